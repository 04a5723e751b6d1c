"""Incremental add / delete on a real graph: what a user notices after each write."""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

import kgrag
from kgrag.cli.main import main
from kgrag.store import open_store
from kgrag.store.packed import row_text
from kgrag.store.vectors import within_a_code_step

ZORBLAX = {
    "id": "zq1",
    "title": "Zorblax Quantum",
    "text": "Zorblax Quantum is a research company founded in Quxville by Ada Lovelace. "
    "Zorblax Quantum builds quantum computers near the Vistula river.",
    "meta": {"source": "test"},
}
ZQ_QUERY = "Which company was founded in Quxville?"


@pytest.fixture()
def graph(science_graph: Path, tmp_path: Path) -> Path:
    """A private copy of the science graph that tests may write to."""
    root = tmp_path / "science"
    shutil.copytree(science_graph, root)
    return root


@pytest.fixture()
def engine(graph: Path):
    with kgrag.open(graph) as e:
        yield e


def _db(graph: Path) -> sqlite3.Connection:
    return sqlite3.connect(graph / "versions" / open_store(graph).current() / "graph.sqlite")


def _ids(graph: Path, table: str) -> set[str]:
    return {r[0] for r in _db(graph).execute(f"SELECT id FROM {table}")}


def test_added_document_is_found_in_chunks_graph_communities_and_tree(engine, graph):
    before = engine.index_version
    result = engine.add([ZORBLAX], contextual=True)
    assert result["ids"] == ["d:zq1"] and result["chunks"] == 1
    assert result["indexVersion"] != before and engine.index_version == result["indexVersion"]
    hits = engine.query(ZQ_QUERY, k=2)
    assert hits[0]["chunk"]["docId"] == "d:zq1" and hits[0]["chunk"]["context"] == "Zorblax Quantum"
    local = engine.graph({"op": "local", "query": ZQ_QUERY, "k": 4})
    assert local["indexVersion"] == result["indexVersion"]
    assert any(h["unit"] == "node" and "Zorblax" in h["text"] for h in local["hits"])
    with open_store(graph).reader() as reader:
        zq = next(e for e in reader.entities() if e.name == "Zorblax Quantum")
        (chunk,) = reader.chunks([zq.chunk_ids[0]])
        assert chunk.doc_id == "d:zq1"
        for level in {c.level for c in reader.communities()}:
            assert any(zq.id in c.members for c in reader.communities(level))
        assert any(chunk.id in t.leaves for t in reader.tree_nodes())
        vistula = [e for e in reader.entities() if e.name.startswith("Vistula")]
        assert any(chunk.id in e.chunk_ids for e in vistula)  # resolved onto the stored entity


def test_untouched_communities_keep_their_ids(engine, graph):
    before = _ids(graph, "communities")
    engine.add([{"id": "lone", "text": "Blorptown hosts the annual Snorkel Festival."}])
    after = _ids(graph, "communities")
    assert after != before
    assert len(before & after) >= len(before) // 2  # repaired locally, not rebuilt


def test_delete_leaves_no_trace_and_is_idempotent(engine, graph):
    original = {t: _ids(graph, t) for t in ("entities", "relations", "chunks", "documents")}
    engine.add([ZORBLAX], contextual=True)
    gone_chunks = _ids(graph, "chunks") - original["chunks"]
    gone_entities = _ids(graph, "entities") - original["entities"]
    assert gone_chunks and gone_entities
    result = engine.delete(["zq1", "never-there"])
    assert result == {"deleted": 1, "indexVersion": engine.index_version}
    for table, ids in original.items():
        assert _ids(graph, table) == ids, table  # exactly what only the document supported went
    db = _db(graph)
    tables = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")]
    for table in tables:
        if table.endswith(("_fts", "_data", "_idx", "_docsize", "_config", "_content")):
            continue
        for row in db.execute(f"SELECT * FROM {table}"):
            text = json.dumps(row_text(table, row))  # packed ids read as text
            assert not any(c in text for c in gone_chunks | gone_entities), (table, row)
    assert not engine.query(ZQ_QUERY, k=3) or all(
        h["chunk"]["docId"] != "d:zq1" for h in engine.query(ZQ_QUERY, k=3)
    )
    version = engine.index_version
    assert engine.delete(["zq1"]) == {"deleted": 0, "indexVersion": version}
    assert open_store(graph).current() == version  # a no-op publishes nothing


def test_an_explicit_id_is_an_upsert(engine, graph):
    engine.add([ZORBLAX])
    n_docs = len(_ids(graph, "documents"))
    version = engine.add([ZORBLAX])["indexVersion"]
    assert open_store(graph).current() == version and len(_ids(graph, "documents")) == n_docs
    changed = dict(ZORBLAX, text="Zorblax Quantum moved to Glimmerholm in 2020.")
    assert engine.add([changed, {"text": "Snorkel Bay is a beach."}])["ids"][0] == "d:zq1"
    assert len(_ids(graph, "documents")) == n_docs + 1
    texts = [r[0] for r in _db(graph).execute("SELECT text FROM chunks WHERE doc_id='d:zq1'")]
    assert texts == [changed["text"]]


def test_chunk_false_keeps_a_document_whole_and_contextual_sets_context(engine, graph):
    long = " ".join(f"Sentence {i} is about the Grobnik harbour." for i in range(120))
    result = engine.add([{"id": "long", "title": "Grobnik", "text": long}], chunk=False)
    assert result["chunks"] == 1
    row = _db(graph).execute("SELECT text, context FROM chunks WHERE doc_id='d:long'").fetchall()
    assert row == [(long, "")]
    assert engine.add([{"id": "long2", "title": "Grobnik", "text": long}])["chunks"] > 1


def test_a_pinned_version_answers_the_same_across_writes(engine):
    pinned = engine.index_version
    params = {"query": "Where was Marie Curie born?", "k": 4, "indexVersion": pinned}

    def answer() -> str:
        out = engine.retrieve(params)
        out["usage"].pop("latencyMs")  # the one field that is about the call, not the index
        return json.dumps(out, sort_keys=True)

    before = answer()
    engine.add([ZORBLAX])
    engine.add([{"id": "zq2", "text": "Marie Curie visited Quxville in 1920."}])
    assert answer() == before
    assert engine.query("Where was Marie Curie born?")  # unpinned: the latest


def test_killed_during_an_add_the_previous_version_stays(graph):
    version = open_store(graph).current()
    script = f"import kgrag, sys; e = kgrag.open(sys.argv[1]); e.add([{ZORBLAX!r}])"
    env = dict(os.environ, HF_HUB_OFFLINE="1", KGRAG_CRASH_AT="before-manifest")
    proc = subprocess.run([sys.executable, "-c", script, str(graph)], env=env, cwd=Path.cwd())
    assert proc.returncode == -signal.SIGKILL
    assert open_store(graph).current() == version
    with kgrag.open(graph) as e:
        assert e.index_version == version
        assert all(h["chunk"]["docId"] != "d:zq1" for h in e.query(ZQ_QUERY, k=3))
        assert e.add([ZORBLAX])["indexVersion"] != version  # the next writer cleans up


def test_readers_during_writes_see_one_whole_version_each(engine):
    seen: dict[str, set[str]] = {}
    errors: list[BaseException] = []
    stop = threading.Event()
    query = {"query": "Zorblax Quantum and Marie Curie", "k": 5}

    def read() -> None:
        while not stop.is_set():
            try:
                out = engine.retrieve(query)
                key = json.dumps(sorted(h["id"] for h in out["hits"]))
                seen.setdefault(out["indexVersion"], set()).add(key)
            except BaseException as exc:  # noqa: BLE001 - reported below
                errors.append(exc)

    threads = [threading.Thread(target=read) for _ in range(4)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 4
    writes = 0
    try:
        while time.monotonic() < deadline or writes < 2:
            engine.add([ZORBLAX]) if writes % 2 == 0 else engine.delete(["zq1"])
            writes += 1
    finally:  # a failed write must not leave the readers spinning past the test
        stop.set()
        for t in threads:
            t.join()
    assert not errors, errors[:3]
    assert len(seen) >= 2
    assert all(len(answers) == 1 for answers in seen.values()), seen


def test_cli_ingest_adds_incrementally_and_delete_removes(graph, tmp_path, capsys):
    extra = tmp_path / "extra.jsonl"
    extra.write_text(json.dumps(ZORBLAX) + "\n")
    version = open_store(graph).current()
    assert main(["ingest", str(extra), "--graph", str(graph), "--quiet"]) == 0
    grown = open_store(graph).current()
    assert grown != version and "d:zq1" in _ids(graph, "documents")
    assert main(["ingest", str(extra), "--graph", str(graph), "--quiet"]) == 0
    assert open_store(graph).current() == grown  # the same file again publishes nothing
    assert main(["delete", "--graph", str(graph), "zq1"]) == 0
    assert "deleted 1 document(s)" in capsys.readouterr().out
    assert "d:zq1" not in _ids(graph, "documents")


def _repair(reader, entities, relations, **kw):
    """Community repair of the science graph's communities with these entities and
    relations (the rest of the graph as stored), at the test settings."""
    from ingest.incremental.communities import repair_communities
    from tests.conftest import small_config

    c = small_config().communities
    return repair_communities(
        entities,
        relations,
        reader.synonyms(),
        reader.sentences(),
        {ch.id: ch.text for ch in reader.chunks()},
        reader.communities(),
        max_size=c.max_size,
        max_levels=c.max_levels,
        seed=c.seed,
        report_sentences=c.report_sentences,
        **kw,
    )


def test_repair_of_an_unchanged_graph_keeps_every_community(science_reader):
    before = science_reader.communities()
    after = _repair(science_reader, science_reader.entities(), science_reader.relations())
    assert after == before


def test_repair_moves_only_touched_entities(science_reader):
    """A new entity tied to one old one: every old community without a touched member
    comes back with the same id (same members, same level)."""
    from kgrag.types import Entity, Relation

    before = science_reader.communities()
    entities = science_reader.entities()
    anchor = sorted(entities, key=lambda e: (-len(e.chunk_ids), e.id))[0]
    chunk = anchor.chunk_ids[0]
    new = Entity("e:zz-new", "Zeta Newcomer", "PERSON", (), (chunk,))
    tie = Relation("r:zz-new", new.id, "work with", anchor.id, 3.0, "svo", (chunk,))
    touched = {new.id, anchor.id}
    after = _repair(
        science_reader, [*entities, new], [*science_reader.relations(), tie], touched=touched
    )
    assert any(new.id in m.members for m in after if m.level == 0)
    after_ids = {m.id for m in after}
    untouched = [m for m in before if not touched & set(m.members)]
    assert untouched and all(m.id in after_ids for m in untouched)


def test_leiden_repair_leaves_untouched_entities_where_they_were(science_reader):
    """From a deliberately poor previous split, free Leiden regroups everyone; with a
    touched set, only the touched entities move."""
    import numpy as np

    from ingest.communities import entity_graph
    from ingest.incremental.communities import _Repair
    from kgrag.types import Community, CommunityReport

    ents, pos, _, graph = entity_graph(
        science_reader.entities(), science_reader.relations(), science_reader.synonyms()
    )
    report = CommunityReport("", (), (), ())
    halves = [tuple(e.id for e in ents[i::2]) for i in (0, 1)]  # alternate: no structure
    before = [Community(f"m:{i}", 0, None, (), m, report, 0.0, ()) for i, m in enumerate(halves)]
    gids = np.arange(len(ents))

    def groups(touched: set[str] | None) -> set[frozenset[str]]:
        repair = _Repair(ents, pos, {m.id: m for m in before}, 6, 3, 42)
        repair.touched = None if touched is None else frozenset(touched)
        return {frozenset(ents[i].id for i in g) for g in repair.partition(graph, gids, before)}

    assert groups(None) != set(map(frozenset, halves))  # free Leiden regroups
    assert groups(set()) == set(map(frozenset, halves))  # nothing touched: nothing moves
    mover = ents[0].id
    moved = groups({mover})
    stay = [set(h) - {mover} for h in halves]
    assert all(any(s <= g for g in moved) for s in stay)


def test_community_vectors_after_an_add_embed_their_report(engine, graph):
    """Reused or fresh, every community vector is the embedding of its current report."""
    from ingest import embed

    engine.add([ZORBLAX])
    with open_store(graph).reader() as reader:
        ids, matrix = reader.vectors("communities")
        by_id = {c.id: c for c in reader.communities()}
        texts = [embed.report_text(by_id[i]) for i in ids]
    expected = engine.encoder.encode(texts)
    cosines = np.sum(np.asarray(matrix) * expected, axis=1)
    assert len(ids) == len(by_id) and float(cosines.min()) > 0.999


def _sentence_vectors(graph: Path) -> dict[str, np.ndarray]:
    with open_store(graph).reader() as reader:
        ids, matrix = reader.vectors("sentences")
        return dict(zip(ids, np.array(matrix), strict=True))


def test_sentence_vectors_follow_adds_and_deletes(engine, graph):
    """Stored sentence vectors are kept as they were, the new document's named
    sentences get theirs (read off the new chunk), and a delete takes them away."""
    from ingest.embed import chunk_text
    from kgrag.ids import sentence_id

    before = _sentence_vectors(graph)
    assert before
    engine.add([ZORBLAX], contextual=True)
    after = _sentence_vectors(graph)
    assert all(np.array_equal(after[sid], vec) for sid, vec in before.items())
    new = sorted(set(after) - set(before))
    with open_store(graph).reader() as reader:
        (chunk,) = [c for c in reader.chunks() if c.doc_id == "d:zq1"]
        named = [s for s in reader.sentences([chunk.id]) if s.entity_ids]
    assert new == sorted(sentence_id(chunk.id, s.index) for s in named) and len(new) == 2
    shift = len(chunk.context) + 1
    spans = [(s.start + shift, s.end + shift) for s in named]
    _, want = engine.encoder.encode_with_spans(chunk_text(chunk), spans)
    got = np.array([after[sentence_id(chunk.id, s.index)] for s in named])
    assert within_a_code_step(got, want)  # sentence vectors are int8-coded
    engine.delete(["zq1"])
    assert set(_sentence_vectors(graph)) == set(before)


def test_a_graph_without_sentence_vectors_still_grows_and_summarises(graph):
    """A graph built before sentences had vectors: an add stores vectors for the new
    sentences only, and global search encodes the old sentences it quotes."""
    version = graph / "versions" / open_store(graph).current()
    for name in ("sentences.q8.npy", "sentences.scale.npy", "sentences.ids.npy"):
        (version / "vectors" / name).unlink()
    shutil.rmtree(version / "serving")  # derived again, without sentence ids
    with kgrag.open(graph) as e:
        assert not _sentence_vectors(graph)
        e.add([ZORBLAX])
        with open_store(graph).reader() as reader:
            zq_chunks = {c.id for c in reader.chunks() if c.doc_id == "d:zq1"}
        stored = _sentence_vectors(graph)
        assert stored and {sid.split("#")[0] for sid in stored} == zq_chunks
        result = e.graph({"op": "global", "query": "Marie Curie and radioactivity", "k": 3})
        assert result["summary"].strip() and result["communities"]
