"""Conventions shared by ingest, every store and the searches above it: how names
and titles are keyed (tokens from :mod:`kgrag.text.tokens`), the predicate of
co-occurrence relations, which entity types never link, the stored walk's edge
weights."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from kgrag.text.tokens import JOINED_TOKEN, TOKEN

COOC = "co-occurs with"  # the predicate of sentence co-occurrence relations
#: edge weights of the walk a store keeps ready, by edge class (local search's defaults)
WALK_WEIGHTS = {"relation": 1.0, "cooc": 0.0, "mention": 1.0, "synonym": 1.0}
MAX_NAME_TOKENS = 10  # longer names are not looked up
#: entity types that name amounts, not things: never linked from a query
SKIP_TYPES = frozenset({"CARDINAL", "ORDINAL", "PERCENT", "QUANTITY", "MONEY"})

#: a trailing parenthetical that tells namesakes apart: "Richard Sale (director)"
DISAMBIGUATOR = re.compile(r"\s*\([^)]*\)\s*$")
_MAX_TITLE_TOKENS = 8


def subject_title(doc_title: str, chunk_meta: Mapping[str, Any]) -> str:
    """The title a chunk is about: the ``subject`` its chunker found (a section of a
    document file whose opening names its heading: :meth:`ingest.layout.Layout.subject`),
    else its document's title. Extraction names it as the chunk's title entity, and the
    store's title links and title entities are read from it."""
    return str(chunk_meta.get("subject") or doc_title)


def title_key(title: str) -> tuple[str, ...]:
    """The token key a title is matched by: no trailing parenthetical, case folded."""
    return tuple(t.casefold() for t in JOINED_TOKEN.findall(DISAMBIGUATOR.sub("", title)))


def name_key(name: str) -> str:
    """An entity name as name lookups key it: case-folded tokens, space-joined."""
    return " ".join(t.casefold() for t in TOKEN.findall(name))


def title_link_pairs(titles: Sequence[str], texts: Sequence[str]) -> list[tuple[int, int]]:
    """(a, b) for every row ``a`` whose text names the title of row ``b`` (see
    :mod:`kgrag.search.links`), rows of the same title left out; sorted."""
    rows_of: dict[tuple[str, ...], list[int]] = {}
    for row, title in enumerate(titles):
        key = title_key(title)
        if key and len(key) <= _MAX_TITLE_TOKENS:
            rows_of.setdefault(key, []).append(row)
    lengths: dict[str, set[int]] = {}  # first token -> title lengths starting with it
    for key in rows_of:
        lengths.setdefault(key[0], set()).add(len(key))
    pairs: list[tuple[int, int]] = []
    for row, text in enumerate(texts):
        own = set(rows_of.get(title_key(titles[row]), ()))
        tokens = [t.casefold() for t in JOINED_TOKEN.findall(text)]
        named: set[int] = set()
        for i, tok in enumerate(tokens):
            for n in lengths.get(tok, ()):
                named.update(rows_of.get(tuple(tokens[i : i + n]), ()))
        pairs.extend((row, t) for t in sorted(named - own - {row}))
    return pairs
