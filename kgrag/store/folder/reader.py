"""The read side of the embedded store: one version opened read-only, records from
its SQLite file and the query side from its serving files
(:class:`~kgrag.store.folder.files.ServingFiles`)."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from kgrag.errors import InvalidParams, StoreError
from kgrag.store import schema
from kgrag.store.base import RECORD_KINDS, VECTOR_KINDS, RecordReader
from kgrag.store.bm25 import Postings, QueryTokenizer, best, query_words, stop_words
from kgrag.store.composed import COMPOSED_KIND, FactParts
from kgrag.store.cooc import CoocColumns
from kgrag.store.folder.files import ServingFiles
from kgrag.store.kernels import Adjacency
from kgrag.store.packed import filled_copies, pack_id, unpack_id
from kgrag.store.serving import SERVING
from kgrag.store.vectors import is_composed, load_fact_parts, open_matrix
from kgrag.types import (
    Chunk,
    Community,
    Document,
    Entity,
    Mention,
    Relation,
    Sentence,
    Synonym,
    TreeNode,
)

_BATCH = 900  # stays under SQLite's bound-parameter limit


def _batches(ids: Sequence[Any]) -> Iterator[Sequence[Any]]:
    for i in range(0, len(ids), _BATCH):
        yield ids[i : i + _BATCH]


def _vector_kind(kind: str) -> str:
    if kind not in VECTOR_KINDS:
        raise InvalidParams(f"unknown vector kind {kind!r}", field="kind")
    return kind


class SQLiteGraphReader(RecordReader):
    """One version, opened read-only; safe to share between threads."""

    def __init__(self, folder: Path, meta: dict[str, Any]) -> None:
        self.folder = folder
        self.manifest = meta
        self.index_version = meta["indexVersion"]
        uri = f"file:{folder / 'graph.sqlite'}?mode=ro"
        try:
            self.db = sqlite3.connect(uri, uri=True, check_same_thread=False)
            self.db.execute("SELECT 1 FROM chunks LIMIT 1")
        except sqlite3.Error as exc:
            raise StoreError(f"{folder}: cannot open graph.sqlite: {exc}") from exc
        self._lock = threading.Lock()
        self._vectors: dict[str, tuple[list[str], Any]] = {}
        self._postings: dict[str, tuple[Postings, QueryTokenizer]] = {}
        self._stop = stop_words()
        self._packed: dict[str, bool] = {}  # table -> whether its ids are packed
        try:
            self.serving = ServingFiles(
                folder / SERVING, folder / "vectors", int(meta.get("dim", 0))
            )
        except (OSError, ValueError) as exc:
            raise StoreError(f"{folder}: unreadable serving files: {exc}") from exc
        try:
            self._cooc = CoocColumns.of(folder)
        except (OSError, ValueError) as exc:
            raise StoreError(f"{folder}: unreadable co-occurrence files: {exc}") from exc

    def _rows(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        with self._lock:
            return self.db.execute(sql, params).fetchall()

    def _by_ids(self, select: str, column: str, ids: Sequence[Any] | None) -> list[Any]:
        """Rows of ``select`` (a SELECT ... FROM) whose ``column`` is in ``ids``; all if None."""
        if ids is None:
            return self._rows(select)
        rows: list[Any] = []
        for batch in _batches(list(dict.fromkeys(ids))):
            marks = ",".join("?" * len(batch))
            rows += self._rows(f"{select} WHERE {column} IN ({marks})", batch)
        return rows

    def counts(self) -> dict[str, int]:
        out = {t: self._rows(f"SELECT count(*) FROM {t}")[0][0] for t in RECORD_KINDS}
        out["relations"] += len(self._cooc) if self._cooc is not None else 0
        return out

    def _documents(self, ids: Sequence[str] | None) -> list[Document]:
        sql = "SELECT id, title, uri, meta, text, sections FROM documents"
        rows = self._by_ids(sql, "id", ids)
        return sorted((schema.document(r) for r in rows), key=lambda d: d.id)

    def _chunks(self, ids: Sequence[str] | None) -> list[Chunk]:
        sql = f"SELECT {schema.CHUNK_COLUMNS} FROM chunks"
        rows = self._by_ids(sql, "id", ids)
        return sorted((schema.chunk(r) for r in rows), key=lambda c: (c.doc_id, c.index))

    def _sentences(self, chunk_ids: Sequence[str] | None) -> list[Sentence]:
        sql = 'SELECT chunk_id, idx, start, "end", entity_ids FROM sentences'
        rows = self._by_ids(sql, "chunk_id", chunk_ids)
        return sorted((schema.sentence(r) for r in rows), key=lambda s: (s.chunk_id, s.index))

    def _entities(self, ids: Sequence[str] | None) -> list[Entity]:
        sql = "SELECT id, name, type, aliases FROM entities"
        rows = self._by_ids(sql, "id", ids)
        chunks: dict[str, list[str]] = {}
        for m in self.mentions_of([r[0] for r in rows] if ids is not None else None):
            chunks.setdefault(m.entity_id, []).append(m.chunk_id)
        out = [schema.entity(r, tuple(sorted(chunks.get(r[0], ())))) for r in rows]
        return sorted(out, key=lambda e: e.id)

    def entity_names(self, ids: Sequence[str]) -> dict[str, str]:
        return dict(self._by_ids("SELECT id, name FROM entities", "id", ids))

    def mentions_of(self, entity_ids: Sequence[str] | None) -> list[Mention]:
        """Mentions of the given entities (all when None)."""
        sql = "SELECT entity_id, chunk_id, count FROM mentions"
        keys = self._keys("mentions", entity_ids)
        return [schema.mention(r) for r in self._by_ids(sql, "entity_id", keys)]

    def _mentions(self, chunk_ids: Sequence[str] | None) -> list[Mention]:
        sql = "SELECT entity_id, chunk_id, count FROM mentions"
        rows = self._by_ids(sql, "chunk_id", self._keys("mentions", chunk_ids))
        return sorted((schema.mention(r) for r in rows), key=lambda m: (m.chunk_id, m.entity_id))

    def _relations(self, keys: Sequence[str] | None, by_end: bool) -> list[Relation]:
        base = "SELECT id, src, predicate, dst, weight, kind, evidence FROM relations"
        wanted = self._keys("relations", keys)
        if by_end and wanted is not None:  # stated relations: the end indexes' rows
            rows = self._by_ids(base, "kind = 'svo' AND src", wanted)
            rows += self._by_ids(base, "kind = 'svo' AND dst", wanted)
        else:
            rows = self._by_ids(base, "id", wanted)
            if self._cooc is not None:  # co-occurrences: columns (kgrag.store.cooc)
                if wanted is None:
                    rows += [r for batch in self._cooc.batches() for r in batch]
                else:
                    rows += self._cooc.find(wanted)
        unique = {unpack_id(r[0]): r for r in rows}
        return [schema.relation(unique[k]) for k in sorted(unique)]

    def _keys(self, table: str, ids: Sequence[str] | None) -> Sequence[Any] | None:
        """``ids`` as ``table`` stores them: packed (:mod:`kgrag.store.packed`) where its
        first column is a BLOB, as text in a version written before packed ids."""
        if ids is None:
            return None
        if table not in self._packed:
            columns = self._rows(f"PRAGMA table_info({table})")
            self._packed[table] = bool(columns) and columns[0][2].upper() == "BLOB"
        return [pack_id(i) for i in ids] if self._packed[table] else ids

    def _synonyms(self) -> list[Synonym]:
        rows = self._rows("SELECT src, dst, score FROM synonyms ORDER BY src, dst")
        return [schema.synonym(r) for r in rows]

    def _communities(self, level: int | None, ids: Sequence[str] | None) -> list[Community]:
        sql = "SELECT * FROM communities"
        rows = self._by_ids(sql, "id", ids)
        rows = filled_copies(rows, lambda wanted: self._by_ids(sql, "id", wanted))
        out = [schema.community(r) for r in rows if level is None or r[1] == level]
        return sorted(out, key=lambda c: (c.level, c.id))

    def _tree_nodes(self, level: int | None, ids: Sequence[str] | None) -> list[TreeNode]:
        sql = "SELECT * FROM tree_nodes"
        rows = self._by_ids(sql, "id", ids)
        out = [schema.tree_node(r) for r in rows if level is None or r[1] == level]
        return sorted(out, key=lambda t: (t.level, t.id))

    def vectors(self, kind: str) -> tuple[list[str], Any]:
        if kind not in VECTOR_KINDS:
            raise InvalidParams(f"unknown vector kind {kind!r}", field="kind")
        if kind not in self._vectors:
            ids = [b.decode() for b in np.asarray(self.serving.array(f"ids.{kind}")).tolist()]
            folder = self.folder / "vectors"
            matrix = open_matrix(folder, kind, int(self.manifest.get("dim", 0)), random=False)
            if matrix.shape[0] != len(ids):
                raise StoreError(f"{folder}: {matrix.shape[0]} {kind} vectors for {len(ids)} ids")
            self._vectors[kind] = (ids, matrix)
        return self._vectors[kind]

    def fact_parts(self) -> tuple[list[str], FactParts] | None:
        folder = self.folder / "vectors"
        if not is_composed(folder, COMPOSED_KIND):
            return None
        return self.vectors(COMPOSED_KIND)[0], load_fact_parts(folder)

    def search_sparse(self, query: str, k: int, kind: str = "chunks") -> list[tuple[str, float]]:
        if kind not in schema.FTS:
            raise InvalidParams(f"no sparse index for {kind!r}", field="kind")
        words = query_words(query, self._stop)
        if not words or k <= 0:
            return []
        with self._lock:  # the query's words are tokenized through this connection
            if kind not in self._postings:
                fts = schema.FTS[kind][0]
                postings = Postings.open(self.serving.folder, kind)
                self._postings[kind] = (postings, QueryTokenizer(self.db, fts))
            postings, tokenizer = self._postings[kind]
            tokens = tokenizer.tokens(words)
        if any(len(t) != 1 for t in tokens):  # a word that is a phrase: SQLite matches it
            return self._fts_search(words, k, kind)
        docs, scores = postings.scores([t[0] for t in tokens])
        ids = self.serving.array(f"bm25.{kind}.ids")
        return best(docs, scores, k, lambda d: [i.decode() for i in ids[d].tolist()])

    def _fts_search(self, words: list[str], k: int, kind: str) -> list[tuple[str, float]]:
        """The same search run by SQLite's FTS5 ``bm25()``."""
        match = " OR ".join(f'"{t}"' for t in words)
        fts = schema.FTS[kind][0]
        # best k by score from the index alone, ids looked up after (joining every
        # matching row to its record first cost more). Rows tied with the
        # k-th are all read, so ids break ties.
        sql = (
            f"SELECT rowid, -bm25({fts}) AS s FROM {fts} WHERE {fts} MATCH ? "
            "ORDER BY s DESC LIMIT ?"
        )
        limit = k + 1
        found = self._rows(sql, (match, limit))
        while len(found) == limit and found[-1][1] == found[k - 1][1]:
            limit *= 2
            found = self._rows(sql, (match, limit))
        _, table, key = schema.FTS[kind]
        ids = dict(self._by_ids(f"SELECT {key}, id FROM {table}", key, [r for r, _ in found]))
        hits = sorted(
            ((ids[r], float(s)) for r, s in found if r in ids), key=lambda x: (-x[1], x[0])
        )
        return hits[:k]

    # -- the query side (the serving files) ------------------------------------------------

    def size(self, kind: str) -> int:
        return self.serving.size(_vector_kind(kind))

    def ids(self, kind: str, rows: Sequence[int] | np.ndarray) -> list[str]:
        return self.serving.ids(_vector_kind(kind), rows)

    def rows(self, kind: str, ids: Sequence[str]) -> np.ndarray:
        return self.serving.rows(_vector_kind(kind), ids)

    def matrix(self, kind: str) -> np.ndarray:
        return self.serving.matrix(_vector_kind(kind))

    def nearest(
        self, kind: str, queries: np.ndarray, k: int, among: np.ndarray | None = None
    ) -> list[list[tuple[int, float]]]:
        return self.serving.nearest(_vector_kind(kind), queries, k, among)

    def similarity(
        self, kind: str, query: np.ndarray, rows: np.ndarray | None = None
    ) -> np.ndarray:
        return self.serving.similarity(_vector_kind(kind), query, rows)

    def adjacency(self, graph: str, rows: np.ndarray) -> Adjacency:
        return self.serving.adjacency(graph, rows)

    def lookup(self, kind: str, keys: Sequence[str]) -> dict[str, int]:
        return self.serving.lookup(kind, keys)

    def attribute(self, kind: str, name: str, rows: np.ndarray | None = None) -> np.ndarray:
        return self.serving.attribute(kind, name, rows)

    def relation_ids(self, edges: np.ndarray) -> list[str]:
        return self.serving.relation_ids(edges)

    def close(self) -> None:
        self.serving.close()
        with self._lock:
            for postings, _ in self._postings.values():
                postings.close()
            self._postings.clear()
            self.db.close()
