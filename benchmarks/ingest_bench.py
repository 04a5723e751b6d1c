"""Ingest benchmark: the whole build against bare encoding of the same passages.

    python benchmarks/ingest_bench.py --corpus ../shared/bench/2wikimultihopqa/2wiki_corpus.json

Measures in one process, one run: (1) bare sentence-transformers encoding of
every passage as "title\\ntext" (what a plain dense index costs), then (2) the
full kgrag ingest of the same file. Prints wall time per stage, the ratio of
the build to bare encoding, peak RSS (this process and the spaCy workers) and
bytes on disk, and writes them as JSON with --out.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")


def _dir_size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--corpus", required=True, help="a corpus file kgrag ingest accepts")
    ap.add_argument("--graph", help="graph folder to build (default: a temporary one)")
    ap.add_argument("--limit", type=int, help="only the first N passages (JSON list corpora)")
    ap.add_argument("--out", help="write the figures as JSON here")
    args = ap.parse_args()

    from ingest import ingest_paths
    from ingest.load import load_paths
    from kgrag.config import Config
    from kgrag.encoders import load_encoder

    work = Path(tempfile.mkdtemp(prefix="kgrag-bench-"))
    corpus = Path(args.corpus)
    if args.limit:
        data = json.loads(corpus.read_text(encoding="utf-8"))[: args.limit]
        corpus = work / corpus.name
        corpus.write_text(json.dumps(data), encoding="utf-8")
    graph = Path(args.graph) if args.graph else work / "graph"
    if graph.exists():
        shutil.rmtree(graph)

    config = Config()
    docs = load_paths([corpus]).documents
    texts = [f"{d.title}\n{d.text}" for d in docs]
    m = config.models  # the bare side: sentence-transformers on torch
    encoder = load_encoder(m.embedding, m.batch_size, m.device, "torch")
    encoder.encode(texts[:64])  # warm-up, so neither side pays first-call costs
    t0 = time.perf_counter()
    encoder.encode(texts)
    bare = time.perf_counter() - t0

    t0 = time.perf_counter()
    report = ingest_paths([corpus], graph, config, progress=sys.stderr.isatty())
    build = time.perf_counter() - t0
    rss_self = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    rss_children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    disk = _dir_size(graph)
    figures = {
        "corpus": str(args.corpus),
        "passages": len(docs),
        "bare_encode_s": round(bare, 2),
        "build_s": round(build, 2),
        "ratio": round(build / bare, 3),
        "stages_s": {k: round(v, 2) for k, v in report.seconds.items()},
        "peak_rss_mib": round(rss_self, 1),
        "peak_rss_spacy_worker_mib": round(rss_children, 1),
        "disk_bytes": disk,
        "disk_bytes_per_passage": round(disk / max(1, len(docs))),
        "counts": report.counts,
        "communities_per_level": report.communities_per_level,
        "tree_nodes_per_level": report.tree_nodes_per_level,
        "cpus": os.cpu_count(),
    }
    print(report.summary())
    print(json.dumps(figures, indent=2))
    if args.out:
        Path(args.out).write_text(json.dumps(figures, indent=2))
    if not args.graph:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
