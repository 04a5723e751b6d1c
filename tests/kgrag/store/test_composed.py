"""Fact vectors stored as their parts (kgrag.store.composed): the rows a store reads
are the ones composed from the entity vectors it stores, every way of reading them
agrees, and parts that do not fit the version are refused."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from ingest import embed
from kgrag.encoders.base import normalise
from kgrag.errors import StoreError
from kgrag.store import GraphWriter, SQLiteGraphStore
from kgrag.store.composed import ComposedMatrix, FactParts
from kgrag.store.vectors import VectorRows, dequantize, quantize
from kgrag.types import Relation
from tests.kgrag.store.test_store import STORES, _records

RNG = np.random.default_rng(11)
ENTITIES = normalise(RNG.normal(size=(2, 4)))
PARTS = FactParts(
    np.array([[0, 1]], np.int32),
    np.array([0], np.int32),
    RNG.normal(size=(1, 4)).astype(np.float32),
    np.array([2.0, 3.0], np.float32),
)


@pytest.fixture(params=STORES)
def store(request, tmp_path):
    s = request.param(request, tmp_path)
    yield s
    s.close()


def _begin(w) -> None:
    """The records, chunk and entity vectors of a version, before its facts."""
    for kind, batch in _records().items():
        w.add(kind, batch)
    w.add_vectors("chunks", ["c:1", "c:2"], np.eye(2, 4, dtype=np.float32))
    w.add_vectors("entities", ["e:d", "e:v"], ENTITIES)


def _write(store) -> str:
    with store.writer() as w:
        _begin(w)
        w.add_fact_parts(["r:2"], PARTS, ENTITIES)
        return w.commit({"dim": 4})


def test_parts_compose_what_the_build_composed():
    """The parts :func:`ingest.embed.fact_parts` gives compose, from float entity
    vectors, the rows :func:`ingest.embed.composed_blocks` makes."""
    rng = np.random.default_rng(2)
    ids = [f"e:{i}" for i in range(6)]
    names = {e: "word " * (i + 1) for i, e in enumerate(ids)}
    matrix = normalise(rng.normal(size=(6, 8)))
    rels = [
        Relation(f"r:{i}", ids[a], p, ids[b], 1.0, "svo", ())
        for i, (a, p, b) in enumerate([(0, "be in", 1), (2, "flow", 0), (5, "be in", 3)])
    ]
    pred_vecs = {"be in": rng.normal(size=8), "flow": rng.normal(size=8)}

    def encode(texts: list[str]) -> np.ndarray:
        return np.array([pred_vecs[t] for t in texts], np.float32)

    def tokens(texts: list[str]) -> np.ndarray:
        return np.array([len(t.split()) for t in texts], np.float32)

    parts = embed.fact_parts(encode, tokens, rels, names, ids, 8)
    want = embed.joined(embed.composed_blocks(encode, tokens, rels, names, (ids, matrix)), 8)
    assert np.allclose(parts.compose(matrix, slice(None)), want, atol=1e-6)
    assert parts.ends.tolist() == [[0, 1], [2, 0], [5, 3]] and parts.weight[4] == 0  # unused
    none = embed.fact_parts(encode, tokens, [], names, ids, 8)
    assert none.ends.shape == (0, 2) and none.predicates.shape == (0, 8)


def test_a_composed_matrix_reads_like_the_rows_it_composes():
    rng = np.random.default_rng(3)
    ents = normalise(rng.normal(size=(5, 4)))
    parts = FactParts(
        rng.integers(0, 5, size=(40, 2)).astype(np.int32),
        rng.integers(0, 3, size=40).astype(np.int32),
        rng.normal(size=(3, 4)).astype(np.float32),
        rng.uniform(1, 4, size=5).astype(np.float32),
    )
    m = ComposedMatrix(parts, ents)
    whole = parts.compose(ents, slice(None))
    q = normalise(rng.normal(size=(1, 4)))[0]
    assert m.shape == (40, 4) and len(m) == 40
    assert np.array_equal(np.asarray(m), whole)
    assert np.array_equal(m[7], whole[7]) and np.array_equal(m[-1], whole[-1])
    assert np.array_equal(m[5:12], whole[5:12]) and np.array_equal(m[::7], whole[::7])
    assert np.array_equal(m[np.array([9, 2, 9])], whole[[9, 2, 9]])
    assert np.array_equal(m[3:6, 1], whole[3:6, 1])
    assert np.allclose(m @ q, whole @ q, atol=1e-6)
    assert np.allclose(np.linalg.norm(whole, axis=1), 1.0, atol=1e-5)
    with pytest.raises(ValueError, match="entities"):
        ComposedMatrix(parts, ents[:4])
    with pytest.raises(ValueError, match="outside"):
        FactParts(np.array([[0, 7]], np.int32), parts.predicate[:1], parts.predicates, parts.weight)


def test_facts_stored_as_parts_read_as_the_rows_they_compose(store):
    """Whatever a store keeps (the folder the parts, Neo4j the composed rows), its fact
    vectors are the rows composed from the entity vectors it stores, and searching
    them finds them."""
    _write(store)
    with store.reader() as r:
        ids, matrix = r.vectors("facts")
        stored_entities = np.asarray(r.vectors("entities")[1])
        # the predicate vectors are kept as int8 codes, like the entity vectors
        coded = replace(PARTS, predicates=dequantize(*quantize(PARTS.predicates)))
        want = coded.compose(stored_entities, slice(None))
        assert ids == ["r:2"]
        assert np.allclose(np.asarray(matrix), want, atol=1e-6)
        found = r.nearest("facts", want[0], 3)[0]
        assert found[0][0] == 0 and found[0][1] == pytest.approx(1.0, abs=1e-5)
        assert r.similarity("facts", want[0]).tolist() == pytest.approx([1.0], abs=1e-5)


def test_the_folder_keeps_the_parts_and_reads_rows_alike(folder_store):
    store = folder_store
    _write(store)
    with store.reader() as r:
        folder = r.folder / "vectors"
        assert (folder / "facts.ends.npy").exists()
        assert not list(folder.glob("facts.npy")) and not list(folder.glob("facts.q8.npy"))
        rows = VectorRows(folder, "facts")
        assert np.array_equal(rows.take(np.array([0])), np.asarray(r.vectors("facts")[1]))
        rows.close()


def test_rows_stored_after_the_parts_replace_them(folder_store):
    store = folder_store
    rows = normalise(RNG.normal(size=(1, 4)))
    with store.writer() as w:
        _begin(w)
        w.add_fact_parts(["r:2"], PARTS, ENTITIES)
        w.add_vectors("facts", ["r:2"], rows)
        w.commit({"dim": 4})
    with store.reader() as r:
        assert not (r.folder / "vectors" / "facts.ends.npy").exists()
        assert np.array_equal(np.asarray(r.vectors("facts")[1]), dequantize(*quantize(rows)))


def test_the_base_writer_stores_the_composed_rows(folder_store):
    store = folder_store
    with store.writer() as w:
        _begin(w)
        GraphWriter.add_fact_parts(w, ["r:2"], PARTS, ENTITIES)
        w.commit({"dim": 4})
    with store.reader() as r:
        got = np.asarray(r.vectors("facts")[1])
    assert np.array_equal(got, dequantize(*quantize(PARTS.compose(ENTITIES, slice(None)))))


def test_parts_that_do_not_fit_the_version_publish_nothing(tmp_path):
    store = SQLiteGraphStore(tmp_path / "g", keep_versions=2, retain_seconds=0)
    three = normalise(RNG.normal(size=(3, 4)))
    with store.writer() as w, pytest.raises(StoreError, match="composed of 2 entities, 3 stored"):
        w.add_vectors("entities", ["e:d", "e:v", "e:x"], three)
        w.add_fact_parts(["r:2"], PARTS, ENTITIES)
        w.commit({"dim": 4})
    with store.writer() as w, pytest.raises(StoreError, match="2 ids but parts of 1"):
        w.add_fact_parts(["r:2", "r:3"], PARTS, ENTITIES)
    assert store.current() is None


@pytest.fixture
def folder_store(tmp_path):
    return SQLiteGraphStore(tmp_path / "g", keep_versions=2, retain_seconds=0)
