"""The power-iteration PPR solves the same fixed point as igraph's prpack."""

from __future__ import annotations

import igraph as ig
import numpy as np

from kgrag.graph.local import personalized_pagerank, transition


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
