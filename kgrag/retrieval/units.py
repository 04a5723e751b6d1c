"""What ``retrieve`` ranks, per unit: chunks, documents, pages, communities, tree nodes,
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
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import numpy as np

from kgrag.rcp.fields import chunk_meta

from ..store import GraphReader
from ..text.tokens import WORD as _WORD
from ..types import Chunk, Community, Document, Entity, Relation
from .grouped import document_source, page_source
from .items import Item, LazyItems, Source, StoreIds, StoreRows

#: units ranked from a source of their own; ``path`` and ``subgraph`` come from local search
SOURCE_UNITS = ("chunk", "document", "page", "community", "tree-node", "node", "triplet")
UNITS = (*SOURCE_UNITS, "path", "subgraph")
#: an entity hit lists at most this many of the chunks that mention it (meta.mentions: all)
MAX_NODE_LEAVES = 50


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
            self._built[unit] = document_source(r, self["chunk"])
        elif unit == "page":
            self._built[unit] = page_source(r, self["chunk"])
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
