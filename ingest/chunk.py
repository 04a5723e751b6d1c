"""Split documents into sentence-aligned, overlapping chunks.

Sentences are found by rules, not a parser, so chunking is fast and needs no
model. Windows pack whole sentences up to ``max_tokens``; the next window
repeats the last few sentences (up to ``overlap_tokens``) so a fact that spans
a window edge is still whole in one chunk. Windows never cross a markdown
section, so every chunk has one heading path as its context.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace

from kgrag.errors import InvalidParams
from kgrag.ids import content_id
from kgrag.text.tokens import TOKEN, count_tokens
from kgrag.types import Chunk, Document

from .layout import TABLE, TEXT, Layout

# Sentence end: terminal punctuation, optional closing quotes/brackets, then
# whitespace; group 1 is the next visible character.
_TERMINAL = re.compile(r"[.!?]+[\"')\]’”»]*(?=\s+(\S))")
_OPENERS = frozenset("\"'“‘«([")
_BLANK_LINE = re.compile(r"\n[ \t]*\n")
# A newline that starts a list item, quote or heading also ends a paragraph.
_BLOCK_START = re.compile(r"\n(?=[ \t]*(?:[-*+•>]|#{1,6}|\d{1,3}[.)])[ \t])")
_WORD_BEFORE = re.compile(r"(\S+)$")
_INITIALISM = re.compile(r"(?:[A-Za-z]\.)+[A-Za-z]")  # U.S, e.g, i.e, a.m

# Words that end with a period without ending a sentence (matched as written).
_ABBREVIATIONS = frozenset(
    {
        *("Mr", "Mrs", "Ms", "Dr", "Prof", "St", "Jr", "Sr", "Mt", "Rev", "Hon"),
        *("Gen", "Col", "Lt", "Sgt", "Capt", "Gov", "Sen", "Rep"),
        *("Inc", "Ltd", "Co", "Corp", "No", "Fig", "Vol"),
        *("Jan", "Feb", "Mar", "Apr", "Jun", "Jul", "Aug", "Sep", "Sept", "Oct", "Nov", "Dec"),
    }
)
# ... and those matched in any case.
_LOWER_ABBREVIATIONS = frozenset({"vs", "etc", "cf", "al", "approx"})


@dataclass(frozen=True, slots=True)
class _Unit:
    """A sentence, or a piece of an over-long one: a span and its token count."""

    start: int
    end: int
    tokens: int


def split_sentences(text: str) -> list[tuple[int, int]]:
    """Character spans of the sentences of ``text``.

    A sentence ends at ``.``, ``!`` or ``?`` (with any closing quotes or
    brackets) followed by whitespace and a capital, digit or quote, unless
    the period ends an abbreviation or an initial; paragraphs (blank lines,
    list items, quotes) also end one. Spans exclude surrounding whitespace and
    together cover every non-whitespace character.
    """
    cuts = {m.start() for m in _BLANK_LINE.finditer(text)}
    cuts.update(m.start() for m in _BLOCK_START.finditer(text))
    for match in _TERMINAL.finditer(text):
        if _ends_sentence(text, match):
            cuts.add(match.end())
    spans = []
    start = 0
    for cut in [*sorted(cuts), len(text)]:
        span = _strip_span(text, start, cut)
        if span is not None:
            spans.append(span)
        start = cut
    return spans


def _ends_sentence(text: str, match: re.Match[str]) -> bool:
    """Whether a terminal punctuation match really ends a sentence."""
    following = match.group(1)
    if not (following.isupper() or following.isdigit() or following in _OPENERS):
        return False
    if match.group(0) != ".":
        return True
    before = _WORD_BEFORE.search(text, max(0, match.start() - 40), match.start())
    word = before.group(1).lstrip("\"'“‘«([") if before else ""
    if not word:
        return True
    if word in _ABBREVIATIONS or word.lower() in _LOWER_ABBREVIATIONS:
        return False
    if len(word) == 1 and word.isupper():  # an initial: "J. R. R. Tolkien"
        return False
    return _INITIALISM.fullmatch(word) is None


def _strip_span(text: str, start: int, end: int) -> tuple[int, int] | None:
    """``(start, end)`` narrowed past whitespace; None if nothing is left."""
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return (start, end) if start < end else None


def chunk_documents(
    documents: Sequence[Document], *, max_tokens: int, overlap_tokens: int
) -> list[Chunk]:
    """Sentence-aligned chunks of every document, in document order.

    Each chunk is an exact slice of its document's text with at most
    ``max_tokens`` tokens; consecutive chunks of a section share trailing
    sentences worth at most ``overlap_tokens``. The same documents always give
    the same chunks.
    """
    if max_tokens < 1:
        raise InvalidParams("max_tokens must be at least 1", field="chunk.max_tokens")
    if not 0 <= overlap_tokens < max_tokens:
        raise InvalidParams(
            "overlap_tokens must be at least 0 and below max_tokens",
            field="chunk.overlap_tokens",
        )
    chunks: list[Chunk] = []
    for doc in documents:
        chunks.extend(_chunk_document(doc, max_tokens, overlap_tokens))
    return chunks


def _chunk_document(doc: Document, max_tokens: int, overlap_tokens: int) -> list[Chunk]:
    """The chunks of one document, section by section: sentence windows, and for a
    document read from a file its tables and images as chunks of their own."""
    layout = Layout(doc)
    chunks: list[Chunk] = []
    for start, end, path, is_heading in _segments(doc):
        context = _context(doc, path)
        for piece in layout.pieces(start, end):
            if piece.kind == TABLE:
                chunks += layout.table_chunks(piece.index, path, context, len(chunks), max_tokens)
                continue
            heading = is_heading and piece.start == start
            units = _units(doc.text, piece.start, piece.end, heading, max_tokens)
            for first, last in _windows(units, max_tokens, overlap_tokens):
                s, e = units[first].start, units[last].end
                if layout.only_placeholders(s, e):
                    continue
                chunks.append(_make_chunk(doc, len(chunks), s, e, path, layout))
            for image in layout.images_in(piece.start, piece.end):
                chunks.append(layout.image_chunk(image, path, context, len(chunks)))
    return chunks


def _segments(doc: Document) -> list[tuple[int, int, tuple[str, ...], bool]]:
    """(start, end, section path, starts with a heading) for each section.

    Text before the first heading is a segment with an empty path.
    """
    marks = [(o, p) for o, p in doc.sections if 0 <= o < len(doc.text)]
    bounds: list[tuple[int, tuple[str, ...], bool]] = []
    if not marks or marks[0][0] > 0:
        bounds.append((0, (), False))
    for offset, path in marks:
        if bounds and bounds[-1][0] == offset:
            bounds.pop()
        bounds.append((offset, path, True))
    ends = [b[0] for b in bounds[1:]] + [len(doc.text)]
    return [(s, e, p, h) for (s, p, h), e in zip(bounds, ends, strict=True)]


def _units(text: str, start: int, end: int, is_heading: bool, max_tokens: int) -> list[_Unit]:
    """Sentences of ``text[start:end]`` as units no longer than ``max_tokens``.

    A segment that starts at a heading has its first line as a sentence of its
    own, since a heading has no terminal punctuation to split on.
    """
    pieces: list[tuple[int, int]] = []
    if is_heading:
        newline = text.find("\n", start, end)
        head_end = end if newline < 0 else newline
        pieces.append((start, head_end))
        start = head_end
    pieces.extend((start + s, start + e) for s, e in split_sentences(text[start:end]))
    units: list[_Unit] = []
    for s, e in pieces:
        span = _strip_span(text, s, e)
        if span is not None:
            units.extend(_cut_long(text, span[0], span[1], max_tokens))
    return units


def _cut_long(text: str, start: int, end: int, max_tokens: int) -> list[_Unit]:
    """The sentence ``text[start:end]`` as one unit, or cut at token
    boundaries into pieces of at most ``max_tokens`` tokens."""
    spans = [m.span() for m in TOKEN.finditer(text, start, end)]
    if len(spans) <= max_tokens:
        return [_Unit(start, end, len(spans))]
    return [
        _Unit(
            spans[i][0],
            spans[min(i + max_tokens, len(spans)) - 1][1],
            min(max_tokens, len(spans) - i),
        )
        for i in range(0, len(spans), max_tokens)
    ]


def _windows(units: list[_Unit], max_tokens: int, overlap_tokens: int) -> list[tuple[int, int]]:
    """Greedy windows over ``units`` as (first, last) unit indices, inclusive.

    The next window starts with trailing units of the previous one worth at
    most ``overlap_tokens``, never all of it, and only as many as still leave
    room for the next new unit, so every window adds text.
    """
    windows: list[tuple[int, int]] = []
    i = 0
    while i < len(units):
        j, total = i, 0
        while j < len(units) and total + units[j].tokens <= max_tokens:
            total += units[j].tokens
            j += 1
        windows.append((i, j - 1))
        if j == len(units):
            break
        k, carried = j, 0
        while k - 1 > i and carried + units[k - 1].tokens <= overlap_tokens:
            k -= 1
            carried += units[k].tokens
        while k < j and carried + units[j].tokens > max_tokens:
            carried -= units[k].tokens
            k += 1
        i = k
    return windows


def _context(doc: Document, path: tuple[str, ...]) -> str:
    """The "Title > Section" line of a chunk; a markdown document's title is usually
    its level-1 heading, said once."""
    if path and path[0] == doc.title:
        path = path[1:]
    return " > ".join([doc.title, *path])


def _make_chunk(
    doc: Document, index: int, start: int, end: int, path: tuple[str, ...], layout: Layout
) -> Chunk:
    text = doc.text[start:end]
    return Chunk(
        id=content_id("chunk", doc.id, text, str(start)),
        doc_id=doc.id,
        index=index,
        text=text,
        context=_context(doc, path),
        tokens=count_tokens(text),
        start=start,
        end=end,
        meta=layout.meta(TEXT, path, start, end),
    )


def make_chunks(
    documents: Sequence[Document],
    *,
    max_tokens: int,
    overlap_tokens: int,
    split: bool = True,
    contextual: bool = True,
) -> list[Chunk]:
    """Chunks as RCP ``index/add`` asks for them.

    ``split`` False keeps each document whole as one chunk; ``contextual``
    False leaves the chunk context (the "Title > Section" line that is
    embedded and cited with the passage) empty.
    """
    if split:
        chunks = chunk_documents(documents, max_tokens=max_tokens, overlap_tokens=overlap_tokens)
    else:
        chunks = [_whole(doc) for doc in documents]
    if not contextual:
        chunks = [replace(c, context="") for c in chunks]
    return chunks


def _whole(doc: Document) -> Chunk:
    return Chunk(
        id=content_id("chunk", doc.id, doc.text, "0"),
        doc_id=doc.id,
        index=0,
        text=doc.text,
        context=doc.title,
        tokens=count_tokens(doc.text),
        start=0,
        end=len(doc.text),
        meta=Layout(doc).meta(TEXT, (), 0, len(doc.text)),
    )
