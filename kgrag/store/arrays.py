"""The serving files' arrays: opened by memory map, or read by ``pread``."""

from __future__ import annotations

import mmap
import os
from pathlib import Path
from typing import Literal

import numpy as np


def map_array(path: Path, mode: Literal["r", "c"] = "r", *, random: bool = True) -> np.ndarray:
    """``path`` (.npy) mapped, as a plain array over the map (np.memmap's indexing costs
    more a call). ``random``: the kernel reads ahead nothing (a read of one row would
    otherwise page in the pages around it)."""
    mapped = np.load(path, mmap_mode=mode)
    handle = getattr(mapped, "_mmap", None)
    if random and handle is not None and hasattr(mmap, "MADV_RANDOM"):
        handle.madvise(mmap.MADV_RANDOM)
    return mapped.view(np.ndarray)


class FileRows:
    """The rows of a C-ordered ``.npy`` file read with ``pread``: a slice costs one read
    and the process keeps no page of the file. A map keeps every page a read touched
    resident in the process, with the pages the kernel maps around each one when the
    file is cached: a long-running server would come to hold most of the postings and
    vectors it ever read."""

    def __init__(self, path: Path) -> None:
        with open(path, "rb") as f:
            version = np.lib.format.read_magic(f)
            read = (
                np.lib.format.read_array_header_1_0
                if version == (1, 0)
                else np.lib.format.read_array_header_2_0
            )
            shape, fortran, dtype = read(f)
            if fortran or not len(shape):
                raise ValueError(f"{path}: not a C-ordered array")
            self.offset = f.tell()
        self.path, self.shape, self.dtype = path, tuple(shape), np.dtype(dtype)
        self.row_shape = self.shape[1:]
        self.row_bytes = self.dtype.itemsize * int(np.prod(self.row_shape, dtype=np.int64))
        self.fd: int | None = os.open(path, os.O_RDONLY)

    def __len__(self) -> int:
        return self.shape[0]

    def slice(self, start: int, stop: int) -> np.ndarray:
        """Rows ``start:stop``, one read."""
        count = max(0, min(stop, len(self)) - start)
        if not count:
            return np.zeros((0, *self.row_shape), dtype=self.dtype)
        if self.fd is None:
            raise ValueError(f"{self.path}: closed")
        data = os.pread(self.fd, self.row_bytes * count, self.offset + start * self.row_bytes)
        if len(data) != self.row_bytes * count:
            raise ValueError(f"{self.path}: truncated (rows {start}:{stop})")
        return np.frombuffer(data, dtype=self.dtype).reshape(count, *self.row_shape)

    def take(self, rows: np.ndarray) -> np.ndarray:
        """The rows ``rows`` (any order), one read per run of consecutive rows."""
        r = np.asarray(rows, dtype=np.int64)
        out = np.empty((len(r), *self.row_shape), dtype=self.dtype)
        if not len(r) or not self.row_bytes:
            return out
        if self.fd is None:
            raise ValueError(f"{self.path}: closed")
        if r.min() < 0 or r.max() >= len(self):
            raise IndexError(f"{self.path}: rows out of range")
        size, buffer = self.row_bytes, out.data.cast("B")
        breaks = np.flatnonzero(np.diff(r) != 1) + 1
        starts, stops = np.r_[0, breaks].tolist(), np.r_[breaks, len(r)].tolist()
        for start, stop, first in zip(starts, stops, r[starts].tolist(), strict=True):
            # straight into the result: no intermediate bytes
            got = os.preadv(
                self.fd, [buffer[start * size : stop * size]], self.offset + first * size
            )
            if got != (stop - start) * size:
                raise ValueError(f"{self.path}: truncated (row {first})")
        return out

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None
