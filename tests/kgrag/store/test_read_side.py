"""The read side on the science graph: the same answers as before the query-side
interface (recorded by benchmarks/read_path_golden.py from commit 8f524e9; the local
answer to "Where was Albert Einstein born?" re-recorded when local search's candidates
grew by the named-passage bridges, which swapped its 5th and 6th hits; every question's
paths re-recorded when paths started at the entities the query names, ended with what
their passage states and path hits looked twice as deep; local answers and paths
re-recorded with the second walk, which adds candidates and rerank features), a query that
reads no whole table, ANN against exact search, old graphs upgraded."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from counting import CountingStore

import kgrag
from kgrag.config import Config
from kgrag.encoders import load_encoder
from kgrag.engine import Engine
from kgrag.errors import StoreError
from kgrag.store import SQLiteGraphStore, open_store
from kgrag.store.arrays import FileRows
from kgrag.store.folder import files as mapped

DATA = Path(__file__).resolve().parents[2] / "data"

GOLDEN = DATA / "science_read_path.json"
QUESTIONS = json.loads((DATA / "science_questions.json").read_text())


def _answers(engine) -> dict:
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "benchmarks"))
    from read_path_golden import answers

    return {q: answers(engine, q) for q in QUESTIONS}


def _same(found: dict, golden: dict) -> None:
    """Every op returns the recorded ids in the recorded order; a provenance path may be
    another of the equally short ones (ties now go to the better seed), so paths must
    end at the same passages with the same number of steps."""
    for q, ops in golden.items():
        for op, ids in ops.items():
            if op == "paths":
                got = [(p[-1], len(p)) for p in found[q][op]]
                assert got == [(p[-1], len(p)) for p in ids], (q, op)
            else:
                assert found[q][op] == ids, (q, op)


def _without_serving(graph: Path, to: Path) -> Path:
    """A copy of ``graph`` as a kgrag before the serving files wrote it."""
    shutil.copytree(graph, to)
    for version in (to / "versions").iterdir():
        shutil.rmtree(version / "serving")
    return to


def test_same_answers_as_the_recorded_read_path(science_graph):
    with kgrag.open(science_graph) as engine:
        _same(_answers(engine), json.loads(GOLDEN.read_text()))


def test_a_graph_written_before_serving_files_is_upgraded_on_open(science_graph, tmp_path):
    old = _without_serving(science_graph, tmp_path / "old")
    with kgrag.open(old) as engine:
        _same(_answers(engine), json.loads(GOLDEN.read_text()))
    assert all((v / "serving" / "serving.json").exists() for v in (old / "versions").iterdir())


def _counting_engine(root: Path) -> tuple[Engine, CountingStore]:
    config = Config()
    store = CountingStore(open_store(root))
    reader = store.reader()
    encoder = load_encoder(reader.manifest["models"]["embedding"])
    return Engine(store, reader, encoder, config.retrieval, build_config=config), store


def test_opening_and_a_local_search_read_no_whole_table(science_graph):
    engine, store = _counting_engine(science_graph)
    with engine:
        engine.capabilities()
        opened = store.readers[0]
        assert opened.whole_reads() == [] and opened.scans() == []
        res = engine.graph(
            {"op": "local", "query": QUESTIONS[0], "k": 5, "units": ["chunk", "path"]}
        )
        assert res["hits"]
        engine.retrieve({"query": QUESTIONS[0], "k": 5, "mode": "hybrid"})
        assert opened.whole_reads() == []
        calls = opened.per_method()
        assert calls["adjacency"] >= 3 and calls["lookup"] == 1
        # the one per-row read a local search makes is the dense similarity over the
        # chunks (as bare dense search does) and the chunk vertices (read once)
        assert {(c.method, c.kind) for c in opened.scans()} == {
            ("similarity", "chunks"),
            ("attribute", "chunks.vertex"),
        }


def test_global_and_drift_read_no_whole_table(science_graph):
    """Global search scans community attributes (a level's rows) and reads the records
    of the reports it returns; DRIFT adds local searches."""
    engine, store = _counting_engine(science_graph)
    with engine:
        res = engine.graph({"op": "global", "query": QUESTIONS[0], "k": 3})
        assert res["communities"] and res["summary"]
        engine.graph({"op": "drift", "query": QUESTIONS[0], "k": 5})
        engine.retrieve({"query": QUESTIONS[0], "k": 5, "unit": "community"})
        opened = store.readers[0]
        assert opened.whole_reads() == []
        assert {c.kind for c in opened.scans()} <= {
            "chunks",
            "chunks.vertex",
            "communities.level",
            "communities.size",
            "communities.canonical",
        }


def test_the_neighbors_op_reads_the_whole_graph_once(science_graph):
    engine, store = _counting_engine(science_graph)
    with engine:
        seed = engine.reader.ids("entities", [0])[0]
        engine.graph({"op": "neighbors", "seedIds": [seed], "hops": 1})
        engine.graph({"op": "neighbors", "seedIds": [seed], "hops": 2})
        reads = [c.method for c in store.readers[0].whole_reads()]
        assert reads.count("relations") == 1 and reads.count("synonyms") == 1


def test_ann_finds_what_the_exact_search_finds(science_graph, tmp_path):
    """An ANN index on every kind of the science graph, and on a generated matrix of
    clustered vectors: the same neighbours as the exact search."""
    ann = _without_serving(science_graph, tmp_path / "ann")
    exact = open_store(science_graph).reader()
    approx = SQLiteGraphStore(ann, ann_min_rows=10).reader()
    assert set(approx.serving.meta["ann"]) >= {"chunks", "entities", "facts"}
    queries = exact.matrix("chunks")[:6] * 0.5 + exact.matrix("chunks")[6:12] * 0.5
    queries /= np.linalg.norm(queries, axis=1, keepdims=True)
    for kind in ("chunks", "entities", "facts"):
        assert approx.nearest(kind, queries, 5) == exact.nearest(kind, queries, 5)
    with kgrag.open(ann) as engine:  # every search through the indexes: the same answers
        _same(_answers(engine), json.loads(GOLDEN.read_text()))


def test_scattered_rows_read_by_pread_give_the_same_answers(science_graph, monkeypatch):
    """Ids and relation ids of every file read as a large graph's are (by ``pread``,
    not through the map): every op's answers as recorded."""
    monkeypatch.setattr(mapped, "_SMALL_FILE", 0)
    with kgrag.open(science_graph) as engine:
        _same(_answers(engine), json.loads(GOLDEN.read_text()))


def test_a_broken_ann_index_gives_a_clear_error(science_graph, tmp_path):
    ann = _without_serving(science_graph, tmp_path / "ann")
    reader = SQLiteGraphStore(ann, ann_min_rows=10).reader()
    (path,) = (ann / "versions").glob("*/serving/ann.facts.faiss")
    path.write_bytes(path.read_bytes()[:100])
    with pytest.raises(StoreError, match="ann.facts.faiss: unreadable ANN index"):
        reader.nearest("facts", reader.matrix("facts")[:1], 5)
    assert reader.nearest("entities", reader.matrix("entities")[:1], 1)  # the rest answers
    reader.close()


def test_ann_recall_on_a_generated_matrix(tmp_path):
    rng = np.random.default_rng(5)
    centres = rng.standard_normal((50, 64))
    matrix = centres[rng.integers(0, 50, 6000)] + 0.35 * rng.standard_normal((6000, 64))
    matrix = (matrix / np.linalg.norm(matrix, axis=1, keepdims=True)).astype(np.float32)
    ids = [f"r:{i:05d}" for i in range(len(matrix))]
    stores = {}
    for name, threshold in (("exact", 0), ("ann", 1000)):
        store = SQLiteGraphStore(tmp_path / name, ann_min_rows=threshold)
        with store.writer() as w:
            w.add_vectors("facts", ids, matrix)
            w.commit({"dim": 64})
        stores[name] = store.reader()
    assert stores["ann"].serving.meta["ann"] == ["facts"]
    queries = matrix[rng.integers(0, len(matrix), 200)] + 0.2 * rng.standard_normal((200, 64))
    queries = (queries / np.linalg.norm(queries, axis=1, keepdims=True)).astype(np.float32)
    for k in (1, 5, 32):
        want = stores["exact"].nearest("facts", queries, k)
        got = stores["ann"].nearest("facts", queries, k)
        recall = np.mean(
            [len({r for r, _ in g} & {r for r, _ in w}) / k for g, w in zip(got, want, strict=True)]
        )
        assert recall >= 0.99, (k, recall)
        for g in got:  # exact float32 scores, best first
            assert [s for _, s in g] == sorted((s for _, s in g), reverse=True)
    # the exact store scans half-precision copies, all queries in one product, and
    # re-scores a margin in float32: each query's true top k over the stored (int8-coded)
    # vectors, as numpy ranks it
    stored = np.asarray(stores["exact"].matrix("facts"))
    assert np.abs(stored - matrix).max() <= np.abs(matrix).max(axis=1).max() / 127
    batched = stores["exact"].nearest("facts", queries, 5)
    scores = queries @ stored.T
    for i, found in enumerate(batched):
        best = np.lexsort((np.arange(len(matrix)), -scores[i]))[:5]
        assert [r for r, _ in found] == best.tolist()
        assert stores["exact"].nearest("facts", queries[i], 5) == [found]
    for q in queries[:20]:  # one query at a time, as local search asks (1-d and 1-row)
        want = stores["exact"].nearest("facts", q, 5)
        assert stores["ann"].nearest("facts", q, 5) == want
        assert stores["ann"].nearest("facts", q[None, :], 5) == want


@pytest.mark.parametrize("point", ["after-derive"])
def test_a_writer_killed_after_deriving_leaves_the_old_version(science_graph, tmp_path, point):
    import os
    import subprocess
    import sys

    root = tmp_path / "g"
    shutil.copytree(science_graph, root)
    before = open_store(root).current()
    script = (
        "import numpy as np, sys\n"
        "from kgrag.store import open_store\n"
        "w = open_store(sys.argv[1]).writer()\n"
        "w.add_vectors('chunks', ['c:x'], np.ones((1, 4), np.float32))\n"
        "w.commit({'dim': 4})\n"
    )
    env = dict(os.environ, KGRAG_CRASH_AT=point)
    done = subprocess.run([sys.executable, "-c", script, str(root)], env=env, check=False)
    assert done.returncode != 0
    assert open_store(root).current() == before
    with kgrag.open(root) as engine:
        _same(_answers(engine), json.loads(GOLDEN.read_text()))


def test_an_old_version_that_cannot_be_upgraded_gets_a_clear_error(science_graph, tmp_path):
    from kgrag.errors import StoreError

    old = _without_serving(science_graph, tmp_path / "old")
    (old / ".lock").unlink(missing_ok=True)
    (old / ".lock").mkdir()  # the writers' lock cannot be taken: nothing can be written
    with pytest.raises(StoreError, match="cannot be written"):
        kgrag.open(old)
    (old / ".lock").rmdir()
    with kgrag.open(old) as engine:  # nothing was lost: it upgrades once it can
        _same(_answers(engine), json.loads(GOLDEN.read_text()))


def _current_version(root: Path) -> Path:
    manifest = json.loads((root / "manifest.json").read_text())
    return root / "versions" / manifest["indexVersion"]


def test_deriving_twice_gives_the_same_files(science_graph, tmp_path):
    from kgrag.store.serving import derive

    version = _current_version(science_graph)
    for name in ("a", "b"):
        derive(version, tmp_path / name, ann_min_rows=1)
    for path in sorted((tmp_path / "a").iterdir()):
        if path.name != "names.sqlite":  # a SQLite file: same rows, pages may differ
            assert path.read_bytes() == (tmp_path / "b" / path.name).read_bytes(), path.name
    shipped = sorted((version / "serving").glob("*.npy"))
    common = [p for p in shipped if (tmp_path / "a" / p.name).exists()]
    assert len(common) > 30  # all but the half copies, which a kind with an index has not
    for path in common:  # the stored graph's own files agree
        assert np.array_equal(np.load(path), np.load(tmp_path / "a" / path.name)), path.name


def test_ids_map_to_rows_only_by_exact_match():
    from kgrag.store.graph_files import Rows

    rows = Rows(np.array([b"e:b", b"e:a", b"e:abc"]))
    found = rows(["e:a", "e:abc", "e:abcd", "e:ab", "e:", "e:b", "x"])
    assert found.tolist() == [1, 2, -1, -1, -1, 0, -1]
    assert rows([]).tolist() == []
    assert Rows(np.zeros(0, dtype="S1"))(["e:a"]).tolist() == [-1]


def test_a_vector_without_its_record_is_a_clear_error(science_graph, tmp_path):
    import sqlite3

    from kgrag.errors import StoreError
    from kgrag.store.serving import derive

    copy = tmp_path / "copy"
    shutil.copytree(_current_version(science_graph), copy)
    db = sqlite3.connect(copy / "graph.sqlite")
    (gone,) = db.execute("SELECT id FROM communities ORDER BY id LIMIT 1").fetchone()
    db.execute("DELETE FROM communities WHERE id = ?", (gone,))
    db.commit()
    db.close()
    with pytest.raises(StoreError, match=f"community {gone} has a vector but no record"):
        derive(copy, tmp_path / "out")


def test_a_small_walk_held_in_memory_gives_the_mapped_columns(science_graph, monkeypatch):
    from kgrag.store.folder import files as mapped

    def columns(reader) -> list[tuple[list[int], list[float]]]:
        rows = np.array([0, 3, 1, reader.size("entities") + 2, 5])
        adj = reader.adjacency("walk", rows)
        spans = zip(adj.indptr[:-1].tolist(), adj.indptr[1:].tolist(), strict=True)
        return [(adj.indices[a:b].tolist(), adj.data[a:b].tolist()) for a, b in spans]

    with open_store(science_graph).reader() as reader:
        held = columns(reader)
        assert reader.serving._small_walk() is not None  # the science walk is small
    monkeypatch.setattr(mapped, "_SMALL_WALK", 0)
    with open_store(science_graph).reader() as reader:
        assert reader.serving._small_walk() is None
        assert columns(reader) == held
    assert any(cols for cols, _ in held)


def test_file_rows_read_what_the_array_holds_and_refuse_a_broken_file(tmp_path):
    matrix = np.arange(60, dtype=np.float32).reshape(20, 3)
    np.save(tmp_path / "m.npy", matrix)
    rows = FileRows(tmp_path / "m.npy")
    assert len(rows) == 20 and rows.dtype == np.float32
    assert np.array_equal(rows.slice(4, 9), matrix[4:9])
    assert rows.slice(18, 40).shape == (2, 3) and rows.slice(5, 5).shape == (0, 3)
    for wanted in (np.array([0, 1, 2, 7, 11, 12, 19]), np.array([12, 3, 4, 19, 0])):
        assert np.array_equal(rows.take(wanted), matrix[wanted])
    with pytest.raises(IndexError, match="out of range"):
        rows.take(np.array([3, 20]))
    rows.close()
    with pytest.raises(ValueError, match="closed"):
        rows.slice(0, 1)
    (tmp_path / "cut.npy").write_bytes((tmp_path / "m.npy").read_bytes()[:-20])
    cut = FileRows(tmp_path / "cut.npy")
    with pytest.raises(ValueError, match="truncated"):
        cut.slice(15, 20)
    cut.close()
    np.save(tmp_path / "f.npy", np.asfortranarray(matrix))
    with pytest.raises(ValueError, match="C-ordered"):
        FileRows(tmp_path / "f.npy")
