"""Text measures shared by the write and read sides."""

from __future__ import annotations

import functools
import re

TOKEN_RE = re.compile(r"\w+|[^\w\s]")


def count_tokens(text: str) -> int:
    """Word and punctuation tokens in ``text``: the token measure used everywhere
    (chunk sizes at ingest, ``tokenBudget`` packing at retrieval)."""
    return sum(1 for _ in TOKEN_RE.finditer(text))


@functools.lru_cache(maxsize=1 << 14)
def cached_tokens(text: str) -> int:
    """:func:`count_tokens` remembered: stored texts are served again and again."""
    return count_tokens(text)
