"""Approximate nearest neighbours: a product-quantised index of a kind's vectors
(faiss's ``IndexPQFastScan``), built with a version for the kinds searched by nearest
neighbour that have at least ``ann_min_rows`` rows, and the search through it whose
candidates are re-scored by exact cosines. A Neo4j version stores the same codes
(``kgrag.nearest``)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from kgrag.errors import StoreError
from kgrag.store.base import exact_scores, top_rows

#: kinds with at least this many rows get an ANN index (``store.ann_min_rows``)
ANN_MIN_ROWS = 50_000
#: kinds searched by nearest neighbour (local search's facts and entities, chunks); the
#: others are ranked within a known set of rows (a community level) or looked up
ANN_KINDS = ("chunks", "entities", "facts")
#: ANN candidates re-scored exactly: at least this many, and 10 per asked neighbour
ANN_CANDIDATES = 256
ANN_EXPANSION = 10
_BATCH = 100_000  # rows added to an index at a time


def build_ann(matrix: np.ndarray, path: Path) -> None:
    """A product-quantised index of the rows of ``matrix`` (faiss ``IndexPQFastScan``,
    inner product, 4 dimensions per 4-bit code: 48 bytes per MiniLM vector), its rows
    in order. A search scans every code with SIMD lookup tables, so no neighbour is
    missed for want of a graph edge or a probed list, and only the codes (1/32 of the
    float32 vectors) sit in memory; the best candidates are then re-scored exactly.
    Trained on at most 65,536 evenly spaced rows, on one thread, so the same vectors
    give the same index."""
    import faiss

    if not len(matrix):
        raise StoreError(f"{path}: no vectors to index")
    threads = faiss.omp_get_max_threads()
    faiss.omp_set_num_threads(1)
    try:
        index = trained_pq(matrix)
        for start in range(0, len(matrix), _BATCH):
            block = np.asarray(matrix[start : start + _BATCH], dtype=np.float32)
            index.add(np.ascontiguousarray(block))
        faiss.write_index(index, str(path))
    finally:
        faiss.omp_set_num_threads(threads)


def trained_pq(matrix: np.ndarray) -> Any:
    """:func:`build_ann`'s index, trained and empty: its ``pq`` codes rows as the
    folder's index codes them (a Neo4j version stores those codes, ``kgrag.nearest``)."""
    import faiss

    n, dim = matrix.shape
    index = faiss.IndexPQFastScan(dim, _pq_codes(dim), 4, faiss.METRIC_INNER_PRODUCT)
    sample = np.asarray(matrix[np.linspace(0, n - 1, min(n, 65_536)).astype(np.int64)])
    # k-means of 16 centroids per code wants ~40 points each: repeat a small kind
    sample = np.tile(sample, (-(-640 // len(sample)), 1))
    threads = faiss.omp_get_max_threads()
    faiss.omp_set_num_threads(1)  # one thread: the same vectors give the same codebook
    try:
        index.train(np.ascontiguousarray(sample, dtype=np.float32))
    finally:
        faiss.omp_set_num_threads(threads)
    return index


def _pq_codes(dim: int) -> int:
    """Sub-quantisers for ``dim`` dimensions: one per 4 where that divides, else per 2
    or per dimension."""
    return next(dim // per for per in (4, 2, 1) if dim % per == 0)


def ann_nearest(
    index: Any, vectors: Callable[[np.ndarray], np.ndarray], n: int, q: np.ndarray, k: int
) -> list[list[tuple[int, float]]]:
    """The ``k`` nearest of ``n`` rows for each row of ``q``: candidates from the
    quantised ``index`` (at least :data:`ANN_CANDIDATES`, :data:`ANN_EXPANSION`
    per asked neighbour), ranked by the exact float32 cosines of their ``vectors``,
    ties by row."""
    wide = min(n, max(ANN_CANDIDATES, ANN_EXPANSION * k))
    _, found = index.search(np.ascontiguousarray(np.atleast_2d(q), dtype=np.float32), wide)
    out = []
    for i, vec in enumerate(np.atleast_2d(q)):
        rows = np.sort(found[i][found[i] >= 0].astype(np.int64))
        out.append(top_rows(rows, exact_scores(vectors(rows), vec), k))
    return out


def open_ann(path: Path) -> Any:
    """A kind's quantised index, read into memory (its codes are 1/32 of the vectors)."""
    import faiss

    try:
        return faiss.read_index(str(path))
    except RuntimeError as exc:
        raise StoreError(f"{path}: unreadable ANN index: {str(exc).splitlines()[0]}") from exc
