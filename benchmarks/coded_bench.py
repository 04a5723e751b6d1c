"""Vectors stored as int8 codes against float32: a built graph copied into the current
store format (sentence, entity, fact, report and tree vectors coded, chunk vectors kept
float32; :mod:`kgrag.store.vectors`), then recall and bytes of both, in one run.

    python benchmarks/coded_bench.py --graph graphs/musique100 \\
        --questions ../shared/bench/musique/musique100.json --out /tmp/musique100.coded

``--graph`` is a folder graph whose vectors are all float32 (built before the coded
format, or by ``git stash``'d code); the copy holds the same records, so the two differ
only in the vectors' precision. Reported per mode (dense, hybrid, local, drift): R@2 and
R@5 of each and the difference; then the bytes of each version and per passage.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

MODES = {
    "dense": {"mode": "dense"},
    "hybrid": {"mode": "hybrid"},
    "local": {"mode": "local"},
    "drift": {"mode": "drift"},
}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--graph", type=Path, required=True, help="a float32 folder graph")
    ap.add_argument("--questions", type=Path, required=True)
    ap.add_argument("--out", type=Path, required=True, help="where the coded copy goes")
    ap.add_argument("--modes", default=",".join(MODES))
    ap.add_argument("--limit", type=int, default=0)
    ap.add_argument("--json", type=Path, help="also write the figures here")
    args = ap.parse_args()

    import kgrag
    from kgrag.bench.disk import where_bytes
    from kgrag.bench.evaluation import chunk_searcher, evaluate, load_questions
    from kgrag.store import copy_graph, open_store

    if not (args.out / "manifest.json").exists():
        with open_store(args.graph).reader() as reader:
            copy_graph(reader, open_store(args.out))
    questions = load_questions(args.questions)
    if args.limit:
        questions = questions[: args.limit]
    rows = []
    graphs = {"float32": args.graph, "int8 codes": args.out}
    for mode in [m for m in args.modes.split(",") if m]:
        got = {}
        for name, graph in graphs.items():
            with kgrag.open(graph) as engine:
                got[name] = evaluate(questions, chunk_searcher(engine, MODES[mode]), (2, 5))
        a, b = got["float32"], got["int8 codes"]
        rows.append({"mode": mode, "float32": a, "int8 codes": b})
        print(
            f"{mode:7s} R@2 {a['R@2']:6.2f} -> {b['R@2']:6.2f} ({b['R@2'] - a['R@2']:+.2f})  "
            f"R@5 {a['R@5']:6.2f} -> {b['R@5']:6.2f} ({b['R@5'] - a['R@5']:+.2f})",
            flush=True,
        )
    with kgrag.open(args.graph) as engine:
        passages = len(engine.reader.documents())
    sizes = {name: where_bytes(graph)["bytes"] for name, graph in graphs.items()}
    for name, size in sizes.items():
        print(f"{name:10s} {size:,} bytes, {size / passages:,.0f} a passage")
    if args.json:
        out = {"graph": str(args.graph), "passages": passages, "recall": rows, "bytes": sizes}
        args.json.write_text(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
