"""Read an HTML file into blocks: headings, paragraphs and list items, tables, figures.

Page chrome is dropped (scripts, styles, forms, navigation, and the banner header,
footer and asides that sit outside any ``article``/``main``/``section``, which is when
ARIA calls them the page's banner and content info, and LibreOffice's running page
header and footer, ``<div title="footer">``); hidden elements too. The body is walked in document
order; text that sits loose in a ``div`` or ``section`` is kept as a paragraph.

Choices a reader should know:

- list items read ``- item`` (``ul``) or ``1. item`` (``ol``, from its ``start``),
  nested lists indented two spaces a level;
- a table's header is its ``thead`` rows, else its leading rows made only of ``th``;
  at least one row is always the header (an unmarked table nearly always starts with
  its column names); spans are repeated across the cells they cover so columns line up;
- a table that holds another table, or has a single cell, is layout, not data: its
  cells are read as ordinary content, so the inner tables become tables of their own;
- an image's bytes come from a ``data:`` URI or a file in the HTML file's own folder
  or below it, never the network; an image whose bytes cannot be had still gives a block
  when it has alt text or a caption;
- the title is ``<title>``, else the first ``h1``, else empty.
"""

from __future__ import annotations

import base64
import binascii
import mimetypes
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote, unquote_to_bytes, urlsplit

from kgrag.errors import InputError

from .model import (
    HEADING,
    IMAGE,
    MAX_IMAGE_BYTES,
    MAX_TABLE_ROWS,
    MAX_UNZIPPED_BYTES,
    MIN_IMAGE_SIDE,
    TABLE,
    TEXT,
    Block,
    Parsed,
)
from .zipguard import size_text

MAX_HTML_BYTES = MAX_UNZIPPED_BYTES
#: the most columns one span may cover (HTML itself clamps colspan to 1000)
MAX_SPAN = 1000

_DROP = frozenset(
    ("script", "style", "noscript", "template", "nav", "form", "iframe", "object")
    + ("embed", "svg", "canvas", "button", "select", "textarea", "input", "label")
    + ("dialog", "head")
)
_CHROME = frozenset(("header", "footer", "aside"))
_CHROME_ROLES = frozenset(("navigation", "banner", "contentinfo", "search"))
_SECTIONING = frozenset(("article", "main", "section"))
_HEADINGS = {f"h{n}": n for n in range(1, 7)}
_BLOCKS = frozenset(
    ("p", "div", "section", "article", "main", "blockquote", "dd", "dt", "dl", "figure")
    + ("figcaption", "address", "header", "footer", "aside", "details", "summary")
    + ("center", "fieldset", "hr", "body", "li", "caption")
)
_WS = re.compile(r"\s+")
_META_CHARSET = re.compile(rb"<meta[^>]+charset\s*=\s*[\"']?\s*([A-Za-z0-9_.:-]+)", re.I)
_BOMS = (b"\xef\xbb\xbf", b"\xff\xfe", b"\xfe\xff")


def read(path: Path, uri: str) -> Parsed:
    """Parse the HTML file at ``path``; ``uri`` names it in errors and warnings."""
    import lxml.etree
    import lxml.html

    data = _read_bytes(path, uri)
    parser = lxml.html.HTMLParser(encoding=_encoding(data), remove_comments=True, remove_pis=True)
    try:
        root = lxml.html.document_fromstring(data, parser=parser)
    except (lxml.etree.ParserError, lxml.etree.XMLSyntaxError, ValueError) as exc:
        raise InputError(uri, f"not readable as HTML ({exc})") from None
    walker = _Walker(folder=path.parent.resolve())
    body = root.find("body")
    try:
        walker.walk(body if body is not None else root)
    except RecursionError:
        raise InputError(uri, "HTML nested too deeply to read") from None
    walker.flush()
    if any("Excessive depth" in e.message for e in parser.error_log):
        walker.warnings.append("elements nested over 256 deep: the deepest were not read")
    title = _text(root.findtext("head/title") or "")
    if not title:
        title = next((b.text for b in walker.blocks if b.kind == HEADING and b.level == 1), "")
    return Parsed(title=title, blocks=walker.blocks, warnings=walker.warnings)


def _read_bytes(path: Path, uri: str) -> bytes:
    try:
        size = path.stat().st_size
        if size > MAX_HTML_BYTES:
            raise InputError(
                uri, f"{size_text(size)} of HTML, over the {size_text(MAX_HTML_BYTES)} limit"
            )
        data = path.read_bytes()
    except OSError as exc:
        raise InputError(uri, f"cannot read the file ({exc.strerror or exc})") from None
    if not data:
        raise InputError(uri, "empty file")
    return data


def _encoding(data: bytes) -> str | None:
    """The encoding to impose, or None to let lxml follow the BOM or ``<meta charset>``.

    Without either, lxml would assume Latin-1; UTF-8 is tried first since most pages
    without a declaration are UTF-8 today, then Windows-1252 (HTML's own default).
    """
    if data.startswith(_BOMS) or _META_CHARSET.search(data[:4096]):
        return None
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return "windows-1252"
    return "utf-8"


def _text(s: str) -> str:
    return _WS.sub(" ", s).strip()


def _tag(el: Any) -> str:
    tag = getattr(el, "tag", None)
    return tag.lower() if isinstance(tag, str) else ""


def _is_chrome(el: Any) -> bool:
    """Navigation and the page's banner/footer, which repeat on every page of a site."""
    if (
        (el.get("role") or "").strip().lower() in _CHROME_ROLES
        or el.get("hidden") is not None
        or (el.get("aria-hidden") or "").lower() == "true"
    ):
        return True
    tag = _tag(el)
    if tag == "div" and (el.get("title") or "").lower() in ("header", "footer"):
        return True  # LibreOffice's export of the page header and footer
    if tag not in _CHROME:
        return False
    return not any(_tag(a) in _SECTIONING for a in el.iterancestors())


@dataclass
class _Walker:
    """Walks an element tree, gathering inline text until a block boundary flushes it."""

    folder: Path  # images are read from here and below, nowhere else
    blocks: list[Block] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    buf: list[str] = field(default_factory=list)
    prefix: str = ""
    images: list[Block] = field(default_factory=list)
    depth: int = 0  # list nesting

    def flush(self) -> None:
        """End the paragraph being gathered: its text, then the images found in it."""
        text = re.sub(r" *\n *", "\n", re.sub(r"[ ]+", " ", "".join(self.buf))).strip()
        self.buf.clear()
        if text:
            self.blocks.append(Block(TEXT, text=self.prefix + text))
            self.prefix = ""
        self.blocks.extend(self.images)
        self.images.clear()

    def inline(self, s: str | None) -> None:
        if s:
            self.buf.append(_WS.sub(" ", s))

    def walk(self, el: Any) -> None:
        """Read ``el``'s own text and children; the caller reads ``el``'s tail."""
        self.inline(el.text)
        for child in el:
            self.element(child)
            self.inline(child.tail)

    def element(self, el: Any) -> None:
        tag = _tag(el)
        if not tag or tag in _DROP or _is_chrome(el):
            return
        if tag in _HEADINGS:
            self.flush()
            text = _text(el.text_content())
            if text:
                self.blocks.append(Block(HEADING, text=text, level=_HEADINGS[tag]))
        elif tag == "pre" or (tag == "code" and "\n" in el.text_content().strip()):
            self.flush()
            text = el.text_content().strip("\n")
            if text.strip():
                self.blocks.append(Block(TEXT, text=text))
        elif tag == "br":
            self.buf.append("\n")
        elif tag == "img":
            self.image(el)
        elif tag in ("ul", "ol", "menu"):
            self.listing(el, ordered=tag == "ol")
        elif tag == "table":
            self.table(el)
        elif tag == "figcaption" and _captions_figure(el):
            return
        elif tag in _BLOCKS:
            self.flush()
            self.walk(el)
            self.flush()
        else:
            self.walk(el)

    def listing(self, el: Any, ordered: bool) -> None:
        self.flush()
        outer = self.prefix
        number = _int(el.get("start"), 1) if ordered else 0
        self.depth += 1
        for child in el:
            if _tag(child) == "li" and not _is_chrome(child):
                number = _int(child.get("value"), number)
                marker = f"{number}. " if ordered else "- "
                self.prefix = "  " * (self.depth - 1) + marker
                self.walk(child)
                self.flush()
                number += 1
            else:
                self.element(child)
            self.inline(child.tail)
        self.flush()
        self.depth -= 1
        self.prefix = outer

    def table(self, el: Any) -> None:
        self.flush()
        rows = el.xpath("./tr|./thead/tr|./tbody/tr|./tfoot/tr")
        cells = [c for r in rows for c in r if _tag(c) in ("td", "th")]
        if len(cells) <= 1 or el.xpath(".//table"):
            for cell in cells:  # layout: read each cell as content
                self.flush()
                self.walk(cell)
                self.flush()
            return
        grid = _grid(rows)
        if len(grid) > MAX_TABLE_ROWS:
            self.warnings.append(
                f"table with {len(grid)} rows, only the first {MAX_TABLE_ROWS} read"
            )
            grid = grid[:MAX_TABLE_ROWS]
        caption = el.find("caption")
        text = _text(caption.text_content()) if caption is not None else _figure_caption(el)
        header = len(el.xpath("./thead/tr")) or _leading_th_rows(rows)
        self.blocks.append(Block(TABLE, text=text, rows=grid, header_rows=max(header, 1)))
        for img in el.iter("img"):
            self.image(img)
        self.flush()

    def image(self, el: Any) -> None:
        if any(_int(el.get(side), MIN_IMAGE_SIDE) < MIN_IMAGE_SIDE for side in ("width", "height")):
            return  # a spacer, rule or tracking pixel
        alt = _text(el.get("alt") or "")
        caption = _figure_caption(el) or _text(el.get("title") or "")
        src = (el.get("src") or "").strip()
        data, mime = self.image_bytes(src)
        if data or alt or caption:
            self.images.append(Block(IMAGE, text=caption, data=data, mime=mime, alt=alt))

    def image_bytes(self, src: str) -> tuple[bytes, str]:
        """The bytes and type of an image source; empty where they cannot be had safely."""
        name = src[:60] + ("..." if len(src) > 60 else "")
        if src.lower().startswith("data:"):
            return self.data_uri(src, name)
        parts = urlsplit(src)
        if not src or parts.scheme or parts.netloc or parts.path.startswith("/"):
            return b"", ""  # remote, or rooted where this folder cannot say
        target = (self.folder / unquote(parts.path)).resolve()
        mime = mimetypes.guess_type(target.name)[0] or ""
        if not target.is_relative_to(self.folder) or not mime.startswith("image/"):
            return b"", ""
        try:
            size = target.stat().st_size
            if size > MAX_IMAGE_BYTES:
                self.warnings.append(_too_big(name, size))
                return b"", ""
            return target.read_bytes(), mime
        except OSError:
            self.warnings.append(f"image {name!r}: no such file beside the page")
            return b"", ""

    def data_uri(self, src: str, name: str) -> tuple[bytes, str]:
        head, _, payload = src[5:].partition(",")
        params = head.split(";")
        mime = params[0].strip().lower() or "text/plain"
        if not mime.startswith("image/"):
            return b"", ""
        encoded = "base64" in (p.strip().lower() for p in params[1:])
        estimate = len(payload) * 3 // 4 if encoded else len(payload)
        if estimate > MAX_IMAGE_BYTES:
            self.warnings.append(_too_big(name, estimate))
            return b"", ""
        try:
            if encoded:
                data = base64.b64decode(_WS.sub("", unquote(payload)), validate=True)
            else:
                data = unquote_to_bytes(payload)
        except (binascii.Error, ValueError):
            self.warnings.append(f"image {name!r}: its data: URI is not valid base64")
            return b"", ""
        return data, mime


def _too_big(name: str, size: int) -> str:
    return (
        f"image {name!r}: {size_text(size)}, over the {size_text(MAX_IMAGE_BYTES)} "
        "limit; its bytes were not kept"
    )


def _int(value: str | None, default: int) -> int:
    try:
        return int(str(value).strip())
    except ValueError:
        return default


def _captions_figure(el: Any) -> bool:
    """Whether a ``figcaption`` is read as its figure's image or table caption instead."""
    figure = el.getparent()
    return figure is not None and bool(figure.xpath(".//img|.//table"))


def _figure_caption(el: Any) -> str:
    for anc in el.iterancestors("figure"):
        caption = anc.find("figcaption")
        return _text(caption.text_content()) if caption is not None else ""
    return ""


def _leading_th_rows(rows: list[Any]) -> int:
    count = 0
    for row in rows:
        cells = [c for c in row if _tag(c) in ("td", "th")]
        if not cells or any(_tag(c) != "th" for c in cells):
            break
        count += 1
    return count


def _grid(rows: list[Any]) -> list[list[str]]:
    """The table's cell text with each span repeated in every row and column it covers."""
    grid: list[list[str]] = []
    carried: dict[int, tuple[int, str]] = {}  # column -> (rows still to cover, text)
    for row in rows:
        out: list[str] = []
        for cell in row:
            if _tag(cell) not in ("td", "th"):
                continue
            _fill_carried(out, carried)
            text = _text(cell.text_content())
            span = min(max(_int(cell.get("colspan"), 1), 1), MAX_SPAN)
            down = min(max(_int(cell.get("rowspan"), 1), 1), MAX_TABLE_ROWS)
            for _ in range(span):
                if down > 1:
                    carried[len(out)] = (down - 1, text)
                out.append(text)
        _fill_carried(out, carried)
        grid.append(out)
    width = max((len(r) for r in grid), default=0)
    return [r + [""] * (width - len(r)) for r in grid if any(r)]


def _fill_carried(out: list[str], carried: dict[int, tuple[int, str]]) -> None:
    """Append the text of cells spanning down from rows above into the next columns."""
    while len(out) in carried:
        col = len(out)
        left, text = carried[col]
        out.append(text)
        if left <= 1:
            del carried[col]
        else:
            carried[col] = (left - 1, text)
