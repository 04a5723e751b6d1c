"""One-document writes on a warm engine: p50 of ``index/delete`` and ``index/add``, by stage.

    python benchmarks/write_bench.py --graph /tmp/w/2wiki --writes 20 --out write.json

Works on the graph folder given (copy a built graph there first: it is written to).
``--writes`` documents spread over the graph are each deleted and then added back, one
document a write, through :func:`ingest.incremental.update.apply_update` with one encoder
loaded once (the writer process of ``kgrag serve`` does the same). Prints, and with
``--out`` writes, the p50 / p95 of each, the p50 of each stage, and the disk each new
version took (its folder's bytes; versions share no files today).
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


def _bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def _summary(rows: list[dict]) -> dict:
    seconds = sorted(r["seconds"] for r in rows)
    stages = sorted({k for r in rows for k in r["stages"]})
    return {
        "n": len(rows),
        "p50_s": round(statistics.median(seconds), 2),
        "p95_s": round(seconds[min(len(seconds) - 1, int(0.95 * len(seconds)))], 2),
        "stage_p50_s": {
            k: round(statistics.median(r["stages"].get(k, 0.0) for r in rows), 2) for k in stages
        },
        "version_mb_p50": round(statistics.median(r["bytes"] for r in rows) / 1e6, 1),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--graph", required=True, help="a built graph folder (it is written to)")
    ap.add_argument("--writes", type=int, default=20, help="documents deleted and re-added")
    ap.add_argument("--out", help="write the figures as JSON here")
    args = ap.parse_args()

    from ingest.incremental.update import apply_update
    from ingest.progress import Stages
    from kgrag.config import Config
    from kgrag.encoders import load_encoder
    from kgrag.store import open_store

    graph = Path(args.graph)
    store = open_store(graph, retain_seconds=0)
    manifest = store.manifest()
    config = Config.model_validate(manifest["versions"][manifest["indexVersion"]]["config"])
    m = config.models
    encoder = load_encoder(m.embedding, m.batch_size, m.device, m.runtime)
    encoder.encode(["warm-up"])
    with store.reader() as reader:
        docs = reader.documents()
    step = max(1, len(docs) // args.writes)
    picked = docs[::step][: args.writes]
    rows: dict[str, list[dict]] = {"delete": [], "add": []}
    for i, doc in enumerate(picked):
        for op, kwargs in (("delete", {"delete": [doc.id]}), ("add", {"add": [doc]})):
            stages = Stages(False)
            t0 = time.perf_counter()
            result = apply_update(store, config, encoder, stages=stages, **kwargs)
            seconds = time.perf_counter() - t0
            version = result.index_version or ""
            size = _bytes(graph / "versions" / version) if version else 0
            rows[op].append({"seconds": seconds, "stages": dict(stages.seconds), "bytes": size})
            print(f"{i + 1}/{len(picked)} {op} {doc.id}: {seconds:.1f} s", file=sys.stderr)
    figures = {
        "graph": str(graph),
        "documents": len(docs),
        "delete": _summary(rows["delete"]),
        "add": _summary(rows["add"]),
    }
    print(json.dumps(figures, indent=2))
    if args.out:
        Path(args.out).write_text(json.dumps(figures, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
