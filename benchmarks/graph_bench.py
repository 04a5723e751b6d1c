"""Graph search latency against bare dense search, measured in one run.

    python benchmarks/graph_bench.py --graph graphs/2wiki \\
        --questions benchmarks/data/2wiki_heldout.json [--repeat 3] [--out FILE]

The baseline is what a plain vector search costs: encode the question with
the same model, one numpy dot against the chunk matrix, top-k. Each op is
called through the engine exactly as a client calls it (kgrag bench's modes:
``retrieve`` dense, sparse and hybrid, ``graph`` local with unit chunk, global,
drift; plus local with every unit; ``--skip`` takes their names), after one
warm-up call, questions interleaved so drift in machine load hits every mode
alike; torch and BLAS run on one thread by default so a shared machine's load
does not thrash them. Reported: p50 and p95 in ms and the
p50 ratio to the baseline.

With ``--stdio`` the ops go over RCP/1 to a ``kgrag serve --stdio`` child on the same
graph (NDJSON on pipes, one call at a time, the whole answer parsed), as an agent host
calls them; the baseline stays in this process.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def _modes(engine: Any, k: int) -> dict[str, Callable[[str], Any]]:
    """kgrag bench's modes, plus local search with every unit."""
    from kgrag.bench.measure import query_modes

    modes = query_modes(engine, k)
    modes["graph local (all units)"] = lambda q: engine.graph({"op": "local", "query": q, "k": k})
    return modes


class StdioServer:
    """``kgrag serve --stdio`` on a graph, called one request at a time."""

    def __init__(self, graph: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "kgrag", "serve", "--stdio", "--graph", graph],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=dict(os.environ),
        )
        self.ids = itertools.count(1)
        init = {"protocolVersion": 1, "client": {"name": "bench", "version": "1"}}
        self.call("initialize", init | {"capabilities": {}})

    def call(self, method: str, params: dict[str, Any]) -> Any:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        id_ = next(self.ids)
        frame = {"jsonrpc": "2.0", "id": id_, "method": method, "params": params}
        self.proc.stdin.write(json.dumps(frame).encode() + b"\n")
        self.proc.stdin.flush()
        while True:  # notifications (progress, logs) come before the answer
            answer = json.loads(self.proc.stdout.readline())
            if answer.get("id") == id_:
                if "error" in answer:
                    raise RuntimeError(f"{method}: {answer['error']}")
                return answer["result"]

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(60)


def _stdio_modes(server: StdioServer, k: int) -> dict[str, Callable[[str], Any]]:
    def retrieve(mode: str) -> Callable[[str], Any]:
        return lambda q: server.call("retrieve", {"query": q, "k": k, "mode": mode})

    return {
        "stdio retrieve dense": retrieve("dense"),
        "stdio retrieve hybrid": retrieve("hybrid"),
        "stdio graph local (chunk)": lambda q: server.call(
            "graph", {"op": "local", "query": q, "k": k, "unit": "chunk"}
        ),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--graph", required=True)
    ap.add_argument("--questions", required=True, help="MuSiQue, HotpotQA or 2Wiki questions")
    ap.add_argument("--repeat", type=int, default=3, help="passes over the questions")
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--limit", type=int, help="only the first N questions")
    ap.add_argument("--out", help="also write the figures as JSON here")
    ap.add_argument("--skip", default="", help="comma-separated modes to leave out")
    ap.add_argument("--stdio", action="store_true", help="the ops over RCP stdio (see above)")
    ap.add_argument(
        "--threads", type=int, default=1, help="torch and BLAS threads (1: steady on a busy box)"
    )
    args = ap.parse_args()
    import torch

    torch.set_num_threads(args.threads)

    import kgrag
    from kgrag.bench.evaluation import load_questions
    from kgrag.bench.measure import measure_queries

    questions = [q.text for q in load_questions(args.questions)][: args.limit]
    engine = kgrag.open(args.graph)
    skip = {m.strip() for m in args.skip.split(",") if m.strip()}
    modes = _modes(engine, args.k)
    server = None
    if args.stdio:
        server = StdioServer(args.graph)
        modes = {"bare encode + dot": modes["bare encode + dot"], **_stdio_modes(server, args.k)}
    modes = {n: f for n, f in modes.items() if n not in skip}
    try:
        figures = measure_queries(engine, questions, repeat=args.repeat, k=args.k, modes=modes)
    finally:
        if server is not None:
            server.close()
    rows, setup = figures["rows"], figures["setup_s"]
    counts = engine.reader.counts()
    print(
        f"graph {args.graph}: {counts.get('chunks', 0):,} chunks, "
        f"{counts.get('entities', 0):,} entities; {len(questions)} questions x {args.repeat}; "
        f"open + warm-up {setup:.1f} s"
    )
    print("| mode | p50 ms | p95 ms | p50 / bare | first-ask p50 ms |\n|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['mode']} | {r['p50_ms']} | {r['p95_ms']} | {r['ratio_p50']} "
            f"| {r['first_p50_ms']} |"
        )
    if args.out:
        Path(args.out).write_text(json.dumps({"setup_s": round(setup, 1), "rows": rows}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
