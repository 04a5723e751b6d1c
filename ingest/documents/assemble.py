"""A parsed file as a :class:`~kgrag.types.Document`: the blocks written out as one
text, headings as its sections, and the rest of the layout (page starts, tables,
images) in ``meta["layout"]``, where the chunker finds it.

The text is what the dense and BM25 indexes see: a table is written as one line per
row of ``header: value`` pairs under its caption; an image leaves a placeholder,
``[Image N: caption]``, where it stood.
"""

from __future__ import annotations

import base64
import html
from pathlib import Path
from typing import Any

from kgrag.ids import content_id
from kgrag.types import Document

from .model import HEADING, IMAGE, TABLE, Block, Parsed

LAYOUT = "layout"


def document(parsed: Parsed, path: Path, uri: str, fmt: str) -> Document:
    """The document of one parsed file."""
    writer = _Writer()
    for block in parsed.blocks:
        writer.add(block)
    text = writer.text()
    title = parsed.title.strip() or _first_heading(parsed.blocks) or path.stem
    meta: dict[str, Any] = {"source": path.name, "format": fmt}
    if parsed.paged:
        meta["page_count"] = parsed.pages
    meta[LAYOUT] = {
        "paged": parsed.paged,
        "pages": writer.pages,
        "tables": writer.tables,
        "images": writer.images,
    }
    doc_id = content_id("document", title, text)
    sections = tuple(writer.sections)
    return Document(id=doc_id, title=title, text=text, uri=uri, meta=meta, sections=sections)


def _first_heading(blocks: list[Block]) -> str:
    return next((b.text.strip() for b in blocks if b.kind == HEADING and b.text.strip()), "")


class _Writer:
    """Accumulates the text, section marks, page starts, tables and images."""

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.offset = 0
        self.sections: list[tuple[int, tuple[str, ...]]] = []
        self.stack: list[tuple[int, str]] = []
        self.pages: list[list[int]] = []
        self.tables: list[dict[str, Any]] = []
        self.images: list[dict[str, Any]] = []

    def text(self) -> str:
        return "".join(self.parts).rstrip() + "\n"

    def _write(self, text: str) -> tuple[int, int]:
        start = self.offset
        self.parts.append(text + "\n\n")
        self.offset += len(text) + 2
        return start, start + len(text)

    def _page(self, page: int) -> None:
        if page and (not self.pages or self.pages[-1][0] != page):
            self.pages.append([page, self.offset])

    def add(self, block: Block) -> None:
        self._page(block.page)
        if block.kind == HEADING:
            self._heading(block)
        elif block.kind == TABLE:
            self._table(block)
        elif block.kind == IMAGE:
            self._image(block)
        elif block.text.strip():
            self._write(block.text.strip())

    def _heading(self, block: Block) -> None:
        title = " ".join(block.text.split())
        if not title:
            return
        level = max(1, block.level)
        while self.stack and self.stack[-1][0] >= level:
            self.stack.pop()
        self.stack.append((level, title))
        self.sections.append((self.offset, tuple(t for _, t in self.stack)))
        self._write(title)

    def _table(self, block: Block) -> None:
        rows = _square(block.rows)
        if not rows:
            return
        heads = _headers(rows, block.header_rows)
        body = rows[min(block.header_rows, len(rows) - 1) :] if block.header_rows else rows
        lines = [linear_row(heads, row) for row in body]
        caption = " ".join(block.text.split())
        start, end = self._write("\n".join(([caption] if caption else []) + lines))
        self.tables.append(
            {
                "start": start,
                "end": end,
                "caption": caption,
                "header": heads,
                "header_rows": rows[: block.header_rows],
                "rows": body,
                "page": block.page,
            }
        )

    def _image(self, block: Block) -> None:
        number = len(self.images) + 1
        label = " ".join((block.text or block.alt).split())
        start, end = self._write(f"[Image {number}: {label}]" if label else f"[Image {number}]")
        self.images.append(
            {
                "start": start,
                "end": end,
                "caption": " ".join(block.text.split()),
                "alt": " ".join(block.alt.split()),
                "ocr": block.ocr.strip(),
                "mime": block.mime,
                "data": base64.b64encode(block.data).decode("ascii") if block.data else "",
                "page": block.page,
            }
        )


def _square(rows: list[list[str]]) -> list[list[str]]:
    """Rows padded to the widest, empty rows and trailing empty columns dropped."""
    rows = [
        [" ".join(str(c).split()) for c in row] for row in rows if any(str(c).strip() for c in row)
    ]
    if not rows:
        return []
    width = max(len(r) for r in rows)
    rows = [r + [""] * (width - len(r)) for r in rows]
    while width > 1 and not any(r[width - 1] for r in rows):
        width -= 1
    return [r[:width] for r in rows]


def _headers(rows: list[list[str]], header_rows: int) -> list[str]:
    """A name per column: the header rows' cells joined, else "Column N"."""
    width = len(rows[0])
    names = []
    for col in range(width):
        parts = [rows[r][col] for r in range(min(header_rows, len(rows) - 1)) if rows[r][col]]
        names.append(" ".join(dict.fromkeys(parts)) or f"Column {col + 1}")
    return names


def linear_row(headers: list[str], row: list[str]) -> str:
    """A table row as ``header: value`` pairs, empty cells left out."""
    return "; ".join(f"{h}: {v}" for h, v in zip(headers, row, strict=False) if v)


def table_html(caption: str, header_rows: list[list[str]], rows: list[list[str]]) -> str:
    """A table as HTML for display: its caption, header rows in ``thead``."""
    out = ["<table>"]
    if caption:
        out.append(f"<caption>{html.escape(caption)}</caption>")
    if header_rows:
        out.append("<thead>")
        out += [
            "<tr>" + "".join(f"<th>{html.escape(c)}</th>" for c in r) + "</tr>" for r in header_rows
        ]
        out.append("</thead>")
    out.append("<tbody>")
    out += ["<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in r) + "</tr>" for r in rows]
    out.append("</tbody></table>")
    return "".join(out)
