"""What local search's learned rerank costs per question.

    python benchmarks/rerank_cost.py --graph graphs/2wiki \\
        --questions benchmarks/data/2wiki_heldout.json [--repeat 3]

Two LocalSearch objects over the same graph, one with the rerank
(``rerank_depth`` 50, the default) and one without (0), answer every question
in turn, interleaved, after one warm-up each (the first sparse search builds
the in-memory BM25 postings). Prints p50 and p95 of each.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--graph", required=True)
    ap.add_argument("--questions", required=True, help="MuSiQue, HotpotQA or 2Wiki questions")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("-k", type=int, default=10)
    args = ap.parse_args()

    import kgrag
    from kgrag.bench.evaluation import load_questions
    from kgrag.search.local import LocalSearch, LocalSettings
    from kgrag.threads import serve_queries

    serve_queries()
    questions = [q.text for q in load_questions(args.questions)]
    with kgrag.open(args.graph) as engine:
        searches = {
            "without rerank": LocalSearch(
                engine.reader, engine.encoder, LocalSettings(rerank_depth=0)
            ),
            "with rerank": LocalSearch(engine.reader, engine.encoder),
        }
        times: dict[str, list[float]] = {name: [] for name in searches}
        for search in searches.values():
            search.search(questions[0], args.k)
        for _ in range(args.repeat):
            for q in questions:
                for name, search in searches.items():
                    started = time.perf_counter()
                    search.search(q, args.k)
                    times[name].append((time.perf_counter() - started) * 1000)
    for name, ts in times.items():
        p95 = sorted(ts)[int(0.95 * (len(ts) - 1))]
        p50 = statistics.median(ts)
        print(f"{name:<15} p50 {p50:6.2f} ms  p95 {p95:6.2f} ms  ({len(ts)} calls)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
