"""The graph files of a version's serving folder (:mod:`kgrag.store.serving`): the
PageRank walk over entities and passages, the relations the provenance paths follow
and their connected components, which entities each passage mentions, which passages
name which titles; and the helpers that read a version's records into rows.

Row spaces: a kind's *row* is its position in that kind's vector file. Graph
*vertices* are the entity rows (a build writes entity vectors in id order) followed by
the passages in chunk-id order; ``chunk_vertex`` maps a chunk row to its vertex.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components

from kgrag.store.packed import id_column, unpack_id
from kgrag.text.keys import COOC, WALK_WEIGHTS, title_key, title_link_pairs

LINK_CAP = 100  # titles named by more passages than this are not stored as links
BATCH = 100_000  # records per fetch from SQLite

#: every relation row of a version in id order, in batches (kgrag.store.cooc)
RelationRows = Callable[[], Iterator[list[Any]]]


class Rows:
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
class Mentions:
    """Every mention, sorted by (entity id, chunk id, count): entity and chunk rows
    (``-1``: none), the entity or chunk id's walk vertex, and the count."""

    entity: np.ndarray
    chunk: np.ndarray
    entity_vertex: np.ndarray
    chunk_vertex: np.ndarray
    count: np.ndarray


def batches(db: sqlite3.Connection, sql: str, args: Sequence[Any] = ()) -> Iterator[list[Any]]:
    cursor = db.execute(sql, args)
    while batch := cursor.fetchmany(BATCH):
        yield batch


def vertices(keys: Sequence[str], erows: Rows, crows: Rows, chunk_vertex: np.ndarray) -> np.ndarray:
    """Walk vertex of each id: its entity row, else its chunk's vertex, else -1."""
    found = erows(keys)
    missing = np.flatnonzero(found < 0)
    if len(missing):
        rows = crows([keys[i] for i in missing.tolist()])
        if len(chunk_vertex):  # a version without chunk vectors has no passage vertex
            found[missing] = np.where(rows >= 0, chunk_vertex[np.maximum(rows, 0)], -1)
    return found


def read_mentions(
    db: sqlite3.Connection, erows: Rows, crows: Rows, chunk_vertex: np.ndarray
) -> Mentions:
    parts: list[tuple[np.ndarray, ...]] = []
    sql = "SELECT entity_id, chunk_id, count FROM mentions ORDER BY entity_id, chunk_id, count"
    for batch in batches(db, sql):
        packed_e, packed_c, n = zip(*batch, strict=True)
        e, c = [unpack_id(x) for x in packed_e], [unpack_id(x) for x in packed_c]
        parts.append(
            (
                erows(e),
                crows(c),
                vertices(e, erows, crows, chunk_vertex),
                vertices(c, erows, crows, chunk_vertex),
                np.array(n, dtype=np.float64),
            )
        )
    if not parts:
        empty = np.zeros(0, dtype=np.int64)
        return Mentions(empty, empty, empty, empty, np.zeros(0))
    return Mentions(*(np.concatenate([p[i] for p in parts]) for i in range(5)))


def save_csr(out: Path, name: str, pairs: np.ndarray, n: int, dtype: Any) -> None:
    """Rows -> sorted distinct columns, from (row, column) pairs."""
    arr = np.unique(np.asarray(pairs, dtype=np.int64).reshape(-1, 2), axis=0)
    np.save(out / f"{name}.indptr.npy", _indptr(arr[:, 0], n))
    np.save(out / f"{name}.indices.npy", arr[:, 1].astype(dtype))


def _indptr(rows: np.ndarray, n: int) -> np.ndarray:
    """CSR row pointers of ``n`` rows for entries sorted by row ``rows``."""
    return np.concatenate([[0], np.cumsum(np.bincount(rows, minlength=n))]).astype(np.int64)


def index_dtype(n: int) -> Any:
    """The narrowest of int32 / int64 holding row numbers below ``n``: graph files are
    read row by row, so their width is what a query pages in."""
    return np.int32 if n < 2**31 else np.int64


def save_walk(
    out: Path,
    db: sqlite3.Connection,
    relations: RelationRows,
    erows: Rows,
    crows: Rows,
    chunk_vertex: np.ndarray,
    mentions: Mentions,
    n: int,
) -> None:
    """The walk M = A D^-1 (float32, CSC) of the entity + passage graph with parallel
    edges summed and loops dropped, edges weighted by :data:`WALK_WEIGHTS` (relations in
    id order, then mentions, then synonyms: the order parallel edges are summed in)."""
    s, d, values = _walk_edges(db, relations, erows, crows, chunk_vertex, mentions)
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
    np.save(out / "walk.indices.npy", walk.indices.astype(index_dtype(n)))
    np.save(out / "walk.data.npy", walk.data)
    np.save(out / "chunk_vertex.npy", chunk_vertex)
    np.save(out / "attr.entities.degree.npy", degree.astype(np.int64))


def _walk_edges(
    db: sqlite3.Connection,
    relations: RelationRows,
    erows: Rows,
    crows: Rows,
    chunk_vertex: np.ndarray,
    mentions: Mentions,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The walk's weighted edges (between vertices, loops and non-positive weights left
    out) as (source, target, weight), in the order their parallels are summed in."""
    w = WALK_WEIGHTS
    src: list[np.ndarray] = []
    dst: list[np.ndarray] = []
    weight: list[np.ndarray] = []

    def add(a: np.ndarray, b: np.ndarray, value: np.ndarray) -> None:
        keep = (a >= 0) & (b >= 0) & (value > 0) & (a != b)
        src.append(a[keep])
        dst.append(b[keep])
        weight.append(value[keep])

    for batch in relations():
        _, a, predicate, b, value, _, _ = zip(*batch, strict=True)
        # a packed row's co-occurrence predicate is NULL (kgrag.store.packed)
        cooc = [p is None or p == COOC for p in predicate]
        scale = np.where(np.array(cooc, dtype=bool), w["cooc"], w["relation"])
        add(
            vertices([unpack_id(x) for x in a], erows, crows, chunk_vertex),
            vertices([unpack_id(x) for x in b], erows, crows, chunk_vertex),
            np.array(value, dtype=np.float64) * scale,
        )
    add(mentions.entity_vertex, mentions.chunk_vertex, mentions.count * w["mention"])
    syn = "SELECT src, dst, score FROM synonyms ORDER BY src, dst"
    for batch in batches(db, syn):
        a, b, score = zip(*batch, strict=True)
        add(
            vertices([unpack_id(x) for x in a], erows, crows, chunk_vertex),
            vertices([unpack_id(x) for x in b], erows, crows, chunk_vertex),
            np.array(score, dtype=np.float64) * w["synonym"],
        )
    return np.concatenate(src), np.concatenate(dst), np.concatenate(weight)


def save_relations(out: Path, relations: RelationRows, erows: Rows) -> None:
    """Entity-entity path lengths (1 stated, 1.5 co-occurrence), symmetric CSR, with
    the relation each unordered pair stands for (stated first, then heavier, then id)."""
    lo_parts, hi_parts, said_parts, weight_parts, at_parts = [], [], [], [], []
    seen = 0
    for batch in relations():
        _, a, _, b, weights, kinds, evidence = zip(*batch, strict=True)
        ra, rb = erows([unpack_id(x) for x in a]), erows([unpack_id(x) for x in b])
        # no evidence: '[]' in a text row, an empty value in a packed one (NULL counts
        # as evidence, as it always has)
        bare = np.array([e in ("[]", "", b"") for e in evidence], dtype=bool)
        keep = (ra >= 0) & (rb >= 0) & (ra != rb) & ~bare
        lo_parts.append(np.minimum(ra, rb)[keep])
        hi_parts.append(np.maximum(ra, rb)[keep])
        said_parts.append(np.array([k == "svo" for k in kinds], dtype=bool)[keep])
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
    np.save(out / "relations.indices.npy", cols[order].astype(index_dtype(len(erows.sorted))))
    np.save(out / "relations.data.npy", lengths[order].astype(np.float16))  # 1 and 1.5: exact
    np.save(out / "relations.edge.npy", index[order].astype(index_dtype(m)))
    np.save(out / "relations.ids.npy", _ids_at(relations, at))
    # the connected component of each entity over these relations: an entity of another
    # component than every seed has no path to them (provenance paths skip it)
    n = len(erows.sorted)
    graph = sp.csr_matrix((np.ones(len(lo), dtype=np.int8), (lo, hi)), shape=(n, n))
    _, component = connected_components(graph, directed=False)
    np.save(out / "attr.entities.component.npy", component.astype(index_dtype(n)))


def _joined(parts: list[np.ndarray], dtype: Any) -> np.ndarray:
    return np.concatenate(parts).astype(dtype) if parts else np.zeros(0, dtype=dtype)


def _ids_at(relations: RelationRows, at: np.ndarray) -> np.ndarray:
    """The ids of the relations at positions ``at`` of the id-ordered scan."""
    wanted = np.sort(at)
    picked: list[bytes | str] = []
    seen = 0
    for batch in relations():
        lo, hi = np.searchsorted(wanted, [seen, seen + len(batch)])
        picked += [batch[i - seen][0] for i in wanted[lo:hi].tolist()]
        seen += len(batch)
    return id_column(picked)[np.searchsorted(wanted, at)]


def save_links(out: Path, titles: list[str], texts: list[str]) -> None:
    """Title links among the chunk rows; a title named by more than :data:`LINK_CAP`
    passages keeps only its in-degree."""
    pairs = np.array(title_link_pairs(titles, texts), dtype=np.int64).reshape(-1, 2)
    n = len(titles)
    in_degree = np.bincount(pairs[:, 1], minlength=n)
    np.save(out / "link_in.npy", in_degree.astype(np.int64))
    save_csr(out, "links", pairs[in_degree[pairs[:, 1]] <= LINK_CAP], n, index_dtype(n))


def save_title_entity(
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
