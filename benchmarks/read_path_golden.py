"""Record what the read path answers, to compare two implementations of it.

    python benchmarks/read_path_golden.py --graph G --questions Q [--limit N] --out FILE
    python benchmarks/read_path_golden.py --graph G --questions Q --compare FILE

For every question: the ids, in order, of ``retrieve`` dense / sparse / hybrid,
``graph`` local (units chunk and path, with each path's nodes) and global, at
k 10. ``--compare`` runs the same calls and reports every question whose
answer differs from the recorded one (exit status 1 when any does). Used to
check that a change of the read side returns the same hits as before it
(tests/data/science_read_path.json was written by it on the science graph).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def answers(engine: Any, question: str, k: int = 10) -> dict[str, Any]:
    """The ids each read op returns for ``question`` (paths: their nodes too)."""
    out: dict[str, Any] = {}
    for mode in ("dense", "sparse", "hybrid"):
        res = engine.retrieve({"query": question, "k": k, "mode": mode})
        out[mode] = [h["id"] for h in res["hits"]]
    local = engine.graph({"op": "local", "query": question, "k": k, "units": ["chunk", "path"]})
    out["local"] = [h["id"] for h in local["hits"] if h["unit"] == "chunk"]
    out["paths"] = [h["provenance"]["path"] for h in local["hits"] if h["unit"] == "path"]
    glob = engine.graph({"op": "global", "query": question, "k": k})
    out["global"] = [c["id"] for c in glob["communities"]]
    return out


def record(graph: str, questions: list[str], k: int = 10) -> dict[str, Any]:
    import kgrag

    with kgrag.open(graph) as engine:
        return {q: answers(engine, q, k) for q in questions}


def differences(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """One line per question and op whose ids differ."""
    lines = []
    for q, ops in old.items():
        for op, ids in ops.items():
            if new.get(q, {}).get(op) != ids:
                lines.append(f"{op}: {q!r}\n  was {ids}\n  now {new.get(q, {}).get(op)}")
    return lines


def main() -> int:
    from kgrag.bench.evaluation import load_questions

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--graph", required=True)
    ap.add_argument("--questions", required=True)
    ap.add_argument("--limit", type=int, default=0)
    ap.add_argument("--out")
    ap.add_argument("--compare")
    args = ap.parse_args()
    raw = json.loads(Path(args.questions).read_text(encoding="utf-8"))
    if all(isinstance(q, str) for q in raw):  # a plain list of questions
        questions = list(raw)
    else:
        questions = [q.text for q in load_questions(args.questions)]
    questions = questions[: args.limit] if args.limit else questions
    found = record(args.graph, questions)
    if args.out:
        Path(args.out).write_text(json.dumps(found, indent=1, ensure_ascii=False) + "\n")
    if args.compare:
        diff = differences(json.loads(Path(args.compare).read_text()), found)
        print("\n".join(diff) or f"same answers to all {len(found)} questions")
        return 1 if diff else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
