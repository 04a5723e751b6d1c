"""RCP over HTTP against in-process engine calls: qps, p50 and p95, one run.

    python benchmarks/server_bench.py --graph graphs/2wiki \\
        --questions benchmarks/data/2wiki_heldout.json [--concurrency 1,4,16] [--out FILE]

For each operation (``retrieve`` hybrid, ``graph`` local with chunk hits) and
each concurrency c, the same questions are answered twice: by c threads of
this process calling the engine directly, and by c client threads posting
JSON-RPC to ``kgrag serve --http`` running as its own process on loopback
(keep-alive connections, one per thread). Both sides run on the same machine
in the same run, so the ratio HTTP qps / in-process qps is what the protocol,
the transport and the process boundary cost. A warm-up pass precedes each
measurement.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

OPS: dict[str, Callable[[str, int], tuple[str, dict[str, Any]]]] = {
    "retrieve hybrid": lambda q, k: ("retrieve", {"query": q, "k": k, "mode": "hybrid"}),
    "graph local": lambda q, k: ("graph", {"op": "local", "query": q, "k": k, "unit": "chunk"}),
}


def _start_server(graph: str, workers: int) -> tuple[subprocess.Popen[bytes], str, int]:
    cmd = [sys.executable, "-m", "kgrag", "serve", "--graph", graph, "--http", "127.0.0.1:0"]
    proc = subprocess.Popen(
        [*cmd, "--workers", str(workers)], stderr=subprocess.PIPE, stdout=subprocess.DEVNULL
    )
    assert proc.stderr is not None
    for raw in proc.stderr:
        found = re.search(r"serving RCP/1 on http://([\d.]+):(\d+)/rcp", raw.decode())
        if found:
            threading.Thread(target=proc.stderr.read, daemon=True).start()  # keep draining
            return proc, found[1], int(found[2])
    raise RuntimeError("kgrag serve did not start")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--graph", required=True)
    ap.add_argument("--questions", required=True)
    ap.add_argument("--concurrency", default="1,4,16")
    ap.add_argument("--requests", type=int, default=80, help="calls per measurement")
    ap.add_argument("--workers", type=int, default=4, help="server worker threads")
    ap.add_argument("-k", type=int, default=10)
    ap.add_argument("--out", help="write the figures as JSON")
    args = ap.parse_args()

    import kgrag
    from kgrag.bench.measure import HttpClient, timed_run

    questions = [q["question"] for q in json.loads(Path(args.questions).read_text())]
    levels = [int(c) for c in args.concurrency.split(",")]
    engine = kgrag.open(args.graph)
    proc, host, port = _start_server(args.graph, args.workers)
    remote = HttpClient(f"http://{host}:{port}")
    remote.call("initialize", {"protocolVersion": 1, "client": {"name": "bench", "version": "1"}})
    rows = []
    try:
        for name, make in OPS.items():
            jobs = [make(questions[i % len(questions)], args.k) for i in range(args.requests)]

            def local(method: str, params: dict[str, Any]) -> Any:
                return getattr(engine, method)(params)

            for c in levels:
                for side, fn in (("in-process", local), ("http", remote.call)):
                    calls = [lambda m=m, p=p, fn=fn: fn(m, p) for m, p in jobs]
                    timed_run(calls[: max(c, 8)], c)  # warm-up
                    figures = timed_run(calls, c)
                    rows.append({"op": name, "concurrency": c, "side": side} | figures)
                    print(json.dumps(rows[-1]), flush=True)
    finally:
        remote.close()
        proc.terminate()
        proc.wait(30)
        engine.close()
    print("\n| op | concurrency | in-process qps (p50/p95 ms) | HTTP qps (p50/p95 ms) | ratio |")
    print("|---|---|---|---|---|")
    for name in OPS:
        for c in levels:
            a, b = (
                next(
                    r for r in rows if r["op"] == name and r["concurrency"] == c and r["side"] == s
                )
                for s in ("in-process", "http")
            )
            print(
                f"| {name} | {c} | {a['qps']} ({a['p50_ms']}/{a['p95_ms']}) | "
                f"{b['qps']} ({b['p50_ms']}/{b['p95_ms']}) | {b['qps'] / a['qps']:.2f} |"
            )
    if args.out:
        Path(args.out).write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
