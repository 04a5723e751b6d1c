"""The kernels a store runs where the graph lives: the PageRank push and the
provenance path rounds, and the row gathering they read the graph by.

A store answers :meth:`kgrag.store.base.GraphReader.pushed_pagerank` and
:meth:`~kgrag.store.base.GraphReader.shortest_paths` with these over its own
adjacency; a server-backed store may run their twins in place instead (the Java
procedures ``Push.java`` and ``PathSearch.java`` under ``neo4j/``), step for step the
same arithmetic, so the answers are the same to the bit.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import scipy.sparse as sp

try:  # scipy's CSR row-gather kernel (what ``csr_matrix[rows]`` calls)
    from scipy.sparse._sparsetools import csr_row_index as _csr_row_index
except ImportError:  # pragma: no cover - a scipy that moved it
    _csr_row_index = None

try:  # scipy's CSC product kernel (what ``csc_matrix @ vector`` calls)
    from scipy.sparse._sparsetools import csc_matvec as _csc_matvec
except ImportError:  # pragma: no cover - a scipy that moved it
    _csc_matvec = None


@dataclass(frozen=True, slots=True)
class Adjacency:
    """The neighbours of a set of rows, CSR-shaped: row i of the request has
    ``indices[indptr[i]:indptr[i+1]]`` (sorted), with ``data`` (and ``edge``, the
    relation row of each, for ``relations``) alongside."""

    indptr: np.ndarray
    indices: np.ndarray
    data: np.ndarray
    edge: np.ndarray | None = None

    def of(self, i: int) -> np.ndarray:
        return self.indices[self.indptr[i] : self.indptr[i + 1]]


@dataclass(frozen=True, slots=True)
class PathLimits:
    """How far a provenance path search goes (:meth:`GraphReader.shortest_paths`): path
    lengths up to ``limit``; no path through an entity of more than ``hub_degree``
    relations (a seed excepted); it stops after settling ``max_reached`` entities, or
    before a round that would follow more than ``max_offers`` edges in all. Reaching an
    entity more than ``generic`` passages mention costs ``toll`` more."""

    limit: float
    hub_degree: int
    max_reached: int
    max_offers: int
    generic: float
    toll: float


def gather_rows(
    indptr: np.ndarray, indices: np.ndarray, data: np.ndarray, rows: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Rows ``rows`` of the CSR arrays ``(indptr, indices, data)`` (columns, of CSC
    ones), concatenated in request order: ``(indptr, indices, data)`` of the result.

    Where ``indptr`` and ``indices`` share an integer type (an in-memory scipy
    matrix's do) this is scipy's row-gather kernel (``csr_row_index``, what
    ``matrix[rows]`` runs), faster than :func:`index_ranges` and a fancy index; else
    the latter."""
    r = np.asarray(rows, dtype=np.int64)
    kind = indices.dtype
    if (
        _csr_row_index is not None
        and indptr.dtype == kind
        and kind in (np.int32, np.int64)
        and isinstance(data, np.ndarray)
        and data.dtype in (np.float32, np.float64)
        and indptr.flags.c_contiguous
        and indices.flags.c_contiguous
        and data.flags.c_contiguous
    ):
        lengths = indptr[r + 1] - indptr[r]
        ptr = np.zeros(len(r) + 1, dtype=np.int64)
        np.cumsum(lengths, out=ptr[1:])
        cols = np.empty(int(ptr[-1]), dtype=kind)
        values = np.empty(int(ptr[-1]), dtype=data.dtype)
        _csr_row_index(len(r), r.astype(kind), indptr, indices, data, cols, values)
        return ptr, cols, values
    ptr, take = row_ranges(indptr, r)
    return ptr, np.asarray(indices[take]), np.asarray(data[take])


def row_ranges(indptr: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For rows ``rows`` of CSR pointers ``indptr``: the pointers of those rows one after
    another, and the positions of their entries (:func:`index_ranges`)."""
    r = np.asarray(rows, dtype=np.int64)
    starts = np.asarray(indptr[r], dtype=np.int64)
    lengths = np.asarray(indptr[r + 1], dtype=np.int64) - starts
    ptr = np.zeros(len(r) + 1, dtype=np.int64)
    np.cumsum(lengths, out=ptr[1:])
    return ptr, index_ranges(starts, lengths)


def index_ranges(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """The concatenated index ranges [start, start + length) of each pair."""
    total = int(lengths.sum())
    if not total:
        return np.zeros(0, dtype=np.int64)
    ends = np.cumsum(lengths)
    offsets = np.repeat(starts - (ends - lengths), lengths)
    return np.arange(total, dtype=np.int64) + offsets


#: a push round finds the rows it reaches by sorting its entries where they number
#: under 1 / this of the rows (a short sort costs less than a scan of every row's sum),
#: else by a scan of the sums
_FEW_ENTRIES = 512


Columns = Callable[[np.ndarray], tuple[np.ndarray, np.ndarray, np.ndarray]]


def pushed_pagerank(
    matrix: sp.csc_matrix | Columns,
    reset: np.ndarray,
    damping: float,
    eps: float,
    rounds: int = 100,
) -> np.ndarray:
    """Approximate PPR: p = (1 - d) sum_k (d M)^k r, where each round moves on only
    the entries of (d M)^k r above ``eps`` (r sums to 1); smaller ones count towards
    p but spread no further. Mass at a vertex without edges is kept there rather
    than sent back to the reset (the exact solve's convention), and the result is
    not renormalised: ranks are what local search reads.

    ``matrix`` is the walk (CSC), or a function ``columns(active)`` giving the CSC
    arrays ``(indptr, indices, data)`` of M[:, active] (a store's adjacency): each
    round reads the columns of the active vertices only. Between rounds the mass
    moving on is held sparse (:class:`_Spread`), so a round costs what its columns
    hold, not the number of vertices; its sums are scipy's CSC product's to the bit."""
    if callable(matrix):
        columns = matrix
    else:
        walk = matrix

        def columns(active: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
            return gather_rows(walk.indptr, walk.indices, walk.data, active)

    # the vertices holding the mass that moves on, and that mass (a float's `!= 0` and
    # then a scan of booleans: a fifth of the time of a scan of the floats)
    at = np.flatnonzero(reset != 0)
    x = (reset[at] / reset.sum()).astype(np.float32)
    p = np.zeros(len(reset), dtype=np.float32)
    spread = _Spread(len(reset))
    for _ in range(rounds):
        p[at] += (1 - damping) * x
        moving = x > eps
        if not moving.any():
            break
        indptr, indices, data = columns(at[moving])
        at, y = spread(indptr, indices, data, x[moving])
        x = damping * y
    return p


class _Spread:
    """A @ x for the CSC columns A = (data, indices, indptr) of one push's rounds, as
    (rows, sums): the rows the columns reach, ascending, and each one's sum (a row
    whose sum is exactly 0 may be left out: it moves no mass). The sums run through
    scipy's CSC product kernel (``csc_matvec``: each product rounded, then added to its
    row in column order and, within a column, in stored order, in the result's dtype)
    on a scratch vector over every row kept for the whole push, whose reached entries
    are read and zeroed again after each round: a round allocates what its columns
    reach, not a vector of every row.

    The rows reached are found by sorting the columns' entries where they are few
    against the rows (:data:`_FEW_ENTRIES`), else by one scan of the sums for nonzeros
    (cheaper than marking the entries in a boolean vector and scanning that)."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.sums: np.ndarray | None = None

    def __call__(
        self, indptr: np.ndarray, indices: np.ndarray, data: np.ndarray, x: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        kind = np.result_type(data.dtype, x.dtype)
        if self.sums is None or self.sums.dtype != kind:
            self.sums = np.zeros(self.n, dtype=kind)
        sums = self.sums
        index = np.int32 if len(indices) < 2**31 and self.n < 2**31 else np.int64
        ptr, idx = np.asarray(indptr, dtype=index), np.asarray(indices, dtype=index)
        values, xs = np.asarray(data, dtype=kind), np.asarray(x, dtype=kind)
        if _csc_matvec is None:  # a scipy without the kernel module: the same order of sums
            np.add.at(sums, idx.astype(np.int64), values * np.repeat(xs, np.diff(ptr)))
        else:
            _csc_matvec(self.n, len(ptr) - 1, ptr, idx, values, xs, sums)
        if len(idx) * _FEW_ENTRIES < self.n:  # sorted, each once
            rows = np.sort(idx)
            keep = np.empty(len(rows), dtype=bool)
            keep[:1] = True
            np.not_equal(rows[1:], rows[:-1], out=keep[1:])
            rows = rows[keep]
        else:  # `!= 0`, then a scan of booleans: a fifth of the time of a scan of floats
            rows = np.flatnonzero(sums != 0)
        found = sums[rows]
        sums[rows] = 0
        return rows, found


class EntityAttributes(Protocol):
    """What :func:`tolls` reads of a store: a per-row attribute of a kind."""

    def attribute(self, kind: str, name: str, rows: np.ndarray | None = None) -> np.ndarray: ...


def tolls(reader: EntityAttributes, rows: np.ndarray, limits: PathLimits) -> np.ndarray:
    """The extra length of reaching each entity row: ``limits.toll`` for an entity more
    than ``limits.generic`` passages mention (a general term), else 0."""
    if not len(rows):
        return np.zeros(0)
    chunks = reader.attribute("entities", "chunks", np.asarray(rows, dtype=np.int64))
    return np.where(chunks > limits.generic, limits.toll, 0.0)


def path_rounds(
    adjacency: Callable[[np.ndarray], Adjacency],
    toll: Callable[[np.ndarray], np.ndarray],
    seeds: Sequence[int],
    groups: Sequence[set[int]] | None,
    limits: PathLimits,
) -> tuple[dict[int, float], dict[int, int]]:
    """Multi-source shortest paths by rounds of equal length (edge lengths and tolls are
    multiples of 0.5, so every round settles one length exactly), reading the relation
    ``adjacency`` of one round's vertices at a time and the ``toll`` of the entities
    they reach, up to ``limits.limit``, or until a member of every group in ``groups``
    is settled, or after ``limits.max_reached`` entities, or before a round that would
    follow more than ``limits.max_offers`` edges in all. A path does not pass through an
    entity of more than ``limits.hub_degree`` relations (a seed excepted). Of equally
    short paths, the one from the better seed (earlier in ``seeds``) wins, then the one
    through the lower row. Each entity's length and predecessor (-9999 at a seed)."""
    seeds = list(seeds)
    dist: dict[int, float] = dict.fromkeys(seeds, 0.0)
    pred: dict[int, int] = dict.fromkeys(seeds, -9999)
    root = {s: i for i, s in enumerate(seeds)}  # the rank of the seed a path starts at
    settled: set[int] = set()
    pending = {0.0: set(seeds)}
    offers = 0
    while pending:
        length = min(pending)
        if length > limits.limit:
            break
        batch = sorted(v for v in pending.pop(length) if v not in settled and dist[v] == length)
        settled.update(batch)
        if groups is not None and all(g & settled for g in groups):
            break
        if len(settled) > limits.max_reached:  # the rest is too far to explain anything
            break
        v, d, u, rank = _offers(
            adjacency(np.array(batch, dtype=np.int64)), batch, length, root, toll, limits
        )
        offers += len(v)
        if offers > limits.max_offers and length > 0:  # this round would read too far
            break
        # the best offer to each vertex: shortest, then from the better seed, lower row
        order = np.lexsort((u, rank, d, v))
        v, d, u, rank = v[order], d[order], u[order], rank[order]
        first = np.ones(len(v), dtype=bool)
        first[1:] = v[1:] != v[:-1]
        for x, dx, ux, rx in zip(
            v[first].tolist(),
            d[first].tolist(),
            u[first].tolist(),
            rank[first].tolist(),
            strict=True,
        ):
            if x in settled:
                continue
            before = dist.get(x, np.inf)
            if dx < before or (dx == before and rx < root[x]):
                dist[x], pred[x], root[x] = dx, ux, rx
                pending.setdefault(dx, set()).add(x)
    return dist, pred


def _offers(
    adj: Adjacency,
    batch: list[int],
    length: float,
    root: dict[int, int],
    toll: Callable[[np.ndarray], np.ndarray],
    limits: PathLimits,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The edges a round of :func:`path_rounds` follows from the entities ``batch`` it
    settled at ``length`` (their relations ``adj``): each edge's end, the length of the
    path through it, its start and the rank of the seed the start's path begins at;
    only edges within ``limits.limit`` and not out of a hub."""
    degree = np.diff(adj.indptr)
    u = np.repeat(np.array(batch, dtype=np.int64), degree)
    v = adj.indices.astype(np.int64)
    d = length + adj.data + toll(v)
    rank = np.array([root[x] for x in batch], dtype=np.int64)[
        np.repeat(np.arange(len(batch)), degree)
    ]
    # a hub (a concept hundreds of entities co-occur with) is an end, not a way
    through = np.repeat((degree <= limits.hub_degree) | (length == 0), degree)
    keep = (d <= limits.limit) & through
    return v[keep], d[keep], u[keep], rank[keep]
