"""The store suite: every GraphStore implementation must pass it."""

from __future__ import annotations

import json
import sqlite3
import time
import uuid
from dataclasses import replace

import numpy as np
import pytest

from kgrag.errors import InvalidParams, StoreError, VersionGone
from kgrag.search.stats import (
    chunk_vertices,
    entity_stats,
    lookup_names,
    specificity,
    title_entity,
)
from kgrag.store import GraphWriter, SQLiteGraphStore
from kgrag.store.vectors import dequantize, quantize
from kgrag.store.versions import Retention
from kgrag.types import (
    Chunk,
    Community,
    CommunityReport,
    Document,
    Entity,
    Mention,
    Relation,
    Sentence,
    Synonym,
    TreeNode,
)


def _sqlite(request, tmp_path):
    return SQLiteGraphStore(tmp_path / "g", keep_versions=2, retain_seconds=0)


def _neo4j(request, tmp_path):
    from kgrag.store.neo4j.store import Neo4jGraphStore

    uri = request.getfixturevalue("neo4j_uri")
    return Neo4jGraphStore(f"{uri}/t{uuid.uuid4().hex[:12]}", keep_versions=2, retain_seconds=0)


STORES = [pytest.param(_sqlite, id="sqlite"), pytest.param(_neo4j, id="neo4j")]


@pytest.fixture(params=STORES)
def store(request, tmp_path):
    s = request.param(request, tmp_path)
    yield s
    s.close()


@pytest.fixture
def folder_store(tmp_path):
    """The embedded store, for what only a folder has (its files)."""
    return SQLiteGraphStore(tmp_path / "g", keep_versions=2, retain_seconds=0)


def _leftovers(store) -> list[str]:
    """What a writer left behind that no published version owns."""
    if isinstance(store, SQLiteGraphStore):
        return [p.name for p in (store.root / "versions").glob(".tmp-*")]
    return sorted(store._tags_written() - set(store.versions()))


def _records(tag: str = "") -> dict[str, list]:
    doc = Document(
        "d:1", "Rivers", "The Danube flows. The Vistula flows north.", "x.txt", {"year": 2020}
    )
    chunks = [
        Chunk(
            "c:1",
            "d:1",
            0,
            f"The Danube flows into the Black Sea{tag}.",
            "Rivers",
            8,
            0,
            17,
            {"year": 2020},
        ),
        Chunk(
            "c:2", "d:1", 1, "The Vistula flows north to the Baltic.", "Rivers > North", 8, 18, 40
        ),
    ]
    entities = [Entity("e:d", "Danube", "LOC", ("Donau",)), Entity("e:v", "Vistula", "LOC")]
    report = CommunityReport(
        "Danube and Vistula", ("Danube", "Vistula"), ("Danube -flow-> Sea",), ("s.",)
    )
    return {
        "documents": [doc],
        "chunks": chunks,
        "sentences": [Sentence("c:1", 0, 0, 17, ("e:d",))],
        "entities": entities,
        "mentions": [Mention("e:d", "c:1", 2), Mention("e:v", "c:2")],
        "relations": [
            Relation("r:1", "e:d", "co-occurs with", "e:v", 1.0, "cooc", ("c:1", "c:2")),
            Relation("r:2", "e:d", "feeds", "e:v", 2.0, "svo", ("c:1",)),
        ],
        "synonyms": [Synonym("e:d", "e:v", 0.81)],
        "communities": [Community("m:1", 0, None, (), ("e:d", "e:v"), report, 7.5, ("c:1", "c:2"))],
        "tree_nodes": [TreeNode("t:1", 1, ("c:1", "c:2"), "Rivers flow.", ("c:1", "c:2"))],
    }


def _write(store, tag: str = "") -> str:
    records = _records(tag)
    with store.writer() as w:
        for kind, batch in records.items():
            w.add(kind, batch)
        w.add_vectors("chunks", ["c:1", "c:2"], np.eye(2, 4, dtype=np.float32))
        return w.commit({"tag": tag, "dim": 4})


def test_round_trip(store):
    version = _write(store)
    assert store.current() == version
    with store.reader() as r:
        want = _records()
        assert r.documents() == want["documents"]
        assert r.chunks() == want["chunks"]
        assert r.chunks(["c:2"]) == want["chunks"][1:]
        assert r.sentences() == want["sentences"]
        assert r.mentions() == sorted(want["mentions"], key=lambda m: (m.chunk_id, m.entity_id))
        assert r.relations() == want["relations"]
        # by an end: stated relations alone, not co-occurrences
        assert r.relations(touching=["e:v"]) == want["relations"][1:]
        assert r.relations(["r:1"], touching=["e:d"]) == []
        assert r.synonyms() == want["synonyms"]
        assert r.communities(level=0) == want["communities"]
        assert r.communities(level=1) == []
        assert r.tree_nodes() == want["tree_nodes"]
        danube = r.entities(["e:d"])[0]
        assert danube.aliases == ("Donau",) and danube.chunk_ids == ("c:1",)
        assert r.entity_names(["e:v", "e:d", "e:none"]) == {"e:d": "Danube", "e:v": "Vistula"}
        assert r.entity_names([]) == {}
        ids, matrix = r.vectors("chunks")
        assert ids == ["c:1", "c:2"] and matrix.shape == (2, 4)
        assert r.vectors("facts")[0] == []
        assert r.counts()["chunks"] == 2
        assert r.manifest["tag"] == "" and r.index_version == version


def test_sparse_search_ranks_by_bm25(store):
    _write(store)
    with store.reader() as r:
        hits = r.search_sparse("Which river reaches the Baltic?", 5)
        assert [h[0] for h in hits] == ["c:2", "c:1"]  # "river" matches both contexts (stemmed)
        assert hits[0][1] > hits[1][1] > 0
        assert [h[0] for h in r.search_sparse("Danube", 5)] == ["c:1"]
        assert r.search_sparse("north OR flows", 5)[0][0] in {"c:1", "c:2"}  # operators are quoted
        assert r.search_sparse("the of and", 5) == []  # stop words only


def test_a_pinned_reader_keeps_its_version_and_old_versions_are_pruned(store):
    v1 = _write(store, "1")
    pinned = store.reader(v1)
    v2 = _write(store, "2")
    assert store.versions() == [v1, v2]
    assert "Sea1" in pinned.chunks(["c:1"])[0].text
    with store.reader() as latest:
        assert "Sea2" in latest.chunks(["c:1"])[0].text
    pinned.close()
    v3 = _write(store, "3")
    assert store.versions() == [v2, v3]  # keep_versions=2
    with pytest.raises(VersionGone) as err:
        store.reader(v1)
    assert err.value.code == -32010


def test_a_leased_version_outlives_a_hundred_writes_until_its_lease_runs_out(folder_store):
    store = folder_store
    store.retention = Retention(keep=1, retain_seconds=0.0, lease_seconds=1.5)
    v1 = _write(store, "1")
    assert store.lease(v1)
    latest = v1
    for i in range(100):
        latest = _write(store, f"w{i}")
        assert store.lease(v1)  # a pinned caller asking again renews nothing yet
    assert store.versions() == [v1, latest]  # the unleased ones went at each publish
    assert sorted(p.name for p in (store.root / "versions").iterdir()) == [v1, latest]
    with store.reader(v1) as pinned:
        assert "Sea1" in pinned.chunks(["c:1"])[0].text
    time.sleep(1.6)  # the lease runs out; the next publish removes the version
    last = _write(store, "last")
    assert store.versions() == [last]
    assert not store.lease(v1)
    with pytest.raises(VersionGone) as err:
        store.reader(v1)
    assert err.value.code == -32010
    assert [p.name for p in (store.root / "leases").iterdir()] == []  # its lease went too


@pytest.mark.parametrize("point", ["before-clean-up", "during-clean-up"])
def test_a_writer_killed_while_cleaning_up_leaves_the_new_version_whole(folder_store, point):
    import os
    import subprocess
    import sys

    from tests.conftest import ROOT

    store = folder_store
    store.retention = Retention(keep=1, retain_seconds=3600.0)
    old = [_write(store, "1"), _write(store, "2")]
    script = (
        "import sys\n"
        "from kgrag.store import SQLiteGraphStore\n"
        "from tests.kgrag.store.test_store import _write\n"
        "_write(SQLiteGraphStore(sys.argv[1], keep_versions=1, retain_seconds=0), 'new')\n"
    )
    env = dict(os.environ, KGRAG_CRASH_AT=point)
    done = subprocess.run([sys.executable, "-c", script, str(store.root)], env=env, cwd=ROOT)
    assert done.returncode == -9  # killed at the point
    new = store.current()
    assert new not in old and store.versions() == [new]  # published before the clean-up
    left = sorted(p.name for p in (store.root / "versions").iterdir())
    assert left == (old + [new] if point == "before-clean-up" else [old[1], new])
    with store.reader() as reader:
        assert "Seanew" in reader.chunks(["c:1"])[0].text
    with pytest.raises(VersionGone):
        store.reader(old[1])
    _write(store, "after")  # the next writer removes what the dead one left
    assert len(list((store.root / "versions").iterdir())) == 2


def test_a_superseded_version_stays_for_its_retention_time(folder_store):
    store = folder_store
    store.retention = Retention(keep=1, retain_seconds=1.0, lease_seconds=60.0)
    v1 = _write(store, "1")
    v2 = _write(store, "2")
    v3 = _write(store, "3")
    assert store.versions() == [v1, v2, v3]  # superseded less than a second ago
    manifest = store.manifest()["versions"]
    assert manifest[v1]["superseded"] <= manifest[v2]["superseded"]
    assert "superseded" not in manifest[v3]
    time.sleep(1.1)
    v4 = _write(store, "4")
    assert store.versions() == [v3, v4]  # v3 was superseded only now


def test_a_lease_in_neo4j_keeps_its_version(neo4j_uri):
    from kgrag.store.neo4j.store import Neo4jGraphStore

    store = Neo4jGraphStore(
        f"{neo4j_uri}/t{uuid.uuid4().hex[:12]}",
        keep_versions=1,
        retain_seconds=0,
        lease_seconds=300,
    )
    v1 = _write(store, "1")
    assert store.lease(v1)
    v2 = _write(store, "2")
    v3 = _write(store, "3")
    assert store.versions() == [v1, v3]
    with store.reader(v1) as pinned:
        assert "Sea1" in pinned.chunks(["c:1"])[0].text
    assert set(store._leases()) == {v1}
    store.connection.run(  # as if its 300 s had passed
        "MATCH (l:KgragLease {graph: $name}) SET l.expires = l.expires - 301", name=store.name
    )
    v4 = _write(store, "4")
    assert store.versions() == [v4] and v2 not in store._tags_written()
    assert not store.lease(v1) and store._leases() == {}
    with pytest.raises(VersionGone):
        store.reader(v1)


def test_an_aborted_write_publishes_nothing(store):
    v1 = _write(store, "1")
    with pytest.raises(RuntimeError), store.writer() as w:
        w.add("documents", _records("x")["documents"])
        raise RuntimeError("crash")
    assert store.current() == v1 and store.versions() == [v1]
    assert _leftovers(store) == []


def test_leftovers_of_a_dead_writer_are_cleaned_and_ignored(folder_store):
    store = folder_store
    v1 = _write(store, "1")
    stale = store.root / "versions" / ".tmp-999-dead"
    (stale / "vectors").mkdir(parents=True)
    (stale / "graph.sqlite").write_bytes(b"half a file")
    assert store.current() == v1
    with store.reader() as r:
        assert r.index_version == v1
    _write(store, "2")
    assert not stale.exists()


def test_an_empty_store_fails_clearly(store):
    assert store.current() is None and store.versions() == []
    with pytest.raises(StoreError, match="no graph here"):
        store.reader()


def test_a_broken_manifest_fails_clearly(folder_store):
    store = folder_store
    _write(store)
    manifest = store.root / "manifest.json"
    data = json.loads(manifest.read_text())
    manifest.write_text(json.dumps(data | {"schema": 99}))
    with pytest.raises(StoreError, match="schema 99"):
        store.reader()
    manifest.write_text("{not json")
    with pytest.raises(StoreError, match="unreadable manifest"):
        store.reader()


def test_vectors_must_match_their_ids(store):
    with store.writer() as w, pytest.raises(StoreError, match="2 ids"):
        w.add_vectors("chunks", ["c:1", "c:2"], np.zeros((3, 4), np.float32))


def test_sentences_and_synonyms_stored_packed_or_as_text_read_the_same(folder_store):
    """A sentence's entity ids are a packed list and a synonym's ends packed ids; a
    version written before (JSON text, text ids) reads as it is."""
    _write(folder_store)
    want = _records()
    folder = folder_store.root / "versions" / folder_store.current()
    db = sqlite3.connect(folder / "graph.sqlite")
    assert {type(v) for (v,) in db.execute("SELECT entity_ids FROM sentences")} == {bytes}
    assert {type(v) for (v,) in db.execute("SELECT src FROM synonyms")} == {bytes}
    db.execute("UPDATE sentences SET entity_ids = '[\"e:d\"]'")
    db.execute("DELETE FROM synonyms")
    db.execute("INSERT INTO synonyms VALUES ('e:d', 'e:v', 0.81)")
    db.commit()
    db.close()
    with folder_store.reader() as r:
        assert r.sentences() == want["sentences"]
        assert r.synonyms() == want["synonyms"]


def test_a_community_carried_down_is_stored_once_and_read_whole(store):
    """A community carried down a level unchanged (one child with its members, report
    and leaves) is stored as NULLs and read back whole, down a chain of copies, alone
    or with its child; a one-child community that differs is stored whole; every
    row's report is found by a sparse search."""
    records = _records()
    base = replace(records["communities"][0], parent="m:2")  # m:1, level 0
    alone = CommunityReport("Vistula", ("Vistula",), (), ("The Vistula flows north.",))
    records["communities"] = [
        base,
        Community("m:2", 1, "m:3", ("m:1",), base.members, base.report, 6.0, base.leaves),
        Community("m:3", 2, None, ("m:2",), base.members, base.report, 5.0, base.leaves),
        Community("m:4", 1, None, ("m:5",), ("e:v",), alone, 1.0, ("c:2",)),
        Community("m:5", 0, "m:4", (), ("e:v",), replace(alone, title="V"), 1.0, ("c:2",)),
    ]
    with store.writer() as w:
        for kind, batch in records.items():
            w.add(kind, batch)
        w.add_vectors("chunks", ["c:1", "c:2"], np.eye(2, 4, dtype=np.float32))
        w.commit({"dim": 4})
    want = sorted(records["communities"], key=lambda c: (c.level, c.id))
    with store.reader() as r:
        assert r.communities() == want
        assert r.communities(ids=["m:3"]) == [want[4]]
        assert r.communities(ids=["m:2", "m:1"]) == [want[0], want[2]]
        assert r.communities(level=2) == [want[4]]
        found = {i for i, _ in r.search_sparse("Danube", 9, kind="communities")}
        assert found == {"m:1", "m:2", "m:3"}
        if isinstance(store, SQLiteGraphStore):
            db = sqlite3.connect(r.folder / "graph.sqlite")
            blank = db.execute("SELECT id FROM communities WHERE report IS NULL").fetchall()
            db.close()
            assert sorted(blank) == [("m:2",), ("m:3",)]


def test_sparse_search_over_reports_and_summaries(store):
    _write(store)
    with store.reader() as r:
        assert r.search_sparse("Vistula", 3, kind="communities")[0][0] == "m:1"
        assert r.search_sparse("rivers flow", 3, kind="tree_nodes")[0][0] == "t:1"
        assert r.search_sparse("Amazon", 3, kind="communities") == []


# -- the query side ------------------------------------------------------------------------


def _write_query_side(store) -> str:
    """The records above with vectors for chunks, entities and the one fact."""
    records = _records()
    with store.writer() as w:
        for kind, batch in records.items():
            w.add(kind, batch)
        w.add_vectors("chunks", ["c:2", "c:1"], np.eye(2, 4, dtype=np.float32))
        entities = np.array([[0.6, 0.8, 0, 0], [0, 0, 1, 0]], dtype=np.float32)
        w.add_vectors("entities", ["e:d", "e:v"], entities)
        w.add_vectors("facts", ["r:2"], np.array([[0, 0.6, 0.8, 0]], dtype=np.float32))
        return w.commit({"dim": 4})


def test_ids_and_rows_by_vector_row(store):
    _write_query_side(store)
    r = store.reader()
    assert r.size("chunks") == 2 and r.size("entities") == 2 and r.size("communities") == 0
    assert r.ids("chunks", [1, 0]) == ["c:1", "c:2"]
    assert r.rows("chunks", ["c:1", "c:9", "c:2", "c:1"]).tolist() == [1, -1, 0, 1]
    assert r.rows("entities", []).tolist() == [] and r.ids("entities", []) == []
    assert r.rows("entities", ["e:v" + "x" * 80]).tolist() == [-1]  # longer than any id
    with pytest.raises(Exception, match="unknown vector kind"):
        r.size("nope")


def test_nearest_and_similarity(store):
    _write_query_side(store)
    r = store.reader()
    q = np.array([0.0, 1.0, 0.0, 0.0], dtype=np.float32)
    found = r.nearest("entities", np.stack([q, np.array([0, 0, 1, 0], np.float32)]), 2)
    # entities and facts are stored as int8 codes scaled to the row's norm: a cosine
    # within a code step (the row's largest magnitude / 127) of the vector written
    assert [row for row, _ in found[0]] == [0, 1]
    assert found[0][0][1] == pytest.approx(0.8, abs=0.8 / 127)
    assert [row for row, _ in found[1]] == [1, 0]
    assert r.nearest("entities", q, 5, among=np.array([1]))[0] == [(1, 0.0)]
    assert r.nearest("facts", q, 3)[0] == [(0, pytest.approx(0.6, abs=0.8 / 127))]
    assert r.similarity("chunks", q).tolist() == [0.0, 1.0]  # row 0 is c:2 = e0
    assert r.similarity("chunks", q, np.array([1])).tolist() == [1.0]
    assert np.allclose(r.matrix("entities")[1], [0, 0, 1, 0], atol=1e-5)  # coded, rescaled


def test_graph_adjacency_names_and_stats(store):
    _write_query_side(store)
    r = store.reader()
    d, v = r.rows("entities", ["e:d", "e:v"]).tolist()
    rel = r.adjacency("relations", np.array([d, v]))
    assert rel.of(0).tolist() == [v] and rel.of(1).tolist() == [d]
    assert rel.data.tolist() == [1.0, 1.0]  # the stated relation stands for the pair
    assert r.relation_ids(rel.edge) == ["r:2", "r:2"]
    c1, c2 = r.rows("chunks", ["c:1", "c:2"]).tolist()
    mentions = r.adjacency("mentions", np.array([c1, c2]))
    assert mentions.of(0).tolist() == [d] and mentions.of(1).tolist() == [v]
    walk = r.adjacency("walk", chunk_vertices(r, np.array([c1])))
    assert walk.of(0).tolist() == [d]  # the passage's one edge: its mention of e:d
    assert chunk_vertices(r).tolist() == [3, 2]  # entities first, then chunks by id
    # a walk column sums to 1: every vertex's out-weights are normalised
    cols = r.adjacency("walk", np.arange(4))
    sums = [cols.data[cols.indptr[i] : cols.indptr[i + 1]].sum() for i in range(4)]
    assert np.allclose(sums, 1.0)
    assert lookup_names(r, ["danube", "vistula", "donau", "sea"]) == {"danube": d, "vistula": v}
    chunks, degree = entity_stats(r, np.array([d, v]))
    assert chunks.tolist() == [1, 1] and degree.tolist() == [2, 2]
    assert specificity(r, np.array([d])).tolist() == [1.0]
    assert title_entity(r, np.array([c1, c2])).tolist() == [-1, -1]
    titles = r.attribute("chunks", "title", np.array([c2, c1]))
    assert [t.decode() for t in titles.tolist()] == ["Rivers", "Rivers"]  # the document's
    assert r.adjacency("links", np.array([c1, c2])).indices.tolist() == []
    with pytest.raises(Exception, match="unknown graph"):
        r.adjacency("roads", np.array([0]))


def test_vectors_added_in_blocks_are_the_vectors_stored(tmp_path):
    """``add_vector_blocks``: the folder writer streams each block to the version's
    file, the base writer joins them; both store what ``add_vectors`` of the whole
    matrix stores, and a block of the wrong width or a row count that is not the ids'
    fails with the kind named and publishes nothing."""
    matrix = np.random.default_rng(5).normal(size=(7, 4)).astype(np.float32)
    blocks = [matrix[:3], matrix[3:6], matrix[6:]]
    ids = [f"c:1#{i}" for i in range(7)]
    stored = {}
    for name, joined in (("folder", False), ("base", True)):
        store = SQLiteGraphStore(tmp_path / name, keep_versions=2, retain_seconds=0)
        with store.writer() as w:
            for kind, batch in _records().items():
                w.add(kind, batch)
            w.add_vectors("chunks", ["c:1", "c:2"], np.eye(2, 4, dtype=np.float32))
            add = GraphWriter.add_vector_blocks if joined else type(w).add_vector_blocks
            add(w, "sentences", ids, 4, iter(blocks))
            w.commit({"dim": 4})
        with store.reader() as r:
            got_ids, got = r.vectors("sentences")
            assert got_ids == ids
            stored[name] = np.asarray(got)
    assert np.array_equal(stored["folder"], stored["base"])
    assert np.array_equal(stored["folder"], dequantize(*quantize(matrix)))
    store = SQLiteGraphStore(tmp_path / "bad", keep_versions=2, retain_seconds=0)
    for bad, message in (([matrix[:, :3]], "sentences: a block of shape"), ([matrix[:5]], "7 ids")):
        with store.writer() as w, pytest.raises(StoreError, match=message):
            w.add_vector_blocks("sentences", ids, 4, bad)
    assert store.current() is None


def test_vectors_filled_in_place_are_the_vectors_stored(tmp_path):
    """The folder writer's ``vectors_to_fill``: a matrix written in blocks into the
    version's own file reads back as ``add_vectors`` would have stored it, and the
    secondary indexes made at commit answer the queries that use them."""
    store = SQLiteGraphStore(tmp_path / "g", keep_versions=2, retain_seconds=0)
    matrix = np.random.default_rng(3).normal(size=(5, 4)).astype(np.float32)
    with store.writer() as w:
        for kind, batch in _records().items():
            w.add(kind, batch)
        w.add_vectors("chunks", ["c:1", "c:2"], np.eye(2, 4, dtype=np.float32))
        out = w.vectors_to_fill("sentences", [f"c:1#{i}" for i in range(5)], 4)
        out[:3], out[3:] = matrix[:3], matrix[3:]
        w.vectors_to_fill("facts", ["r:1"], 4)[:] = 1.0
        w.add_vectors("facts", ["r:1"], np.full((1, 4), 0.5, np.float32))  # replaces it
        with pytest.raises(InvalidParams, match="unknown vector kind"):
            w.vectors_to_fill("nope", ["x"], 4)
        w.commit({"dim": 4})
    with store.reader() as r:
        ids, stored = r.vectors("sentences")
        assert ids == [f"c:1#{i}" for i in range(5)]
        # sentence vectors are stored as int8 codes: exactly what coding the matrix gives
        assert np.array_equal(np.asarray(stored), dequantize(*quantize(matrix)))
        assert np.abs(np.asarray(stored) - matrix).max() <= np.abs(matrix).max() / 127
        assert np.allclose(r.vectors("facts")[1], [[0.5] * 4], atol=1e-6)
        assert [x.id for x in r.relations(touching=["e:d"])] == ["r:2"]
        db = sqlite3.connect(r.folder / "graph.sqlite")
        names = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type='index'")}
        db.close()
    assert {"relations_src", "relations_dst", "mentions_chunk", "chunks_doc"} <= names
