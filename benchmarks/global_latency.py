"""Global search latency: the summary drawn from passages against the one drawn from
reports, in one process over one graph, the two asked in turn question by question.

    python benchmarks/global_latency.py --graph G --questions Q [--repeat 2] [--k 5]

Each question is asked once of each first (a warm-up, not timed), then ``--repeat``
times each, alternating. Reported: p50 and p95 in ms of each and their ratio.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--graph", required=True)
    ap.add_argument("--questions", required=True, help="a JSON list of {question}")
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--k", type=int, default=5)
    ap.add_argument("--limit", type=int, help="only the first N questions")
    args = ap.parse_args()

    import kgrag
    from kgrag.search.global_search import GlobalSearch

    questions = [q["question"] for q in json.loads(Path(args.questions).read_text("utf-8"))]
    questions = questions[: args.limit] if args.limit else questions
    with kgrag.open(args.graph) as engine:
        passages = GlobalSearch(engine.reader, engine.encoder)
        reports = GlobalSearch(
            engine.reader,
            engine.encoder,
            dataclasses.replace(passages.settings, summary_from="reports"),
        )
        searches = {"passages": passages, "reports": reports}
        for q in questions:  # warm-up: each question's query vector and reads cached alike
            for gs in searches.values():
                gs.search(q, args.k)
        ms: dict[str, list[float]] = {name: [] for name in searches}
        for _ in range(args.repeat):
            for q in questions:
                for name, gs in searches.items():
                    started = time.perf_counter()
                    gs.search(q, args.k)
                    ms[name].append(1000 * (time.perf_counter() - started))
    out: dict[str, object] = {"questions": len(questions), "repeat": args.repeat}
    for name, times in ms.items():
        times.sort()
        out[name] = {
            "p50_ms": round(statistics.median(times), 2),
            "p95_ms": round(times[int(0.95 * (len(times) - 1))], 2),
        }
    p50 = {name: out[name]["p50_ms"] for name in ms}  # type: ignore[index]
    out["p50_ratio"] = round(p50["passages"] / p50["reports"], 2)
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
