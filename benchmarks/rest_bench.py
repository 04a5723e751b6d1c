"""Passage recall through the Knowhere-compatible route: agentic against classic.

    python benchmarks/rest_bench.py --graph graphs/musique100 \\
        --questions ../shared/bench/musique/musique100_questions.json [--top-k 5]

Each question is posted to ``/v1/retrieval/query`` of a real loopback server
(``use_agentic`` true, then false) and its ``results`` are scored the way
``kgrag eval`` scores (HippoRAG 2: the share of gold passages among the first
k distinct passages). Reported: Recall@2 and @top_k, the p50 latency, and
how the agentic runs stopped.
"""

from __future__ import annotations

import argparse
import collections
import http.client
import json
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
    ap.add_argument("--questions", required=True)
    ap.add_argument("--top-k", type=int, default=5)
    ap.add_argument("--limit", type=int, help="only the first N questions")
    ap.add_argument("--out", help="write the figures as JSON")
    args = ap.parse_args()

    from kgrag.bench.evaluation import load_questions, recall_at
    from kgrag.server import Graphs, Running, create_app

    questions = load_questions(args.questions)[: args.limit]
    graphs = Graphs.open([f"bench={args.graph}"])
    engine = graphs.get("bench")
    key_of = {d.id: f"{d.title}\n{d.text}" for d in engine.reader.documents()}
    rows = []
    with Running(create_app(graphs)) as running:
        host, port = running.url.removeprefix("http://").rsplit(":", 1)
        conn = http.client.HTTPConnection(host, int(port), timeout=600)
        for route, agentic in (("agentic", True), ("classic", False)):
            recall: dict[int, list[float]] = {2: [], args.top_k: []}
            latencies, stops = [], collections.Counter()
            for q in questions:
                body = {"query": q.text, "top_k": args.top_k, "use_agentic": agentic}
                started = time.perf_counter()
                conn.request("POST", "/v1/retrieval/query", json.dumps(body), {})
                out = json.loads(conn.getresponse().read())
                latencies.append((time.perf_counter() - started) * 1000)
                stops[out["stop_reason"]] += 1
                keys = [key_of[r["document_id"]] for r in out["results"]]
                for k in recall:
                    recall[k].append(recall_at(keys, q.gold, k))
            row = {
                "route": route,
                "questions": len(questions),
                **{f"R@{k}": round(100 * statistics.fmean(v), 1) for k, v in recall.items()},
                "p50_ms": round(statistics.median(latencies), 1),
                "stops": dict(stops),
            }
            rows.append(row)
            print(json.dumps(row), flush=True)
        conn.close()
    graphs.close()
    if args.out:
        Path(args.out).write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
