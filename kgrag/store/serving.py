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
(chunks: ``title``, its document's title, UTF-8; entities: ``chunks`` mentioning,
``degree``, ``component`` (connected component over the relations); communities:
``level``, ``rating``, ``size``, ``id_rank``, ``canonical``, and ``hierarchy``, the
rows in hierarchy order); ``half.<kind>.npy`` (half-precision vectors of the scanned
kinds without an ANN index (an index holds its own quantised copy));
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
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components

from kgrag.errors import StoreError
from kgrag.ids import sentence_id
from kgrag.store import schema
from kgrag.store.base import VECTOR_KINDS
from kgrag.store.bm25 import Postings
from kgrag.text.keys import (
    COOC,
    MAX_NAME_TOKENS,
    SKIP_TYPES,
    WALK_WEIGHTS,
    name_key,
    title_key,
    title_link_pairs,
)

SERVING = "serving"
#: 7: 32-bit graph indices, relation lengths as float32; 8: chunk titles; 9: the ANN index
#: is faiss's product-quantised scan (was usearch's HNSW); 10: the default ANN threshold is
#: 50,000 rows (was 200,000), so 2Wiki's facts and entities are searched through the index;
#: 11: the entities' ``component`` attribute
SERVING_FORMAT = 11
#: kinds with at least this many rows get an ANN index (``store.ann_min_rows``): at 6k
#: passages, 69k facts take 0.4 ms a query through it against 1.9 ms by the fp16 scan
ANN_MIN_ROWS = 50_000
LINK_CAP = 100  # titles named by more passages than this are not stored as links
HALF_KINDS = ("entities", "facts")
#: kinds searched by nearest neighbour (local search's facts and entities, chunks); the
#: others are ranked within a known set of rows (a community level) or looked up
ANN_KINDS = ("chunks", "entities", "facts")
_BATCH = 100_000  # records per fetch from SQLite


def derive(folder: Path, out: Path, *, ann_min_rows: int = ANN_MIN_ROWS) -> dict[str, Any]:
    """Build the serving files of the version in ``folder`` into ``out``; return their
    description (also written to ``out/serving.json``, last).

    Records are streamed from SQLite in batches and held as numpy arrays, ids mapped
    to rows by binary search over the sorted ids: memory grows with the number of
    edges times a few dozen bytes, not with Python objects per record."""
    out.mkdir(exist_ok=True)
    db = sqlite3.connect(f"file:{folder / 'graph.sqlite'}?mode=ro", uri=True)
    try:
        ids = {k: _save_ids(out, k, _vector_ids(db, k)) for k in VECTOR_KINDS}
        # the graph's entities are the entities with a vector (a build gives every one)
        erows, crows = _Rows(ids["entities"]), _Rows(ids["chunks"])
        n_ent, n_chunk = len(ids["entities"]), len(ids["chunks"])
        chunk_vertex = np.empty(n_chunk, dtype=np.int64)
        chunk_vertex[crows.order] = n_ent + np.arange(n_chunk)
        names, kinds = _entity_names(db, erows, n_ent)
        mentions = _mentions(db, erows, crows, chunk_vertex)
        _save_walk(out, db, erows, crows, chunk_vertex, mentions, n_ent + n_chunk)
        _save_relations(out, db, erows)
        pairs = np.stack([mentions.chunk, mentions.entity], axis=1)
        pairs = np.unique(pairs[(pairs[:, 0] >= 0) & (pairs[:, 1] >= 0)], axis=0)
        _save_csr(out, "mentions", pairs, n_chunk, _index_dtype(n_ent))
        _save_entity_stats(out, db, erows, n_ent)
        titles, texts = _chunk_titles(db, crows, n_chunk)
        width = max((len(t.encode()) for t in titles), default=1) or 1
        np.save(out / "attr.chunks.title.npy", np.array([t.encode() for t in titles], f"S{width}"))
        _save_links(out, titles, texts)
        del texts
        _save_title_entity(out, titles, pairs, names, n_chunk)
        _save_names(out / "names.sqlite", names, kinds)
        _save_sentences(out / "names.sqlite", db, _Rows(ids["sentences"]))
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
    for kind in HALF_KINDS:  # the scan of a kind without an index (an index holds its own copy)
        if kind not in ann:
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


class _Rows:
    """Ids to rows of one kind by binary search in its sorted ids (``-1``: no row)."""

    def __init__(self, ids: np.ndarray) -> None:
        self.order = np.argsort(ids, kind="stable").astype(np.int64)
        self.sorted = ids[self.order]

    def __call__(self, keys: Sequence[str]) -> np.ndarray:
        if not len(keys):
            return np.zeros(0, dtype=np.int64)
        if not len(self.sorted):
            return np.full(len(keys), -1, dtype=np.int64)
        wanted = np.array([k.encode() for k in keys])  # its own width: no truncation
        at = np.minimum(np.searchsorted(self.sorted, wanted), len(self.sorted) - 1)
        return np.where(self.sorted[at] == wanted, self.order[at], -1)


@dataclass(frozen=True)
class _Mentions:
    """Every mention, sorted by (entity id, chunk id, count): entity and chunk rows
    (``-1``: none), the entity or chunk id's walk vertex, and the count."""

    entity: np.ndarray
    chunk: np.ndarray
    entity_vertex: np.ndarray
    chunk_vertex: np.ndarray
    count: np.ndarray


def _batches(db: sqlite3.Connection, sql: str, args: Sequence[Any] = ()) -> Iterator[list[Any]]:
    cursor = db.execute(sql, args)
    while batch := cursor.fetchmany(_BATCH):
        yield batch


def _vertices(
    keys: Sequence[str], erows: _Rows, crows: _Rows, chunk_vertex: np.ndarray
) -> np.ndarray:
    """Walk vertex of each id: its entity row, else its chunk's vertex, else -1."""
    found = erows(keys)
    missing = np.flatnonzero(found < 0)
    if len(missing):
        rows = crows([keys[i] for i in missing.tolist()])
        found[missing] = np.where(rows >= 0, chunk_vertex[np.maximum(rows, 0)], -1)
    return found


def _mentions(
    db: sqlite3.Connection, erows: _Rows, crows: _Rows, chunk_vertex: np.ndarray
) -> _Mentions:
    parts: list[tuple[np.ndarray, ...]] = []
    sql = "SELECT entity_id, chunk_id, count FROM mentions ORDER BY entity_id, chunk_id, count"
    for batch in _batches(db, sql):
        e, c, n = zip(*batch, strict=True)
        parts.append(
            (
                erows(e),
                crows(c),
                _vertices(e, erows, crows, chunk_vertex),
                _vertices(c, erows, crows, chunk_vertex),
                np.array(n, dtype=np.float64),
            )
        )
    if not parts:
        empty = np.zeros(0, dtype=np.int64)
        return _Mentions(empty, empty, empty, empty, np.zeros(0))
    return _Mentions(*(np.concatenate([p[i] for p in parts]) for i in range(5)))


def _entity_names(db: sqlite3.Connection, erows: _Rows, n: int) -> tuple[list[str], list[str]]:
    """Each entity row's name and type ("" for a vector without a record)."""
    names, kinds = [""] * n, [""] * n
    for batch in _batches(db, "SELECT id, name, type FROM entities"):
        rows = erows([r[0] for r in batch]).tolist()
        for row, (_, name, kind) in zip(rows, batch, strict=True):
            if row >= 0:
                names[row], kinds[row] = name, kind
    return names, kinds


def build_ann(matrix: np.ndarray, path: Path) -> None:
    """A product-quantised index of the rows of ``matrix`` (faiss ``IndexPQFastScan``,
    inner product, 4 dimensions per 4-bit code: 48 bytes per MiniLM vector), its rows
    in order. A search scans every code with SIMD lookup tables, so no neighbour is
    missed for want of a graph edge or a probed list, and only the codes (1/32 of the
    float32 vectors) sit in memory; the best candidates are then re-scored exactly.
    Trained on at most 65,536 evenly spaced rows, on one thread, so the same vectors
    give the same index. 60k-passage graph, exact top 5 of 691k facts among the best
    256 codes: 0.99 (HNSW at breadth 1024: 0.93, with a 12x larger index)."""
    import faiss

    if not len(matrix):
        raise StoreError(f"{path}: no vectors to index")
    threads = faiss.omp_get_max_threads()
    faiss.omp_set_num_threads(1)
    try:
        index = trained_pq(matrix)
        for start in range(0, len(matrix), _BATCH):
            block = np.asarray(matrix[start : start + _BATCH], dtype=np.float32)
            index.add(np.ascontiguousarray(block))
        faiss.write_index(index, str(path))
    finally:
        faiss.omp_set_num_threads(threads)


def trained_pq(matrix: np.ndarray) -> Any:
    """:func:`build_ann`'s index, trained and empty: its ``pq`` codes rows as the
    folder's index codes them (a Neo4j version stores those codes, ``kgrag.nearest``)."""
    import faiss

    n, dim = matrix.shape
    index = faiss.IndexPQFastScan(dim, _pq_codes(dim), 4, faiss.METRIC_INNER_PRODUCT)
    sample = np.asarray(matrix[np.linspace(0, n - 1, min(n, 65_536)).astype(np.int64)])
    # k-means of 16 centroids per code wants ~40 points each: repeat a small kind
    sample = np.tile(sample, (-(-640 // len(sample)), 1))
    threads = faiss.omp_get_max_threads()
    faiss.omp_set_num_threads(1)  # one thread: the same vectors give the same codebook
    try:
        index.train(np.ascontiguousarray(sample, dtype=np.float32))
    finally:
        faiss.omp_set_num_threads(threads)
    return index


def _pq_codes(dim: int) -> int:
    """Sub-quantisers for ``dim`` dimensions: one per 4 where that divides, else per 2
    or per dimension."""
    return next(dim // per for per in (4, 2, 1) if dim % per == 0)


def _vector_ids(db: sqlite3.Connection, kind: str) -> np.ndarray:
    """A kind's ids by row, fixed-width bytes."""
    sql = "SELECT id FROM vector_ids WHERE kind=? ORDER BY row"
    parts = [np.array([r[0].encode() for r in batch]) for batch in _batches(db, sql, (kind,))]
    if not parts:
        return np.zeros(0, dtype="S1")
    width = max(p.dtype.itemsize for p in parts)
    return np.concatenate([p.astype(f"S{width}") for p in parts])


def _matrix(folder: Path, kind: str) -> np.ndarray:
    path = folder / "vectors" / f"{kind}.npy"
    return np.load(path, mmap_mode="r") if path.exists() else np.zeros((0, 0), np.float32)


def _save_half(matrix: np.ndarray, path: Path) -> None:
    """A half-precision copy, converted a block of rows at a time."""
    half = np.lib.format.open_memmap(path, mode="w+", dtype=np.float16, shape=matrix.shape)
    for i in range(0, len(matrix), _BATCH):
        half[i : i + _BATCH] = matrix[i : i + _BATCH]
    half.flush()
    del half


def _save_ids(out: Path, kind: str, ids: np.ndarray) -> np.ndarray:
    order = np.argsort(ids, kind="stable").astype(np.int64)
    np.save(out / f"ids.{kind}.npy", ids)
    np.save(out / f"order.{kind}.npy", order)
    np.save(out / f"sorted.{kind}.npy", ids[order])
    return ids


def _save_csr(out: Path, name: str, pairs: np.ndarray, n: int, dtype: Any) -> None:
    """Rows -> sorted distinct columns, from (row, column) pairs."""
    arr = np.unique(np.asarray(pairs, dtype=np.int64).reshape(-1, 2), axis=0)
    np.save(out / f"{name}.indptr.npy", _indptr(arr[:, 0], n))
    np.save(out / f"{name}.indices.npy", arr[:, 1].astype(dtype))


def _indptr(rows: np.ndarray, n: int) -> np.ndarray:
    """CSR row pointers of ``n`` rows for entries sorted by row ``rows``."""
    return np.concatenate([[0], np.cumsum(np.bincount(rows, minlength=n))]).astype(np.int64)


def _save_walk(
    out: Path,
    db: sqlite3.Connection,
    erows: _Rows,
    crows: _Rows,
    chunk_vertex: np.ndarray,
    mentions: _Mentions,
    n: int,
) -> None:
    """The walk M = A D^-1 (float32, CSC) of the entity + passage graph with parallel
    edges summed and loops dropped, edges weighted by :data:`WALK_WEIGHTS` (relations in
    id order, then mentions, then synonyms: the order parallel edges are summed in)."""
    w = WALK_WEIGHTS
    src: list[np.ndarray] = []
    dst: list[np.ndarray] = []
    weight: list[np.ndarray] = []

    def add(a: np.ndarray, b: np.ndarray, value: np.ndarray) -> None:
        keep = (a >= 0) & (b >= 0) & (value > 0) & (a != b)
        src.append(a[keep])
        dst.append(b[keep])
        weight.append(value[keep])

    rels = "SELECT src, dst, predicate = ?, weight FROM relations ORDER BY id"
    for batch in _batches(db, rels, (COOC,)):
        a, b, cooc, value = zip(*batch, strict=True)
        scale = np.where(np.array(cooc, dtype=bool), w["cooc"], w["relation"])
        add(
            _vertices(a, erows, crows, chunk_vertex),
            _vertices(b, erows, crows, chunk_vertex),
            np.array(value, dtype=np.float64) * scale,
        )
    add(mentions.entity_vertex, mentions.chunk_vertex, mentions.count * w["mention"])
    syn = "SELECT src, dst, score FROM synonyms ORDER BY src, dst"
    for batch in _batches(db, syn):
        a, b, score = zip(*batch, strict=True)
        add(
            _vertices(a, erows, crows, chunk_vertex),
            _vertices(b, erows, crows, chunk_vertex),
            np.array(score, dtype=np.float64) * w["synonym"],
        )
    s, d = np.concatenate(src), np.concatenate(dst)
    values = np.concatenate(weight)
    for parts in (src, dst, weight):
        parts.clear()
    lo, hi = np.minimum(s, d), np.maximum(s, d)
    del s, d
    upper = sp.coo_matrix((values, (lo, hi)), shape=(n, n)).tocsr()  # sums parallels
    del lo, hi, values
    adj = (upper + upper.T).tocsr()
    del upper
    strength = np.asarray(adj.sum(axis=0)).ravel()
    inv = np.where(strength > 0, 1.0 / np.where(strength > 0, strength, 1.0), 0.0)
    walk = (adj @ sp.diags(inv)).tocsc().astype(np.float32)
    degree = np.diff(adj.indptr)[: len(erows.sorted)]
    del adj
    walk.sort_indices()
    np.save(out / "walk.indptr.npy", walk.indptr.astype(np.int64))
    np.save(out / "walk.indices.npy", walk.indices.astype(_index_dtype(n)))
    np.save(out / "walk.data.npy", walk.data)
    np.save(out / "chunk_vertex.npy", chunk_vertex)
    np.save(out / "attr.entities.degree.npy", degree.astype(np.int64))


def _save_relations(out: Path, db: sqlite3.Connection, erows: _Rows) -> None:
    """Entity-entity path lengths (1 stated, 1.5 co-occurrence), symmetric CSR, with
    the relation each unordered pair stands for (stated first, then heavier, then id)."""
    lo_parts, hi_parts, said_parts, weight_parts, at_parts = [], [], [], [], []
    sql = "SELECT src, dst, kind = 'svo', weight, evidence IN ('[]', '') FROM relations ORDER BY id"
    seen = 0
    for batch in _batches(db, sql):
        a, b, stated, weights, bare = zip(*batch, strict=True)
        ra, rb = erows(a), erows(b)
        # a NULL evidence compares as NULL: it counts as evidence, as it always has
        keep = (ra >= 0) & (rb >= 0) & (ra != rb) & (np.array(bare, dtype=object) != 1)
        lo_parts.append(np.minimum(ra, rb)[keep])
        hi_parts.append(np.maximum(ra, rb)[keep])
        said_parts.append(np.array(stated, dtype=bool)[keep])
        weight_parts.append(np.array(weights, dtype=np.float64)[keep])
        at_parts.append(seen + np.flatnonzero(keep))
        seen += len(batch)
    lo, hi = _joined(lo_parts, np.int64), _joined(hi_parts, np.int64)
    said, value, at = (
        _joined(said_parts, bool),
        _joined(weight_parts, np.float64),
        _joined(at_parts, np.int64),
    )
    # per pair: stated first, then heavier, then the lower id (the scan is in id order)
    order = np.lexsort((at, -value, ~said, hi, lo))
    lo, hi, said, at = lo[order], hi[order], said[order], at[order]
    first = np.ones(len(lo), dtype=bool)
    first[1:] = (lo[1:] != lo[:-1]) | (hi[1:] != hi[:-1])
    lo, hi, said, at = lo[first], hi[first], said[first], at[first]
    m = len(lo)
    rows = np.concatenate([lo, hi])
    cols = np.concatenate([hi, lo])
    lengths = np.tile(np.where(said, 1.0, 1.5), 2)
    index = np.tile(np.arange(m, dtype=np.int64), 2)
    order = np.lexsort((cols, rows))
    np.save(out / "relations.indptr.npy", _indptr(rows, len(erows.sorted)))
    np.save(out / "relations.indices.npy", cols[order].astype(_index_dtype(len(erows.sorted))))
    np.save(out / "relations.data.npy", lengths[order].astype(np.float32))  # 1 and 1.5: exact
    np.save(out / "relations.edge.npy", index[order].astype(_index_dtype(m)))
    np.save(out / "relations.ids.npy", _ids_at(db, at))
    # the connected component of each entity over these relations: an entity of another
    # component than every seed has no path to them (provenance paths skip it)
    n = len(erows.sorted)
    graph = sp.csr_matrix((np.ones(len(lo), dtype=np.int8), (lo, hi)), shape=(n, n))
    _, component = connected_components(graph, directed=False)
    np.save(out / "attr.entities.component.npy", component.astype(_index_dtype(n)))


def _index_dtype(n: int) -> Any:
    """The narrowest of int32 / int64 holding row numbers below ``n``: graph files are
    read row by row, so their width is what a query pages in."""
    return np.int32 if n < 2**31 else np.int64


def _joined(parts: list[np.ndarray], dtype: Any) -> np.ndarray:
    return np.concatenate(parts).astype(dtype) if parts else np.zeros(0, dtype=dtype)


def _ids_at(db: sqlite3.Connection, at: np.ndarray) -> np.ndarray:
    """The ids of the relations at positions ``at`` of the id-ordered scan."""
    wanted = np.sort(at)
    picked: list[bytes] = []
    seen = 0
    for batch in _batches(db, "SELECT id FROM relations ORDER BY id"):
        lo, hi = np.searchsorted(wanted, [seen, seen + len(batch)])
        picked += [batch[i - seen][0].encode() for i in wanted[lo:hi].tolist()]
        seen += len(batch)
    arr = np.array(picked) if picked else np.zeros(0, dtype="S1")
    return arr[np.searchsorted(wanted, at)]


def _save_communities(out: Path, db: sqlite3.Connection, ids: np.ndarray) -> None:
    """Per community row: level, rating, members, its id's rank, and whether it is the
    canonical copy (of communities with the same report and leaves, the finest, then
    the lowest id); and the rows in hierarchy order (coarsest level first, then id)."""
    n = len(ids)
    crows = _Rows(ids)
    level = np.zeros(n, dtype=np.int64)
    rating = np.zeros(n, dtype=np.float64)
    size = np.zeros(n, dtype=np.int64)
    key_of: list[bytes] = [b""] * n
    covered = np.zeros(n, dtype=bool)
    for batch in _batches(db, "SELECT * FROM communities"):
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


def _save_postings(
    out: Path, db: sqlite3.Connection, kind: str, fts: str, table: str, key: str
) -> None:
    """BM25 postings of one full-text index, and the record id of each document."""
    postings, rowids = Postings.build(db, fts)
    postings.save(out, kind)
    found: dict[int, bytes] = {}
    for batch in _batches(db, f"SELECT {key}, id FROM {table}"):
        found.update((r[0], r[1].encode()) for r in batch)
    ids = [found[int(r)] for r in rowids.tolist()]
    del found
    np.save(out / f"bm25.{kind}.ids.npy", np.array(ids, dtype=f"S{max(map(len, ids), default=1)}"))


def _save_sentences(path: Path, db: sqlite3.Connection, rows_of: _Rows) -> None:
    """Sentence text (stripped, as a report quotes it) -> the first row of its vector."""
    sql = (
        'SELECT s.chunk_id, s.idx, substr(c.text, s.start + 1, s."end" - s.start) '
        "FROM sentences s JOIN chunks c ON c.id = s.chunk_id ORDER BY s.chunk_id, s.idx"
    )
    out = sqlite3.connect(path)
    out.execute("CREATE TABLE sentences (key TEXT PRIMARY KEY, row INTEGER) WITHOUT ROWID")
    for batch in _batches(db, sql):
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


def _save_entity_stats(out: Path, db: sqlite3.Connection, erows: _Rows, n: int) -> None:
    """Per entity row, the number of distinct chunks mentioning it."""
    counts = np.zeros(n, dtype=np.int64)
    sql = "SELECT entity_id, COUNT(DISTINCT chunk_id) FROM mentions GROUP BY entity_id"
    for batch in _batches(db, sql):
        rows = erows([r[0] for r in batch])
        found = rows >= 0
        counts[rows[found]] = np.array([r[1] for r in batch], dtype=np.int64)[found]
    np.save(out / "attr.entities.chunks.npy", counts)


def _chunk_titles(db: sqlite3.Connection, crows: _Rows, n: int) -> tuple[list[str], list[str]]:
    """Each chunk row's document title and text."""
    titles, texts = [""] * n, [""] * n
    sql = "SELECT c.id, d.title, c.text FROM chunks c JOIN documents d ON d.id = c.doc_id"
    found = np.zeros(n, dtype=bool)
    for batch in _batches(db, sql):
        for row, (_, title, text) in zip(crows([r[0] for r in batch]).tolist(), batch, strict=True):
            if row >= 0:
                titles[row], texts[row], found[row] = title, text, True
    if not found.all():
        raise StoreError(f"{int((~found).sum())} chunk vectors have no chunk record")
    return titles, texts


def _save_links(out: Path, titles: list[str], texts: list[str]) -> None:
    """Title links among the chunk rows; a title named by more than :data:`LINK_CAP`
    passages keeps only its in-degree."""
    pairs = np.array(title_link_pairs(titles, texts), dtype=np.int64).reshape(-1, 2)
    n = len(titles)
    in_degree = np.bincount(pairs[:, 1], minlength=n)
    np.save(out / "link_in.npy", in_degree.astype(np.int64))
    _save_csr(out, "links", pairs[in_degree[pairs[:, 1]] <= LINK_CAP], n, _index_dtype(n))


def _save_title_entity(
    out: Path, titles: list[str], pairs: np.ndarray, names: list[str], n_chunk: int
) -> None:
    """For each chunk row the lowest entity row it mentions whose name is its title
    (``pairs``: the distinct (chunk row, entity row) mentions, sorted)."""
    found = np.full(n_chunk, -1, dtype=np.int64)
    keys = [title_key(t) for t in titles]
    for row, ent in pairs.tolist():
        key = keys[row]
        if found[row] < 0 and key and title_key(names[ent]) == key:
            found[row] = ent
    np.save(out / "title_entity.npy", found)


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
        if len(batch) >= _BATCH:
            db.executemany("INSERT OR IGNORE INTO names VALUES (?, ?)", batch)
            batch = []
    db.executemany("INSERT OR IGNORE INTO names VALUES (?, ?)", batch)  # rows ascend: lowest wins
    db.commit()
    db.close()
