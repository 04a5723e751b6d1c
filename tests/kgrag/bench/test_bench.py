"""``kgrag bench``: every section measured and written, failures named, no speed asserted."""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from kgrag.cli.main import main
from tests.conftest import SCIENCE

PNG = b"\x89PNG\r\n\x1a\n"
MODES = [
    "bare encode + dot",
    "retrieve dense",
    "retrieve sparse",
    "retrieve hybrid",
    "graph local (chunk)",
    "graph global",
    "graph drift",
]
QUESTIONS = [
    {"question": "Where was the wife of Pierre Curie born?"},
    {"question": "Which river flows through the capital of Poland?"},
]


def _questions(folder: Path) -> Path:
    path = folder / "questions.json"
    path.write_text(json.dumps(QUESTIONS), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def served(science_graph: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A query + HTTP run on the session graph; the report folder."""
    work = tmp_path_factory.mktemp("bench-served")
    argv = ["bench", "--graph", str(science_graph), "--out", str(work / "out")]
    argv += ["--questions", str(_questions(work)), "--repeat", "1", "--concurrency", "1"]
    assert main([*argv, "-k", "3", "--quiet"]) == 0
    return work / "out"


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An ingest + query run from the science corpus, HTTP skipped; the report folder."""
    work = tmp_path_factory.mktemp("bench-built")
    config = work / "config.json"
    config.write_text(json.dumps({"extract": {"n_process": 1}}), encoding="utf-8")
    argv = ["bench", "--corpus", str(SCIENCE), "--graph", str(work / "graph")]
    argv += ["--out", str(work / "out"), "--config", str(config), "--skip", "http"]
    argv += ["--questions", str(_questions(work)), "--repeat", "1", "-k", "3", "--quiet"]
    assert main(argv) == 0
    return work / "out"


def _figures(out: Path) -> dict[str, Any]:
    return json.loads((out / "figures.json").read_text(encoding="utf-8"))


def _positive(value: Any) -> bool:
    return isinstance(value, (int, float)) and math.isfinite(value) and value > 0


def _table_rows(report: str, heading: str) -> list[list[str]]:
    section = report.split(f"## {heading}\n", 1)[1].split("\n## ", 1)[0]
    rows = [line.strip("|").split("|") for line in section.splitlines() if line.startswith("| ")]
    return [[cell.strip() for cell in row] for row in rows]


def test_query_and_http_figures_are_measured(served: Path):
    figures = _figures(served)
    assert {"machine", "command", "query", "http"} <= figures.keys()
    assert "ingest" not in figures
    rows = figures["query"]["rows"]
    assert [r["mode"] for r in rows] == MODES
    for r in rows:
        assert all(
            _positive(r[key]) for key in ("p50_ms", "p95_ms", "ratio_p50", "first_p50_ms")
        ), r
        assert r["p95_ms"] >= r["p50_ms"]
    assert rows[0]["ratio_p50"] == 1.0
    assert figures["query"]["questions"] == len(QUESTIONS)
    [http] = figures["http"]["rows"]
    assert http["concurrency"] == 1 and _positive(http["ratio_qps"])
    for side in ("in-process", "http"):
        assert _positive(http[side]["qps"]) and _positive(http[side]["p50_ms"])
    machine = figures["machine"]
    assert machine["cpus"] > 0 and machine["torch_threads"] > 0 and machine["kgrag"]


def test_the_report_names_the_machine_the_command_and_tabulates_numbers(served: Path):
    report = (served / "report.md").read_text(encoding="utf-8")
    assert "CPUs" in report and "GiB RAM" in report and "torch threads" in report
    assert re.search(r"^kgrag bench --graph \S+ --questions \S+ --out \S+ --repeat 1", report, re.M)
    query = _table_rows(report, "Query latency")
    assert [row[0] for row in query[1:]] == MODES  # after the header row
    http = _table_rows(report, "HTTP throughput")
    assert http[1][:2] == ["retrieve hybrid", "1"]
    for row in query[1:] + http[1:]:
        numbers = row[1:] if row[0] in MODES else row[2:]
        assert all(float(cell) > 0 for cell in numbers), row
    assert "## Ingest" not in report


def test_plots_are_png_files(served: Path):
    for name in ("query_latency.png", "http_qps.png"):
        assert (served / name).read_bytes()[:8] == PNG
    assert not (served / "ingest_stages.png").exists()
    assert sorted(_figures(served)["plots"]) == ["http_qps.png", "query_latency.png"]


def test_ingest_is_timed_against_bare_encoding_and_http_skipped(built: Path):
    from kgrag.store import open_store

    figures = _figures(built)
    ingest = figures["ingest"]
    passages = len(json.loads(SCIENCE.read_text(encoding="utf-8")))
    assert ingest["passages"] == passages
    assert {"load", "extract", "embed", "commit"} <= ingest["stages_s"].keys()
    assert all(_positive(s) for s in ingest["stages_s"].values())
    # each stage's memory: resident at its end, within the process's peak by then
    assert ingest["stages_mib"].keys() == ingest["stages_s"].keys()
    assert all(0 < rss <= peak for rss, peak in ingest["stages_mib"].values())
    assert max(peak for _rss, peak in ingest["stages_mib"].values()) <= ingest["peak_rss_mib"]
    for key in ("total_s", "bare_encode_s", "ratio", "peak_rss_mib", "disk_bytes_per_passage"):
        assert _positive(ingest[key]), key
    assert open_store(ingest["graph"]).current() is not None
    assert figures["query"]["chunks"] == ingest["counts"]["chunks"]
    assert "http" not in figures and not (built / "http_qps.png").exists()
    assert (built / "ingest_stages.png").read_bytes()[:8] == PNG
    report = (built / "report.md").read_text(encoding="utf-8")
    stages = _table_rows(report, "Ingest")
    assert ["total / bare", str(ingest["ratio"])] in stages
    assert "## HTTP" not in report and "--skip http" in report


def test_without_matplotlib_the_report_says_so(
    served: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    from kgrag.bench.report import write_report

    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib now fails
    figures = _figures(served)
    path = write_report(figures, tmp_path)
    assert "No plots: matplotlib is not installed" in path.read_text(encoding="utf-8")
    assert "kgrag[bench]" in _figures(tmp_path)["plots_missing"]
    assert not list(tmp_path.glob("*.png"))


def test_default_queries_are_first_sentences_of_chunks(science_graph: Path):
    import kgrag
    from kgrag.bench.measure import default_queries

    with kgrag.open(science_graph) as engine:
        texts = [c.text for c in engine.reader.chunks()]
        queries = default_queries(engine)
    assert 0 < len(queries) == min(30, len(texts))
    assert all(any(t.startswith(q) for t in texts) for q in queries)
    assert all(q.endswith((".", "!", "?")) or len(q) == 300 for q in queries)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        ([], "give --graph DIR (a built graph) or --corpus FILE"),
        (["--graph", "{tmp}/nothing"], "no graph here"),
        (["--graph", "{tmp}", "--corpus", str(SCIENCE)], "is not empty"),
        (["--corpus", "{tmp}/missing.json"], "no such file"),
        (["--graph", "{tmp}", "--skip", "query,speed"], "not speed"),
        (["--graph", "{tmp}", "--concurrency", "0"], "--concurrency wants positive"),
    ],
)
def test_usage_errors_exit_2_with_a_message(
    argv: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    (tmp_path / "stray.txt").write_text("x")
    filled = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    assert main(["bench", "--out", str(tmp_path / "out"), *filled]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_bench_help_runs_as_a_module():
    done = subprocess.run(
        [sys.executable, "-m", "kgrag", "bench", "--help"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "--concurrency" in done.stdout and "--skip" in done.stdout
