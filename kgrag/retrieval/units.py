"""What ``retrieve`` ranks, per unit: chunks, documents, communities, tree nodes,
entities (unit ``node``) and facts (unit ``triplet``).

A :class:`Source` holds one unit's vectors and everything needed to turn a
row into a hit: text, level, leaves, metadata for filters, citation. It is
built once per opened graph version, on the first call that needs that unit,
and shared by all calls. The chunk, entity and fact sources read nothing when
built: their vectors are the store's mapped matrix, their ids and items are
read by row when a call touches them (:class:`LazyItems`), and a row is found
by id through the store. Documents, communities and tree nodes are still read
whole when first used.
"""

from __future__ import annotations

import math
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from kgrag.rcp.fields import chunk_meta

from ..encoders import normalise
from ..store import GraphReader
from ..text.tokens import WORD as _WORD
from ..types import Chunk, Community, Document, Entity, Relation

#: units ranked from a source of their own; ``path`` and ``subgraph`` come from local search
SOURCE_UNITS = ("chunk", "document", "community", "tree-node", "node", "triplet")
UNITS = (*SOURCE_UNITS, "path", "subgraph")
#: an entity hit lists at most this many of the chunks that mention it (meta.mentions: all)
MAX_NODE_LEAVES = 50


@dataclass(frozen=True, slots=True)
class Item:
    """One retrievable thing, ready to become a hit."""

    id: str
    text: str
    level: int
    leaves: tuple[str, ...]
    meta: dict[str, Any]  # filterable fields
    citation: dict[str, Any] = field(default_factory=dict)
    chunk: dict[str, Any] | None = None


@dataclass(slots=True)
class Source:
    """One unit's rows: ids, unit vectors, levels and the items behind them;
    ``row_of`` finds the row of an id."""

    unit: str
    ids: Sequence[str]
    matrix: np.ndarray
    levels: np.ndarray
    items: Sequence[Item]
    sparse: Callable[[str, int], list[tuple[int, float]]]  # query, k -> (row, bm25)
    row_of: Mapping[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.row_of:
            self.row_of = {id_: i for i, id_ in enumerate(self.ids)}

    def rows(self, level: int | None) -> np.ndarray:
        """Row indexes eligible at ``level`` (all when None)."""
        if level is None:
            return np.arange(len(self.ids))
        return np.flatnonzero(self.levels == level)


_CACHE = 20_000  # items a lazy source keeps built (least recently used go first)


class LazyItems(Sequence[Item]):
    """Items built by row on first touch, in batches; iterating reads them all."""

    def __init__(self, n: int, build: Callable[[list[int]], list[Item]]) -> None:
        self._n, self._build = n, build
        self._cache: OrderedDict[int, Item] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return self._n

    def prefetch(self, rows: Sequence[int]) -> None:
        """Build the items of ``rows`` in one batch."""
        with self._lock:
            missing = sorted({int(r) for r in rows} - self._cache.keys())
        if not missing:
            return
        built = self._build(missing)
        with self._lock:
            for row, item in zip(missing, built, strict=True):
                self._cache[row] = item
            while len(self._cache) > _CACHE:
                self._cache.popitem(last=False)

    def __getitem__(self, row: int) -> Item:  # type: ignore[override]
        if not isinstance(row, (int, np.integer)) or not -self._n <= row < self._n:
            raise IndexError(row)
        row = int(row) % self._n
        with self._lock:
            item = self._cache.get(row)
            if item is not None:
                self._cache.move_to_end(row)
                return item
        self.prefetch([row])
        return self._cache[row] if row in self._cache else self._build([row])[0]

    def __iter__(self) -> Iterator[Item]:
        for start in range(0, self._n, 1000):
            yield from self._build(list(range(start, min(self._n, start + 1000))))


class StoreIds(Sequence[str]):
    """The ids of a vector kind by row, read from the store as asked."""

    def __init__(self, reader: GraphReader, kind: str) -> None:
        self.reader, self.kind, self._n = reader, kind, reader.size(kind)

    def __len__(self) -> int:
        return self._n

    def __getitem__(self, row: int) -> str:  # type: ignore[override]
        if not isinstance(row, (int, np.integer)) or not -self._n <= row < self._n:
            raise IndexError(row)
        return self.reader.ids(self.kind, [int(row) % self._n])[0]

    def __iter__(self) -> Iterator[str]:
        for start in range(0, self._n, 10_000):
            yield from self.reader.ids(self.kind, range(start, min(self._n, start + 10_000)))


class StoreRows(Mapping[str, int]):
    """The row of an id in a vector kind, looked up in the store."""

    def __init__(self, reader: GraphReader, kind: str) -> None:
        self.reader, self.kind = reader, kind

    def __getitem__(self, key: str) -> int:
        row = int(self.reader.rows(self.kind, [key])[0])
        if row < 0:
            raise KeyError(key)
        return row

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and int(self.reader.rows(self.kind, [key])[0]) >= 0

    def __len__(self) -> int:
        return self.reader.size(self.kind)

    def __iter__(self) -> Iterator[str]:
        return iter(StoreIds(self.reader, self.kind))


class Sources(Mapping[str, Source]):
    """Every unit's source of one graph version, each built on first use."""

    def __init__(self, reader: GraphReader) -> None:
        self.reader = reader
        self._built: dict[str, Source] = {}
        self._lock = threading.RLock()

    def __getitem__(self, unit: str) -> Source:
        with self._lock:
            if unit not in self._built:
                self._build(unit)
            return self._built[unit]

    def _build(self, unit: str) -> None:
        r = self.reader
        if unit == "chunk":
            self._built[unit] = _chunk_source(r)
        elif unit == "document":
            self._built[unit] = _document_source(r, self["chunk"])
        elif unit == "community":
            self._built[unit] = _community_source(r)
        elif unit == "tree-node":
            self._built[unit] = _tree_source(r)
        elif unit in ("node", "triplet"):
            self._built.update(_entity_sources(r))
        else:
            raise KeyError(unit)

    def __iter__(self) -> Iterator[str]:
        return iter(SOURCE_UNITS)

    def __len__(self) -> int:
        return len(SOURCE_UNITS)


def prefetch(source: Source, rows: Sequence[int]) -> None:
    """Build the items of ``rows`` in one batch where the source builds them lazily."""
    if isinstance(source.items, LazyItems):
        source.items.prefetch(rows)


def rows_of(source: Source, ids: Sequence[str]) -> dict[str, int]:
    """The row of each of ``ids`` that the source has, in one read of the store."""
    if isinstance(source.row_of, StoreRows):
        found = source.row_of.reader.rows(source.row_of.kind, list(ids)).tolist() if ids else []
        return {i: int(r) for i, r in zip(ids, found, strict=True) if r >= 0}
    return {i: source.row_of[i] for i in ids if i in source.row_of}


def load_sources(reader: GraphReader) -> Sources:
    """Every unit's source for one graph version (built as first used)."""
    return Sources(reader)


def _sparse_rows(reader: GraphReader, kind: str) -> Callable[..., Any]:
    def search(query: str, k: int) -> list[tuple[int, float]]:
        found = reader.search_sparse(query, k, kind)
        rows = reader.rows(kind, [i for i, _ in found]).tolist()
        return [(row, s) for row, (_, s) in zip(rows, found, strict=True) if row >= 0]

    return search


def _chunk_source(reader: GraphReader) -> Source:
    def build(rows: list[int]) -> list[Item]:
        ids = reader.ids("chunks", rows)
        chunks = {c.id: c for c in reader.chunks(ids)}
        docs = {d.id: d for d in reader.documents(sorted({c.doc_id for c in chunks.values()}))}
        return [_chunk_item(chunks[i], docs[chunks[i].doc_id]) for i in ids]

    n = reader.size("chunks")
    return Source(
        "chunk",
        StoreIds(reader, "chunks"),
        reader.matrix("chunks"),
        np.zeros(n, dtype=np.int64),
        LazyItems(n, build),
        _sparse_rows(reader, "chunks"),
        StoreRows(reader, "chunks"),
    )


def _chunk_item(c: Chunk, d: Document) -> Item:
    meta = chunk_meta(c, d)
    uri = f"{d.uri}#page={meta['page']}" if d.uri and "page" in meta else d.uri
    return Item(
        c.id,
        c.text,
        0,
        (c.id,),
        meta,
        {"source": meta["source"], "uri": uri, "title": d.title, "start": c.start, "end": c.end},
        {"docId": c.doc_id, "index": c.index, "context": c.context},
    )


def _document_source(reader: GraphReader, chunk: Source) -> Source:
    docs = {d.id: d for d in reader.documents()}
    by_doc: dict[str, list[int]] = {}
    for row, item in enumerate(chunk.items):
        by_doc.setdefault(item.meta["docId"], []).append(row)
    ids = sorted(by_doc)
    dim = chunk.matrix.shape[1] if chunk.matrix.ndim == 2 else 0
    matrix = (
        normalise(np.stack([chunk.matrix[by_doc[i]].mean(axis=0) for i in ids]))
        if ids
        else np.zeros((0, dim))
    )
    items = []
    for id_ in ids:
        d = docs[id_]
        first = chunk.items[by_doc[id_][0]]
        meta = {k: v for k, v in first.meta.items() if k != "section"}
        leaves = tuple(chunk.ids[r] for r in by_doc[id_])
        citation = {"source": meta["source"], "uri": d.uri, "title": d.title}
        items.append(Item(id_, d.text, 0, leaves, meta, citation))
    doc_row = {id_: i for i, id_ in enumerate(ids)}

    def sparse(query: str, k: int) -> list[tuple[int, float]]:
        best: dict[int, float] = {}
        for row, score in chunk.sparse(query, k * 4):
            r = doc_row[chunk.items[row].meta["docId"]]
            best[r] = max(best.get(r, 0.0), score)
        return sorted(best.items(), key=lambda rs: (-rs[1], rs[0]))[:k]

    return Source("document", ids, matrix, np.zeros(len(ids), dtype=np.int64), items, sparse)


def _community_source(reader: GraphReader) -> Source:
    def build(rows: list[int]) -> list[Item]:
        ids = reader.ids("communities", rows)
        found = {c.id: c for c in reader.communities(ids=ids)}
        return [_community_item(found[i]) for i in ids]

    n = reader.size("communities")
    return Source(
        "community",
        StoreIds(reader, "communities"),
        reader.matrix("communities"),
        reader.attribute("communities", "level"),
        LazyItems(n, build),
        _sparse_rows(reader, "communities"),
        StoreRows(reader, "communities"),
    )


def _community_item(c: Community) -> Item:
    meta = {"level": c.level, "rating": c.rating, "size": len(c.members)}
    citation = {"source": "community-report", "title": c.report.title}
    return Item(c.id, c.report.text(), c.level, c.leaves, meta, citation)


def _tree_source(reader: GraphReader) -> Source:
    ids, matrix = reader.vectors("tree_nodes")
    found = {t.id: t for t in reader.tree_nodes()}
    items = []
    for id_ in ids:
        t = found[id_]
        meta = {"level": t.level, "size": len(t.leaves)}
        items.append(Item(id_, t.summary, t.level, t.leaves, meta, {"source": "raptor-summary"}))
    return _leveled(reader, "tree-node", "tree_nodes", ids, matrix, items)


def _entity_sources(reader: GraphReader) -> dict[str, Source]:
    """Entities (unit ``node``, text = name) and SVO facts (unit ``triplet``)."""

    def nodes(rows: list[int]) -> list[Item]:
        found = {e.id: e for e in reader.entities(reader.ids("entities", rows))}
        return [_node_item(found[i]) for i in reader.ids("entities", rows)]

    def facts(rows: list[int]) -> list[Item]:
        ids = reader.ids("facts", rows)
        relations = {r.id: r for r in reader.relations(ids)}
        ends = sorted({e for r in relations.values() for e in (r.src, r.dst)})
        names = reader.entity_names(ends)
        return [_fact_item(relations[i], names) for i in ids]

    return {
        "node": _token_source(reader, "node", "entities", nodes),
        "triplet": _token_source(reader, "triplet", "facts", facts),
    }


def _node_item(e: Entity) -> Item:
    meta = {"type": e.type, "mentions": len(e.chunk_ids)}
    leaves = e.chunk_ids[:MAX_NODE_LEAVES]
    return Item(e.id, e.name, 0, leaves, meta, {"source": "entity", "title": e.name})


def _fact_item(r: Relation, names: Mapping[str, str]) -> Item:
    meta = {"predicate": r.predicate, "src": r.src, "dst": r.dst, "kind": r.kind}
    text = f"{names[r.src]} {r.predicate} {names[r.dst]}"
    return Item(r.id, text, 0, r.evidence, meta, {"source": "relation", "title": text})


def _token_source(
    reader: GraphReader, unit: str, kind: str, build: Callable[[list[int]], list[Item]]
) -> Source:
    """A source whose sparse side is an in-memory BM25 over the items' short texts
    (built on its first query: it reads every item)."""
    n = reader.size(kind)
    items = LazyItems(n, build)
    index: dict[str, Any] = {}
    lock = threading.Lock()

    def postings() -> dict[str, Any]:
        with lock:
            if not index:
                terms: dict[str, list[int]] = {}
                lengths = np.zeros(n, dtype=np.float64)
                for row, it in enumerate(items):
                    words = _terms(it.text)
                    lengths[row] = len(words)
                    for term in set(words):
                        terms.setdefault(term, []).append(row)
                index.update(terms=terms, lengths=lengths, avg=float(lengths.mean()) if n else 1.0)
        return index

    def sparse(query: str, k: int) -> list[tuple[int, float]]:
        built = postings()
        lengths, avg = built["lengths"], built["avg"]
        scores: dict[int, float] = {}
        for term in set(_terms(query)):
            rows = built["terms"].get(term, [])
            idf = math.log(1 + (n - len(rows) + 0.5) / (len(rows) + 0.5))
            for r in rows:  # BM25 with tf = 1 (names and facts rarely repeat a word)
                norm = 1.0 + 1.2 * (0.25 + 0.75 * lengths[r] / avg)
                scores[r] = scores.get(r, 0.0) + idf * 2.2 / norm
        return sorted(scores.items(), key=lambda rs: (-rs[1], rs[0]))[:k]

    levels = np.zeros(n, dtype=np.int64)
    return Source(
        unit,
        StoreIds(reader, kind),
        reader.matrix(kind),
        levels,
        items,
        sparse,
        StoreRows(reader, kind),
    )


def _terms(text: str) -> list[str]:
    return [t for t in _WORD.findall(text.casefold()) if t not in _STOP]


_STOP = frozenset(
    [
        "a",
        "an",
        "and",
        "at",
        "by",
        "for",
        "from",
        "in",
        "is",
        "of",
        "on",
        "or",
        "the",
        "to",
        "was",
        "were",
        "what",
        "which",
        "who",
    ]
)


def _leveled(
    reader: GraphReader, unit: str, kind: str, ids: list[str], matrix: np.ndarray, items: list[Item]
) -> Source:
    levels = np.array([it.level for it in items], dtype=np.int64)
    return Source(unit, list(ids), np.asarray(matrix), levels, items, _sparse_rows(reader, kind))


def canonical_rows(source: Source, reader: GraphReader | None = None) -> np.ndarray:
    """Rows without the copies a community hierarchy carries down a level unchanged:
    of several communities with the same leaves and text, the finest stays (for the
    communities, the store's ``canonical`` attribute when ``reader`` is given)."""
    if reader is not None and source.unit == "community":
        return np.flatnonzero(reader.attribute("communities", "canonical"))
    seen: dict[tuple[str, tuple[str, ...]], int] = {}
    for row in np.argsort(source.levels, kind="stable"):
        item = source.items[row]
        seen.setdefault((item.text, item.leaves), int(row))
    return np.array(sorted(seen.values()), dtype=np.int64)
