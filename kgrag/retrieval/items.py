"""The rows ``retrieve`` ranks: an :class:`Item` (what becomes a hit) and a
:class:`Source` (one unit's ids, vectors, levels and items), with the lazy readers a
source keeps its ids, rows and items in."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..store import GraphReader


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
