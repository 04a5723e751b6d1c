"""Synonymy edges: pairs of entities whose name vectors are close.

The search is a blocked matrix top-k: exact up to ``_EXACT_MAX`` entities, and
above that within clusters of the names (spherical k-means). Every block of
similarities is bounded (``_BLOCK_CELLS``), however large a cluster grows, and
the pairs found are kept as columns (:class:`SynonymTable`): at 60k passages a
build finds ~740k pairs, which as a dict of tuples and then a list of objects
took ~1 GB at the end of resolve, a build's highest point.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np

from kgrag.types import Synonym

from .columns import ColumnTable

_BLOCK = 2048
_BLOCK_CELLS = 1 << 23  # similarities per block: with the sort, ~128 MiB in all
_EXACT_MAX = 150_000  # more entities than this: clustered synonym search


class SynonymTable(ColumnTable[Synonym]):
    """Synonyms as columns: row i is ``Synonym(ids[src[i]], ids[dst[i]],
    round(score[i], 6))``, sorted by (src, dst)."""

    what = "synonym"

    def __init__(
        self, ids: Sequence[str], src: np.ndarray, dst: np.ndarray, score: np.ndarray
    ) -> None:
        self.ids = ids
        self.src, self.dst, self.score = src, dst, score

    def __len__(self) -> int:
        return len(self.src)

    def _rows(self, rows: Sequence[int] | range) -> Iterator[Synonym]:
        at = np.asarray(rows, dtype=np.int64)
        ids = self.ids
        for a, b, s in zip(
            self.src[at].tolist(), self.dst[at].tolist(), self.score[at].tolist(), strict=True
        ):
            yield Synonym(ids[a], ids[b], round(s, 6))

    def clear(self) -> None:
        """Let the columns go (a build has written the synonyms)."""
        self.ids = []
        self.src = self.dst = np.zeros(0, np.int64)
        self.score = np.zeros(0, np.float32)


def synonym_pairs(
    ids: Sequence[str], vectors: np.ndarray, threshold: float, k: int
) -> SynonymTable:
    """Pairs of ids whose unit vectors have cosine >= threshold among each one's top k.

    Up to ``_EXACT_MAX`` ids the search is exact: blocked matrix products with
    argpartition, a block holding as many rows as keep it near ``_BLOCK_CELLS``
    similarities, so memory stays flat; the time is quadratic in n. Above that, each
    row is compared only with the rows of its cluster (:func:`_clustered_top`), which
    grows as n^1.5. A pair found from both ends keeps the score found last.
    """
    n = len(ids)
    empty = SynonymTable(ids, np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0))
    if n < 2:
        return empty
    k = min(k, n - 1)
    found_i, found_j, found_s = [], [], []
    candidates = _clustered_top(vectors, k) if n > _EXACT_MAX else _exact_top(vectors, k)
    for rows, top, top_sims in candidates:
        r, c = np.nonzero(top_sims >= threshold)
        found_i.append(rows[r])
        found_j.append(top[r, c])
        found_s.append(top_sims[r, c])
    if not found_i or not sum(len(x) for x in found_i):
        return empty
    i, j = np.concatenate(found_i).astype(np.int64), np.concatenate(found_j).astype(np.int64)
    del found_i, found_j, found_s
    rank = _ranks(ids)
    # each pair once, its ends ordered by id
    swap = rank[i] > rank[j]
    a, b = np.where(swap, j, i), np.where(swap, i, j)
    key = rank[a] * np.int64(n) + rank[b]
    _, first = np.unique(key, return_index=True)  # sorted by key: by (src, dst) id
    a, b = a[first], b[first]
    return SynonymTable(ids, a, b, pair_scores(vectors, a, b))


def stored_form(vectors: np.ndarray) -> np.ndarray:
    """``vectors`` as a version stores and reads them (int8 codes and a scale a row,
    :mod:`kgrag.store.vectors`): synonymy is scored on these, so that a graph grown by
    writes, which reads its stored vectors, scores a pair as a build does."""
    from kgrag.store.vectors import dequantize, quantize

    if not len(vectors):
        return np.asarray(vectors, dtype=np.float32)
    return dequantize(*quantize(np.asarray(vectors, dtype=np.float32)))


def pair_scores(vectors: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The cosine of each pair (rows ``a[i]``, ``b[i]``), one pair at a time in float64:
    the same number whichever block or batch the pair was found in."""
    out = np.empty(len(a), dtype=np.float64)
    for lo in range(0, len(a), _BLOCK):
        x = vectors[a[lo : lo + _BLOCK]].astype(np.float64)
        y = vectors[b[lo : lo + _BLOCK]].astype(np.float64)
        out[lo : lo + _BLOCK] = np.einsum("ij,ij->i", x, y)
    return out


def top_of(vectors: np.ndarray, rows: np.ndarray, k: int) -> _Top:
    """The exact top ``k`` of each of ``rows`` among all rows but itself, as
    :func:`_exact_top` finds them for every row."""
    rows = np.asarray(rows, dtype=np.int64)
    sims = vectors[rows] @ vectors.T
    sims[np.arange(len(rows)), rows] = -1.0
    top = _top_k(sims, k)
    return rows, top, sims[np.arange(len(rows))[:, None], top]


def _top_k(sims: np.ndarray, k: int) -> np.ndarray:
    """The columns of each row's ``k`` largest similarities, ties at the k-th broken by
    the lower column: the same columns however the rows were batched (``argpartition``
    alone picks among ties by where they fall)."""
    top = np.argpartition(-sims, k - 1, axis=1)[:, :k]
    kth = sims[np.arange(len(sims))[:, None], top].min(axis=1)
    tied = np.nonzero((sims >= kth[:, None]).sum(axis=1) > k)[0]
    for r in tied.tolist():  # rare: equal vectors, or equal cosines to the row
        row = sims[r]
        order = np.lexsort((np.arange(len(row)), -row))
        top[r] = order[:k]
    return top


def repair_synonyms(
    stored: Sequence[Synonym],
    ids: Sequence[str],
    vectors: np.ndarray,
    changed: Sequence[str],
    threshold: float,
    k: int,
) -> list[Synonym]:
    """The synonymy pairs :func:`synonym_pairs` would find over ``ids`` (sorted) and
    their stored-form ``vectors``, from the pairs ``stored`` of the version before:
    ``changed`` are the entities new since then or whose edges changed (deletions'
    partners among them). A pair can only appear or go where one end's top ``k`` holds
    a changed entity above the threshold, so the top ``k`` of the changed entities, of
    every entity above the threshold to a new one, and of their partners are computed
    again; every other stored pair stands."""
    n = len(ids)
    pos = {e: i for i, e in enumerate(ids)}
    pairs = {(s.src, s.dst): s for s in stored if s.src in pos and s.dst in pos}
    k = min(k, n - 1)
    if k <= 0:
        return [pairs[key] for key in sorted(pairs)]
    block = max(16, min(_BLOCK, _BLOCK_CELLS // n))  # rows a block: memory stays flat
    focus = {pos[e] for e in changed if e in pos}
    near = np.zeros(n, dtype=bool)
    rows = np.array(sorted(focus), dtype=np.int64)
    for lo in range(0, len(rows), block):  # who may hold a changed entity in its top k
        sims = vectors[rows[lo : lo + block]] @ vectors.T
        near |= (sims >= threshold).any(axis=0)
    focus |= set(np.nonzero(near)[0].tolist())
    names = {ids[r] for r in focus}
    partners = {x for key in pairs if names & set(key) for x in key}
    again = np.array(sorted(focus | {pos[e] for e in partners}), dtype=np.int64)
    for key in [key for key in pairs if names & set(key)]:
        del pairs[key]  # found again below if it still holds
    found_a, found_b = [], []
    for lo in range(0, len(again), block):
        r, top, sims = top_of(vectors, again[lo : lo + block], k)
        i, j = np.nonzero(sims >= threshold)
        found_a.append(r[i])
        found_b.append(top[i, j])
    a = np.concatenate(found_a) if found_a else np.zeros(0, np.int64)
    b = np.concatenate(found_b) if found_b else np.zeros(0, np.int64)
    a, b = np.minimum(a, b), np.maximum(a, b)  # ids are sorted: rows order them
    fresh = sorted({(int(x), int(y)) for x, y in zip(a.tolist(), b.tolist(), strict=True)})
    fa = np.array([x for x, _ in fresh], dtype=np.int64)
    fb = np.array([y for _, y in fresh], dtype=np.int64)
    for x, y, score in zip(fa.tolist(), fb.tolist(), pair_scores(vectors, fa, fb), strict=True):
        key = (ids[x], ids[y])
        pairs.setdefault(key, Synonym(key[0], key[1], round(float(score), 6)))
    return [pairs[key] for key in sorted(pairs)]


def _ranks(ids: Sequence[str]) -> np.ndarray:
    """The rank of each id in string order (its position where ``ids`` are sorted)."""
    if all(ids[x] < ids[x + 1] for x in range(len(ids) - 1)):
        return np.arange(len(ids), dtype=np.int64)
    rank = np.empty(len(ids), np.int64)
    rank[sorted(range(len(ids)), key=ids.__getitem__)] = np.arange(len(ids))
    return rank


_Top = tuple[np.ndarray, np.ndarray, np.ndarray]  # rows, their top columns, similarities


def _exact_top(vectors: np.ndarray, k: int) -> Iterator[_Top]:
    n = len(vectors)
    block = max(16, min(_BLOCK, _BLOCK_CELLS // n))
    for start in range(0, n, block):
        sims = vectors[start : start + block] @ vectors.T
        rows = np.arange(sims.shape[0])
        sims[rows, rows + start] = -1.0
        top = _top_k(sims, k)
        yield rows + start, top, sims[rows[:, None], top]


def _clustered_top(vectors: np.ndarray, k: int, probes: int = 8) -> Iterator[_Top]:
    """Approximate top k: spherical k-means (about sqrt(n) centroids, fitted on a
    fixed sample, so the result is deterministic); each row is compared with every
    row that has its nearest centroid among their ``probes`` nearest: nearly every pair
    of the exact search, in a fraction of its time. A cluster's rows are compared a
    block at a time, so a large cluster does not make a large block."""
    n = len(vectors)
    n_clusters = max(2, int(np.sqrt(n)))
    sample = vectors[:: max(1, n // (64 * n_clusters))]
    centroids = sample[:: max(1, len(sample) // n_clusters)][:n_clusters].copy()
    for _ in range(5):
        assign = np.argmax(sample @ centroids.T, axis=1)
        sums = np.zeros_like(centroids)
        np.add.at(sums, assign, sample)
        norms = np.linalg.norm(sums, axis=1, keepdims=True)
        centroids = np.where(norms > 0, sums / np.maximum(norms, 1e-12), centroids)
    nearest = np.empty((n, probes), dtype=np.int32)
    step = max(1, _BLOCK_CELLS // len(centroids))
    for start in range(0, n, step):
        sims = vectors[start : start + step] @ centroids.T
        nearest[start : start + step] = np.argsort(-sims, axis=1, kind="stable")[:, :probes]
    home = nearest[:, 0].copy()
    flat = nearest.ravel()
    del nearest
    order = np.argsort(flat, kind="stable")
    bounds = np.searchsorted(flat[order], np.arange(len(centroids) + 1))
    del flat
    by_home = np.argsort(home, kind="stable")
    home_bounds = np.searchsorted(home[by_home], np.arange(len(centroids) + 1))
    del home
    for c in range(len(centroids)):
        cluster = by_home[home_bounds[c] : home_bounds[c + 1]]
        pool = order[bounds[c] : bounds[c + 1]] // probes  # rows probing c, ascending
        if len(cluster) == 0 or len(pool) < 2:
            continue
        kk = min(k, len(pool) - 1)
        pooled = vectors[pool]
        block = max(16, _BLOCK_CELLS // len(pool))
        for lo in range(0, len(cluster), block):
            rows = cluster[lo : lo + block]
            sims = vectors[rows] @ pooled.T
            sims[np.arange(len(rows)), np.searchsorted(pool, rows)] = -1.0  # not itself
            top = np.argpartition(-sims, kk - 1, axis=1)[:, :kk]
            yield rows, pool[top], sims[np.arange(len(rows))[:, None], top]
