"""A stored kind's vectors read as a float32 matrix without being made whole: rows
and slices are made as they are taken, products and whole reads a block of rows at a
time (:class:`~kgrag.store.vectors.CodedMatrix`,
:class:`~kgrag.store.composed.ComposedMatrix`)."""

from __future__ import annotations

from typing import Any

import numpy as np

BLOCK = 16_384  # rows made at a time for a product or a whole read


class RowMatrix:
    """What reads as an ``(n, dim)`` float32 matrix: a subclass sets ``shape`` and
    answers ``self[rows]`` (an int, a slice or row numbers)."""

    shape: tuple[int, ...]
    ndim = 2
    dtype = np.dtype(np.float32)

    @property
    def size(self) -> int:
        return int(self.shape[0] * self.shape[1])

    def __len__(self) -> int:
        return self.shape[0]

    def __getitem__(self, key: Any) -> np.ndarray:
        raise NotImplementedError

    def block_product(self, lo: int, hi: int, q: np.ndarray) -> np.ndarray:
        """Rows ``lo:hi`` times ``q``."""
        product: np.ndarray = self[lo:hi] @ q
        return product

    def __matmul__(self, other: np.ndarray) -> np.ndarray:
        q = np.asarray(other, dtype=np.float32)
        parts = [self.block_product(i, i + BLOCK, q) for i in range(0, len(self), BLOCK)]
        if parts:
            return np.concatenate(parts)
        return np.zeros((0, *q.shape[1:]), dtype=np.float32)

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        whole = self[:]
        return whole if dtype is None else whole.astype(dtype)

    def astype(self, dtype: Any) -> np.ndarray:
        return np.asarray(self, dtype=dtype)


class SharedRows(RowMatrix):
    """A matrix whose equal rows are stored once: row ``i`` is ``base[rows[i]]``. A
    product is made over the stored rows and spread to the others."""

    def __init__(self, base: Any, rows: np.ndarray) -> None:
        if len(rows) and (rows.min() < 0 or rows.max() >= len(base)):
            raise ValueError(f"shared rows point outside the {len(base)} stored")
        self.base, self.rows = base, rows
        self.shape = (len(rows), int(base.shape[1]))

    def __getitem__(self, key: Any) -> np.ndarray:
        if isinstance(key, tuple):
            return self[key[0]][(slice(None), *key[1:])]
        if isinstance(key, (int, np.integer)):
            return np.asarray(self.base[int(self.rows[key])])
        return np.asarray(self.base[np.asarray(self.rows[key], dtype=np.int64)])

    def __matmul__(self, other: np.ndarray) -> np.ndarray:
        product: np.ndarray = (self.base @ np.asarray(other, dtype=np.float32))[self.rows]
        return product
