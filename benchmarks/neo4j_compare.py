"""The same graph served from its folder and from Neo4j: how often the top 10 agree,
recall on both, and query latency on both, in one run.

    make neo4j                          # prints bolt://127.0.0.1:PORT
    python benchmarks/neo4j_compare.py --graph graphs/musique100 \\
        --neo4j bolt://127.0.0.1:PORT --questions ../shared/bench/musique/musique100.json \\
        [--n 100] [--ops dense,hybrid,local,global,drift] [--reuse] [--out FILE]

The folder's latest version is copied into Neo4j (``kgrag.store.copy_graph``: every
record and vector; the serving structures derived again and uploaded), timed; then
every question runs retrieve (dense, hybrid) and graph local / global / drift on both
(``--reuse``: the graph was copied by an earlier run and is not copied again).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

OPS = ("dense", "hybrid", "local", "global", "drift")


def main() -> int:
    import kgrag
    from kgrag.bench.evaluation import load_questions, recall_at
    from kgrag.store import copy_graph, open_store
    from kgrag.threads import serve_queries

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--graph", required=True, help="a graph folder")
    ap.add_argument("--neo4j", required=True, help="bolt://HOST:PORT of a Neo4j 5 server")
    ap.add_argument("--name", help="the graph's name in Neo4j (default: the folder's)")
    ap.add_argument("--questions", required=True)
    ap.add_argument("--n", type=int, default=100)
    ap.add_argument("--out", type=Path)
    ap.add_argument("--reuse", action="store_true", help="the graph is in Neo4j already")
    ap.add_argument("--ops", default=",".join(OPS), help=f"of {', '.join(OPS)}")
    args = ap.parse_args()
    unknown = set(args.ops.split(",")) - set(OPS)
    if unknown:
        ap.error(f"unknown op(s) {', '.join(sorted(unknown))}; known: {', '.join(OPS)}")
    serve_queries()
    location = f"{args.neo4j.rstrip('/')}/{args.name or Path(args.graph).name}"
    load_s = 0.0
    if not args.reuse:
        started = time.perf_counter()
        with open_store(args.graph).reader() as reader:
            copy_graph(reader, open_store(location))
        load_s = time.perf_counter() - started
        print(f"copied into {location} in {load_s:.1f} s", flush=True)
    questions = load_questions(args.questions)[: args.n]
    report: dict[str, dict[str, float]] = {}
    with kgrag.open(args.graph) as a, kgrag.open(location) as b:
        docs = {d.id: f"{d.title}\n{d.text}" for d in a.reader.documents()}
        doc_of = {c.id: c.doc_id for c in a.reader.chunks()}

        def top(engine: kgrag.Engine, op: str, text: str) -> tuple[list[str], float]:
            t = time.perf_counter()
            if op in ("dense", "hybrid"):
                hits = engine.retrieve({"query": text, "k": 10, "mode": op})["hits"]
            else:
                hits = engine.graph({"op": op, "query": text, "k": 10, "unit": "chunk"})["hits"]
            return [h["id"] for h in hits], 1000 * (time.perf_counter() - t)

        for op in args.ops.split(","):
            same, ms_a, ms_b, rec = 0, [], [], {"folder": [0.0, 0.0], "neo4j": [0.0, 0.0]}
            for q in questions:
                x, ta = top(a, op, q.text)
                y, tb = top(b, op, q.text)
                same += x == y
                ms_a.append(ta)
                ms_b.append(tb)
                for store, ids in (("folder", x), ("neo4j", y)):
                    keys = [docs[doc_of[i]] for i in ids if i in doc_of]
                    rec[store][0] += recall_at(keys, q.gold, 2)
                    rec[store][1] += recall_at(keys, q.gold, 5)
            n = len(questions)
            report[op] = {
                "same_top10_pct": round(100 * same / n, 1),
                "folder_R@2": round(100 * rec["folder"][0] / n, 2),
                "folder_R@5": round(100 * rec["folder"][1] / n, 2),
                "neo4j_R@2": round(100 * rec["neo4j"][0] / n, 2),
                "neo4j_R@5": round(100 * rec["neo4j"][1] / n, 2),
                "folder_p50_ms": round(statistics.median(ms_a), 1),
                "neo4j_p50_ms": round(statistics.median(ms_b), 1),
                "neo4j_p95_ms": round(sorted(ms_b)[int(0.95 * (n - 1))], 1),
            }
            print(op, report[op], flush=True)
    if args.out:
        args.out.write_text(json.dumps({"load_s": round(load_s, 1), "ops": report}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
