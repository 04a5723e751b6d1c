"""Recall scoring (HippoRAG 2 rules) and `kgrag eval` on a real mini set."""

from __future__ import annotations

import json

import pytest

from kgrag.bench.evaluation import Question, evaluate, load_questions, recall_at
from kgrag.errors import InputError
from tests.conftest import BENCH
from tests.kgrag.cli.test_cli import kgrag


def test_recall_counts_distinct_passages_by_full_key():
    gold = frozenset({"A\nx", "B\ny"})
    assert recall_at(["A\nx", "A\nx", "C\nz", "B\ny"], gold, 2) == 0.5
    assert recall_at(["A\nx", "A\nx", "C\nz", "B\ny"], gold, 3) == 1.0
    assert recall_at(["A\nother text", "B\ny"], gold, 5) == 0.5  # same title, other passage


def test_evaluate_means_over_questions():
    qs = [Question("1", "q1", frozenset({"a"})), Question("2", "q2", frozenset({"b", "c"}))]
    ranked = {"q1": ["a", "x"], "q2": ["x", "b"]}
    out = evaluate(qs, lambda q, n: ranked[q][:n], ks=(1, 2))
    assert out["R@1"] == 50.0 and out["R@2"] == 75.0 and out["questions"] == 2


@pytest.mark.skipif(not BENCH.exists(), reason="the shared bench data is not here")
def test_gold_keys_for_each_layout():
    for name in ("musique/musique3.json", "hotpotqa/hotpotqa2.json", "2wikimultihopqa/2wiki2.json"):
        questions = load_questions(BENCH / name)
        corpus_file = BENCH / name.replace(".json", "_corpus.json")
        corpus = json.loads(corpus_file.read_text())
        if isinstance(corpus, dict):
            keys = {f"{t}\n{''.join(s)}" for t, s in corpus.items()}
        else:
            keys = {f"{p['title']}\n{p['text']}" for p in corpus}
        for q in questions:
            assert q.gold and q.gold <= keys, name  # every gold passage is in its corpus


def test_bad_question_file(tmp_path):
    bad = tmp_path / "q.json"
    bad.write_text('[{"question": "x"}]')
    with pytest.raises(InputError, match="neither MuSiQue"):
        load_questions(bad)


@pytest.mark.skipif(not BENCH.exists(), reason="the shared bench data is not here")
def test_kgrag_eval_on_musique_mini(tmp_path):
    out = tmp_path / "eval.json"
    run = kgrag(
        "eval",
        "--graph",
        str(tmp_path / "g"),
        "--questions",
        str(BENCH / "musique/musique3.json"),
        "--corpus",
        str(BENCH / "musique/musique3_corpus.json"),
        "--modes",
        "dense,hybrid",
        "--out",
        str(out),
        "--plot",
        str(tmp_path / "recall.png"),
    )
    assert run.returncode == 0, run.stderr
    rows = json.loads(out.read_text())
    assert [r["mode"] for r in rows] == ["dense", "hybrid"]
    for r in rows:
        assert r["questions"] == 3 and 0 < r["R@2"] <= r["R@5"] <= 100
        assert set(r) == {"mode", "params", "questions", "R@2", "R@5", "p50_ms"}
    png = (tmp_path / "recall.png").read_bytes()
    assert png.startswith(b"\x89PNG") and len(png) > 5000
    # a plot path that cannot be written fails before any search, naming the option
    bad = kgrag(*run.args[3:-2], "--plot", str(tmp_path / "no" / "recall.png"))
    assert bad.returncode != 0 and "--plot: no folder" in bad.stderr
    bad = kgrag(*run.args[3:-2], "--plot", str(tmp_path / "recall.txt"))
    assert bad.returncode != 0 and "--plot wants a .png" in bad.stderr
