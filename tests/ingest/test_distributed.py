"""Ingest through Ray on real clusters: a local one with two workers and a two-node
``ray.cluster_utils.Cluster``. The graph equals the one a single process builds."""

from __future__ import annotations

import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from kgrag.cli.main import main
from kgrag.store import open_store
from kgrag.store.base import RECORD_KINDS
from kgrag.store.vectors import CODED_KINDS, within_a_code_step
from tests.conftest import DATA, SCIENCE, small_config

ray = pytest.importorskip("ray")

from ingest import ingest_paths  # noqa: E402
from ingest.distributed import RayOptions  # noqa: E402
from kgrag.errors import ClusterError  # noqa: E402

DOCS = DATA / "docs"
#: documents of each kind with broken ones beside them, read on the workers (the
#: scans are left out: OCR would double the test's time)
FILES = ("report.pdf", "report.docx", "slides.pptx", "sheet.xlsx", "broken.xlsx", "truncated.pdf")
#: record tables compared row for row (the full-text index tables follow from them)
TABLES = RECORD_KINDS  # the vectors' ids: compared with the vectors
KINDS = ("chunks", "sentences", "entities", "facts", "communities", "tree_nodes")


def _rows(graph: Path) -> dict[str, list[tuple]]:
    version = open_store(graph).current()
    db = sqlite3.connect(graph / "versions" / str(version) / "graph.sqlite")
    try:
        return {t: sorted(db.execute(f"SELECT * FROM {t}").fetchall(), key=repr) for t in TABLES}
    finally:
        db.close()


def assert_same_graph(ours: Path, theirs: Path) -> None:
    """Records equal row for row; vectors equal in ids and within float tolerance (of
    the coded kinds, within a code step)."""
    mine, want = _rows(ours), _rows(theirs)
    for table in TABLES:
        assert mine[table] == want[table], table
    with open_store(ours).reader() as a, open_store(theirs).reader() as b:
        for kind in KINDS:
            ids_a, m_a = a.vectors(kind)
            ids_b, m_b = b.vectors(kind)
            assert list(ids_a) == list(ids_b), kind
            if kind in CODED_KINDS:  # a last-bit difference can move a code by one step
                assert within_a_code_step(m_a, m_b), kind
            else:
                assert np.allclose(np.asarray(m_a), np.asarray(m_b), atol=1e-5), kind


def test_an_unreachable_cluster_is_one_line_and_the_graph_keeps_serving(
    science_graph: Path, tmp_path: Path, capsys
):
    graph = tmp_path / "g"
    shutil.copytree(science_graph, graph)
    before = open_store(graph).current()
    code = main(["ingest", str(DOCS), "--graph", str(graph), "--ray", "127.0.0.1:1", "--quiet"])
    err = capsys.readouterr().err.strip()
    assert code != 0
    assert err == "kgrag: error: cannot reach the Ray cluster at '127.0.0.1:1': connection refused"
    assert open_store(graph).current() == before
    with pytest.raises(ClusterError, match="expected auto, local"):
        ingest_paths([DOCS], graph, ray=RayOptions(address="nowhere"))


def test_auto_passes_over_the_address_a_dead_cluster_left(tmp_path: Path, monkeypatch):
    from ingest.distributed import running_cluster

    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    monkeypatch.setenv("RAY_TMPDIR", str(tmp_path))
    assert running_cluster() is None  # no cluster ever ran here
    (tmp_path / "ray").mkdir()
    (tmp_path / "ray" / "ray_current_cluster").write_text("127.0.0.1:1\n")
    assert running_cluster() is None  # Ray's "auto" would retry it for minutes
    monkeypatch.setenv("RAY_ADDRESS", "127.0.0.1:1")
    assert running_cluster() == "127.0.0.1:1"  # named: its failure is reported


def test_without_ray_installed_the_flag_says_what_to_install(tmp_path: Path):
    code = (
        "import sys; sys.modules['ray'] = None\n"  # as if ray were not installed
        "from kgrag.cli.main import main\n"
        f"sys.exit(main(['ingest', {str(SCIENCE)!r}, '--graph', {str(tmp_path / 'g')!r},"
        " '--ray', 'auto', '--quiet']))"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert run.returncode != 0
    lines = run.stderr.strip().splitlines()
    assert lines == [
        "kgrag: error: --ray needs Ray: pip install 'kgrag[ray]' (or ray[data]) on this "
        "machine and on the cluster's nodes"
    ]
    assert not (tmp_path / "g").exists() or open_store(tmp_path / "g").current() is None


@pytest.fixture(scope="module")
def local_cluster():
    """A real local Ray cluster with two CPUs (two parse workers): a new one ("local"),
    never one that another test's cluster left as the machine's latest."""
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


def test_ray_build_and_growth_equal_the_single_process_ones(
    local_cluster, science_graph: Path, tmp_path: Path
):
    options = RayOptions(workers=2, docs_per_batch=3)  # batches cut across the corpus
    built = tmp_path / "ray"
    report = ingest_paths([SCIENCE], built, small_config(), ray=options)
    assert report.changed and "parse" in report.seconds
    assert_same_graph(built, science_graph)

    # incremental ingest of files read and parsed on the workers
    docs = tmp_path / "docs"
    docs.mkdir()
    for name in FILES:
        shutil.copy(DOCS / name, docs / name)
    grown = tmp_path / "grown"
    shutil.copytree(science_graph, grown)
    local = ingest_paths([docs], grown, small_config())
    assert local.changed and len(local.errors) == 2  # a truncated PDF, a broken sheet
    again = ingest_paths([docs], built, small_config(), ray=options)
    assert again.changed and again.counts == local.counts
    # each broken file is one error, as a single process reports it; the rest went in
    assert [e.message for e in again.errors] == [e.message for e in local.errors]
    assert again.skipped == local.skipped
    assert_same_graph(built, grown)
    # and the same files again are a no-op, as they are without Ray
    same = ingest_paths([docs], built, small_config(), ray=options)
    assert not same.changed and same.index_version == again.index_version


def _parse_worker_pids() -> list[int]:
    """The processes of live parse actors (Ray titles an actor's process after it)."""
    import psutil

    out = []
    for proc in psutil.process_iter(["cmdline"]):
        line = " ".join(proc.info["cmdline"] or ())
        if line.startswith("ray::") and "ParseWorker" in line:
            out.append(proc.pid)
    return out


def test_two_nodes_and_a_killed_worker_build_the_same_graph(science_graph: Path, tmp_path: Path):
    from ray.cluster_utils import Cluster

    if ray.is_initialized():
        ray.shutdown()
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1})
    try:
        cluster.add_node(num_cpus=1)
        ray.init(address=cluster.address, include_dashboard=False, log_to_driver=False)
        assert len([n for n in ray.nodes() if n["Alive"]]) == 2
        built = tmp_path / "two-nodes"
        result: dict[str, object] = {}

        def run() -> None:
            try:
                result["report"] = ingest_paths(
                    [SCIENCE], built, small_config(), ray=RayOptions(docs_per_batch=2)
                )
            except Exception as exc:  # pragma: no cover - reported by the assert below
                result["error"] = exc

        worker = threading.Thread(target=run)
        worker.start()
        killed = None
        deadline = time.monotonic() + 120
        while killed is None and worker.is_alive() and time.monotonic() < deadline:
            pids = _parse_worker_pids()
            if pids:
                time.sleep(2)  # let it take a batch
                os.kill(pids[0], signal.SIGKILL)
                killed = pids[0]
            time.sleep(0.5)
        assert killed is not None and worker.is_alive(), "killed no worker mid-ingest"
        worker.join(timeout=300)
        assert "error" not in result, result.get("error")
        assert_same_graph(built, science_graph)
    finally:
        ray.shutdown()
        cluster.shutdown()
