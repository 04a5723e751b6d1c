"""Local search's entity hits read the specificity of few entities, and pick the same
ones as weighing every entity the walk reached."""

from __future__ import annotations

import numpy as np

from kgrag.retrieval.graph_hits import _specific_top


def test_specific_top_is_the_top_of_every_entity_weighed():
    rng = np.random.default_rng(7)
    for trial in range(200):
        n = int(rng.integers(1, 5000))
        mass = np.where(rng.random(n) < 0.6, rng.random(n) ** 4, 0.0)
        if trial % 5 == 0:  # ties in mass and in weighed mass
            mass = np.round(mass, 2)
        chunks = rng.integers(1, 400, n)
        spec = 1.0 / chunks
        asked: list[int] = []

        def specificity(rows: np.ndarray, spec: np.ndarray = spec, asked: list[int] = asked):
            asked.append(len(rows))
            return spec[rows]

        k = int(rng.integers(0, 30))
        rows, weighted = _specific_top(mass, specificity, k)
        held = np.flatnonzero(mass > 0)
        every = mass[held] * np.sqrt(spec[held])
        order = np.lexsort((held, -every))[:k]
        assert rows.tolist() == held[order].tolist()
        assert np.array_equal(weighted, every[order])
        assert sum(asked) <= len(held)


def test_specific_top_reads_a_few_hundred_of_many():
    rng = np.random.default_rng(3)
    mass = rng.random(50_000) ** 6
    spec = 1.0 / rng.integers(1, 20, len(mass))
    asked: list[int] = []
    rows, _ = _specific_top(mass, lambda r: asked.append(len(r)) or spec[r], 10)
    assert len(rows) == 10 and sum(asked) < 5_000
