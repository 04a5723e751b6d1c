"""Ingest through Ray against the single-process ingest of the same corpus, one run.

    python benchmarks/ray_bench.py --corpus SLICE [--workers 2] [--out ray.json]

Builds the corpus twice into temporary folders, deleted after: in this process, then
with ``--ray local`` on a Ray cluster started here, with ``--workers`` parse actors
(the cluster's start is timed as part of the Ray build). Prints the two builds'
seconds by stage and their ratio, checks that they hold as many records of each kind
(the tests compare them one by one), and measures each parse worker's throughput
(passages per second of its own busy time). From those it projects the time for 10^7
passages on 8, 32 and 128 workers: the per-document stages and the global stages'
encoding divided among the workers, plus what the driver does alone (synonym search,
community detection, RAPTOR's clustering, the commit) scaled in proportion to the
corpus (a floor: the search and the clustering grow faster than the corpus).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

#: the stages the driver runs whatever the number of workers
GLOBAL = ("resolve", "graph", "communities", "embed", "raptor", "commit")
PROJECT = (8, 32, 128)
TARGET = 10_000_000


def _counts(graph: Path) -> dict[str, int]:
    from kgrag.store import open_store

    with open_store(graph).reader() as reader:
        return reader.counts()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--corpus", required=True, help="a corpus file or folder kgrag ingest reads")
    ap.add_argument("--workers", type=int, default=2, help="parse actors on the local Ray cluster")
    ap.add_argument("--docs-per-batch", type=int, help="default: shared evenly among workers")
    ap.add_argument("--out", help="write the figures as JSON here")
    args = ap.parse_args()

    from ingest import ingest_paths
    from ingest.distributed import RayOptions

    tmp = Path(tempfile.mkdtemp(prefix="kgrag-ray-bench-"))
    start = time.perf_counter()
    single = ingest_paths([args.corpus], tmp / "single")
    single_s = time.perf_counter() - start

    options = RayOptions(address="local", workers=args.workers, docs_per_batch=args.docs_per_batch)
    start = time.perf_counter()
    spread = ingest_paths([args.corpus], tmp / "ray", ray=options)
    ray_s = time.perf_counter() - start

    same = _counts(tmp / "single") == _counts(tmp / "ray")
    shutil.rmtree(tmp, ignore_errors=True)
    passages = single.counts.get("documents", 0)
    busy = spread.worker_seconds
    per_worker = {w: passages / len(busy) / s for w, s in busy.items()} if busy else {}
    throughput = passages / sum(busy.values()) if busy else 0.0  # per worker-second
    global_s = sum(spread.seconds.get(s, 0.0) for s in GLOBAL)
    # the global stages' encoding ran on the workers, the rest on the driver alone
    encode_work = spread.encode_seconds * len(busy)  # worker-seconds
    driver_s = global_s - spread.encode_seconds
    scale = TARGET / passages
    projection = {
        str(w): TARGET / (w * throughput) + (encode_work / w + driver_s) * scale for w in PROJECT
    }
    figures = {
        "passages": passages,
        "single_seconds": single_s,
        "ray_seconds": ray_s,
        "ratio": ray_s / single_s,
        "single_stages": single.seconds,
        "ray_stages": spread.seconds,
        "same_counts": same,
        "workers": len(busy),
        "worker_busy_seconds": busy,
        "passages_per_worker_second": throughput,
        "per_worker_approx": per_worker,
        "driver_global_seconds": global_s,
        "global_encode_seconds_on_workers": spread.encode_seconds,
        "driver_only_seconds": driver_s,
        "projected_hours_1e7": {w: s / 3600 for w, s in projection.items()},
    }
    print(json.dumps(figures, indent=2))
    if args.out:
        Path(args.out).write_text(json.dumps(figures, indent=2))
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
