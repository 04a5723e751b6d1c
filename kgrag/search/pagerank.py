"""Personalized PageRank over an undirected weighted graph: an exact solve and a
local approximation.

:func:`personalized_pagerank` solves the fixed point igraph's prpack solves, by
conjugate gradients on the walk's symmetric form (torch's sparse product).
:func:`pushed_pagerank` sums the walk's series round by round and carries on only
the entries that still hold at least ``eps`` of the reset mass, so it touches the
neighbourhood of the seeds rather than the whole graph: its cost follows how
spread out the reset is, not the graph's size.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import igraph as ig
import numpy as np
import scipy.sparse as sp

from kgrag.store.base import gather_rows

try:  # scipy's CSC product kernel (what ``csc_matrix @ vector`` calls)
    from scipy.sparse._sparsetools import csc_matvec as _csc_matvec
except ImportError:  # pragma: no cover - a scipy that moved it
    _csc_matvec = None

_PPR_ROUNDS, _PPR_TOL = 100, 1e-10
#: a push round finds the rows it reaches by sorting its entries where they number
#: under 1 / this of the rows (a sort of 400 entries: 3 us; a scan of 64k sums: 13 us,
#: of 6.4M: ~2 ms), else by a scan of the sums
_FEW_ENTRIES = 512


def _adjacency(g: ig.Graph) -> sp.csr_matrix:
    """The symmetric weight matrix of ``g`` (parallel edges summed)."""
    n = g.vcount()
    ends = np.array(g.get_edgelist(), dtype=np.int64).reshape(-1, 2)
    w = np.asarray(g.es["weight"] if g.ecount() else [], dtype=np.float64)
    rows = np.concatenate([ends[:, 0], ends[:, 1]])
    cols = np.concatenate([ends[:, 1], ends[:, 0]])
    return sp.csr_matrix((np.concatenate([w, w]), (rows, cols)), shape=(n, n))


def walk_matrix(g: ig.Graph) -> sp.csc_matrix:
    """The column-stochastic walk M = A D^-1 of ``g`` (float32, by column), for
    :func:`pushed_pagerank`."""
    adj = _adjacency(g)
    strength = np.asarray(adj.sum(axis=0)).ravel()
    inv = np.where(strength > 0, 1.0 / np.where(strength > 0, strength, 1.0), 0.0)
    return (adj @ sp.diags(inv)).tocsc().astype(np.float32)


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
    not renormalised: ranks are what local search reads. On the 60k-passage graph a
    sixth of the exact solve's time, passage recall within a point of it.

    ``matrix`` is the walk (CSC), or a function ``columns(active)`` giving the CSC
    arrays ``(indptr, indices, data)`` of M[:, active] (a store's adjacency): each
    round reads the columns of the active vertices only. Between rounds the mass
    moving on is held sparse (:class:`_Spread`), so a round costs what its columns
    hold, not the number of vertices (6.4M at 600k passages, where vectors over every
    vertex cost 10-30 ms a round); its sums are scipy's CSC product's to the bit."""
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
    (2Wiki's 64k vertices: 36 us, where marking 138k entries in a boolean vector and
    scanning that took 420)."""

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


@dataclass(frozen=True, slots=True)
class Walk:
    """The random walk of an undirected weighted graph in symmetric form, as torch
    tensors (torch's sparse product is ~25% faster than scipy's here): ``sym`` =
    D^-1/2 A D^-1/2 (A the weights, D the vertex strengths), ``root`` = the square
    root of each strength (0 for a vertex without edges)."""

    sym: Any  # torch sparse CSR tensor
    root: Any  # torch tensor

    def astype(self, dtype: Any) -> Walk:
        """The walk in another torch dtype."""
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", "Sparse CSR tensor support", UserWarning)
            return Walk(self.sym.to(dtype), self.root.to(dtype))


def transition(g: ig.Graph) -> Walk:
    """The walk of ``g`` (float64), ready for :func:`personalized_pagerank`."""
    import torch

    n = g.vcount()
    adj = _adjacency(g)
    root = np.sqrt(np.asarray(adj.sum(axis=0)).ravel())
    inv = sp.diags(np.where(root > 0, 1.0 / np.where(root > 0, root, 1.0), 0.0))
    sym = (inv @ adj @ inv).tocsr()
    sym.sort_indices()
    # 32-bit indices where they fit: a third less memory traffic per product than 64
    index = np.int32 if sym.nnz < 2**31 else np.int64
    with warnings.catch_warnings():  # "sparse CSR support is in beta"
        warnings.filterwarnings("ignore", "Sparse CSR tensor support", UserWarning)
        tensor = torch.sparse_csr_tensor(
            torch.from_numpy(sym.indptr.astype(index)),
            torch.from_numpy(sym.indices.astype(index)),
            torch.from_numpy(sym.data),
            size=(n, n),
            check_invariants=True,
        )
    return Walk(tensor, torch.from_numpy(root))


def personalized_pagerank(
    walk: Walk, reset: np.ndarray, damping: float, tol: float = _PPR_TOL
) -> np.ndarray:
    """PPR with the reset distribution ``reset``; a vertex without edges sends its
    mass back to the reset distribution (igraph prpack's fixed point).

    With M = A D^-1 the walk, the fixed point is proportional to x = (I - d M)^-1 r,
    and x = D^1/2 y where (I - d S) y = D^-1/2 r, S = D^-1/2 A D^-1/2. That matrix is
    symmetric with eigenvalues in [1 - d, 1 + d], so conjugate gradients converge by
    a factor ~0.27 per round at d = 0.5 (power iteration: 0.5): fewer sparse products
    for the same accuracy (2Wiki: L1 error 3e-5 after 7 rounds, power iteration 10).
    Stops when the residual's 2-norm falls below ``tol`` times the right-hand side's
    (at most 100 rounds); computed in the walk's dtype."""
    import torch

    root = walk.root
    r = torch.from_numpy(reset / reset.sum()).to(root.dtype)
    linked = root > 0
    b = torch.where(linked, r / torch.where(linked, root, torch.ones_like(root)), 0.0)
    y = torch.zeros_like(b)  # from zero, the first residual is b: no product needed
    res = b.clone()
    direction = b.clone()
    rho, goal = float(res @ res), (tol * float(torch.linalg.vector_norm(b))) ** 2
    for _ in range(_PPR_ROUNDS):
        if rho <= goal:
            break
        product = direction - damping * (walk.sym @ direction)
        step = rho / float(direction @ product)
        y.add_(direction, alpha=step)
        res.add_(product, alpha=-step)
        rho, last = float(res @ res), rho
        direction = res + (rho / last) * direction
    x = torch.where(linked, root * y, r).clamp(min=0).numpy()
    return x / float(x.sum())
