"""RAPTOR benchmark: passage Recall@2/@5 of dense chunks, collapsed tree and tree traversal.

    python benchmarks/raptor_bench.py --graph graphs/musique100 \\
        --questions ../shared/bench/musique/musique100.json \\
        --corpus ../shared/bench/musique/musique100_corpus.json

Recall is scored as ``kgrag eval`` scores it (:mod:`kgrag.bench.evaluation`). Each
mode returns hits; a hit maps to passages so: a chunk to its document's key
(``title\\ntext``), a tree node to its leaf chunks ordered by their own cosine
to the question (then id), in hit order; duplicates count once. The
``/chunks`` rows keep only the chunk hits of a strategy (summaries dropped), to
separate what the summaries route to from what they add by expansion (for the
collapsed tree that row would be dense retrieval again, so it is left out).
Each strategy is asked for 3 x 5 hits. Questions are encoded once up front and
BLAS runs on one thread, so ``p50_ms`` is the search and mapping alone.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")

KS = (2, 5)
DEPTH = 3 * max(KS)  # hits asked of each strategy


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--graph", required=True, help="graph folder built from the corpus")
    ap.add_argument("--questions", required=True, help="MuSiQue, HotpotQA or 2Wiki questions")
    ap.add_argument("--corpus", help="build the graph from this corpus first if it has no version")
    ap.add_argument("--beams", default="1,3,5", help="traversal beam widths, comma-separated")
    ap.add_argument("--limit", type=int, help="only the first N questions")
    ap.add_argument("--out", help="write the figures as JSON here")
    args = ap.parse_args()

    from threadpoolctl import threadpool_limits

    from kgrag.bench.evaluation import evaluate, load_questions
    from kgrag.config import Config
    from kgrag.encoders import load_encoder
    from kgrag.search.tree import TreeSearch
    from kgrag.store import open_store

    store = open_store(args.graph)
    if store.current() is None:
        if not args.corpus:
            ap.error(f"{args.graph} has no published version; pass --corpus to build it")
        from ingest import ingest_paths

        print(ingest_paths([args.corpus], args.graph).summary(), file=sys.stderr)
    questions = load_questions(args.questions)[: args.limit]
    config = Config()
    with store.reader() as reader:
        model = reader.manifest.get("models", {}).get("embedding", config.models.embedding)
        m = config.models
        encoder = load_encoder(model, m.batch_size, m.device, m.runtime)
        texts = [q.text for q in questions]
        qvecs = dict(zip(texts, encoder.encode(texts), strict=True))
        tree = TreeSearch(reader)
        keys = _passage_keys(reader)
        modes = _modes(tree, [int(b) for b in args.beams.split(",")])
        with threadpool_limits(1):
            results = {
                name: evaluate(questions, _searcher(run, tree, qvecs, keys), KS)
                for name, run in modes.items()
            }
        figures: dict[str, Any] = {
            "graph": args.graph,
            "questions": args.questions,
            "tree_nodes": len(reader.tree_nodes()),
            "modes": results,
        }
    _print(figures)
    if args.out:
        Path(args.out).write_text(json.dumps(figures, indent=2) + "\n", encoding="utf-8")
    return 0


Run = Callable[[np.ndarray, int], list[Any]]


def _modes(tree: Any, beams: list[int]) -> dict[str, tuple[Run, bool]]:
    """Name -> (search returning TreeHits, keep only chunk hits)."""
    modes: dict[str, tuple[Run, bool]] = {
        "dense": (lambda q, k: tree.collapsed(q, k, levels={0}), False),
        "collapsed": (tree.collapsed, False),
    }
    for b in beams:
        run: Run = lambda q, k, b=b: tree.traverse(q, k, beam=b)  # noqa: E731
        modes[f"traverse-b{b}"] = (run, False)
        modes[f"traverse-b{b}/chunks"] = (run, True)
    return modes


def _passage_keys(reader: Any) -> dict[str, str]:
    """Chunk id -> the passage key of its document."""
    docs = {d.id: f"{d.title}\n{d.text}" for d in reader.documents()}
    return {c.id: docs[c.doc_id] for c in reader.chunks()}


def _searcher(
    mode: tuple[Run, bool], tree: Any, qvecs: dict[str, np.ndarray], keys: dict[str, str]
) -> Callable[[str, int], list[str]]:
    run, chunks_only = mode

    def search(question: str, n: int) -> list[str]:
        q = qvecs[question]
        out: list[str] = []
        for hit in run(q, DEPTH):
            if chunks_only and hit.unit != "chunk":
                continue
            leaves = list(hit.leaves)
            if len(leaves) > 1:
                scores = tree.matrix[[tree.row[c] for c in leaves]] @ q
                leaves = [leaves[i] for i in np.lexsort((np.array(leaves), -scores))]
            out.extend(keys[c] for c in leaves)
        return out

    return search


def _print(figures: dict[str, Any]) -> None:
    print(f"{figures['graph']}  ({figures['tree_nodes']} tree nodes)")
    print(f"{'mode':<22}{'R@2':>8}{'R@5':>8}{'p50 ms':>9}")
    for name, f in figures["modes"].items():
        print(f"{name:<22}{f['R@2']:>8.2f}{f['R@5']:>8.2f}{f['p50_ms']:>9.1f}")


if __name__ == "__main__":
    sys.exit(main())
