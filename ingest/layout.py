"""The typed chunks of a document read from a file (:mod:`ingest.documents`): tables
and images get chunks of their own, and every chunk learns its page.

A document's ``meta["layout"]`` says where its tables and image placeholders sit in
its text and where each page starts. The chunker asks :class:`Layout` to cut a
section's span around the tables, for the table and image chunks, and for the
provenance fields of any span (``chunk_type``, ``page`` / ``pages``).
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from kgrag.ids import content_id
from kgrag.text.tokens import WORD, count_tokens
from kgrag.types import Chunk, Document

from .documents.assemble import LAYOUT, table_html

TEXT, TABLE, IMAGE = "text", "table", "image"
#: characters of a section's opening searched for the words of its heading
OPENING = 300
_NUMBERING = re.compile(r"^(\d+(\.\d+)*\.?|[A-Z]\.(\d+(\.\d+)*)?)\s+")
_DISAMBIGUATOR = re.compile(r"\s*\([^)]*\)\s*$")


@dataclass(frozen=True, slots=True)
class Piece:
    """A span of a section: text to window, or one table (``index`` into the tables)."""

    start: int
    end: int
    kind: str
    index: int = -1


class Layout:
    """The layout of one document; an empty one for plain text and JSON records."""

    def __init__(self, doc: Document) -> None:
        layout: dict[str, Any] = doc.meta.get(LAYOUT) or {}
        self.doc = doc
        self.paged = bool(layout.get("paged"))
        self.page_starts = [int(offset) for _, offset in layout.get("pages", [])]
        self.page_numbers = [int(page) for page, _ in layout.get("pages", [])]
        self.tables: list[dict[str, Any]] = list(layout.get("tables", []))
        self.images: list[dict[str, Any]] = list(layout.get("images", []))
        self.base_meta = {k: v for k, v in doc.meta.items() if k != LAYOUT}
        self.layout = bool(layout)
        self.section_starts = [int(offset) for offset, _ in doc.sections]
        self._subjects: dict[int, str] = {}

    def pieces(self, start: int, end: int) -> Iterator[Piece]:
        """``[start, end)`` cut around the tables inside it."""
        at = start
        for index, table in enumerate(self.tables):
            t0, t1 = int(table["start"]), int(table["end"])
            if t0 < start or t0 >= end:
                continue
            if t0 > at:
                yield Piece(at, t0, TEXT)
            yield Piece(t0, t1, TABLE, index)
            at = t1
        if at < end:
            yield Piece(at, end, TEXT)

    def images_in(self, start: int, end: int) -> list[int]:
        """The images whose placeholders lie in ``[start, end)``."""
        return [i for i, im in enumerate(self.images) if start <= int(im["start"]) < end]

    def only_placeholders(self, start: int, end: int) -> bool:
        """Whether ``[start, end)`` holds nothing but image placeholders (an image
        file's text): such a span gets no text chunk, the image chunk says it all."""
        rest = self.doc.text[start:end]
        for i in reversed(self.images_in(start, end)):
            s, e = int(self.images[i]["start"]) - start, int(self.images[i]["end"]) - start
            rest = rest[:s] + rest[e:]
        return bool(self.images_in(start, end)) and not rest.strip()

    def meta(self, kind: str, path: tuple[str, ...], start: int, end: int) -> dict[str, Any]:
        """A chunk's metadata: the document's, its type, section path and pages."""
        meta = dict(self.base_meta)
        meta["chunk_type"] = kind
        meta["parent_path"] = list(path)
        subject = self.subject(path, start)
        if subject:
            meta["subject"] = subject
        if self.paged and self.page_starts:
            first, last = self.page_at(start), self.page_at(max(start, end - 1))
            meta["page"] = first
            if last != first:
                meta["pages"] = [first, last]
        return meta

    def subject(self, path: tuple[str, ...], start: int) -> str:
        """The entity a section is about, for a document read from a file: its heading,
        when the section's opening (:data:`OPENING` characters after the heading line)
        names it (:func:`_names`). "Robert North Bradbury" over "Robert N. Bradbury
        (1886-1949) was ..." is a subject; "Maintenance" over "Routine maintenance at
        ..." or "Value" over "B = value(...)" is not."""
        if not self.layout or not path:
            return ""
        i = bisect_right(self.section_starts, start) - 1
        if i < 0:
            return ""
        offset = self.section_starts[i]
        if offset not in self._subjects:
            heading = path[-1]
            body = self.doc.text[offset : offset + len(heading) + 2 + OPENING]
            body = body.split("\n", 1)[1] if "\n" in body else ""
            name = _NUMBERING.sub("", heading)
            self._subjects[offset] = name if _names(name, body) else ""
        return self._subjects[offset]

    def page_at(self, offset: int) -> int:
        """The page the character at ``offset`` is on."""
        i = bisect_right(self.page_starts, offset) - 1
        return self.page_numbers[max(i, 0)]

    # -- table and image chunks -----------------------------------------------------

    def table_chunks(
        self, index: int, path: tuple[str, ...], context: str, first: int, max_tokens: int
    ) -> list[Chunk]:
        """A table as one chunk when it fits ``max_tokens``, else row groups, each
        under the caption and written as HTML with the header rows repeated."""
        table = self.tables[index]
        caption = str(table.get("caption", ""))
        lines = self.doc.text[int(table["start"]) : int(table["end"])].split("\n")
        offset = int(table["start"])
        if caption:
            offset += len(caption) + 1
            lines = lines[1:]
        spans = []
        for line in lines:
            spans.append((offset, offset + len(line)))
            offset += len(line) + 1
        chunks: list[Chunk] = []
        for lo, hi in _groups(
            [count_tokens(line) for line in lines], count_tokens(caption), max_tokens
        ):
            start = int(table["start"]) if lo == 0 else spans[lo][0]
            end = spans[hi - 1][1]
            text = (
                self.doc.text[start:end]
                if lo == 0
                else f"{caption}\n{self.doc.text[spans[lo][0] : end]}".lstrip("\n")
            )
            meta = self.meta(TABLE, path, start, end)
            rows = table["rows"][lo:hi]
            meta["html"] = table_html(caption, table.get("header_rows", []), rows)
            meta["table"] = {
                "index": index,
                "rows": [lo + 1, hi],
                "of": len(lines),
                "header": list(table.get("header", [])),
                "cells": [list(r) for r in rows],
            }
            chunks.append(self._chunk(first + len(chunks), start, end, text, context, meta))
        return chunks

    def image_chunk(self, index: int, path: tuple[str, ...], context: str, number: int) -> Chunk:
        """The chunk of an image: its caption, alternative text and OCR text."""
        image = self.images[index]
        parts = [str(image.get(k, "")).strip() for k in ("caption", "alt", "ocr")]
        text = (
            "\n".join(dict.fromkeys(p for p in parts if p))
            or f"Image {index + 1} of {self.doc.title}"
        )
        start, end = int(image["start"]), int(image["end"])
        meta = self.meta(IMAGE, path, start, end)
        meta["image"] = {
            "index": index,
            "mime": image.get("mime", ""),
            "caption": image.get("caption", ""),
            "alt": image.get("alt", ""),
        }
        return self._chunk(number, start, end, text, context, meta)

    def _chunk(
        self, index: int, start: int, end: int, text: str, context: str, meta: dict[str, Any]
    ) -> Chunk:
        return Chunk(
            id=content_id("chunk", self.doc.id, text, str(start), meta["chunk_type"]),
            doc_id=self.doc.id,
            index=index,
            text=text,
            context=context,
            tokens=count_tokens(text),
            start=start,
            end=end,
            meta=meta,
        )


def _groups(tokens: list[int], caption: int, max_tokens: int) -> list[tuple[int, int]]:
    """Consecutive row ranges ``[lo, hi)`` whose tokens, with the caption's, fit
    ``max_tokens`` (a row longer than that is a group alone)."""
    groups: list[tuple[int, int]] = []
    lo, total = 0, caption
    for i, n in enumerate(tokens):
        if i > lo and total + n > max_tokens:
            groups.append((lo, i))
            lo, total = i, caption
        total += n
    if lo < len(tokens):
        groups.append((lo, len(tokens)))
    return groups


def _names(heading: str, body: str) -> bool:
    """Whether ``body`` names ``heading`` (a trailing "(...)" aside): a capitalised word
    of it appears as written, and so do at least half of its words."""
    words = [w for w in WORD.findall(_DISAMBIGUATOR.sub("", heading)) if len(w) > 1]
    found = [w for w in words if re.search(rf"(?<!\w){re.escape(w)}(?!\w)", body)]
    return any(w[0].isupper() for w in found) and 2 * len(found) >= len(words)
