"""A read-only sequence of records held as columns: a record is made when it is read."""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Iterator, Sequence
from typing import Any, TypeVar, overload

T = TypeVar("T")

_BLOCK = 8192  # rows turned into Python values at a time


class ColumnTable(Sequence[T]):
    """Subclasses hold the columns and make records of rows (:meth:`_rows`)."""

    what = "row"  # what a row is, for the index error

    @abstractmethod
    def __len__(self) -> int: ...

    @abstractmethod
    def _rows(self, rows: Sequence[int] | range) -> Iterator[T]:
        """The records of ``rows``, in that order."""

    @overload
    def __getitem__(self, i: int) -> T: ...
    @overload
    def __getitem__(self, i: slice) -> list[T]: ...
    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            return list(self._rows(range(len(self))[i]))
        n = len(self)
        if not -n <= i < n:
            raise IndexError(f"{self.what} index out of range")
        return next(self._rows([i % n]))

    def __iter__(self) -> Iterator[T]:
        for lo in range(0, len(self), _BLOCK):
            yield from self._rows(range(lo, min(lo + _BLOCK, len(self))))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence):
            return NotImplemented
        return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))

    __hash__ = None  # type: ignore[assignment]
