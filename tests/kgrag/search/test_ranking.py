"""Local search's orderings: stable, ties by position, as a full sort gives them."""

from __future__ import annotations

import numpy as np

from kgrag.search.ranking import descending, ranks, top_k


def test_descending_is_a_stable_argsort_of_the_negated_values():
    rng = np.random.default_rng(9)
    for n in (0, 1, 7, 1000):
        x = rng.standard_normal(n).astype(np.float32)
        x[::5] = 0.0
        x[1::7] = -0.0
        x[2::9] = x[:1] if n else x[2::9]  # ties with the first value
        if n > 3:
            x[3] = np.inf
            x[4] = -np.inf
        assert np.array_equal(descending(x), np.argsort(-x, kind="stable"))
    y = rng.random(50)  # float64 takes numpy's own stable sort
    assert np.array_equal(descending(y), np.argsort(-y, kind="stable"))


def test_ranks_of_mostly_zero_mass_are_those_of_a_full_sort():
    rng = np.random.default_rng(4)
    for n, share in ((0, 0.0), (1, 0.0), (1, 1.0), (500, 0.1), (500, 0.6), (500, 1.0)):
        x = (rng.random(n) * (rng.random(n) < share)).astype(np.float32)
        x[1::11] = -0.0 if n else x[1::11]
        x[2::13] = x[2] if n > 2 else x[2::13]  # ties
        want = np.empty(n)
        want[np.argsort(-x, kind="stable")] = np.arange(n)
        assert np.array_equal(ranks(x), want)
    signed = rng.standard_normal(300).astype(np.float32) * (rng.random(300) < 0.2)
    want = np.empty(300)
    want[np.argsort(-signed, kind="stable")] = np.arange(300)
    assert np.array_equal(ranks(signed), want)  # negatives: the full sort


def test_top_k_is_the_head_of_a_stable_sort():
    x = np.array([0.5, 2.0, 0.5, -1.0, 2.0, 0.0])
    assert top_k(x, 2) == [(1, 2.0), (4, 2.0)]
    assert top_k(x, 4) == [(1, 2.0), (4, 2.0), (0, 0.5), (2, 0.5)]
    assert top_k(x, 10) == [(int(i), float(x[i])) for i in np.argsort(-x, kind="stable")]
    assert top_k(x, 0) == [] and top_k(np.zeros(0), 3) == []
