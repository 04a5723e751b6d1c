"""The load test (benchmarks/load_test.py) in short: a few clients for seconds against
`kgrag serve --http` on a copy of the science graph, with a writer adding and deleting
documents beside them. Its own checks must hold: no failed request, every answer from
a version that was published, every marked hit held by the version that answered.
The server makes its writes in its writer process (started by the first write)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
QUESTIONS = [
    "Where was Marie Curie born?",
    "What does the sun do?",
    "Which planet is red?",
    "Who discovered radium?",
]


def test_a_short_load_with_writes_fails_nothing_and_mixes_no_versions(
    served_copy: Path, tmp_path: Path
):
    graph = tmp_path / "graph"
    shutil.copytree(served_copy, graph)
    questions = tmp_path / "questions.json"
    questions.write_text(json.dumps([{"question": q} for q in QUESTIONS]), encoding="utf-8")
    out = tmp_path / "load.json"
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "load_test.py"), "--graph", str(graph)]
        + ["--questions", str(questions), "--clients", "4", "--duration", "14"]
        + ["--write-every", "0.5", "--min-writes", "2", "--out", str(out)],
        capture_output=True,
        text=True,
        env=dict(os.environ, HF_HUB_OFFLINE="1"),
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    result = json.loads(out.read_text())
    assert result["failed"] == 0 and result["version_problems"] == []
    assert result["server_exit"] == 0
    ops = result["ops"]
    for op in ("retrieve hybrid", "graph local", "graph global", "graph drift", "rest v1"):
        assert ops[op]["requests"] >= 4, op
        assert ops[op]["p50_ms"] <= ops[op]["p99_ms"]
    assert ops["explorer communities"]["requests"] and ops["explorer neighbors"]["requests"]
    assert result["writes"] >= 2 and result["versions_published"] >= 2
    # the versions check saw answers, and some named the writer's documents
    assert result["answers_checked"] > 20 and result["marked_hits"] > 0
    assert result["rss_kib"]["end"]["VmRSS"] > 0
    assert result["writer_rss_kib"]["max"]["VmRSS"] > 0  # the writes ran apart
