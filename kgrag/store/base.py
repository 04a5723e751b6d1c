"""The store interface: a read side and a write side, batch-first.

A graph lives in one folder. Each ingest writes a complete new *version*
through a :class:`GraphWriter` and publishes it with :meth:`GraphWriter.commit`,
one atomic step; a :class:`GraphReader` opens one published version and sees
exactly it, whatever writers do meanwhile. The embedded implementation is
:mod:`kgrag.store.sqlite`; a server-backed one (Neo4j) goes behind the same
two classes.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..types import (
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
VECTOR_KINDS = ("chunks", "sentences", "entities", "facts", "communities", "tree_nodes")


class GraphReader(ABC):
    """One published version of a graph, read-only."""

    index_version: str
    manifest: dict[str, Any]

    @abstractmethod
    def counts(self) -> dict[str, int]:
        """Number of records of each kind."""

    @abstractmethod
    def documents(self, ids: Sequence[str] | None = None) -> list[Document]:
        """Documents by id (all when ``ids`` is None), in id order."""

    @abstractmethod
    def chunks(self, ids: Sequence[str] | None = None) -> list[Chunk]:
        """Chunks by id (all when None), ordered by document then index."""

    @abstractmethod
    def sentences(self, chunk_ids: Sequence[str] | None = None) -> list[Sentence]:
        """Sentences of the given chunks (all when None)."""

    @abstractmethod
    def entities(self, ids: Sequence[str] | None = None) -> list[Entity]:
        """Entities by id (all when None), with the chunks that mention them."""

    @abstractmethod
    def mentions(self, chunk_ids: Sequence[str] | None = None) -> list[Mention]:
        """Entity mentions in the given chunks (all when None)."""

    @abstractmethod
    def relations(
        self, ids: Sequence[str] | None = None, *, touching: Sequence[str] | None = None
    ) -> list[Relation]:
        """Relations by id, or those with an end in ``touching``; all when both are None."""

    @abstractmethod
    def synonyms(self) -> list[Synonym]:
        """All synonymy edges."""

    @abstractmethod
    def communities(
        self, level: int | None = None, ids: Sequence[str] | None = None
    ) -> list[Community]:
        """Communities at ``level`` or by id (all when both are None)."""

    @abstractmethod
    def tree_nodes(
        self, level: int | None = None, ids: Sequence[str] | None = None
    ) -> list[TreeNode]:
        """RAPTOR nodes at ``level`` or by id (all when both are None)."""

    @abstractmethod
    def vectors(self, kind: str) -> tuple[list[str], np.ndarray]:
        """Ids and the (n, dim) float32 matrix of one vector kind, row-aligned."""

    @abstractmethod
    def search_sparse(self, query: str, k: int, kind: str = "chunks") -> list[tuple[str, float]]:
        """BM25 over chunks (text and context), community reports or tree summaries:
        (id, score), best first."""

    @abstractmethod
    def close(self) -> None:
        """Release open files."""

    def __enter__(self) -> GraphReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class GraphWriter(ABC):
    """Writes one new version; nothing is visible to readers until :meth:`commit`."""

    @abstractmethod
    def add(self, kind: str, records: Iterable[Any]) -> None:
        """Store a batch of records of ``kind`` (one of RECORD_KINDS)."""

    @abstractmethod
    def add_vectors(self, kind: str, ids: Sequence[str], matrix: np.ndarray) -> None:
        """Store the vectors of one kind (one of VECTOR_KINDS), row i for ids[i]."""

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
