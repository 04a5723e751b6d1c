"""Orderings local search shares: ranks with ties by position, the best ``k`` entries,
a min-max scale. Ties go by position, so a search ranks the same way each time."""

from __future__ import annotations

import numpy as np


def ranks(x: np.ndarray) -> np.ndarray:
    """0-based rank of each entry, best (largest) first; ties by position. Where no
    entry is negative and some are zero (PageRank mass: passages the walk did not
    reach), only the others are sorted; the zeros follow them in position order, as a
    sort of every entry puts them."""
    out = np.empty(len(x))
    zero = x == 0
    some = np.flatnonzero(~zero)
    if 10 * len(some) < 9 * len(x) and float(x.min()) >= 0:
        out[some[descending(x[some])]] = np.arange(len(some))
        out[zero] = len(some) + np.arange(len(x) - len(some))
        return out
    out[descending(x)] = np.arange(len(x))
    return out


def descending(x: np.ndarray) -> np.ndarray:
    """Indexes of ``x`` by value, largest first, ties by index: ``argsort(-x)`` as a
    stable sort would give it. For float32, the value's bits are mapped to an
    order-preserving unsigned int and sorted by two stable passes over its 16-bit
    halves, low then high (numpy sorts 16-bit keys by radix, faster than a stable
    argsort of the floats)."""
    if x.dtype != np.float32:
        return np.argsort(-x, kind="stable")
    bits = (x + np.float32(0)).view(np.uint32)  # -0.0 + 0.0 is 0.0: equal zeros tie
    up = np.where(bits >> np.uint32(31), ~bits, bits | np.uint32(1 << 31))
    key = ~up  # ascending key, descending value
    low = np.argsort((key & np.uint32(0xFFFF)).astype(np.uint16), kind="stable")
    high = np.argsort((key[low] >> np.uint32(16)).astype(np.uint16), kind="stable")
    return low[high]


def top_k(scores: np.ndarray, k: int) -> list[tuple[int, float]]:
    """The ``k`` largest entries as (index, score), best first, ties by index (which of
    the entries tied at the ``k``-th place are kept is ``argpartition``'s choice)."""
    if len(scores) == 0 or k <= 0:
        return []
    k = min(k, len(scores))
    part = np.argpartition(-scores, k - 1)[:k]
    order = sorted(part, key=lambda i: (-scores[i], i))
    return [(int(i), float(scores[i])) for i in order]


def minmax(x: np.ndarray) -> np.ndarray:
    """``x`` scaled to [0, 1] (all ones when every entry is equal)."""
    lo, hi = float(x.min()), float(x.max())
    return (x - lo) / (hi - lo) if hi > lo else np.ones_like(x)
