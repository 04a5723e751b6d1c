"""What a Neo4j reader keeps of what it read: a published version never changes,
so what was read stays true, and a search reads the same seeds, chains and hubs
again and again (one query per path, per hit and per feature otherwise)."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from kgrag.types import Entity

#: how much a reader keeps of what it read (ids, rows, vectors, adjacency lists,
#: attributes and records of one immutable version), in numbers held (a vector of 384
#: counts 384, a record 1 per 8 characters): 4 Mi
MEMO_NUMBERS = 4 << 20
_NONE = object()


def weight(value: Any) -> int:
    """About how many numbers ``value`` holds, for the memo's budget."""
    if isinstance(value, str):
        return 1 + len(value) // 8
    if isinstance(value, np.ndarray):
        return 1 + value.size
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, (list, tuple)):
        return 1 + sum(weight(v) if isinstance(v, (list, tuple, str)) else 1 for v in value)
    if isinstance(value, Entity):
        return 8 + len(value.chunk_ids)
    return 1


class Memo:
    """Values read, by (space, key), the most recently used kept up to
    :data:`MEMO_NUMBERS` numbers (:func:`weight`); safe to share between threads."""

    def __init__(self) -> None:
        self.kept: OrderedDict[tuple[str, Any], Any] = OrderedDict()
        self.held = 0  # the numbers kept holds, about
        self._lock = threading.Lock()

    def read(
        self, space: str, keys: Sequence[Any], fetch: Callable[[list[Any]], dict[Any, Any]]
    ) -> dict[Any, Any]:
        """The values of ``keys`` in ``space``, asking ``fetch`` (one query) only for the
        keys not kept yet. Keys ``fetch`` does not answer are asked again."""
        wanted = list(dict.fromkeys(keys))
        out: dict[Any, Any] = {}
        missing = []
        with self._lock:
            for k in wanted:
                hit = self.kept.get((space, k), _NONE)
                if hit is _NONE:
                    missing.append(k)
                else:
                    self.kept.move_to_end((space, k))
                    out[k] = hit
        if missing:
            got = fetch(missing)
            out.update(got)
            with self._lock:
                for k, v in got.items():
                    key = (space, k)
                    if key not in self.kept:
                        self.kept[key] = v
                        self.held += weight(v)
                while self.held > MEMO_NUMBERS and self.kept:
                    self.held -= weight(self.kept.popitem(last=False)[1])
        return out

    def clear(self) -> None:
        with self._lock:
            self.kept.clear()
            self.held = 0
