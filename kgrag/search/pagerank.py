"""Personalized PageRank over an undirected weighted graph: an exact solve and a
local approximation.

:func:`personalized_pagerank` solves the fixed point igraph's prpack solves, by
conjugate gradients on the walk's symmetric form (torch's sparse product).
:func:`pushed_pagerank` (the kernel a store runs, :mod:`kgrag.store.kernels`; here
for the searches over an in-memory graph, with :func:`walk_matrix`) sums the walk's
series round by round and carries on only the entries that still hold at least
``eps`` of the reset mass, so it touches the neighbourhood of the seeds rather than
the whole graph: its cost follows how spread out the reset is, not the graph's size.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any

import igraph as ig
import numpy as np
import scipy.sparse as sp

from kgrag.store.kernels import pushed_pagerank

__all__ = ["Walk", "personalized_pagerank", "pushed_pagerank", "transition", "walk_matrix"]

_PPR_ROUNDS, _PPR_TOL = 100, 1e-10


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
