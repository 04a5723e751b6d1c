"""The command line, run as a real subprocess: ingest with bad files, query,
export, info, and a process killed in the middle of an ingest."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import networkx as nx
import pytest

from kgrag.store import open_store
from tests.conftest import SCIENCE

SMALL = {"communities": {"max_size": 6}, "raptor": {"top_size": 2}, "extract": {"n_process": 1}}


def kgrag(*args: str, **kw) -> subprocess.CompletedProcess:
    env = dict(os.environ, HF_HUB_OFFLINE="1") | kw.pop("env", {})
    return subprocess.run(
        [sys.executable, "-m", "kgrag", *args], capture_output=True, text=True, env=env, **kw
    )


def test_bad_files_each_get_one_error_and_the_rest_go_in(tmp_path: Path):
    src = tmp_path / "in"
    src.mkdir()
    (src / "good.txt").write_text("Ada Lovelace wrote the first program for the Analytical Engine.")
    (src / "empty.txt").write_bytes(b"")
    (src / "binary.txt").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00")
    (src / "latin1.md").write_bytes("# Café\nNaïve text".encode("latin-1"))
    (src / "broken.json").write_text('[{"title": "x", "text": ')
    (src / "shape.json").write_text('{"a": 1}')
    config = tmp_path / "config.json"
    config.write_text(json.dumps(SMALL))
    graph = tmp_path / "g"
    run = kgrag(
        "ingest", str(src), str(SCIENCE), "--graph", str(graph), "--config", str(config), "--quiet"
    )
    assert run.returncode == 1, run.stderr
    errors = [line for line in run.stderr.splitlines() if line.startswith("kgrag: error:")]
    assert len(errors) == 5, run.stderr
    reasons = {Path(line.split(": ")[2]).name: line for line in errors}
    assert "empty file" in reasons["empty.txt"]
    assert "binary file" in reasons["binary.txt"]
    assert "not valid UTF-8" in reasons["latin1.md"]
    assert "invalid JSON at line 1" in reasons["broken.json"]
    assert "unrecognised JSON layout" in reasons["shape.json"]
    assert "documents    13" in run.stdout  # 12 science passages + good.txt
    with open_store(graph).reader() as r:
        titles = {d.title for d in r.documents()}
    assert "good" in titles and "Marie Curie" in titles


def test_unknown_config_key_is_a_clear_error(tmp_path: Path):
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"chunk": {"max_tokenz": 10}}))
    run = kgrag("ingest", str(SCIENCE), "--graph", str(tmp_path / "g"), "--config", str(config))
    assert run.returncode == 2
    assert "chunk.max_tokenz" in run.stderr
    assert not (tmp_path / "g" / "manifest.json").exists()


def test_query_prints_unit_level_score_and_leaves(science_graph: Path):
    run = kgrag(
        "query",
        "--graph",
        str(science_graph),
        "-k",
        "2",
        "--unit",
        "chunk,community,tree-node",
        "Where was Marie Curie born?",
    )
    assert run.returncode == 0, run.stderr
    assert (
        "[chunk L0]" in run.stdout and "[community L" in run.stdout and "[tree-node L" in run.stdout
    )
    run = kgrag(
        "query", "--graph", str(science_graph), "-k", "1", "--json", "Where was Marie Curie born?"
    )
    hit = json.loads(run.stdout.splitlines()[0])
    assert hit["unit"] == "chunk" and hit["level"] == 0
    assert hit["chunk"]["context"] == "Marie Curie"
    assert hit["provenance"]["leaves"] == [hit["id"]]


@pytest.mark.parametrize("fmt", ["graphml", "json"])
def test_export_is_readable_by_networkx(science_graph: Path, science_reader, tmp_path: Path, fmt):
    out = tmp_path / f"g.{fmt}"
    run = kgrag("export", "--graph", str(science_graph), "--format", fmt, "--out", str(out))
    assert run.returncode == 0, run.stderr
    if fmt == "graphml":
        g = nx.read_graphml(out)
    else:
        g = nx.node_link_graph(json.loads(out.read_text()), edges="edges")
    counts = science_reader.counts()
    assert g.number_of_nodes() == counts["entities"] + counts["chunks"]
    edges = counts["relations"] + counts["mentions"] + counts["synonyms"]
    assert g.number_of_edges() == edges
    kinds = {d["kind"] for _, _, d in g.edges(data=True)}
    assert kinds == {"relation", "mention", "synonym"}


def test_info_and_missing_graph(science_graph: Path, tmp_path: Path):
    run = kgrag("info", "--graph", str(science_graph))
    assert run.returncode == 0 and json.loads(run.stdout)["counts"]["documents"] == 12
    run = kgrag("query", "--graph", str(tmp_path / "nothing"), "anything")
    assert run.returncode == 2 and "no graph here" in run.stderr


def _assert_previous_version_answers(graph: Path, version: str) -> None:
    store = open_store(graph)
    assert store.current() == version
    run = kgrag("query", "--graph", str(graph), "-k", "1", "--json", "Where was Marie Curie born?")
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout)["chunk"]["context"] == "Marie Curie"


@pytest.mark.parametrize("when", ["mid-build", "before-rename", "before-manifest"])
def test_killed_ingest_leaves_the_previous_version(science_graph: Path, tmp_path: Path, when):
    graph = tmp_path / "g"
    shutil.copytree(science_graph, graph)
    version = open_store(graph).current()
    extra = Path(__file__).parents[3] / "examples" / "corpus.json"
    if when != "mid-build":  # the crash points are in the commit: a few documents reach it
        few = json.loads(extra.read_text(encoding="utf-8"))[:4]
        extra = tmp_path / "few.json"
        extra.write_text(json.dumps(few), encoding="utf-8")
    config = tmp_path / "config.json"
    config.write_text(json.dumps(SMALL))
    args = [
        sys.executable,
        "-m",
        "kgrag",
        "ingest",
        str(extra),
        "--graph",
        str(graph),
        "--config",
        str(config),
        "--quiet",
    ]
    env = dict(os.environ, HF_HUB_OFFLINE="1")
    if when == "mid-build":
        proc = subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(6)  # past start-up, inside the model-heavy stages
        assert proc.poll() is None, "the ingest finished before it could be killed"
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    else:
        env["KGRAG_CRASH_AT"] = when
        proc = subprocess.run(args, env=env, capture_output=True)
        assert proc.returncode == -signal.SIGKILL
    _assert_previous_version_answers(graph, version)
    open_store(graph).writer().abort()  # the next writer removes what the dead one left
    assert sorted(p.name for p in (graph / "versions").iterdir()) == [version]
