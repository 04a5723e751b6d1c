"""Half-precision scans rank by exact float32 scores."""

from __future__ import annotations

import numpy as np

from kgrag.graph.scan import HalfScan


def _unit(rows: int, dim: int, seed: int) -> np.ndarray:
    m = np.random.default_rng(seed).standard_normal((rows, dim)).astype(np.float32)
    return m / np.linalg.norm(m, axis=1, keepdims=True)


def test_top_equals_the_exact_float32_top():
    matrix = _unit(5000, 64, 1)
    scan = HalfScan(matrix)
    for q in _unit(20, 64, 2):
        exact = matrix @ q
        want = np.lexsort((np.arange(len(exact)), -exact))[:7]
        got = scan.top(q, 7)
        assert [r for r, _ in got] == want.tolist()
        assert np.allclose([s for _, s in got], exact[want], atol=1e-6)


def test_near_duplicates_are_told_apart_and_ties_go_by_row():
    base = _unit(1, 64, 3)[0]
    matrix = np.vstack([_unit(100, 64, 4), base, base, base * 0.9999 + 1e-4]).astype(np.float32)
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
    got = HalfScan(matrix).top(base, 3)
    assert [r for r, _ in got][:2] == [100, 101]  # equal scores: lower row first
    assert got[2][0] == 102


def test_small_and_empty_matrices():
    matrix = _unit(3, 8, 5)
    assert [r for r, _ in HalfScan(matrix).top(matrix[1], 10)][0] == 1
    assert len(HalfScan(matrix).top(matrix[1], 10)) == 3
    assert HalfScan(matrix).top(matrix[1], 0) == []
    empty = HalfScan(np.zeros((0, 8), dtype=np.float32))
    assert len(empty) == 0 and empty.top(matrix[0], 5) == []
