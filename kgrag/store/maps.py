"""Files opened by memory map, for the serving files and the BM25 postings."""

from __future__ import annotations

import mmap
from pathlib import Path
from typing import Literal

import numpy as np


def map_array(path: Path, mode: Literal["r", "c"] = "r", *, random: bool = True) -> np.ndarray:
    """``path`` (.npy) mapped, as a plain array over the map (np.memmap's indexing costs
    ~4 us a call). ``random``: the kernel reads ahead nothing (a read of one row would
    otherwise page in ~128 KB around it: on the 60k graph, 245 MB of fact vectors
    resident after 100 questions that re-score 32 rows each)."""
    mapped = np.load(path, mmap_mode=mode)
    handle = getattr(mapped, "_mmap", None)
    if random and handle is not None and hasattr(mmap, "MADV_RANDOM"):
        handle.madvise(mmap.MADV_RANDOM)
    return mapped.view(np.ndarray)
