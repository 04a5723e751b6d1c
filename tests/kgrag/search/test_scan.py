"""The store's half-precision scan (a kind without an ANN index) ranks by exact
float32 scores of the stored vectors."""

from __future__ import annotations

import numpy as np

from kgrag.store import SQLiteGraphStore


def _unit(rows: int, dim: int, seed: int) -> np.ndarray:
    m = np.random.default_rng(seed).standard_normal((rows, dim)).astype(np.float32)
    return m / np.linalg.norm(m, axis=1, keepdims=True)


def _reader(tmp_path, matrix: np.ndarray):
    store = SQLiteGraphStore(tmp_path / "g", ann_min_rows=0)  # exact: no index
    with store.writer() as w:
        w.add_vectors("facts", [f"r:{i:05d}" for i in range(len(matrix))], matrix)
        w.commit({"dim": matrix.shape[1]})
    return store.reader()


def test_top_equals_the_exact_float32_top(tmp_path):
    matrix = _unit(5000, 64, 1)
    reader = _reader(tmp_path, matrix)
    stored = np.asarray(reader.matrix("facts"))  # facts are kept as int8 codes
    for q in _unit(20, 64, 2):
        exact = stored @ q
        want = np.lexsort((np.arange(len(exact)), -exact))[:7]
        got = reader.nearest("facts", q, 7)[0]
        assert [r for r, _ in got] == want.tolist()
        assert np.allclose([s for _, s in got], exact[want], atol=1e-6)


def test_near_duplicates_are_told_apart_and_ties_go_by_row(tmp_path):
    base = _unit(1, 64, 3)[0]
    matrix = np.vstack([_unit(100, 64, 4), base, base, base * 0.9999 + 1e-4]).astype(np.float32)
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
    got = _reader(tmp_path, matrix).nearest("facts", base, 3)[0]
    assert [r for r, _ in got][:2] == [100, 101]  # equal scores: lower row first
    assert got[2][0] == 102


def test_small_matrices(tmp_path):
    matrix = _unit(3, 8, 5)
    reader = _reader(tmp_path, matrix)
    assert [r for r, _ in reader.nearest("facts", matrix[1], 10)[0]][0] == 1
    assert len(reader.nearest("facts", matrix[1], 10)[0]) == 3
    assert reader.nearest("facts", matrix[1], 0) == [[]]
