"""Recall of the store's ANN search against its exact search, on a real graph.

    python benchmarks/ann_recall.py --graph G --questions Q [--n 200]

For each vector kind local search and retrieve query (chunks, entities, facts)
a product-quantised index is built as a commit builds it (:func:`kgrag.store.serving.build_ann`,
into a temporary folder), and the questions' vectors (and, for entities, the
vectors of their capitalised spans, which is how local search links names it
does not know) are searched through it and exactly. Reported per kind and
depth: recall of the exact top k, build seconds, ms per query both ways.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from functools import partial
from pathlib import Path

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

DEPTHS = {"chunks": (10, 100), "entities": (1, 5), "facts": (5, 32)}


def main() -> int:
    import kgrag
    from kgrag.search.names import NameIndex
    from kgrag.store.folder.files import ann_nearest, open_ann
    from kgrag.store.serving import build_ann

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--graph", required=True)
    ap.add_argument("--questions", required=True)
    ap.add_argument("--n", type=int, default=200)
    args = ap.parse_args()
    questions = [q["question"] for q in json.loads(Path(args.questions).read_text())][: args.n]
    engine = kgrag.open(args.graph)
    reader = engine.reader
    qvecs = engine.encoder.encode(questions)
    spans = [
        q[a:b]
        for q in questions
        for a, b in NameIndex.from_lookup(lambda keys: {}).spans(q).unknown
    ]
    span_vecs = engine.encoder.encode(spans) if spans else qvecs[:0]
    print(f"{args.graph}: {len(questions)} questions, {len(spans)} spans")
    print("| kind | rows | k | recall | exact ms/q | ANN ms/q | build s |")
    print("|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for kind, depths in DEPTHS.items():
            matrix = reader.matrix(kind)
            if not len(matrix):
                continue
            started = time.perf_counter()
            build_ann(matrix, Path(tmp) / f"{kind}.faiss")
            build_s = time.perf_counter() - started
            index = open_ann(Path(tmp) / f"{kind}.faiss")
            queries = np.concatenate([qvecs, span_vecs]) if kind == "entities" else qvecs
            for k in depths:
                started = time.perf_counter()
                exact = _exact(matrix, queries, k)
                exact_ms = (time.perf_counter() - started) / len(queries) * 1000
                started = time.perf_counter()
                approx = ann_nearest(
                    index, partial(reader.serving.vectors_of, kind), len(matrix), queries, k
                )
                ann_ms = (time.perf_counter() - started) / len(queries) * 1000
                hit = [
                    len({r for r, _ in a} & {r for r, _ in e}) / max(1, len(e))
                    for a, e in zip(approx, exact, strict=True)
                ]
                print(
                    f"| {kind} | {len(matrix):,} | {k} | {np.mean(hit):.4f} | {exact_ms:.2f} "
                    f"| {ann_ms:.2f} | {build_s:.1f} |"
                )
    return 0


def _exact(matrix: np.ndarray, queries: np.ndarray, k: int) -> list[list[tuple[int, float]]]:
    """The exact top ``k`` by a float32 dot over every row (read in blocks), ties by row:
    what the store's scan gives, whether or not this graph's kind has an index."""
    scores = np.concatenate(
        [queries @ np.asarray(matrix[i : i + 100_000]).T for i in range(0, len(matrix), 100_000)],
        axis=1,
    )
    rows = np.arange(scores.shape[1])
    out = []
    for s in scores:
        top = np.lexsort((rows, -s))[:k]
        out.append([(int(r), float(s[r])) for r in top])
    return out


if __name__ == "__main__":
    sys.exit(main())
