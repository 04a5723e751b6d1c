"""Vectors kept as int8 codes (kgrag.store.vectors): what is stored, how it reads, and
that a version written before the coded format still reads as it was."""

from __future__ import annotations

import numpy as np
import pytest

from kgrag.store import SQLiteGraphStore
from kgrag.store.vectors import (
    CODED_KINDS,
    CodedMatrix,
    dequantize,
    quantize,
    within_a_code_step,
)


def _unit(rows: int, dim: int, seed: int) -> np.ndarray:
    m = np.random.default_rng(seed).standard_normal((rows, dim)).astype(np.float32)
    return m / np.linalg.norm(m, axis=1, keepdims=True)


def test_codes_keep_each_row_and_its_norm_and_code_again_to_the_bit():
    m = _unit(3000, 384, 1)
    m[7] = 0.0  # a zero row stays zero
    codes, scale = quantize(m)
    assert codes.dtype == np.int8 and scale.dtype == np.float32
    back = dequantize(codes, scale)
    assert within_a_code_step(back, m)
    assert not within_a_code_step(back + 0.01, m)  # the check can fail
    norms = np.linalg.norm(back, axis=1)
    assert np.allclose(np.delete(norms, 7), 1.0, atol=2e-5) and norms[7] == 0.0
    again = quantize(back)  # a copied graph or a carried-forward version
    assert np.array_equal(again[0], codes) and np.array_equal(again[1], scale)
    q = _unit(1, 384, 2)[0]
    assert np.abs(back @ q - m @ q).max() < 5e-3  # cosines move by a code step at most


def test_a_coded_matrix_reads_as_its_float_matrix():
    m = _unit(40_000, 16, 3)  # more rows than one block of the product
    coded = CodedMatrix(*quantize(m))
    whole = dequantize(*quantize(m))
    assert coded.shape == (40_000, 16) and len(coded) == 40_000 and coded.dtype == np.float32
    assert np.array_equal(np.asarray(coded), whole)
    assert np.array_equal(coded[5], whole[5]) and np.array_equal(coded[3:9], whole[3:9])
    rows = np.array([39_999, 0, 17])
    assert np.array_equal(coded[rows], whole[rows]) and np.array_equal(
        coded[rows, 2], whole[rows, 2]
    )
    q = _unit(3, 16, 4)
    assert np.allclose(coded @ q[0], whole @ q[0], atol=1e-6)
    assert np.allclose(coded @ q.T, whole @ q.T, atol=1e-6)
    assert (coded @ q.T).shape == (40_000, 3)
    empty = CodedMatrix(np.zeros((0, 16), np.int8), np.zeros(0, np.float32))
    assert (empty @ q[0]).shape == (0,) and np.asarray(empty).shape == (0, 16)
    with pytest.raises(ValueError, match="codes of shape"):
        CodedMatrix(np.zeros((2, 4), np.int8), np.zeros(3, np.float32))


def test_a_version_holds_codes_for_the_coded_kinds(tmp_path):
    """Chunk vectors stay float32: tests/kgrag/store/test_store.py reads them exactly."""
    store = SQLiteGraphStore(tmp_path / "g")
    kinds = ("sentences", "facts")  # kinds that need no records beside their vectors
    assert set(kinds) <= set(CODED_KINDS)
    vectors = {kind: _unit(50, 8, i) for i, kind in enumerate(kinds)}
    with store.writer() as w:
        for kind, m in vectors.items():
            w.add_vectors(kind, [f"x:{kind}{i}" for i in range(len(m))], m)
        w.commit({"dim": 8})
    folder = tmp_path / "g" / "versions" / store.current() / "vectors"
    assert sorted(p.name for p in folder.iterdir()) == sorted(
        f"{k}.{part}.npy" for k in kinds for part in ("q8", "scale", "ids")
    )
    with store.reader() as r:
        for kind in kinds:
            assert within_a_code_step(r.vectors(kind)[1], vectors[kind])
            got = r.serving.vectors_of(kind, np.array([4, 1, 4]))  # read by pread
            assert np.array_equal(got, np.asarray(r.matrix(kind))[[4, 1, 4]])


def test_a_version_written_before_the_codes_reads_its_float32_vectors(tmp_path):
    """A version whose vector files are all float32 (as every version was before) is
    read as it is: the same rows, searches over them, and the same vectors copied on."""
    store = SQLiteGraphStore(tmp_path / "g")
    m = _unit(60, 8, 9)
    with store.writer() as w:
        w.add_vectors("facts", [f"r:{i:03d}" for i in range(60)], m)
        w.commit({"dim": 8})
    folder = tmp_path / "g" / "versions" / store.current() / "vectors"
    (folder / "facts.q8.npy").unlink()
    (folder / "facts.scale.npy").unlink()
    np.save(folder / "facts.npy", m)  # the old layout
    with store.reader() as r:
        assert np.array_equal(np.asarray(r.vectors("facts")[1]), m)
        assert np.array_equal(r.serving.vectors_of("facts", np.array([2, 0])), m[[2, 0]])
        found = r.nearest("facts", m[11], 1)[0]
        assert found[0][0] == 11 and found[0][1] == pytest.approx(1.0, abs=1e-6)


def test_equal_rows_are_stored_once_and_read_as_every_row(tmp_path):
    """A kind whose rows repeat (a community carried down a level has its child's
    vector) keeps each distinct row once and reads back every row as written; a kind
    with few repeats is stored whole."""
    distinct = _unit(40, 8, 3)
    picks = np.random.default_rng(4).integers(0, 40, size=100)
    picks[:40] = np.arange(40)
    store = SQLiteGraphStore(tmp_path / "g")
    with store.writer() as w:
        w.add_vectors("sentences", [f"c:1#{i}" for i in range(100)], distinct[picks])
        w.add_vectors("facts", [f"r:{i}" for i in range(40)], distinct)
        w.commit({"dim": 8})
    folder = tmp_path / "g" / "versions" / store.current() / "vectors"
    assert np.load(folder / "sentences.q8.npy").shape == (40, 8)
    assert np.load(folder / "sentences.rows.npy").tolist() == picks.tolist()  # first in order
    assert not (folder / "facts.rows.npy").exists()
    want = dequantize(*quantize(distinct))[picks]
    q = _unit(1, 8, 5)[0]
    with store.reader() as r:
        ids, matrix = r.vectors("sentences")
        assert len(ids) == 100 and matrix.shape == (100, 8)
        assert np.array_equal(np.asarray(matrix), want)
        assert np.array_equal(matrix[7], want[7]) and np.array_equal(matrix[90:], want[90:])
        assert np.allclose(matrix @ q, want @ q, atol=1e-6)
        got = r.serving.vectors_of("sentences", np.array([99, 3, 99]))  # read by pread
        assert np.array_equal(got, want[[99, 3, 99]])
        assert r.similarity("sentences", q, np.array([5, 60])) == pytest.approx(want[[5, 60]] @ q)
