"""PDF files: text by page with pypdfium2, headings from the outline or the type,
tables by pdfplumber on the pages that have ruled lines, figures as images, and OCR for
pages without a text layer.

pypdfium2 was chosen by measurement (docs/benchmarks.md, "Reading documents"): on the
same pages its text matches ``pdftotext -layout`` word for word where pdfplumber's
loses words, at twice pdftotext's speed and fifty times pdfplumber's. pdfplumber's
table finder is the slow part, so it runs only where a page draws enough lines to
hold a table.
"""

from __future__ import annotations

import io
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kgrag.errors import InputError

from . import ocr
from .model import (
    HEADING,
    IMAGE,
    MAX_IMAGE_BYTES,
    MAX_PAGES,
    MIN_IMAGE_SIDE,
    TABLE,
    TEXT,
    Block,
    Parsed,
)
from .pdf_tables import TableFinder

#: a page with fewer visible characters than this has no text layer worth reading
MIN_TEXT_CHARS = 8
#: characters per line whose boxes and weights are read
LINE_SAMPLE = 16
#: a first-page line this many times the body type height is read as the title
TITLE_RATIO = 1.6
_BULLETS = "\u2022\u25e6\u25aa\u25cf\u2023\u2043\u00b7\x88\uf0b7\uf0a7\u27a2\u25a0\u25a1*"
_BULLET = re.compile(rf"^\s*[{re.escape(_BULLETS)}]\s*")
_NUMBERED = re.compile(r"^\s*(\d{1,3}[.)]|[a-z][.)])\s+")
_PAGE_NUMBER = re.compile(r"^\W*(page\s*)?\d{1,5}(\s*(of|/)\s*\d{1,5})?\W*$", re.I)
_CAPTION = re.compile(r"^\s*(figure|fig\.|image|picture)\s*\d+", re.I)
_TABLE_CAPTION = re.compile(r"^\s*table\s*\d+", re.I)
_MONO_FONT = re.compile(r"mono|courier|cmtt|typewriter|consol|menlo|\\btt", re.I)
_DIGITS = re.compile(r"\d+")
_SPACES = re.compile(r"\s+")
_NUMBERING = re.compile(r"^(\d+(\.\d+)*\.?|[IVXLC]+\.?|[A-Z]\.)\s+")

Progress = Callable[[int, int], None]


@dataclass(slots=True)
class Line:
    """A line of a page: its text, vertical extent from the page top, left edge,
    type height and weight."""

    text: str
    top: float
    bottom: float
    left: float
    height: float
    weight: float
    mono: bool = False


@dataclass(slots=True)
class Item:
    """A line, table or image of a page with its top, for reading order."""

    top: float
    line: Line | None = None
    block: Block | None = None


def read(path: Path, uri: str, progress: Progress | None = None) -> Parsed:
    """The blocks of a PDF file, page by page."""
    import pypdfium2 as pdfium

    if path.stat().st_size == 0:
        raise InputError(uri, "empty file")
    try:
        pdf = pdfium.PdfDocument(str(path))
    except pdfium.PdfiumError as exc:
        raise InputError(uri, _open_error(str(exc))) from None
    try:
        return _read_pages(pdf, path, uri, progress)
    finally:
        pdf.close()


def _open_error(message: str) -> str:
    low = message.lower()
    if "password" in low:
        return "encrypted PDF: it needs a password to open"
    if "format" in low or "file" in low:
        return f"not a readable PDF (damaged or truncated: {message})"
    return f"cannot open PDF: {message}"


def _read_pages(pdf: Any, path: Path, uri: str, progress: Progress | None) -> Parsed:
    parsed = Parsed(paged=True, pages=len(pdf))
    if len(pdf) > MAX_PAGES:
        parsed.warnings.append(f"{len(pdf)} pages: only the first {MAX_PAGES} were read")
    count = min(len(pdf), MAX_PAGES)
    outline = _outline(pdf)
    tables = TableFinder(path)
    pages: list[list[Item]] = []
    try:
        for index in range(count):
            pages.append(_page_items(pdf, index, tables, parsed.warnings))
            if progress is not None:
                progress(index + 1, count)
    finally:
        tables.close()
    titles = {title for marks in outline.values() for _, title in marks}
    _drop_running_lines(pages, titles)
    body = _body_style(pages)
    for number, items in enumerate(pages, start=1):
        marks = outline.get(number - 1, [])
        parsed.blocks.extend(_page_blocks(items, number, marks, bool(outline), body))
    parsed.title = _title(pdf, pages[0] if pages else [], body[0], parsed.blocks)
    return parsed


def _outline(pdf: Any) -> dict[int, list[tuple[int, str]]]:
    """The outline's (level, normalised title) entries by 0-based page."""
    out: dict[int, list[tuple[int, str]]] = {}
    try:
        for mark in pdf.get_toc(max_depth=6):
            dest = mark.get_dest()
            page = dest.get_index() if dest is not None else None
            if page is not None and page >= 0:
                out.setdefault(page, []).append((mark.level + 1, _norm(mark.get_title())))
    except Exception:  # noqa: BLE001 - a broken outline only costs the headings it held
        return out
    return out


def _title(pdf: Any, first: list[Item], body: float, blocks: list[Block]) -> str:
    """The document's title: its metadata's; else the largest type on the first page
    when it is well above body text (a title page, whose lines are seldom headings
    of the outline); else the first top-level heading."""
    try:
        title = str((pdf.get_metadata_dict() or {}).get("Title") or "").strip()
    except Exception:  # noqa: BLE001 - metadata is optional
        title = ""
    if title:
        return title
    lines = [i.line for i in first if i.line is not None and i.line.text.strip()]
    largest = max((line.height for line in lines), default=0.0)
    if largest >= TITLE_RATIO * body:
        # a title set over two lines is one title
        words = [line.text.strip() for line in lines if line.height >= 0.95 * largest]
        return " ".join(words[:3])
    return next((b.text for b in blocks if b.kind == HEADING and b.level == 1), "")


def _norm(text: str) -> str:
    return _NUMBERING.sub("", _SPACES.sub(" ", text).strip()).lower()


# --- one page ---------------------------------------------------------------------


def _page_items(pdf: Any, index: int, tables: TableFinder, warnings: list[str]) -> list[Item]:
    page = pdf[index]
    try:
        height = float(page.get_height())
        lines = _lines(page, height)
        items = [Item(line.top, line=line) for line in lines]
        if sum(len(line.text.strip()) for line in lines) < MIN_TEXT_CHARS:
            return items + _scanned(page, index, warnings)
        found = tables.find(index, page) if tables.worth_asking(page) else []
        for top, bottom, x0, x1, block in found:
            items = [i for i in items if not _inside(i.line, top, bottom, x0, x1)]
            items.append(Item(top, block=block))
        items.extend(Item(top, block=block) for top, block in _images(page, height, lines))
        return sorted(items, key=lambda i: i.top)
    finally:
        page.close()


def _lines(page: Any, height: float) -> list[Line]:
    """The text lines of a page in pdfium's order (the content's reading order)."""
    import pypdfium2.raw as raw

    textpage = page.get_textpage()
    try:
        count = textpage.count_chars()
        text = textpage.get_text_range(0, count) if count else ""
        lines: list[Line] = []
        pos = 0
        for raw_line in text.split("\r\n"):
            end = pos + len(raw_line)
            if raw_line.strip():
                sample = _sample(raw_line, pos, min(end, count))
                boxes = [textpage.get_charbox(i, loose=True) for i in sample]
                weights = [raw.FPDFText_GetFontWeight(textpage.raw, i) for i in sample]
                line = _line(raw_line, boxes, weights, height)
                line.mono = bool(sample) and _fixed_pitch(textpage, sample[len(sample) // 2])
                lines.append(line)
            pos = end + 2
        return lines
    finally:
        textpage.close()


def _fixed_pitch(textpage: Any, index: int) -> bool:
    """Whether the character's font is fixed-pitch (code, terminal output): by the
    font's flag, or by its name where the flag is not set (TeX's CMTT, Courier)."""
    import ctypes

    import pypdfium2.raw as raw

    flags = ctypes.c_int(0)
    name = ctypes.create_string_buffer(128)
    raw.FPDFText_GetFontInfo(textpage.raw, index, name, 128, ctypes.byref(flags))
    return bool(flags.value & 1) or _MONO_FONT.search(name.value.decode("latin-1")) is not None


def _sample(text: str, start: int, end: int) -> list[int]:
    """Up to :data:`LINE_SAMPLE` visible characters of a line, spread over it, by index
    (their boxes and weights stand for the line's: one call per character is slow)."""
    visible = [start + i for i, ch in enumerate(text[: end - start]) if not ch.isspace()]
    step = max(1, len(visible) // LINE_SAMPLE)
    return visible[::step]


def _line(text: str, boxes: list[tuple[float, ...]], weights: list[int], height: float) -> Line:
    marks = list(zip(boxes, weights, strict=True))
    if not marks:
        return Line(text, 0.0, 0.0, 0.0, 0.0, 400.0)
    tops = [b[3] for b, _ in marks]
    bottoms = [b[1] for b, _ in marks]
    sizes = Counter(round(b[3] - b[1], 1) for b, _ in marks)
    weight = Counter(w for _, w in marks).most_common(1)[0][0]
    return Line(
        text=text.strip(),
        top=height - max(tops),
        bottom=height - min(bottoms),
        left=min(b[0] for b, _ in marks),
        height=sizes.most_common(1)[0][0],
        weight=float(weight if weight > 0 else 400),
    )


def _inside(line: Line | None, top: float, bottom: float, x0: float, x1: float) -> bool:
    if line is None:
        return False
    middle = (line.top + line.bottom) / 2
    return top - 1 <= middle <= bottom + 1 and line.left < x1


def _scanned(page: Any, index: int, warnings: list[str]) -> list[Item]:
    """A page without a text layer, read by OCR when it is installed."""
    if not ocr.available():
        warnings.append(f"page {index + 1}: no text layer, and OCR is not installed ({ocr.HINT})")
        return []
    image = page.render(scale=2).to_pil()
    text = ocr.read_text(image)
    if not text.strip():
        warnings.append(f"page {index + 1}: no text layer, and OCR found no text")
        return []
    return [
        Item(float(n), block=Block(TEXT, text=para)) for n, para in enumerate(text.split("\n\n"))
    ]


def _images(page: Any, height: float, lines: list[Line]) -> list[tuple[float, Block]]:
    """The page's pictures big enough to be figures, each with a caption found beside it."""
    import pypdfium2.raw as raw

    out: list[tuple[float, Block]] = []
    for obj in page.get_objects(filter=(raw.FPDF_PAGEOBJ_IMAGE,), max_depth=2):
        try:
            width, tall = obj.get_px_size()
            if min(width, tall) < MIN_IMAGE_SIDE:
                continue
            left, bottom, right, top = obj.get_bounds()
            data = _png(obj.get_bitmap(render=False).to_pil())
        except Exception:  # noqa: BLE001 - an undecodable picture is left out
            continue
        if len(data) > MAX_IMAGE_BYTES:
            continue
        caption = _caption(lines, height - top, height - bottom)
        out.append((height - top, Block(IMAGE, text=caption, data=data, mime="image/png")))
    return out


def _png(image: Any) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, format="PNG", optimize=True)
    return buffer.getvalue()


def _caption(lines: list[Line], top: float, bottom: float) -> str:
    """The "Figure N ..." line nearest below (or above) a picture, within 60 points."""
    near = [
        (min(abs(line.top - bottom), abs(top - line.bottom)), line.text)
        for line in lines
        if _CAPTION.match(line.text) and (line.top >= bottom - 2 or line.bottom <= top + 2)
    ]
    near = [n for n in near if n[0] <= 60]
    return min(near)[1] if near else ""


# --- lines to blocks --------------------------------------------------------------


def _drop_running_lines(pages: list[list[Item]], titles: set[str]) -> None:
    """Remove running headers and footers and bare page numbers.

    A line among the first or last two of a page is running when most of its words
    (digits aside) are edge words of a quarter of the pages or more: left and right
    pages often differ, and a running header may name the chapter. A line that is an
    outline entry's title stays."""
    if not pages:
        return
    edges = [_edge_lines(items) for items in pages]
    seen: Counter[str] = Counter()
    for edge in edges:
        seen.update({word for line in edge for word in _words(line.text)})
    least = max(2, (len(pages) + 3) // 4)
    for items, edge in zip(pages, edges, strict=True):
        drop = {
            id(line)
            for line in edge
            if _norm(line.text) not in titles
            and (
                _PAGE_NUMBER.match(line.text) is not None
                or (len(pages) > 1 and _running(_words(line.text), seen, least))
            )
        }
        items[:] = [i for i in items if i.line is None or id(i.line) not in drop]


def _words(text: str) -> list[str]:
    return _DIGITS.sub("#", text.lower()).split()


def _running(words: list[str], seen: Counter[str], least: int) -> bool:
    if not words or len(words) > 12:
        return False
    return sum(seen[w] >= least for w in words) * 2 > len(words)


def _edge_lines(items: list[Item]) -> list[Line]:
    lines = [i.line for i in items if i.line is not None]
    return lines[:2] + lines[-2:] if len(lines) > 4 else lines


def _body_style(pages: list[list[Item]]) -> tuple[float, float]:
    """The commonest type height and weight over the document's lines (by characters)."""
    heights: Counter[float] = Counter()
    weights: Counter[float] = Counter()
    for items in pages:
        for item in items:
            if item.line is not None:
                heights[item.line.height] += len(item.line.text)
                weights[item.line.weight] += len(item.line.text)
    height = heights.most_common(1)[0][0] if heights else 10.0
    weight = weights.most_common(1)[0][0] if weights else 400.0
    return height, weight


def _page_blocks(
    items: list[Item],
    page: int,
    outline: list[tuple[int, str]],
    has_outline: bool,
    body: tuple[float, float],
) -> list[Block]:
    """A page's items as blocks: headings, paragraphs (lines joined), tables, images."""
    blocks: list[Block] = []
    para: list[Line] = []

    def flush() -> None:
        if para:
            blocks.append(Block(TEXT, text=_join(para), page=page))
            para.clear()

    for item in items:
        if item.block is not None:
            flush()
            item.block.page = page
            blocks.append(item.block)
            continue
        line = item.line
        assert line is not None
        level = _heading_level(line, outline, has_outline, body)
        if level:
            flush()
            blocks.append(Block(HEADING, text=line.text, level=level, page=page))
            continue
        if para and _starts_paragraph(para[-1], line):
            flush()
        para.append(line)
    flush()
    _attach_table_captions(blocks)
    return blocks


def _heading_level(
    line: Line, outline: list[tuple[int, str]], has_outline: bool, body: tuple[float, float]
) -> int:
    """The heading level of a line: its outline entry's when the document has an
    outline, else by type when it is set larger or heavier than the body and reads
    like a title; 0 for body text."""
    text = _norm(line.text)
    for level, title in outline:
        if text and text == title:
            return level
    if has_outline or len(line.text) > 120 or line.text.endswith((".", ",", ";", ":")):
        return 0
    if len(line.text.split()) > 14 or not any(ch.isalpha() for ch in line.text):
        return 0
    height, weight = body
    if line.height >= height * 1.6:
        return 1
    if line.height >= height * 1.3:
        return 2
    if line.height >= height * 1.1 or (line.weight >= 600 and weight < 600):
        return 3
    return 0


def _starts_paragraph(previous: Line, line: Line) -> bool:
    gap = line.top - previous.bottom
    height = max(previous.height, line.height, 1.0)
    return (
        previous.mono != line.mono
        or gap > 0.6 * height
        or gap < -2 * height
        or bool(_BULLET.match(line.text) or _NUMBERED.match(line.text))
        or _TABLE_CAPTION.match(line.text) is not None
        or _CAPTION.match(line.text) is not None
    )


def _join(lines: list[Line]) -> str:
    """Lines as one paragraph: hyphenated breaks joined, a bullet written as "- ";
    code (a fixed-pitch font) keeps its lines."""
    if all(line.mono for line in lines):
        return "\n".join(line.text for line in lines)
    text = _BULLET.sub("- ", lines[0].text)
    for line in lines[1:]:
        nxt = line.text
        if text.endswith("-") and len(text) > 1 and text[-2].isalpha() and nxt[:1].islower():
            text = text[:-1] + nxt
        else:
            text = f"{text} {nxt}"
    return text


def _attach_table_captions(blocks: list[Block]) -> None:
    """A "Table N ..." paragraph just before or after a table becomes its caption; a
    figure's caption paragraph goes (the image's placeholder carries it)."""
    for i, block in enumerate(blocks):
        if block.kind == IMAGE and block.text:
            for j in (i - 1, i + 1):
                if 0 <= j < len(blocks) and blocks[j].kind == TEXT and blocks[j].text == block.text:
                    blocks[j].text = ""
        if block.kind != TABLE or block.text:
            continue
        for j in (i - 1, i + 1):
            if (
                0 <= j < len(blocks)
                and blocks[j].kind == TEXT
                and _TABLE_CAPTION.match(blocks[j].text)
            ):
                block.text = blocks[j].text
                blocks[j].text = ""
                break
    blocks[:] = [b for b in blocks if b.kind != TEXT or b.text]
