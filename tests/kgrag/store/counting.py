"""A store that counts what it is asked: every call of the read interface, how many
rows it named, and whether it read a whole table.

It wraps a real store (its answers are the inner store's), so the searches run
on it unchanged; tests and benchmarks use it to show what a query touches. A
call *reads a whole table* when it asks a record reader for every record (ids
None), for a whole vector matrix (``vectors``), or for every synonym; a call
*scans* when it reads one value per row of a kind (``similarity`` over every
row, or an ``attribute`` of every row such as the chunks' vertices), as bare dense
search does over the chunks.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from kgrag.store.base import Adjacency, GraphReader, GraphStore, GraphWriter

_SCANS = ("similarity", "attribute")


@dataclass(frozen=True, slots=True)
class Call:
    method: str
    kind: str  # the kind, graph or "" asked for
    rows: int  # ids, rows or keys named (-1: all)


class CountingReader(GraphReader):
    """A :class:`GraphReader` that answers through ``inner`` and logs every call."""

    def __init__(self, inner: GraphReader) -> None:
        self.inner = inner
        self.index_version = inner.index_version
        self.manifest = inner.manifest
        self.calls: list[Call] = []
        self._lock = threading.Lock()

    def _log(self, method: str, kind: str, rows: Sequence[Any] | np.ndarray | None) -> None:
        with self._lock:
            self.calls.append(Call(method, kind, -1 if rows is None else len(rows)))

    def whole_reads(self) -> list[Call]:
        """Calls that read every record of a kind."""
        return [c for c in self.calls if c.rows == -1 and c.method not in _SCANS]

    def scans(self) -> list[Call]:
        """Calls that read one value per row of a kind."""
        return [c for c in self.calls if c.rows == -1 and c.method in _SCANS]

    def counts(self) -> dict[str, int]:
        self._log("counts", "", ())
        return self.inner.counts()

    def per_method(self) -> Counter[str]:
        return Counter(c.method for c in self.calls)

    # -- records -------------------------------------------------------------------------

    def records(
        self,
        kind: str,
        keys: Sequence[str] | None = None,
        *,
        key: str = "id",
        level: int | None = None,
    ) -> list[Any]:
        self._log(kind, kind, keys)
        return self.inner.records(kind, keys, key=key, level=level)

    def entity_names(self, ids: Sequence[str]) -> dict[str, str]:
        self._log("entity_names", "entities", ids)
        return self.inner.entity_names(ids)

    def vectors(self, kind: str) -> tuple[list[str], np.ndarray]:
        self._log("vectors", kind, None)
        return self.inner.vectors(kind)

    def search_sparse(self, query: str, k: int, kind: str = "chunks") -> list[tuple[str, float]]:
        self._log("search_sparse", kind, [query])
        return self.inner.search_sparse(query, k, kind)

    # -- the query side ------------------------------------------------------------------

    def size(self, kind: str) -> int:
        self._log("size", kind, ())
        return self.inner.size(kind)

    def ids(self, kind: str, rows: Sequence[int] | np.ndarray) -> list[str]:
        rows = list(rows) if not isinstance(rows, np.ndarray) else rows
        self._log("ids", kind, rows)
        return self.inner.ids(kind, rows)

    def rows(self, kind: str, ids: Sequence[str]) -> np.ndarray:
        self._log("rows", kind, ids)
        return self.inner.rows(kind, ids)

    def matrix(self, kind: str) -> np.ndarray:
        self._log("matrix", kind, ())  # a map: nothing is read until rows are
        return self.inner.matrix(kind)

    def nearest(
        self, kind: str, queries: np.ndarray, k: int, among: np.ndarray | None = None
    ) -> list[list[tuple[int, float]]]:
        self._log("nearest", kind, np.atleast_2d(queries))
        return self.inner.nearest(kind, queries, k, among)

    def similarity(
        self, kind: str, query: np.ndarray, rows: np.ndarray | None = None
    ) -> np.ndarray:
        self._log("similarity", kind, rows)
        return self.inner.similarity(kind, query, rows)

    def adjacency(self, graph: str, rows: np.ndarray) -> Adjacency:
        self._log("adjacency", graph, rows)
        return self.inner.adjacency(graph, rows)

    def lookup(self, kind: str, keys: Sequence[str]) -> dict[str, int]:
        self._log("lookup", kind, keys)
        return self.inner.lookup(kind, keys)

    def attribute(self, kind: str, name: str, rows: np.ndarray | None = None) -> np.ndarray:
        self._log("attribute", f"{kind}.{name}", rows)
        return self.inner.attribute(kind, name, rows)

    def relation_ids(self, edges: np.ndarray) -> list[str]:
        self._log("relation_ids", "relations", edges)
        return self.inner.relation_ids(edges)

    def close(self) -> None:
        self.inner.close()


class CountingStore(GraphStore):
    """A :class:`GraphStore` whose readers are :class:`CountingReader` s."""

    def __init__(self, inner: GraphStore) -> None:
        self.inner = inner
        self.root: Path = inner.root
        self.readers: list[CountingReader] = []

    def versions(self) -> list[str]:
        return self.inner.versions()

    def current(self) -> str | None:
        return self.inner.current()

    def manifest(self) -> dict[str, Any]:
        return self.inner.manifest()

    def reader(self, version: str | None = None) -> CountingReader:
        reader = CountingReader(self.inner.reader(version))
        self.readers.append(reader)
        return reader

    def writer(self) -> GraphWriter:
        return self.inner.writer()
