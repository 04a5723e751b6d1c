"""Every answer a graph gives to a question set, as JSON lines, for byte-equality checks
between two builds of the code (a refactor must not change one byte bar ``latencyMs``).

    python benchmarks/answer_dump.py --graph graphs/musique100 \\
        --questions ../shared/bench/musique/musique100.json --out before.jsonl
    ... change the code ...
    python benchmarks/answer_dump.py ... --out after.jsonl && cmp before.jsonl after.jsonl

``--graph`` takes a folder or a ``bolt://HOST:PORT/NAME`` location. Per question it
asks: retrieve dense / sparse / hybrid (unit chunk) and retrieve of units community,
tree-node, node, triplet, path; graph local (units chunk, path, node, triplet), global
and drift; and neighbors of the local op's first entity. ``latencyMs`` is dropped.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")


def _scrub(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _scrub(v) for k, v in value.items() if k != "latencyMs"}
    if isinstance(value, list):
        return [_scrub(v) for v in value]
    return value


def _calls(text: str) -> list[tuple[str, str, dict[str, Any]]]:
    calls: list[tuple[str, str, dict[str, Any]]] = []
    for mode in ("dense", "sparse", "hybrid"):
        calls.append((f"retrieve:{mode}", "retrieve", {"query": text, "k": 10, "mode": mode}))
    for unit in ("community", "tree-node", "node", "triplet", "path"):
        calls.append((f"retrieve:{unit}", "retrieve", {"query": text, "k": 5, "unit": unit}))
    local = {"op": "local", "query": text, "k": 10, "unit": ["chunk", "path", "node", "triplet"]}
    calls.append(("graph:local", "graph", local))
    calls.append(("graph:global", "graph", {"op": "global", "query": text, "k": 5}))
    calls.append(("graph:drift", "graph", {"op": "drift", "query": text, "k": 10}))
    return calls


def main() -> int:
    import kgrag
    from kgrag.bench.evaluation import load_questions

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--graph", required=True, help="a graph folder or bolt://HOST:PORT/NAME")
    ap.add_argument("--questions", required=True)
    ap.add_argument("--n", type=int, default=0, help="the first N questions (0: all)")
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    questions = load_questions(args.questions)
    if args.n:
        questions = questions[: args.n]
    with kgrag.open(args.graph) as engine, args.out.open("w") as out:
        for i, q in enumerate(questions):
            for name, method, params in _calls(q.text):
                try:
                    result = getattr(engine, method)(params)
                except kgrag.KgragError as e:
                    result = {"error": type(e).__name__, "message": str(e)}
                line = {"q": i, "call": name, "result": _scrub(result)}
                out.write(json.dumps(line, sort_keys=True, ensure_ascii=False) + "\n")
                if name == "graph:local":
                    nodes = [h["id"] for h in result.get("hits", []) if h["unit"] == "node"]
                    if nodes:
                        around = engine.graph({"op": "neighbors", "seedIds": nodes[:1]})
                        line = {"q": i, "call": "graph:neighbors", "result": _scrub(around)}
                        out.write(json.dumps(line, sort_keys=True, ensure_ascii=False) + "\n")
            print(f"\r{i + 1}/{len(questions)}", end="", file=sys.stderr, flush=True)
    print(file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
