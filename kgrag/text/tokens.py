"""The tokenizer: the three token patterns every module shares, and the token count.

- :data:`WORD`: runs of word characters; the terms of BM25 and of text overlap.
- :data:`TOKEN`: a run of word characters or one other non-space character; the
  token count (chunk sizes, ``tokenBudget``), name keys and query spans.
- :data:`JOINED_TOKEN`: as :data:`TOKEN`, but words joined by a hyphen, an
  apostrophe or a dot stay one token ("Jean-Luc", "O'Brien", "U.S"); title keys
  and the text they are looked for in.
"""

from __future__ import annotations

import functools
import re

WORD = re.compile(r"\w+")
TOKEN = re.compile(r"\w+|[^\w\s]")
JOINED_TOKEN = re.compile(r"\w+(?:[-'.]\w+)*|[^\w\s]")


def count_tokens(text: str) -> int:
    """Word and punctuation tokens in ``text``: the token measure used everywhere
    (chunk sizes at ingest, ``tokenBudget`` packing at retrieval)."""
    return sum(1 for _ in TOKEN.finditer(text))


@functools.lru_cache(maxsize=1 << 14)
def cached_tokens(text: str) -> int:
    """:func:`count_tokens` remembered: stored texts are served again and again."""
    return count_tokens(text)
