"""What a query needs, computed once per version and stored to open by memory map.

A version's records live in ``graph.sqlite``; the searches need them in other
shapes: the PageRank walk over entities and passages, the relation graph the
provenance paths follow, which entities each passage mentions, which passages
name which titles, per-entity statistics, the entity name index, ids by row.
Building those from the records took most of the time and memory of opening a
graph (the 60k-passage graph: 213 s, 12 GiB). :func:`derive` builds them when
a version is written and saves them under ``serving/`` as ``.npy`` files (and
the name index as a small SQLite file), so that a reader maps them and parses
nothing.

Row spaces: a kind's *row* is its position in that kind's vector file. Graph
*vertices* are the entity rows (a build writes entity vectors in id order)
followed by the passages in chunk-id order; ``chunk_vertex`` maps a chunk row
to its vertex.

Files (``serving/``): ``ids.<kind>.npy`` (fixed-width ids by row) and
``sorted.<kind>.npy`` / ``order.<kind>.npy`` (the ids in id order and their
rows, for lookups by id); ``walk.*`` (the
column-stochastic walk, CSC); ``relations.*`` (entity-entity path lengths,
CSR, with the relation each pair stands for); ``mentions.*`` (chunk row ->
entity rows); ``links.*`` (chunk row -> chunk rows it names by title) with
``link_in`` (how many passages name each one); ``title_entity`` (the entity a
passage's title names, -1 none); ``attr.<kind>.<name>.npy``, per-row attributes
(entities: ``chunks`` mentioning, ``degree``; communities: ``level``,
``rating``, ``size``, ``id_rank``, ``canonical``, and ``hierarchy``, the rows in
hierarchy order); ``half.<kind>.npy`` (half-precision vectors of the scanned
kinds without an ANN index (an index holds its own quantised copy));
``ann.<kind>.usearch`` (an HNSW index, for kinds of at least ``ann_min_rows``
rows); ``bm25.<kind>.*`` (the postings of a full-text index: sorted terms,
their documents and counts, document lengths; the record id of each document);
``names.sqlite`` (entity names and report sentence texts -> rows);
``serving.json`` (what was built, with what settings).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

from ..ids import sentence_id
from . import schema
from .base import VECTOR_KINDS
from .bm25 import Postings
from .keys import (
    COOC,
    MAX_NAME_TOKENS,
    SKIP_TYPES,
    WALK_WEIGHTS,
    name_key,
    title_key,
    title_link_pairs,
)

SERVING = "serving"
SERVING_FORMAT = 6
LINK_CAP = 100  # titles named by more passages than this are not stored as links
HALF_KINDS = ("entities", "facts")
#: kinds searched by nearest neighbour (local search's facts and entities, chunks); the
#: others are ranked within a known set of rows (a community level) or looked up
ANN_KINDS = ("chunks", "entities", "facts")


def derive(folder: Path, out: Path, *, ann_min_rows: int = 200_000) -> dict[str, Any]:
    """Build the serving files of the version in ``folder`` into ``out``; return their
    description (also written to ``out/serving.json``, last)."""
    out.mkdir(exist_ok=True)
    db = sqlite3.connect(f"file:{folder / 'graph.sqlite'}?mode=ro", uri=True)
    try:
        ids = {k: _vector_ids(db, k) for k in VECTOR_KINDS}
        for kind, values in ids.items():
            _save_ids(out, kind, values)
        entity_ids, chunk_ids = ids["entities"], ids["chunks"]
        # the graph's entities are the entities with a vector (a build gives every one)
        named = {r[0]: r for r in db.execute("SELECT id, name, type FROM entities")}
        names = [named.get(e, (e, "", "")) for e in entity_ids]
        erow = {e: i for i, e in enumerate(entity_ids)}
        crow = {c: i for i, c in enumerate(chunk_ids)}
        n_ent, n_chunk = len(entity_ids), len(chunk_ids)
        chunk_vertex = np.empty(n_chunk, dtype=np.int64)
        chunk_vertex[np.argsort(np.array(chunk_ids, dtype=object), kind="stable")] = (
            n_ent + np.arange(n_chunk)
        )
        mentions = db.execute("SELECT entity_id, chunk_id, count FROM mentions").fetchall()
        _save_walk(out, db, erow, crow, chunk_vertex, mentions, n_ent + n_chunk)
        _save_relations(out, db, erow)
        pairs = [(crow[c], erow[e]) for e, c, _ in mentions if c in crow and e in erow]
        _save_csr(out, "mentions", pairs, n_chunk, np.int32)
        _save_entity_stats(out, mentions, erow)
        titles, texts = _chunk_titles(db, chunk_ids)
        _save_links(out, titles, texts)
        _save_title_entity(out, titles, pairs, [r[1] for r in names], n_chunk)
        _save_names(out / "names.sqlite", names)
        _save_sentences(out / "names.sqlite", db, ids["sentences"])
        _save_communities(out, db, ids["communities"])
        for kind, (fts, table, key) in schema.FTS.items():
            _save_postings(out, db, kind, fts, table, key)
    finally:
        db.close()
    ann = [k for k in ANN_KINDS if ann_min_rows > 0 and len(ids[k]) >= ann_min_rows]
    for kind in ann:
        build_ann(_matrix(folder, kind), out / f"ann.{kind}.usearch")
    for kind in HALF_KINDS:  # the scan of a kind without an index (an index holds its own copy)
        if kind not in ann:
            matrix = _matrix(folder, kind)
            np.save(out / f"half.{kind}.npy", np.ascontiguousarray(matrix, dtype=np.float16))
    meta = {
        "format": SERVING_FORMAT,
        "walk_weights": WALK_WEIGHTS,
        "link_cap": LINK_CAP,
        "ann": ann,
        "ann_min_rows": ann_min_rows,
    }
    (out / "serving.json").write_text(json.dumps(meta, indent=2, sort_keys=True))
    return meta


def build_ann(matrix: np.ndarray, path: Path) -> None:
    """An HNSW index (usearch, inner product on unit vectors, 8-bit quantised) of the
    rows of ``matrix``, keyed by row. Built on one thread, so the same vectors give the
    same index. 2Wiki facts, recall of the exact top 5 after exact re-scoring: 0.992
    (half precision: 0.993, 1.7x the bytes)."""
    from usearch.index import Index

    index = Index(ndim=matrix.shape[1], metric="ip", dtype="i8", connectivity=16, expansion_add=128)
    if len(matrix):
        index.add(np.arange(len(matrix), dtype=np.uint64), np.asarray(matrix), threads=1)
    index.save(str(path))


def _vector_ids(db: sqlite3.Connection, kind: str) -> list[str]:
    sql = "SELECT id FROM vector_ids WHERE kind=? ORDER BY row"
    return [r[0] for r in db.execute(sql, (kind,))]


def _matrix(folder: Path, kind: str) -> np.ndarray:
    path = folder / "vectors" / f"{kind}.npy"
    return np.load(path, mmap_mode="r") if path.exists() else np.zeros((0, 0), np.float32)


def _save_ids(out: Path, kind: str, ids: Sequence[str]) -> None:
    width = max((len(i.encode()) for i in ids), default=1)
    arr = np.array([i.encode() for i in ids], dtype=f"S{width}")
    order = np.argsort(arr, kind="stable").astype(np.int64)
    np.save(out / f"ids.{kind}.npy", arr)
    np.save(out / f"order.{kind}.npy", order)
    np.save(out / f"sorted.{kind}.npy", arr[order])


def _save_csr(out: Path, name: str, pairs: Iterable[tuple[int, int]], n: int, dtype: Any) -> None:
    """Rows -> sorted distinct columns."""
    arr = np.unique(np.array(list(pairs), dtype=np.int64).reshape(-1, 2), axis=0)
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.add.at(indptr, arr[:, 0] + 1, 1)
    np.save(out / f"{name}.indptr.npy", np.cumsum(indptr))
    np.save(out / f"{name}.indices.npy", arr[:, 1].astype(dtype))


def _save_walk(
    out: Path,
    db: sqlite3.Connection,
    erow: dict[str, int],
    crow: dict[str, int],
    chunk_vertex: np.ndarray,
    mentions: list[tuple[str, str, int]],
    n: int,
) -> None:
    """The walk M = A D^-1 (float32, CSC) of the entity + passage graph with parallel
    edges summed and loops dropped, edges weighted by :data:`WALK_WEIGHTS`."""
    w = WALK_WEIGHTS
    src: list[int] = []
    dst: list[int] = []
    weight: list[float] = []

    def vertex(x: str) -> int | None:
        if x in erow:
            return erow[x]
        return int(chunk_vertex[crow[x]]) if x in crow else None

    def add(a: str, b: str, value: float) -> None:
        va, vb = vertex(a), vertex(b)
        if va is not None and vb is not None and value > 0 and va != vb:
            src.append(va)
            dst.append(vb)
            weight.append(value)

    rels = "SELECT src, dst, predicate, weight FROM relations ORDER BY id"
    for a, b, predicate, value in db.execute(rels):
        add(a, b, value * (w["cooc"] if predicate == COOC else w["relation"]))
    for e, c, count in sorted(mentions):
        add(e, c, float(count) * w["mention"])
    for a, b, score in db.execute("SELECT src, dst, score FROM synonyms ORDER BY src, dst"):
        add(a, b, score * w["synonym"])
    s, d = np.array(src, dtype=np.int64), np.array(dst, dtype=np.int64)
    lo, hi = np.minimum(s, d), np.maximum(s, d)
    upper = sp.coo_matrix((np.array(weight), (lo, hi)), shape=(n, n)).tocsr()  # sums parallels
    adj = (upper + upper.T).tocsr()
    strength = np.asarray(adj.sum(axis=0)).ravel()
    inv = np.where(strength > 0, 1.0 / np.where(strength > 0, strength, 1.0), 0.0)
    walk = (adj @ sp.diags(inv)).tocsc().astype(np.float32)
    walk.sort_indices()
    np.save(out / "walk.indptr.npy", walk.indptr.astype(np.int64))
    np.save(out / "walk.indices.npy", walk.indices.astype(np.int64))
    np.save(out / "walk.data.npy", walk.data)
    np.save(out / "chunk_vertex.npy", chunk_vertex)
    degree = np.diff(adj.indptr)[: len(erow)]
    np.save(out / "attr.entities.degree.npy", degree.astype(np.int64))


def _save_relations(out: Path, db: sqlite3.Connection, erow: dict[str, int]) -> None:
    """Entity-entity path lengths (1 stated, 1.5 co-occurrence), symmetric CSR, with
    the relation each unordered pair stands for (stated first, then heavier, then id)."""
    sql = "SELECT id, src, dst, kind, weight, evidence FROM relations"
    rows = sorted(db.execute(sql), key=lambda r: (r[3] != "svo", -r[4], r[0]))
    chosen: dict[tuple[int, int], tuple[str, float]] = {}
    for rid, a, b, kind, _, evidence in rows:
        if a in erow and b in erow and a != b and evidence not in ("[]", ""):
            ra, rb = erow[a], erow[b]
            chosen.setdefault((min(ra, rb), max(ra, rb)), (rid, 1.0 if kind == "svo" else 1.5))
    keys = sorted(chosen)
    rel_ids = [chosen[k][0] for k in keys]
    pairs = [(a, b) for a, b in keys] + [(b, a) for a, b in keys]
    index = list(range(len(keys))) * 2
    lengths = [chosen[k][1] for k in keys] * 2
    n = len(erow)
    arr = np.array(pairs, dtype=np.int64).reshape(-1, 2)
    order = np.lexsort((arr[:, 1], arr[:, 0]))
    arr = arr[order]
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.add.at(indptr, arr[:, 0] + 1, 1)
    np.save(out / "relations.indptr.npy", np.cumsum(indptr))
    np.save(out / "relations.indices.npy", arr[:, 1].astype(np.int64))
    np.save(out / "relations.data.npy", np.asarray(lengths, dtype=np.float64)[order])
    np.save(out / "relations.edge.npy", np.asarray(index, dtype=np.int64)[order])
    width = max((len(r.encode()) for r in rel_ids), default=1)
    np.save(out / "relations.ids.npy", np.array([r.encode() for r in rel_ids], dtype=f"S{width}"))


def _save_communities(out: Path, db: sqlite3.Connection, ids: list[str]) -> None:
    """Per community row: level, rating, members, its id's rank, and whether it is the
    canonical copy (of communities with the same report and leaves, the finest, then
    the lowest id); and the rows in hierarchy order (coarsest level first, then id)."""
    found = {r[0]: schema.community(r) for r in db.execute("SELECT * FROM communities")}
    rows = [found[i] for i in ids]  # a community vector always has its record
    np.save(out / "attr.communities.level.npy", np.array([c.level for c in rows], dtype=np.int64))
    np.save(
        out / "attr.communities.rating.npy", np.array([c.rating for c in rows], dtype=np.float64)
    )
    np.save(
        out / "attr.communities.size.npy", np.array([len(c.members) for c in rows], dtype=np.int64)
    )
    rank = np.empty(len(ids), dtype=np.int64)
    rank[np.argsort(np.array(ids, dtype=object), kind="stable")] = np.arange(len(ids))
    np.save(out / "attr.communities.id_rank.npy", rank)
    seen: dict[tuple[str, tuple[str, ...]], int] = {}
    for row, c in enumerate(rows):
        key = (c.report.text(), c.leaves)
        if key not in seen or (c.level, c.id) < (rows[seen[key]].level, rows[seen[key]].id):
            seen[key] = row
    canonical = np.zeros(len(ids), dtype=bool)
    canonical[list(seen.values())] = True
    np.save(out / "attr.communities.canonical.npy", canonical)
    order = sorted(range(len(rows)), key=lambda r: (-rows[r].level, rows[r].id))
    np.save(out / "attr.communities.hierarchy.npy", np.array(order, dtype=np.int64))


def _save_postings(
    out: Path, db: sqlite3.Connection, kind: str, fts: str, table: str, key: str
) -> None:
    """BM25 postings of one full-text index, and the record id of each document."""
    postings, rowids = Postings.build(db, fts)
    postings.save(out, kind)
    found = dict(db.execute(f"SELECT {key}, id FROM {table}"))
    ids = [found[int(r)].encode() for r in rowids]
    np.save(out / f"bm25.{kind}.ids.npy", np.array(ids, dtype=f"S{max(map(len, ids), default=1)}"))


def _save_sentences(path: Path, db: sqlite3.Connection, ids: list[str]) -> None:
    """Sentence text (stripped, as a report quotes it) -> the first row of its vector."""
    row_of = {sid: i for i, sid in enumerate(ids)}
    sql = (
        'SELECT s.chunk_id, s.idx, s.start, s."end", c.text FROM sentences s '
        "JOIN chunks c ON c.id = s.chunk_id ORDER BY s.chunk_id, s.idx"
    )
    best: dict[str, int] = {}
    for chunk_id, idx, start, end, text in db.execute(sql):
        row = row_of.get(sentence_id(chunk_id, idx))
        if row is not None:
            best.setdefault(text[start:end].strip(), row)
    out = sqlite3.connect(path)
    out.execute("CREATE TABLE sentences (key TEXT PRIMARY KEY, row INTEGER) WITHOUT ROWID")
    out.executemany("INSERT INTO sentences VALUES (?, ?)", sorted(best.items()))
    out.commit()
    out.close()


def _save_entity_stats(
    out: Path, mentions: list[tuple[str, str, int]], erow: dict[str, int]
) -> None:
    counts = np.zeros(len(erow), dtype=np.int64)
    for e in {(e, c) for e, c, _ in mentions}:
        if e[0] in erow:
            counts[erow[e[0]]] += 1
    np.save(out / "attr.entities.chunks.npy", counts)


def _chunk_titles(db: sqlite3.Connection, chunk_ids: list[str]) -> tuple[list[str], list[str]]:
    sql = "SELECT c.id, d.title, c.text FROM chunks c JOIN documents d ON d.id = c.doc_id"
    found = {r[0]: (r[1], r[2]) for r in db.execute(sql)}
    return [found[c][0] for c in chunk_ids], [found[c][1] for c in chunk_ids]


def _save_links(out: Path, titles: list[str], texts: list[str]) -> None:
    """Title links among the chunk rows; a title named by more than :data:`LINK_CAP`
    passages keeps only its in-degree."""
    pairs = title_link_pairs(titles, texts)
    n = len(titles)
    in_degree = np.bincount(np.array([t for _, t in pairs], dtype=np.int64), minlength=n)
    np.save(out / "link_in.npy", in_degree.astype(np.int64))
    kept = [(a, b) for a, b in pairs if in_degree[b] <= LINK_CAP]
    _save_csr(out, "links", kept, n, np.int64)


def _save_title_entity(
    out: Path,
    titles: list[str],
    pairs: list[tuple[int, int]],
    names: list[str],
    n_chunk: int,
) -> None:
    """For each chunk row the lowest entity row it mentions whose name is its title."""
    found = np.full(n_chunk, -1, dtype=np.int64)
    for row, ent in sorted(set(pairs)):
        key = title_key(titles[row])
        if found[row] < 0 and key and title_key(names[ent]) == key:
            found[row] = ent
    np.save(out / "title_entity.npy", found)


def _save_names(path: Path, names: list[tuple[str, str, str]]) -> None:
    """Name key -> the lowest entity row of that name (amount types and long names left out)."""
    best: dict[str, int] = {}
    for row, (_, name, kind) in enumerate(names):
        key = name_key(name)
        if kind in SKIP_TYPES or not key or key.count(" ") >= MAX_NAME_TOKENS:
            continue
        best.setdefault(key, row)
    path.unlink(missing_ok=True)
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE names (key TEXT PRIMARY KEY, row INTEGER) WITHOUT ROWID")
    db.executemany("INSERT INTO names VALUES (?, ?)", sorted(best.items()))
    db.commit()
    db.close()
