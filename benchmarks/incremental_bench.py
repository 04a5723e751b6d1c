"""Incremental-update benchmark: add documents to a built graph vs rebuild it.

    # 100 documents out of a built graph and back in, against a full rebuild
    python benchmarks/incremental_bench.py add --graph /tmp/inc/b2wiki \\
        --corpus ../shared/bench/2wikimultihopqa/2wiki_corpus.json --n 100 --rebuild

    # a corpus built in 10 batches (compare `kgrag eval` with a one-shot build)
    python benchmarks/incremental_bench.py batches --graph /tmp/inc/musique_10 \\
        --corpus ../shared/bench/musique/musique100_corpus.json --batches 10

``add`` works on the graph folder given (copy a graph there first): it deletes
``n`` of the corpus's documents incrementally, then times adding them back
(one ``index/add`` of ``n`` documents onto a graph of the rest); ``--rebuild``
also times a full build of the whole corpus into a fresh folder. Figures are
printed and, with --out, written as JSON.
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


def _config(graph: Path):  # noqa: ANN202 - a kgrag Config
    from kgrag.config import Config
    from kgrag.store import open_store

    manifest = open_store(graph).manifest()
    return Config.model_validate(manifest["versions"][manifest["indexVersion"]]["config"])


def _add(args: argparse.Namespace) -> dict[str, float]:
    from ingest import build
    from ingest.incremental.update import apply_update
    from ingest.load import load_paths
    from ingest.progress import Stages
    from kgrag.encoders import load_encoder
    from kgrag.store import open_store

    graph = Path(args.graph)
    config = _config(graph)
    docs = load_paths([args.corpus]).documents
    step = max(1, len(docs) // args.n)
    picked = docs[::step][: args.n]
    store = open_store(graph, **config.store.model_dump())
    m = config.models
    encoder = load_encoder(m.embedding, m.batch_size, m.device, m.runtime)
    encoder.encode(["warm-up"])
    t0 = time.perf_counter()
    gone = apply_update(store, config, encoder, delete=[d.id for d in picked])
    t1 = time.perf_counter()
    stages = Stages(False)
    added = apply_update(store, config, encoder, add=picked, stages=stages)
    t2 = time.perf_counter()
    out = {
        "documents": len(docs),
        "n": len(picked),
        "deleted": gone.deleted,
        "delete_seconds": round(t1 - t0, 1),
        "add_seconds": round(t2 - t1, 1),
        "add_stages": {k: round(v, 1) for k, v in stages.seconds.items()},
        "counts_after_add": added.counts,
    }
    if args.rebuild:
        fresh = Path(tempfile.mkdtemp(prefix="kgrag-rebuild-")) / "graph"
        t3 = time.perf_counter()
        build(docs, fresh, config)
        out["rebuild_seconds"] = round(time.perf_counter() - t3, 1)
        out["add_over_rebuild"] = round(out["add_seconds"] / out["rebuild_seconds"], 3)
        shutil.rmtree(fresh.parent, ignore_errors=True)
    return out


def _batches(args: argparse.Namespace) -> dict[str, float]:
    from ingest import build
    from ingest.load import load_paths
    from kgrag.config import Config

    graph = Path(args.graph)
    if graph.exists():
        shutil.rmtree(graph)
    docs = load_paths([args.corpus]).documents
    size = -(-len(docs) // args.batches)
    seconds = []
    for i in range(0, len(docs), size):
        t0 = time.perf_counter()
        report = build(docs[i : i + size], graph, Config())
        seconds.append(round(time.perf_counter() - t0, 1))
        print(f"batch {len(seconds)}: {report.index_version} {report.counts}", file=sys.stderr)
    return {"documents": len(docs), "batches": len(seconds), "seconds": seconds}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="command", required=True)
    add = sub.add_parser("add", help="delete n documents, time adding them back")
    add.add_argument("--graph", required=True, help="a built graph folder (it is modified)")
    add.add_argument("--corpus", required=True, help="the corpus the graph was built from")
    add.add_argument("--n", type=int, default=100)
    add.add_argument("--rebuild", action="store_true", help="also time a full rebuild")
    bat = sub.add_parser("batches", help="build a corpus in batches")
    bat.add_argument("--graph", required=True, help="graph folder to (re)create")
    bat.add_argument("--corpus", required=True)
    bat.add_argument("--batches", type=int, default=10)
    for p in (add, bat):
        p.add_argument("--out", help="write the figures as JSON here")
    args = ap.parse_args()
    figures = _add(args) if args.command == "add" else _batches(args)
    print(json.dumps(figures, indent=2))
    if args.out:
        Path(args.out).write_text(json.dumps(figures, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
