"""PageRank: the exact solve matches igraph's prpack; pushes approach it locally."""

from __future__ import annotations

import igraph as ig
import numpy as np
import pytest

from kgrag.search.pagerank import (
    personalized_pagerank,
    pushed_pagerank,
    transition,
    walk_matrix,
)
from kgrag.store import kernels
from kgrag.store.kernels import _Spread


def test_power_iteration_matches_prpack_with_isolated_vertices():
    g = ig.Graph.Erdos_Renyi(n=400, m=1600, directed=False)
    g.add_vertices(3)  # vertices without edges: their mass goes back to the reset
    g.es["weight"] = list(np.random.default_rng(7).random(g.ecount()) + 0.1)
    reset = np.zeros(g.vcount())
    reset[[1, 5, 77, 401]] = [1.0, 0.5, 0.2, 0.3]
    for damping in (0.5, 0.85):
        expected = g.personalized_pagerank(
            directed=False,
            damping=damping,
            reset=reset.tolist(),
            weights="weight",
            implementation="prpack",
        )
        got = personalized_pagerank(transition(g), reset, damping)
        assert np.allclose(got, expected, atol=1e-9)
        assert abs(got.sum() - 1.0) < 1e-9


def test_pushes_approach_the_exact_ranks_and_stay_local():
    rng = np.random.default_rng(3)
    g = ig.Graph.Barabasi(n=3000, m=3, directed=False)  # hubs, like an entity graph
    g.es["weight"] = list(rng.random(g.ecount()) + 0.1)
    reset = np.zeros(g.vcount())
    reset[[10, 500, 2500]] = [1.0, 0.5, 0.25]
    exact = personalized_pagerank(transition(g), reset, 0.5)
    top = set(np.argsort(-exact)[:20].tolist())
    matrix = walk_matrix(g)
    fine = pushed_pagerank(matrix, reset, 0.5, eps=1e-9)
    assert np.abs(fine / fine.sum() - exact).sum() < 1e-4  # no threshold to speak of: exact
    coarse = pushed_pagerank(matrix, reset, 0.5, eps=1e-3)
    assert len(top & set(np.argsort(-coarse)[:20].tolist())) >= 16
    assert np.count_nonzero(coarse) < 0.5 * g.vcount()  # the walk stayed near the seeds


def _dense_push(matrix, reset, damping, eps, rounds=100):
    """The push as it ran before its mass was held sparse: every round over every
    vertex, scipy's product on a slice of the active columns."""
    r = (reset / reset.sum()).astype(np.float32)
    p, x = np.zeros_like(r), r
    for _ in range(rounds):
        p += (1 - damping) * x
        active = np.flatnonzero(x > eps)
        if not len(active):
            break
        x = damping * (matrix[:, active] @ x[active])
    return p


@pytest.mark.parametrize("few", [1, kernels._FEW_ENTRIES, 10**9])  # scans, as shipped, sorts
def test_pushes_run_scipys_column_product_to_the_bit(few, monkeypatch):
    # the push holds its moving mass sparse and sums it with scipy's CSC kernel on
    # scratch vectors; a dense push over scipy slices gives the same float32 mass,
    # whichever way a round finds the rows it reaches
    monkeypatch.setattr(kernels, "_FEW_ENTRIES", few)
    rng = np.random.default_rng(11)
    g = ig.Graph.Barabasi(n=2000, m=4, directed=False)
    g.es["weight"] = list(rng.random(g.ecount()) + 0.1)
    matrix = walk_matrix(g)
    reset = np.zeros(g.vcount())
    reset[rng.choice(g.vcount(), 12, replace=False)] = rng.random(12) + 0.1

    def columns(active):
        part = matrix[:, active]
        return part.indptr, part.indices, part.data

    for eps in (1e-3, 1e-5, 1e-7):
        got = pushed_pagerank(matrix, reset, 0.5, eps)
        assert got.dtype == np.float32
        assert np.array_equal(got, _dense_push(matrix, reset, 0.5, eps))
        assert np.array_equal(pushed_pagerank(columns, reset, 0.5, eps), got)
        assert np.count_nonzero(got) > 100  # the walk went somewhere
    # a round's sums: the rows the columns reach, ascending, and scipy's product there
    spread = _Spread(g.vcount())
    for active in (np.arange(0, 2000, 7), np.array([3, 4, 5]), np.arange(2000)):
        x = rng.random(len(active)).astype(np.float32)
        rows, sums = spread(*columns(active), x)
        want = matrix[:, active] @ x
        nonzero = sums != 0  # a row may be left out only where its sum is 0
        assert np.array_equal(rows[nonzero], np.flatnonzero(want))
        assert np.array_equal(sums[nonzero], want[rows[nonzero]])
        assert np.all(np.diff(rows) > 0)


def test_gathered_columns_are_scipys_slices_either_way():
    import scipy.sparse as sp

    from kgrag.store.kernels import gather_rows

    m = sp.random(300, 300, density=0.05, random_state=4, format="csc", dtype=np.float32)
    rows = np.array([7, 0, 299, 7, 150, 42])  # any order, repeats kept
    want = m[:, rows]
    for indptr, indices in (
        (m.indptr, m.indices),  # one integer type: scipy's kernel
        (m.indptr.astype(np.int64), m.indices.astype(np.int32)),  # two: index ranges
    ):
        ptr, cols, data = gather_rows(indptr, indices, m.data, rows)
        assert ptr.tolist() == want.indptr.tolist()
        assert cols.tolist() == want.indices.tolist()
        assert data.dtype == np.float32 and data.tolist() == want.data.tolist()
    ptr, cols, data = gather_rows(m.indptr, m.indices, m.data, np.array([], dtype=np.int64))
    assert ptr.tolist() == [0] and len(cols) == len(data) == 0
