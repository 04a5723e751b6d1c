"""The store interface: a read side and a write side, batch-first.

A graph lives in one folder. Each ingest writes a complete new *version*
through a :class:`GraphWriter` and publishes it with :meth:`GraphWriter.commit`,
one atomic step; a :class:`GraphReader` opens one published version and sees
exactly it, whatever writers do meanwhile. The embedded implementation is
:mod:`kgrag.store.folder.store`; a server-backed one (Neo4j) goes behind the same
two classes.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from kgrag.errors import InvalidParams
from kgrag.store.composed import FactParts
from kgrag.store.kernels import Adjacency, PathLimits, path_rounds, pushed_pagerank, tolls
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

#: record kinds a writer accepts, and the vector kinds it stores
RECORD_KINDS = (
    "documents",
    "chunks",
    "sentences",
    "entities",
    "mentions",
    "relations",
    "synonyms",
    "communities",
    "tree_nodes",
)
#: what :meth:`GraphReader.records` finds each record kind by
RECORD_KEYS = {
    "documents": ("id",),
    "chunks": ("id",),
    "sentences": ("chunk_id",),
    "entities": ("id",),
    "mentions": ("chunk_id",),
    "relations": ("id", "stated_end"),
    "synonyms": (),
    "communities": ("id",),
    "tree_nodes": ("id",),
}
VECTOR_KINDS = ("chunks", "sentences", "entities", "facts", "communities", "tree_nodes")
#: the graphs :meth:`GraphReader.adjacency` answers for, and what their rows are:
#: ``walk`` vertex -> vertex, the PageRank walk's column (weights M[i, j]); ``relations``
#: entity row -> entity rows, path lengths (1 stated, 1.5 co-occurrence), ``edge`` the
#: relation; ``mentions`` chunk row -> entity rows it mentions; ``links`` chunk row ->
#: chunk rows it names by title, ``data`` how many passages name the target
GRAPHS = ("walk", "relations", "mentions", "links")


@dataclass(frozen=True, slots=True)
class PassageText:
    """What one passage says, as the quoting of provenance paths reads it
    (:meth:`GraphReader.passage_texts`)."""

    text: str
    title_entity: str | None  # the entity the passage's title names
    sentences: tuple[Sentence, ...]  # in order
    similarity: dict[int, float]  # sentence index -> cosine to the query (with a vector)


def record_request(kind: str, keys: Sequence[str] | None, key: str) -> None:
    """Check a :meth:`GraphReader.records` request: a record kind, found by one of its
    keys (synonyms only all together)."""
    if kind not in RECORD_KEYS:
        raise InvalidParams(f"unknown record kind {kind!r}", field="kind")
    if keys is not None and key not in RECORD_KEYS[kind]:
        raise InvalidParams(f"{kind} are not found by {key!r}", field="key")


def nearest_request(
    size: int, queries: np.ndarray, k: int, among: np.ndarray | None
) -> tuple[np.ndarray, int, np.ndarray | None]:
    """What every store's :meth:`GraphReader.nearest` starts with: the queries as float32
    rows, ``k`` clamped to the rows there are (<= 0: answer empty lists), and the
    candidate rows sorted (None: the whole kind)."""
    q = np.atleast_2d(np.asarray(queries, dtype=np.float32))
    k = min(k, size if among is None else len(among))
    cand = None if among is None else np.sort(np.asarray(among, dtype=np.int64))
    return q, k, cand


def exact_scores(vectors: np.ndarray, vec: np.ndarray) -> np.ndarray:
    """Cosines of unit ``vectors`` with ``vec``, as float32: a float64 product rounded.
    A float32 product is not the same for equal rows at different positions (the BLAS
    kernel sums a block's rows in another order than its tail's), so equal vectors (a
    community carried down a level) could score a last bit apart and order by position;
    rounded from float64, they score alike and tie by row, as a database that scores in
    double precision orders them."""
    return (np.asarray(vectors, dtype=np.float64) @ np.asarray(vec, dtype=np.float64)).astype(
        np.float32
    )


def top_rows(rows: np.ndarray, scores: np.ndarray, k: int) -> list[tuple[int, float]]:
    """The ``k`` best (row, score) pairs, best first, ties by row."""
    order = np.lexsort((rows, -scores))[:k]
    return [(int(rows[i]), float(scores[i])) for i in order]


class GraphReader(ABC):
    """One published version of a graph, read-only.

    Two sides: records (documents, chunks, ... by id, :meth:`records` and the typed
    readers over it) and the query side, push-down operations a search is written
    against so that a query costs what it touches: nearest neighbours within a vector
    kind, BM25 over a text kind, adjacency of a set of graph rows, lookup by key,
    per-row attributes, ids by row, and the kernels a store may run in place (the
    PageRank push, the provenance path search, the passages a path quotes). Rows are
    positions within a vector kind; graph vertices are the entity rows followed by the
    passages (the chunks' ``vertex`` attribute). A server-backed store answers each of
    these with one query. What a search derives from them (an entity's specificity,
    name lookups, ...) is in :mod:`kgrag.search.stats`.
    """

    #: reads go to a server: a search overlaps the ones that do not depend on each
    #: other (threads), as their round trips would otherwise add up
    concurrent_reads: bool = False

    index_version: str
    manifest: dict[str, Any]

    @abstractmethod
    def counts(self) -> dict[str, int]:
        """Number of records of each kind."""

    @abstractmethod
    def records(
        self,
        kind: str,
        keys: Sequence[str] | None = None,
        *,
        key: str = "id",
        level: int | None = None,
    ) -> list[Any]:
        """Records of one of :data:`RECORD_KINDS` whose ``key`` is one of ``keys`` (all
        when None), ordered as the typed reader of the kind says. ``key`` is ``id``,
        ``chunk_id`` (sentences and mentions) or ``end`` (relations with an end among
        ``keys``); ``level`` keeps communities or tree nodes of that level."""

    # -- typed record readers (over :meth:`records`) ---------------------------------

    def documents(self, ids: Sequence[str] | None = None) -> list[Document]:
        """Documents by id (all when ``ids`` is None), in id order."""
        return self.records("documents", ids)

    def chunks(self, ids: Sequence[str] | None = None) -> list[Chunk]:
        """Chunks by id (all when None), ordered by document then index."""
        return self.records("chunks", ids)

    def sentences(self, chunk_ids: Sequence[str] | None = None) -> list[Sentence]:
        """Sentences of the given chunks (all when None)."""
        return self.records("sentences", chunk_ids, key="chunk_id")

    def entities(self, ids: Sequence[str] | None = None) -> list[Entity]:
        """Entities by id (all when None), with the chunks that mention them."""
        return self.records("entities", ids)

    def entity_names(self, ids: Sequence[str]) -> dict[str, str]:
        """The name of each of the entities ``ids`` that exists: what a quote or a path
        shows, without the mentions an :meth:`entities` record carries (a general term
        has thousands). A store overrides it with a read of the names alone."""
        return {e.id: e.name for e in self.entities(ids)}

    def mentions(self, chunk_ids: Sequence[str] | None = None) -> list[Mention]:
        """Entity mentions in the given chunks (all when None)."""
        return self.records("mentions", chunk_ids, key="chunk_id")

    def relations(
        self, ids: Sequence[str] | None = None, *, touching: Sequence[str] | None = None
    ) -> list[Relation]:
        """Relations by id; all when both are None. With ``touching``: the stated
        relations (kind ``svo``) with an end among those entities. Co-occurrences are not
        found by their ends (the stores index the ends of stated relations alone: on
        2Wiki 86% of the relations are co-occurrences); :meth:`adjacency` ``relations``
        holds every relation's ends."""
        if touching is None:
            return self.records("relations", ids)
        found = self.records("relations", touching, key="stated_end")
        if ids is None:
            return found
        wanted = set(ids)
        return [r for r in found if r.id in wanted]

    def synonyms(self) -> list[Synonym]:
        """All synonymy edges."""
        return self.records("synonyms")

    def communities(
        self, level: int | None = None, ids: Sequence[str] | None = None
    ) -> list[Community]:
        """Communities at ``level`` or by id (all when both are None)."""
        return self.records("communities", ids, level=level)

    def tree_nodes(
        self, level: int | None = None, ids: Sequence[str] | None = None
    ) -> list[TreeNode]:
        """RAPTOR nodes at ``level`` or by id (all when both are None)."""
        return self.records("tree_nodes", ids, level=level)

    @abstractmethod
    def vectors(self, kind: str) -> tuple[list[str], np.ndarray]:
        """Ids and the (n, dim) float32 matrix of one vector kind, row-aligned (a mapped
        array, or a :class:`~kgrag.store.vectors.CodedMatrix` that reads as one)."""

    def fact_parts(self) -> tuple[list[str], FactParts] | None:
        """The facts' ids and what their vectors are composed of, where the version
        keeps them so (:mod:`kgrag.store.composed`; the parts' entity rows are rows of
        :meth:`vectors` ``entities``); None where it keeps the rows."""
        return None

    @abstractmethod
    def search_sparse(self, query: str, k: int, kind: str = "chunks") -> list[tuple[str, float]]:
        """BM25 over chunks (text and context), community reports or tree summaries:
        (id, score), best first."""

    # -- the query side ------------------------------------------------------------------

    @abstractmethod
    def size(self, kind: str) -> int:
        """Rows of one vector kind."""

    @abstractmethod
    def ids(self, kind: str, rows: Sequence[int] | np.ndarray) -> list[str]:
        """The ids of ``rows`` of a vector kind."""

    @abstractmethod
    def rows(self, kind: str, ids: Sequence[str]) -> np.ndarray:
        """The rows of ``ids`` in a vector kind (-1 for an id without a row)."""

    @abstractmethod
    def matrix(self, kind: str) -> np.ndarray:
        """The (n, dim) float32 vectors of a kind, row-aligned, without reading them: the
        embedded store maps the file; reading a row pages it in."""

    @abstractmethod
    def nearest(
        self,
        kind: str,
        queries: np.ndarray,
        k: int,
        among: np.ndarray | None = None,
    ) -> list[list[tuple[int, float]]]:
        """For each query vector (rows of ``queries``, unit length) its ``k`` nearest
        rows of ``kind`` by cosine, with exact float32 scores, best first, ties by
        row; only rows in ``among`` when it is given."""

    @abstractmethod
    def similarity(
        self, kind: str, query: np.ndarray, rows: np.ndarray | None = None
    ) -> np.ndarray:
        """The exact cosine of ``query`` with ``rows`` of ``kind`` (every row when None:
        the one full scan a search may make, as bare dense search does)."""

    @abstractmethod
    def adjacency(self, graph: str, rows: np.ndarray) -> Adjacency:
        """The neighbours of ``rows`` in one of :data:`GRAPHS`."""

    def pushed_pagerank(
        self, reset: np.ndarray, damping: float, eps: float, rounds: int = 100
    ) -> np.ndarray:
        """Approximate personalized PageRank over the stored walk
        (:func:`kgrag.store.kernels.pushed_pagerank`; ``reset`` over every vertex). Each
        round reads the walk columns of its active vertices by :meth:`adjacency`; a
        server-backed store may run the whole push where the graph lives."""

        def columns(active: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
            adj = self.adjacency("walk", active)
            return adj.indptr, adj.indices, adj.data

        return pushed_pagerank(columns, reset, damping, eps, rounds)

    def shortest_paths(
        self, seeds: Sequence[int], groups: Sequence[set[int]] | None, limits: PathLimits
    ) -> tuple[dict[int, float], dict[int, int]]:
        """Multi-source shortest paths over the relations from the entity rows ``seeds``
        (best first) until an entity of every group is settled (every entity within
        the limits when None): each entity's length and predecessor row (-9999 at a
        seed). :func:`kgrag.store.kernels.path_rounds` over :meth:`adjacency` and the
        entities' ``chunks``; a server-backed store may run it where the graph lives."""
        return path_rounds(
            lambda rows: self.adjacency("relations", rows),
            lambda rows: tolls(self, rows, limits),
            seeds,
            groups,
            limits,
        )

    @abstractmethod
    def lookup(self, kind: str, keys: Sequence[str]) -> dict[str, int]:
        """The row of each key that names a row: ``entities`` by name key (as
        :func:`kgrag.text.keys.name_key` writes it; a shared name gives the lowest
        row), ``sentences`` by the stripped sentence text (the first such sentence)."""

    @abstractmethod
    def attribute(self, kind: str, name: str, rows: np.ndarray | None = None) -> np.ndarray:
        """A per-row attribute of a kind for ``rows`` (every row when None: a scan):
        chunks ``title`` (its document's title, UTF-8 bytes), ``vertex`` (its graph
        vertex) and ``title_entity`` (the entity row its document's title names, -1
        none); entities ``chunks`` (passages mentioning it), ``degree`` and
        ``component`` (its connected component over the relations: entities of
        different components have no path); communities ``level``, ``rating``,
        ``size`` (members), ``id_rank`` (rank of the id), ``canonical`` (not a copy
        carried down a level), ``hierarchy`` (row i: the i-th row in hierarchy order,
        coarsest level first, then id)."""

    @abstractmethod
    def relation_ids(self, edges: np.ndarray) -> list[str]:
        """The relation ids of ``edge`` values of :meth:`adjacency` ``relations``."""

    def passage_texts(
        self, chunk_ids: Sequence[str], query: np.ndarray | None = None
    ) -> dict[str, PassageText]:
        """Each known chunk's text, title entity, sentences and their cosine to
        ``query`` (none when None), read together: what quoting a path's edges needs. A
        server-backed store answers it with one query."""
        from ..ids import sentence_id

        ids = sorted(set(chunk_ids))
        text = {c.id: c.text for c in self.chunks(ids)}
        ids = [c for c in ids if c in text]
        by_chunk: dict[str, list[Sentence]] = {c: [] for c in ids}
        for s in self.sentences(ids):
            by_chunk[s.chunk_id].append(s)
        keys = []
        for found in by_chunk.values():
            found.sort(key=lambda s: s.index)
            keys += [(s.chunk_id, s.index) for s in found]
        similarity: dict[str, dict[int, float]] = {c: {} for c in ids}
        if query is not None and keys and self.size("sentences"):
            rows = self.rows("sentences", [sentence_id(c, i) for c, i in keys])
            known = rows >= 0
            if known.any():
                sims = self.similarity("sentences", query, rows[known]).tolist()
                kept = [key for key, ok in zip(keys, known.tolist(), strict=True) if ok]
                for (c, i), sim in zip(kept, sims, strict=True):
                    similarity[c][i] = sim
        titles: dict[str, str] = {}
        chunk_rows = self.rows("chunks", ids)
        with_row = [(c, int(r)) for c, r in zip(ids, chunk_rows.tolist(), strict=True) if r >= 0]
        if with_row:
            named = self.attribute(
                "chunks", "title_entity", np.array([r for _, r in with_row], dtype=np.int64)
            )
            known_t = [(c, int(e)) for (c, _), e in zip(with_row, named.tolist(), strict=True)]
            known_t = [(c, e) for c, e in known_t if e >= 0]
            eids = self.ids("entities", [e for _, e in known_t])
            titles = {c: eid for (c, _), eid in zip(known_t, eids, strict=True)}
        return {
            c: PassageText(text[c], titles.get(c), tuple(by_chunk[c]), similarity[c]) for c in ids
        }

    @abstractmethod
    def close(self) -> None:
        """Release open files."""

    def __enter__(self) -> GraphReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class RecordReader(GraphReader):
    """A reader that answers :meth:`records` with one private reader per record kind,
    the way both stores do: the request is checked once here and sent on."""

    def records(
        self,
        kind: str,
        keys: Sequence[str] | None = None,
        *,
        key: str = "id",
        level: int | None = None,
    ) -> list[Any]:
        record_request(kind, keys, key)
        if kind == "communities":
            return self._communities(level, keys)
        if kind == "tree_nodes":
            return self._tree_nodes(level, keys)
        if kind == "relations":
            return self._relations(keys, by_end=key == "stated_end")
        if kind == "synonyms":
            return self._synonyms()
        read: dict[str, Callable[[Sequence[str] | None], list[Any]]] = {
            "documents": self._documents,
            "chunks": self._chunks,
            "sentences": self._sentences,
            "entities": self._entities,
            "mentions": self._mentions,
        }
        return read[kind](keys)

    @abstractmethod
    def _documents(self, ids: Sequence[str] | None) -> list[Document]: ...

    @abstractmethod
    def _chunks(self, ids: Sequence[str] | None) -> list[Chunk]: ...

    @abstractmethod
    def _sentences(self, chunk_ids: Sequence[str] | None) -> list[Sentence]: ...

    @abstractmethod
    def _entities(self, ids: Sequence[str] | None) -> list[Entity]: ...

    @abstractmethod
    def _mentions(self, chunk_ids: Sequence[str] | None) -> list[Mention]: ...

    @abstractmethod
    def _relations(self, keys: Sequence[str] | None, by_end: bool) -> list[Relation]: ...

    @abstractmethod
    def _communities(self, level: int | None, ids: Sequence[str] | None) -> list[Community]: ...

    @abstractmethod
    def _tree_nodes(self, level: int | None, ids: Sequence[str] | None) -> list[TreeNode]: ...

    @abstractmethod
    def _synonyms(self) -> list[Synonym]: ...


class GraphWriter(ABC):
    """Writes one new version; nothing is visible to readers until :meth:`commit`."""

    @abstractmethod
    def add(self, kind: str, records: Iterable[Any]) -> None:
        """Store a batch of records of ``kind`` (one of RECORD_KINDS)."""

    @abstractmethod
    def add_vectors(self, kind: str, ids: Sequence[str], matrix: np.ndarray) -> None:
        """Store the vectors of one kind (one of VECTOR_KINDS), row i for ids[i]."""

    def add_vector_blocks(
        self, kind: str, ids: Sequence[str], dim: int, blocks: Iterable[np.ndarray]
    ) -> None:
        """Store the vectors of one kind given as consecutive blocks of rows (ids[i] for
        row i of them all), for a matrix too large to hold whole: a writer that can
        writes each block as it comes; this one joins them."""
        parts = [np.asarray(b, np.float32) for b in blocks]
        matrix = np.concatenate(parts) if parts else np.zeros((0, dim), np.float32)
        self.add_vectors(kind, ids, matrix)

    def add_fact_parts(self, ids: Sequence[str], parts: FactParts, entities: Any) -> None:
        """Store the fact vectors as what they are composed of
        (:mod:`kgrag.store.composed`), ``ids[i]`` for fact i; ``entities`` are the
        entity vectors the parts' rows index (an array, or anything whose ``[rows]``
        reads as one, such as a :class:`~kgrag.store.vectors.CodedMatrix`). A writer that
        can keeps the parts and composes from the entity vectors it stores; this one
        stores the rows composed."""
        n = len(parts.ends)
        blocks = (parts.compose(entities, slice(i, i + 16_384)) for i in range(0, n, 16_384))
        self.add_vector_blocks("facts", ids, parts.dim, blocks)

    @abstractmethod
    def commit(self, meta: dict[str, Any]) -> str:
        """Publish the version atomically, record ``meta`` in the manifest; return its id."""

    @abstractmethod
    def abort(self) -> None:
        """Drop everything written (no-op after commit); published versions are untouched."""

    def __enter__(self) -> GraphWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.abort()  # a no-op after commit; otherwise nothing half-written survives


class GraphStore(ABC):
    """A graph folder: its published versions, readers and writers."""

    #: the folder the graph lives in (sidecars such as feedback.sqlite sit beside it)
    root: Path

    @abstractmethod
    def versions(self) -> list[str]:
        """Published versions still stored, oldest first."""

    @abstractmethod
    def current(self) -> str | None:
        """The latest published version, or None for an empty graph."""

    @abstractmethod
    def manifest(self) -> dict[str, Any]:
        """The manifest of the latest version ({} for an empty graph)."""

    @abstractmethod
    def reader(self, version: str | None = None) -> GraphReader:
        """Open ``version`` (the latest when None) for reading."""

    @abstractmethod
    def writer(self) -> GraphWriter:
        """Begin writing a new version."""

    def lease(self, version: str) -> bool:
        """Keep ``version`` stored for the store's lease time from now (a call pinned to
        it renews the lease); False when it is no longer stored."""
        return version in self.versions()

    def close(self) -> None:  # noqa: B027 - optional: a folder holds no connection
        """Release the store's connections (a folder holds none)."""
