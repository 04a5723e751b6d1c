"""What ``retrieve`` ranks, per unit: chunks, documents, communities, tree nodes,
entities (unit ``node``) and facts (unit ``triplet``).

A :class:`Source` holds one unit's vectors and everything needed to turn a
row into a hit: text, level, leaves, metadata for filters, citation. It is
built once per opened graph version and shared by all calls.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..encoders import normalise
from ..store import GraphReader
from ..types import Document

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
    """One unit's rows: ids, unit vectors, levels and the items behind them."""

    unit: str
    ids: list[str]
    matrix: np.ndarray
    levels: np.ndarray
    items: list[Item]
    sparse: Callable[[str, int], list[tuple[int, float]]]  # query, k -> (row, bm25)

    def rows(self, level: int | None) -> np.ndarray:
        """Row indexes eligible at ``level`` (all when None)."""
        if level is None:
            return np.arange(len(self.ids))
        return np.flatnonzero(self.levels == level)


def load_sources(reader: GraphReader) -> dict[str, Source]:
    """Every unit's source for one graph version."""
    docs = {d.id: d for d in reader.documents()}  # read once: both sources cite them
    chunk = _chunk_source(reader, docs)
    return {
        "chunk": chunk,
        "document": _document_source(docs, chunk),
        "community": _community_source(reader),
        "tree-node": _tree_source(reader),
        **_entity_sources(reader),
    }


def _sparse_rows(reader: GraphReader, kind: str, ids: list[str]) -> Callable[..., Any]:
    row_of = {id_: i for i, id_ in enumerate(ids)}

    def search(query: str, k: int) -> list[tuple[int, float]]:
        return [(row_of[i], s) for i, s in reader.search_sparse(query, k, kind) if i in row_of]

    return search


def _chunk_source(reader: GraphReader, docs: dict[str, Document]) -> Source:
    ids, matrix = reader.vectors("chunks")
    chunks = {c.id: c for c in reader.chunks()}
    items = []
    for id_ in ids:
        c = chunks[id_]
        d = docs[c.doc_id]
        source = str(d.meta.get("source", ""))
        meta = dict(c.meta) | {
            "docId": c.doc_id,
            "title": d.title,
            "source": source,
            "section": c.context,
        }
        items.append(
            Item(
                id_,
                c.text,
                0,
                (id_,),
                meta,
                {"source": source, "uri": d.uri, "title": d.title, "start": c.start, "end": c.end},
                {"docId": c.doc_id, "index": c.index, "context": c.context},
            )
        )
    levels = np.zeros(len(ids), dtype=np.int64)
    return Source(
        "chunk", list(ids), np.asarray(matrix), levels, items, _sparse_rows(reader, "chunks", ids)
    )


def _document_source(docs: dict[str, Document], chunk: Source) -> Source:
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
    ids, matrix = reader.vectors("communities")
    found = {c.id: c for c in reader.communities()}
    items = []
    for id_ in ids:
        c = found[id_]
        meta = {"level": c.level, "rating": c.rating, "size": len(c.members)}
        citation = {"source": "community-report", "title": c.report.title}
        items.append(Item(id_, c.report.text(), c.level, c.leaves, meta, citation))
    return _leveled(reader, "community", "communities", ids, matrix, items)


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
    entities = {e.id: e for e in reader.entities()}
    ids, matrix = reader.vectors("entities")
    nodes = []
    for id_ in ids:
        e = entities[id_]
        meta = {"type": e.type, "mentions": len(e.chunk_ids)}
        leaves = e.chunk_ids[:MAX_NODE_LEAVES]
        nodes.append(Item(id_, e.name, 0, leaves, meta, {"source": "entity", "title": e.name}))
    fact_ids, fact_matrix = reader.vectors("facts")
    relations = {r.id: r for r in reader.relations(fact_ids)}
    facts = []
    for id_ in fact_ids:
        r = relations[id_]
        src, dst = entities[r.src].name, entities[r.dst].name
        meta = {"predicate": r.predicate, "src": r.src, "dst": r.dst, "kind": r.kind}
        text = f"{src} {r.predicate} {dst}"
        facts.append(Item(id_, text, 0, r.evidence, meta, {"source": "relation", "title": text}))
    return {
        "node": _token_source("node", list(ids), matrix, nodes),
        "triplet": _token_source("triplet", list(fact_ids), fact_matrix, facts),
    }


def _token_source(unit: str, ids: list[str], matrix: np.ndarray, items: list[Item]) -> Source:
    """A source whose sparse side is an in-memory BM25 over the items' short texts."""
    postings: dict[str, list[int]] = {}
    lengths = np.array([len(_terms(it.text)) for it in items], dtype=np.float64)
    for row, it in enumerate(items):
        for term in set(_terms(it.text)):
            postings.setdefault(term, []).append(row)
    n, avg = len(items), float(lengths.mean()) if len(items) else 1.0

    def sparse(query: str, k: int) -> list[tuple[int, float]]:
        scores: dict[int, float] = {}
        for term in set(_terms(query)):
            rows = postings.get(term, [])
            idf = math.log(1 + (n - len(rows) + 0.5) / (len(rows) + 0.5))
            for r in rows:  # BM25 with tf = 1 (names and facts rarely repeat a word)
                norm = 1.0 + 1.2 * (0.25 + 0.75 * lengths[r] / avg)
                scores[r] = scores.get(r, 0.0) + idf * 2.2 / norm
        return sorted(scores.items(), key=lambda rs: (-rs[1], rs[0]))[:k]

    levels = np.zeros(len(ids), dtype=np.int64)
    return Source(unit, ids, np.asarray(matrix), levels, items, sparse)


def _terms(text: str) -> list[str]:
    return [t for t in _WORD.findall(text.casefold()) if t not in _STOP]


_WORD = re.compile(r"\w+")
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
    return Source(
        unit, list(ids), np.asarray(matrix), levels, items, _sparse_rows(reader, kind, ids)
    )


def canonical_rows(source: Source) -> np.ndarray:
    """Rows without the copies a community hierarchy carries down a level unchanged:
    of several communities with the same leaves and text, the finest stays."""
    seen: dict[tuple[str, tuple[str, ...]], int] = {}
    for row in np.argsort(source.levels, kind="stable"):
        item = source.items[row]
        seen.setdefault((item.text, item.leaves), int(row))
    return np.array(sorted(seen.values()), dtype=np.int64)
