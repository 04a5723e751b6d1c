"""Named things and words of a parsed query, shared by the query transforms
(:mod:`kgrag.retrieval.transform`) and decomposition (:mod:`kgrag.retrieval.decompose`)."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

_NOT_NAMES = frozenset({"CARDINAL", "ORDINAL", "QUANTITY", "PERCENT", "MONEY", "TIME", "DATE"})
_WH_TAGS = frozenset({"WDT", "WP", "WP$", "WRB"})
_EDGE_POS = frozenset({"AUX", "ADP", "PUNCT", "CCONJ", "SCONJ", "PRON", "PART", "VERB"})
_QUOTED = re.compile(r"\"([^\"]+)\"|“([^”]+)”")


def _wordset(text: str) -> frozenset[str]:
    return frozenset(text.split())


def find_entities(doc: Any) -> list[tuple[int, int, str]]:
    """Named things in ``doc`` as (start_char, end_char, label), in reading order.

    NER spans (not numbers or dates), noun chunks headed by a proper noun and quoted
    strings; overlaps keep the longest span.
    """
    spans = [(*_trim(e), e.label_) for e in doc.ents if e.label_ not in _NOT_NAMES]
    for chunk in doc.noun_chunks:
        if chunk.root.pos_ == "PROPN" and not any(t.pos_ in ("CCONJ", "PUNCT") for t in chunk):
            toks = [t for t in chunk if not (t.i == chunk.start and t.pos_ in ("DET", "PRON"))]
            if toks:
                spans.append((toks[0].idx, toks[-1].idx + len(toks[-1]), ""))
    run: list[Any] = []
    for tok in [*doc, None]:
        if tok is not None and tok.pos_ == "PROPN":
            run.append(tok)
            continue
        if run:
            spans.append((run[0].idx, run[-1].idx + len(run[-1]), ""))
        run = []
    for m in _QUOTED.finditer(doc.text):
        start = m.start(1) if m.group(1) is not None else m.start(2)
        spans.append((start, m.end() - 1, "QUOTE"))
    kept: list[tuple[int, int, str]] = []
    for s, e, label in sorted(spans, key=lambda x: (x[0] - x[1], x[0])):
        s, e = _strip_possessive(doc.text, s, e)
        if e > s and all(e <= ks or s >= ke for ks, ke, _ in kept):
            kept.append((s, e, label))
    return sorted(kept)


def _trim(span: Any) -> tuple[int, int]:
    """The character range of an entity without the function words NER sometimes takes in."""
    toks = list(span)
    while toks and (toks[0].pos_ in _EDGE_POS or toks[0].tag_ in _WH_TAGS):
        toks.pop(0)
    while toks and toks[-1].pos_ in _EDGE_POS:
        toks.pop()
    return (toks[0].idx, toks[-1].idx + len(toks[-1])) if toks else (0, 0)


def _strip_possessive(text: str, start: int, end: int) -> tuple[int, int]:
    """Drop a trailing 's or ' and surrounding spaces from a character span."""
    span = text[start:end]
    span = re.sub(r"\s*('s|’s|')$", "", span)
    return start, start + len(span.rstrip())


def _dedupe(items: Iterable[str]) -> list[str]:
    """Items without case-insensitive repeats or blanks, first occurrence kept."""
    seen: set[str] = set()
    out = []
    for item in items:
        key = item.strip().casefold()
        if key and key not in seen:
            seen.add(key)
            out.append(item.strip())
    return out
