"""Co-occurrence relations kept as columns beside graph.sqlite (kgrag.store.cooc): a
folder version reads back every relation as written, finds them by id and counts them,
and derives serving files byte-equal to those of the same relations kept as SQLite
rows, as versions written before the columns keep them."""

from __future__ import annotations

import shutil
import sqlite3

import numpy as np
import pytest

from kgrag.errors import StoreError
from kgrag.ids import content_id
from kgrag.store import SQLiteGraphStore
from kgrag.store.cooc import FOLDER, CoocColumns, _narrowest
from kgrag.store.packed import relation_values
from kgrag.store.serving import derive
from kgrag.text.keys import COOC
from kgrag.types import Chunk, Document, Entity, Mention, Relation


def _records(seed: int = 3) -> dict[str, list]:
    rng = np.random.default_rng(seed)
    ents = sorted(content_id("entity", f"name {i}") for i in range(30))
    chunks = sorted(content_id("chunk", f"chunk {i}") for i in range(10))
    relations: dict[str, Relation] = {}
    for _ in range(300):
        a, b = sorted(rng.choice(ents, 2, replace=False).tolist())
        picked = rng.choice(chunks, int(rng.integers(1, 4)), replace=False).tolist()
        evidence = tuple(sorted(picked))
        rid = content_id("relation", a, COOC, b)
        relations[rid] = Relation(rid, a, COOC, b, float(len(evidence)), "cooc", evidence)
    for i in range(20):
        a, b = rng.choice(ents, 2, replace=False).tolist()
        rid = content_id("relation", a, f"verb {i}", b)
        relations[rid] = Relation(rid, a, f"verb {i}", b, 1.0, "svo", (chunks[i % 10],))
    # co-occurrences the columns do not take: a text id, a text end; and one without
    # evidence, which they do
    odd = [
        Relation("r:mine", ents[0], COOC, ents[1], 2.0, "cooc", (chunks[0],)),
        Relation(content_id("relation", "x"), ents[2], COOC, "e:text", 1.0, "cooc", ()),
        Relation(content_id("relation", "y"), ents[3], COOC, ents[4], 1.0, "cooc", ()),
    ]
    relations.update({r.id: r for r in odd})
    doc = Document("d:1", "T", "text", "x.txt", {})
    return {
        "documents": [doc],
        "chunks": [Chunk(c, "d:1", i, f"passage {i}", "T", 2, 0, 9) for i, c in enumerate(chunks)],
        "entities": [Entity(e, f"name {i}", "ORG") for i, e in enumerate(ents)],
        "mentions": [Mention(e, chunks[i % 10]) for i, e in enumerate(ents)],
        "relations": [relations[k] for k in sorted(relations)],
    }


def _write(store: SQLiteGraphStore, records: dict[str, list]) -> str:
    rng = np.random.default_rng(0)
    with store.writer() as w:
        for kind, batch in records.items():
            w.add(kind, batch)
        ents, chunks = records["entities"], records["chunks"]
        w.add_vectors("entities", [e.id for e in ents], rng.normal(size=(len(ents), 8)))
        w.add_vectors("chunks", [c.id for c in chunks], rng.normal(size=(len(chunks), 8)))
        return w.commit({"dim": 8})


def test_relations_read_back_whole_by_id_and_counted(tmp_path):
    records = _records()
    store = SQLiteGraphStore(tmp_path / "g")
    _write(store, records)
    want = records["relations"]
    folder = store.root / "versions" / store.current()
    cooc = CoocColumns.of(folder)
    assert cooc is not None
    # every co-occurrence of content ids is a column row; the two others stay rows
    kept = [r for r in want if r.kind == "cooc" and r.id != "r:mine" and r.dst != "e:text"]
    assert len(cooc) == len(kept) > 150
    db = sqlite3.connect(folder / "graph.sqlite")
    assert db.execute("SELECT count(*) FROM relations").fetchone()[0] == len(want) - len(cooc)
    with store.reader() as r:
        assert r.relations() == want
        assert r.counts()["relations"] == len(want)
        picked = [x.id for x in want[::7]]
        assert r.relations([*picked, "r:none", content_id("relation", "none")]) == want[::7]
        assert r.relations([]) == []
        ends = [want[0].src, want[5].dst]
        stated = [x for x in want if x.kind == "svo" and {x.src, x.dst} & set(ends)]
        assert r.relations(touching=ends) == stated  # stated relations alone, as always


def test_serving_files_equal_those_of_the_rows_they_replace(tmp_path):
    """The same version with its co-occurrences moved back into SQLite (how a version
    written before the columns keeps them) derives byte-equal serving files."""
    store = SQLiteGraphStore(tmp_path / "g")
    _write(store, _records())
    folder = store.root / "versions" / store.current()
    rows = tmp_path / "rows"
    shutil.copytree(folder, rows)
    cooc = CoocColumns.of(rows)
    assert cooc is not None
    db = sqlite3.connect(rows / "graph.sqlite")
    db.executemany(
        "INSERT INTO relations VALUES (?,?,?,?,?,?,?)", [r for b in cooc.batches(50) for r in b]
    )
    db.commit()
    db.close()
    shutil.rmtree(rows / FOLDER)
    assert CoocColumns.of(rows) is None
    derive(folder, tmp_path / "a")
    derive(rows, tmp_path / "b")
    files = sorted(p.name for p in (tmp_path / "a").iterdir())
    assert files == sorted(p.name for p in (tmp_path / "b").iterdir())
    for name in files:
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes(), name


def test_a_column_row_is_the_row_sqlite_would_hold(tmp_path):
    records = _records()
    store = SQLiteGraphStore(tmp_path / "g")
    _write(store, records)
    cooc = CoocColumns.of(store.root / "versions" / store.current())
    assert cooc is not None
    by_id = {relation_values(r)[0]: relation_values(r) for r in records["relations"]}
    for row in cooc.rows(np.arange(len(cooc))):
        assert row == by_id[row[0]]


def test_a_repeated_co_occurrence_fails_the_commit_and_publishes_nothing(tmp_path):
    records = _records()
    store = SQLiteGraphStore(tmp_path / "g")
    first = _write(store, records)
    again = next(r for r in records["relations"] if r.kind == "cooc" and r.id.startswith("r:"))
    records["relations"].append(again)
    with pytest.raises(StoreError, match="duplicate relations record"):
        _write(store, records)
    assert store.current() == first
    assert not list((store.root / "versions").glob(".tmp-*"))


def test_weights_take_the_narrowest_type_that_holds_them_exactly():
    assert _narrowest(np.array([1.0, 255.0])).dtype == np.uint8
    assert _narrowest(np.array([1.0, 256.0])).dtype == np.uint16
    assert _narrowest(np.array([1.0, 70000.0])).dtype == np.float32
    assert _narrowest(np.array([1.0, 0.5])).dtype == np.float32
    assert _narrowest(np.array([-1.0])).dtype == np.float32
    assert _narrowest(np.array([1.0, 0.37])).dtype == np.float64


def test_relations_added_in_batches_are_saved_together(tmp_path):
    """A writer saves the columns after each batch of relations, joined with those it
    saved before; a co-occurrence repeated in a later batch is refused."""
    records = _records()
    rels = records["relations"]
    store = SQLiteGraphStore(tmp_path / "g")
    batches = [rels[1::3], rels[::3], rels[2::3]]
    records["relations"] = []
    with store.writer() as w:
        for kind, batch in records.items():
            w.add(kind, batch)
        for batch in batches:
            w.add("relations", batch)
        ents = records["entities"]
        w.add_vectors("entities", [e.id for e in ents], np.ones((len(ents), 4)))
        w.commit({"dim": 4})
    with store.reader() as r:
        assert r.relations() == rels
    first = store.current()
    again = next(r for r in rels[::3] if r.kind == "cooc" and r.id.startswith("r:"))
    with pytest.raises(StoreError, match="duplicate relations record"), store.writer() as w:
        w.add("relations", rels[::3])
        w.add("relations", [again])
    assert store.current() == first
