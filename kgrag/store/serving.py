"""What a query needs, computed once per version and stored to open by memory map.

A version's records live in ``graph.sqlite``; the searches need them in other
shapes: the PageRank walk over entities and passages, the relation graph the
provenance paths follow, which entities each passage mentions, which passages
name which titles, per-entity statistics, the entity name index, ids by row.
Building those from the records took most of the time and memory of opening a
graph. :func:`derive` builds them when
a version is written and saves them under ``serving/`` as ``.npy`` files (and
the name index as a small SQLite file), so that a reader maps them and parses
nothing.

Row spaces: a kind's *row* is its position in that kind's vector file. Graph
*vertices* are the entity rows (a build writes entity vectors in id order)
followed by the passages in chunk-id order; ``chunk_vertex`` maps a chunk row
to its vertex.

Files (``serving/``): ``ids.<kind>.npy`` (fixed-width ids by row; a version that
keeps them beside its vectors, ``vectors/<kind>.ids.npy``, has no copy here) and
``sorted.<kind>.npy`` / ``order.<kind>.npy`` (the ids in id order and their
rows, for lookups by id); ``walk.*`` (the
column-stochastic walk, CSC); ``relations.*`` (entity-entity path lengths,
CSR, with the relation each pair stands for); ``mentions.*`` (chunk row ->
entity rows); ``links.*`` (chunk row -> chunk rows it names by title) with
``link_in`` (how many passages name each one); ``title_entity`` (the entity a
passage's title names, -1 none); ``attr.<kind>.<name>.npy``, per-row attributes
(chunks: ``title``, its document's title, UTF-8; entities: ``chunks`` mentioning,
``degree``, ``component`` (connected component over the relations); communities:
``level``, ``rating``, ``size``, ``id_rank``, ``canonical``, and ``hierarchy``, the
rows in hierarchy order); ``half.<kind>.npy`` (half-precision vectors of the scanned
kinds without an ANN index, only where those vectors are float32: a version from
before coded vectors);
``ann.<kind>.faiss`` (a product-quantised index, for kinds of at least
``ann_min_rows`` rows); ``bm25.<kind>.*`` (the postings of a full-text index: sorted terms,
their documents and counts, document lengths; the record id of each document);
``names.sqlite`` (entity names and report sentence texts -> rows);
``serving.json`` (what was built, with what settings).
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from pathlib import Path
from typing import Any

import numpy as np

from kgrag.errors import StoreError
from kgrag.ids import sentence_id
from kgrag.store import schema
from kgrag.store.ann import ANN_KINDS, ANN_MIN_ROWS, build_ann
from kgrag.store.base import VECTOR_KINDS
from kgrag.store.bm25 import Postings
from kgrag.store.cooc import relation_batches
from kgrag.store.graph_files import (
    BATCH,
    LINK_CAP,
    Rows,
    batches,
    index_dtype,
    read_mentions,
    save_csr,
    save_links,
    save_relations,
    save_title_entity,
    save_walk,
)
from kgrag.store.packed import filled_copies, unpack_id
from kgrag.store.vectors import ids_file, is_float32, open_matrix
from kgrag.text.keys import (
    MAX_NAME_TOKENS,
    SKIP_TYPES,
    WALK_WEIGHTS,
    name_key,
    subject_title,
)

SERVING = "serving"
#: 7: 32-bit graph indices, relation lengths as float32; 8: chunk titles; 9: the ANN index
#: is faiss's product-quantised scan (was usearch's HNSW); 10: the default ANN threshold is
#: 50,000 rows (was 200,000);
#: 11: the entities' ``component`` attribute
SERVING_FORMAT = 11
HALF_KINDS = ("entities", "facts")


def derive(folder: Path, out: Path, *, ann_min_rows: int = ANN_MIN_ROWS) -> dict[str, Any]:
    """Build the serving files of the version in ``folder`` into ``out``; return their
    description (also written to ``out/serving.json``, last).

    Records are streamed from SQLite in batches and held as numpy arrays, ids mapped
    to rows by binary search over the sorted ids: memory grows with the number of
    edges times a few dozen bytes, not with Python objects per record."""
    out.mkdir(exist_ok=True)
    db = sqlite3.connect(f"file:{folder / 'graph.sqlite'}?mode=ro", uri=True)
    try:
        ids = {k: _save_ids(out, k, *_vector_ids(folder, db, k)) for k in VECTOR_KINDS}
        # the graph's entities are the entities with a vector (a build gives every one)
        erows, crows = Rows(ids["entities"]), Rows(ids["chunks"])
        n_ent, n_chunk = len(ids["entities"]), len(ids["chunks"])
        chunk_vertex = np.empty(n_chunk, dtype=np.int64)
        chunk_vertex[crows.order] = n_ent + np.arange(n_chunk)
        names, kinds = _entity_names(db, erows, n_ent)
        mentions = read_mentions(db, erows, crows, chunk_vertex)

        def relations() -> Any:
            return relation_batches(db, folder, BATCH)

        save_walk(out, db, relations, erows, crows, chunk_vertex, mentions, n_ent + n_chunk)
        save_relations(out, relations, erows)
        pairs = np.stack([mentions.chunk, mentions.entity], axis=1)
        pairs = np.unique(pairs[(pairs[:, 0] >= 0) & (pairs[:, 1] >= 0)], axis=0)
        save_csr(out, "mentions", pairs, n_chunk, index_dtype(n_ent))
        _save_entity_stats(out, db, erows, n_ent)
        titles, texts = _chunk_titles(db, crows, n_chunk)
        width = max((len(t.encode()) for t in titles), default=1) or 1
        np.save(out / "attr.chunks.title.npy", np.array([t.encode() for t in titles], f"S{width}"))
        save_links(out, titles, texts)
        del texts
        save_title_entity(out, titles, pairs, names, n_chunk)
        _save_names(out / "names.sqlite", names, kinds)
        _save_sentences(out / "names.sqlite", db, Rows(ids["sentences"]))
        _save_communities(out, db, ids["communities"])
        for kind, (fts, table, key) in schema.FTS.items():
            _save_postings(out, db, kind, fts, table, key)
    finally:
        db.close()
    sizes = {k: len(v) for k, v in ids.items()}
    del ids
    ann = [k for k in ANN_KINDS if ann_min_rows > 0 and sizes[k] >= ann_min_rows]
    for kind in ann:
        build_ann(_matrix(folder, kind), out / f"ann.{kind}.faiss")
    # the scan of a kind without an index, where its vectors are float32 (a version
    # from before coded vectors): a coded or composed kind's half copy is made in memory
    # on first use
    for kind in HALF_KINDS:
        if kind not in ann and is_float32(folder / "vectors", kind):
            _save_half(_matrix(folder, kind), out / f"half.{kind}.npy")
    meta = {
        "format": SERVING_FORMAT,
        "walk_weights": WALK_WEIGHTS,
        "link_cap": LINK_CAP,
        "ann": ann,
        "ann_min_rows": ann_min_rows,
    }
    (out / "serving.json").write_text(json.dumps(meta, indent=2, sort_keys=True))
    return meta


def _entity_names(db: sqlite3.Connection, erows: Rows, n: int) -> tuple[list[str], list[str]]:
    """Each entity row's name and type ("" for a vector without a record)."""
    names, kinds = [""] * n, [""] * n
    for batch in batches(db, "SELECT id, name, type FROM entities"):
        rows = erows([r[0] for r in batch]).tolist()
        for row, (_, name, kind) in zip(rows, batch, strict=True):
            if row >= 0:
                names[row], kinds[row] = name, kind
    return names, kinds


def _vector_ids(folder: Path, db: sqlite3.Connection, kind: str) -> tuple[np.ndarray, bool]:
    """A kind's ids by row, fixed-width bytes, and whether they are kept beside the
    vectors (else a version written before: its ``vector_ids`` table)."""
    path = ids_file(folder / "vectors", kind)
    if path.exists():
        return np.load(path), True
    if not db.execute("SELECT 1 FROM sqlite_master WHERE name = 'vector_ids'").fetchone():
        return np.zeros(0, dtype="S1"), False
    return _table_ids(db, kind), False


def _table_ids(db: sqlite3.Connection, kind: str) -> np.ndarray:
    sql = "SELECT id FROM vector_ids WHERE kind=? ORDER BY row"
    parts = [np.array([r[0].encode() for r in batch]) for batch in batches(db, sql, (kind,))]
    if not parts:
        return np.zeros(0, dtype="S1")
    width = max(p.dtype.itemsize for p in parts)
    return np.concatenate([p.astype(f"S{width}") for p in parts])


def _matrix(folder: Path, kind: str) -> Any:
    return open_matrix(folder / "vectors", kind, 0, random=False)


def _save_half(matrix: np.ndarray, path: Path) -> None:
    """A half-precision copy, converted a block of rows at a time."""
    half = np.lib.format.open_memmap(path, mode="w+", dtype=np.float16, shape=matrix.shape)
    for i in range(0, len(matrix), BATCH):
        half[i : i + BATCH] = matrix[i : i + BATCH]
    half.flush()
    del half


def _save_ids(out: Path, kind: str, ids: np.ndarray, beside: bool) -> np.ndarray:
    """The lookup files of a kind's ids, and the ids themselves unless ``beside`` the
    vectors already (:func:`~kgrag.store.vectors.ids_file`)."""
    order = np.argsort(ids, kind="stable").astype(np.int64)
    if not beside:
        np.save(out / f"ids.{kind}.npy", ids)
    np.save(out / f"order.{kind}.npy", order)
    np.save(out / f"sorted.{kind}.npy", ids[order])
    return ids


def _save_communities(out: Path, db: sqlite3.Connection, ids: np.ndarray) -> None:
    """Per community row: level, rating, members, its id's rank, and whether it is the
    canonical copy (of communities with the same report and leaves, the finest, then
    the lowest id); and the rows in hierarchy order (coarsest level first, then id)."""
    n = len(ids)
    crows = Rows(ids)
    level = np.zeros(n, dtype=np.int64)
    rating = np.zeros(n, dtype=np.float64)
    size = np.zeros(n, dtype=np.int64)
    key_of: list[bytes] = [b""] * n
    covered = np.zeros(n, dtype=bool)
    select = "SELECT * FROM communities"
    for batch in batches(db, select):
        batch = filled_copies(batch, lambda wanted: _rows_of(db, select, wanted))
        rows = crows([r[0] for r in batch]).tolist()
        for row, record in zip(rows, batch, strict=True):
            if row < 0:
                continue
            c = schema.community(record)
            level[row], rating[row], size[row] = c.level, c.rating, len(c.members)
            text = json.dumps([c.report.text(), list(c.leaves)])
            key_of[row] = hashlib.blake2b(text.encode(), digest_size=16).digest()
            covered[row] = True
    if not covered.all():
        missing = ids[np.flatnonzero(~covered)[0]].decode()
        raise StoreError(f"community {missing} has a vector but no record")
    rank = np.empty(n, dtype=np.int64)
    rank[crows.order] = np.arange(n)
    np.save(out / "attr.communities.level.npy", level)
    np.save(out / "attr.communities.rating.npy", rating)
    np.save(out / "attr.communities.size.npy", size)
    np.save(out / "attr.communities.id_rank.npy", rank)
    seen: dict[bytes, int] = {}
    for row, key in enumerate(key_of):
        best = seen.get(key)
        if best is None or (level[row], rank[row]) < (level[best], rank[best]):
            seen[key] = row
    canonical = np.zeros(n, dtype=bool)
    canonical[list(seen.values())] = True
    np.save(out / "attr.communities.canonical.npy", canonical)
    np.save(out / "attr.communities.hierarchy.npy", np.lexsort((rank, -level)).astype(np.int64))


def _rows_of(db: sqlite3.Connection, select: str, ids: list[str]) -> list[Any]:
    """The rows of ``select`` (a SELECT ... FROM) with these ids."""
    out: list[Any] = []
    for i in range(0, len(ids), 500):
        part = ids[i : i + 500]
        out += db.execute(f"{select} WHERE id IN ({','.join('?' * len(part))})", part).fetchall()
    return out


def _save_postings(
    out: Path, db: sqlite3.Connection, kind: str, fts: str, table: str, key: str
) -> None:
    """BM25 postings of one full-text index, and the record id of each document."""
    postings, rowids = Postings.build(db, fts)
    postings.save(out, kind)
    found: dict[int, bytes] = {}
    for batch in batches(db, f"SELECT {key}, id FROM {table}"):
        found.update((r[0], r[1].encode()) for r in batch)
    ids = [found[int(r)] for r in rowids.tolist()]
    del found
    np.save(out / f"bm25.{kind}.ids.npy", np.array(ids, dtype=f"S{max(map(len, ids), default=1)}"))


def _save_sentences(path: Path, db: sqlite3.Connection, rows_of: Rows) -> None:
    """Sentence text (stripped, as a report quotes it) -> the first row of its vector."""
    sql = (
        'SELECT s.chunk_id, s.idx, substr(c.text, s.start + 1, s."end" - s.start) '
        "FROM sentences s JOIN chunks c ON c.id = s.chunk_id ORDER BY s.chunk_id, s.idx"
    )
    out = sqlite3.connect(path)
    out.execute("CREATE TABLE sentences (key TEXT PRIMARY KEY, row INTEGER) WITHOUT ROWID")
    for batch in batches(db, sql):
        rows = rows_of([sentence_id(c, i) for c, i, _ in batch]).tolist()
        # the first sentence of a text keeps it, as the scan order says
        out.executemany(
            "INSERT OR IGNORE INTO sentences VALUES (?, ?)",
            [
                (text.strip(), row)
                for (_, _, text), row in zip(batch, rows, strict=True)
                if row >= 0
            ],
        )
    out.commit()
    out.close()


def _save_entity_stats(out: Path, db: sqlite3.Connection, erows: Rows, n: int) -> None:
    """Per entity row, the number of distinct chunks mentioning it."""
    counts = np.zeros(n, dtype=np.int64)
    sql = "SELECT entity_id, COUNT(DISTINCT chunk_id) FROM mentions GROUP BY entity_id"
    for batch in batches(db, sql):
        rows = erows([unpack_id(r[0]) for r in batch])
        found = rows >= 0
        counts[rows[found]] = np.array([r[1] for r in batch], dtype=np.int64)[found]
    np.save(out / "attr.entities.chunks.npy", counts)


def _chunk_titles(db: sqlite3.Connection, crows: Rows, n: int) -> tuple[list[str], list[str]]:
    """Each chunk row's title (:func:`~kgrag.text.keys.subject_title`) and text."""
    titles, texts = [""] * n, [""] * n
    sql = "SELECT c.id, d.title, c.text, c.meta FROM chunks c JOIN documents d ON d.id = c.doc_id"
    found = np.zeros(n, dtype=bool)
    for batch in batches(db, sql):
        for row, (_, title, text, meta) in zip(
            crows([r[0] for r in batch]).tolist(), batch, strict=True
        ):
            if row >= 0:
                chunk_meta = json.loads(meta) if meta and '"subject"' in meta else {}
                titles[row], texts[row], found[row] = subject_title(title, chunk_meta), text, True
    if not found.all():
        raise StoreError(f"{int((~found).sum())} chunk vectors have no chunk record")
    return titles, texts


def _save_names(path: Path, names: list[str], kinds: list[str]) -> None:
    """Name key -> the lowest entity row of that name (amount types and long names left out)."""
    path.unlink(missing_ok=True)
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE names (key TEXT PRIMARY KEY, row INTEGER) WITHOUT ROWID")
    batch: list[tuple[str, int]] = []
    for row, (name, kind) in enumerate(zip(names, kinds, strict=True)):
        key = name_key(name)
        if kind in SKIP_TYPES or not key or key.count(" ") >= MAX_NAME_TOKENS:
            continue
        batch.append((key, row))
        if len(batch) >= BATCH:
            db.executemany("INSERT OR IGNORE INTO names VALUES (?, ?)", batch)
            batch = []
    db.executemany("INSERT OR IGNORE INTO names VALUES (?, ?)", batch)  # rows ascend: lowest wins
    db.commit()
    db.close()
