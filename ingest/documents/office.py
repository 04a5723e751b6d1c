"""Word (.docx) and PowerPoint (.pptx) files as blocks in reading order.

Word: the body's paragraphs and tables in order; running headers and footers, the
table of contents and deleted (tracked) text are not read. A paragraph is a heading
when its outline level or its style says so (``Heading N`` is level N, ``Title`` level
1, and a style whose outline level is set counts, so localised style names work);
a list paragraph (numbered, or styled ``List ...``) reads ``- item``, or ``1. item``,
``b) item`` as Word numbers it (:mod:`.numbering`), indented two spaces a level.
Pictures follow the paragraph they sit in; text boxes follow as paragraphs of their
own. Merged table cells repeat their text in every column and row they cover, so
columns line up.

PowerPoint: one page per slide. The title comes first as a level-1 heading, then the
other shapes from top to bottom, left to right; bulleted paragraphs read ``- item``,
two spaces of indent a level; speaker notes close the slide as ``Notes: ...``.

Both take the document's title from its properties, else its first level-1 heading
(for slides, the first slide's title).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from .model import (
    HEADING,
    IMAGE,
    MAX_IMAGE_BYTES,
    MAX_PAGES,
    MAX_TABLE_ROWS,
    MIN_IMAGE_SIDE,
    TABLE,
    TEXT,
    Block,
    Parsed,
)
from .numbering import Numbering
from .zipguard import broken_file, check_zip, size_text

NS = {
    "w": "http://schemas.openxmlformats.org/wordprocessingml/2006/main",
    "a": "http://schemas.openxmlformats.org/drawingml/2006/main",
    "r": "http://schemas.openxmlformats.org/officeDocument/2006/relationships",
    "wp": "http://schemas.openxmlformats.org/drawingml/2006/wordprocessingDrawing",
    "v": "urn:schemas-microsoft-com:vml",
    "mc": "http://schemas.openxmlformats.org/markup-compatibility/2006",
    "p": "http://schemas.openxmlformats.org/presentationml/2006/main",
}
#: English Metric Units in one pixel at 96 dpi
EMU_PER_PX = 9525
#: the most grid columns one Word cell may span (Word's own table limit is 63)
MAX_SPAN = 64


def _q(name: str) -> str:
    prefix, _, local = name.partition(":")
    return f"{{{NS[prefix]}}}{local}"


P, TBL, TR, TC, T = _q("w:p"), _q("w:tbl"), _q("w:tr"), _q("w:tc"), _q("w:t")
SDT, SDT_CONTENT, CUSTOM_XML = _q("w:sdt"), _q("w:sdtContent"), _q("w:customXml")
TXBX, FALLBACK = _q("w:txbxContent"), _q("mc:Fallback")
BLIP, IMAGEDATA = _q("a:blip"), _q("v:imagedata")
#: run content whose text is not the paragraph's own: deleted text, field codes,
#: drawings and their text boxes (read apart), the fallback copy of new markup
_SKIP_RUN = frozenset(
    _q(n) for n in ("w:del", "w:moveFrom", "w:drawing", "w:pict", "mc:Fallback", "w:instrText")
)
_CHARS = {_q("w:tab"): "\t", _q("w:br"): "\n", _q("w:cr"): "\n", _q("w:noBreakHyphen"): "-"}
_HEADING_STYLE = re.compile(r"^heading\s*([1-9])$", re.I)
_TOC_STYLE = re.compile(r"^toc\s*(\d|heading)", re.I)
_SPACES = re.compile(r"[^\S\n]+")


def _clean(text: str) -> str:
    """Whitespace runs to one space, line breaks kept, the ends trimmed."""
    return re.sub(r" *\n *", "\n", _SPACES.sub(" ", text)).strip()


def _val(el: Any, path: str) -> str | None:
    """The ``w:val`` of the element at ``path`` under ``el`` (None when absent)."""
    found = el.find(path, NS) if el is not None else None
    return None if found is None else found.get(_q("w:val"), "")


def _inside(el: Any, stop: Any, tags: frozenset[str]) -> bool:
    """Whether an element between ``el`` and ``stop`` (both excluded) has one of ``tags``."""
    parent = el.getparent()
    while parent is not None and parent is not stop:
        if parent.tag in tags:
            return True
        parent = parent.getparent()
    return False


def _image_block(data: bytes, mime: str, alt: str, what: str, warnings: list[str]) -> Block:
    if len(data) > MAX_IMAGE_BYTES:
        warnings.append(
            f"{what}: {size_text(len(data))}, over the {size_text(MAX_IMAGE_BYTES)} limit; "
            "its bytes were not kept"
        )
        data, mime = b"", ""
    return Block(IMAGE, data=data, mime=mime, alt=alt)


def _too_small(cx: Any, cy: Any) -> bool:
    """Whether a picture shown at ``cx`` by ``cy`` EMU is a rule, bullet or spacer."""
    sides = [int(s) for s in (cx, cy) if s is not None and str(s).lstrip("-").isdigit()]
    return any(s < MIN_IMAGE_SIDE * EMU_PER_PX for s in sides)


# --- Word ---------------------------------------------------------------------------


def read_docx(path: Path, uri: str) -> Parsed:
    """Parse the Word file at ``path``; ``uri`` names it in errors and warnings."""
    check_zip(path, uri, ".docx")
    import docx
    from docx.opc.exceptions import OpcError

    with broken_file(uri, ".docx", OpcError):
        document = docx.Document(str(path))
        reader = _Docx(document.part, *_docx_styles(document), Numbering(document))
        reader.container(document.element.body)
        title = (document.core_properties.title or "").strip()
    first = next((b.text for b in reader.blocks if b.kind == HEADING and b.level == 1), "")
    return Parsed(title=title or first, blocks=reader.blocks, warnings=reader.warnings)


_Styles = dict[str, tuple[str, int | None, str | None]]


def _docx_styles(document: Any) -> tuple[_Styles, str]:
    """Each paragraph style id: its name, outline level and numbering instance, with
    what it inherits from the styles it is based on; and the default style's id."""
    raw: dict[str, tuple[str, str | None, str | None, str | None]] = {}
    default = ""
    for style in document.styles.element.findall("w:style", NS):
        if style.get(_q("w:type")) not in (None, "paragraph"):
            continue
        sid = style.get(_q("w:styleId"), "")
        if style.get(_q("w:default")) in ("1", "true", "on"):
            default = sid
        outline = _val(style, "w:pPr/w:outlineLvl")
        num_id = _val(style, "w:pPr/w:numPr/w:numId")
        raw[sid] = (_val(style, "w:name") or "", outline, _val(style, "w:basedOn"), num_id)
    styles: _Styles = {}
    for sid, (name, _, _, _) in raw.items():
        outline = num_id = None
        seen: set[str] = set()
        at: str | None = sid
        while at in raw and at not in seen:  # the nearest style that sets a value wins
            seen.add(at)
            _, own_outline, at, own_num = raw[at]
            outline = outline if outline is not None else own_outline
            num_id = num_id if num_id is not None else own_num
        level = int(outline) if outline and outline.isdigit() else None
        styles[sid] = (name, level, num_id if num_id not in (None, "0") else None)
    return styles, default


class _Docx:
    """Reads a Word body into blocks; its styles are resolved once up front."""

    def __init__(
        self, part: Any, styles: _Styles, default_style: str, numbering: Numbering
    ) -> None:
        self.part = part
        self.numbering = numbering
        self.styles = styles
        self.default_style = default_style
        self.blocks: list[Block] = []
        self.warnings: list[str] = []
        self.tables = 0
        self.caption: Block | None = None  # the last paragraph styled as a caption

    def container(self, parent: Any) -> None:
        """The paragraphs and tables of the body (or a content control) in order."""
        for child in parent.iterchildren():
            if child.tag == P:
                self.paragraph(child)
            elif child.tag == TBL:
                self.table(child)
            elif child.tag == SDT and not self.is_toc(child):
                content = child.find("w:sdtContent", NS)
                if content is not None:
                    self.container(content)
            elif child.tag == CUSTOM_XML:
                self.container(child)

    @staticmethod
    def is_toc(sdt: Any) -> bool:
        gallery = _val(sdt, "w:sdtPr/w:docPartObj/w:docPartGallery") or ""
        return gallery.lower().startswith("table of contents")

    def paragraph(self, p: Any) -> None:
        style_id = _val(p, "w:pPr/w:pStyle") or self.default_style
        name, style_outline, style_num = self.styles.get(style_id, ("", None, None))
        if _TOC_STYLE.match(name):
            return
        text = _clean(_run_text(p))
        level = _heading_level(name, _val(p, "w:pPr/w:outlineLvl"), style_outline)
        if level and text:
            self.blocks.append(Block(HEADING, text=text.replace("\n", " "), level=level))
        elif text and name.strip().lower() == "caption":
            self.add_caption(text)
        elif text:
            num_id = _val(p, "w:pPr/w:numPr/w:numId")
            num_id = style_num if num_id is None else num_id
            if num_id not in (None, "0") or "list" in name.lower():
                depth = _val(p, "w:pPr/w:numPr/w:ilvl") or "0"
                level = min(int(depth) if depth.isdigit() else 0, 8)
                marker = self.numbering.marker(num_id if num_id != "0" else None, level)
                text = "  " * level + marker + " " + text
            self.blocks.append(Block(TEXT, text=text))
        self.images(p)
        for box in p.iter(TXBX):
            if not _inside(box, p, frozenset((TXBX, FALLBACK))):
                self.container(box)

    def add_caption(self, text: str) -> None:
        """A caption names the picture just before it (Word puts figure captions
        below); else it stays a paragraph, which a table right after it takes as its
        caption (table captions go above)."""
        last = self.blocks[-1] if self.blocks else None
        if last is not None and last.kind == IMAGE and not last.text:
            last.text = text
        else:
            self.caption = Block(TEXT, text=text)
            self.blocks.append(self.caption)

    def images(self, scope: Any) -> None:
        """The pictures in ``scope`` (not in its text boxes) as image blocks, in order."""
        for el in scope.iter(BLIP, IMAGEDATA):
            if _inside(el, scope, frozenset((TXBX, FALLBACK))):
                continue
            rid = el.get(_q("r:embed") if el.tag == BLIP else _q("r:id"))
            holder = next((a for a in el.iterancestors(_q("wp:inline"), _q("wp:anchor"))), None)
            extent = holder.find("wp:extent", NS) if holder is not None else None
            if extent is not None and _too_small(extent.get("cx"), extent.get("cy")):
                continue
            alt = ""
            if holder is not None:
                doc_pr = holder.find("wp:docPr", NS)
                if doc_pr is not None:
                    alt = doc_pr.get("descr") or doc_pr.get("title") or ""
            else:
                shape = next(el.iterancestors(_q("v:shape")), None)
                alt = shape.get("alt", "") if shape is not None else ""
            image = self.part.related_parts.get(rid) if rid else None
            if image is None or not str(image.content_type).startswith("image/"):
                continue  # a linked picture: its bytes live elsewhere
            what = f"image {image.partname}"
            self.blocks.append(
                _image_block(image.blob, image.content_type, _clean(alt), what, self.warnings)
            )

    def table(self, tbl: Any) -> None:
        self.tables += 1
        rows = tbl.findall("w:tr", NS)
        if len(rows) > MAX_TABLE_ROWS:
            self.warnings.append(
                f"table {self.tables}: {len(rows)} rows, only the first {MAX_TABLE_ROWS} read"
            )
            rows = rows[:MAX_TABLE_ROWS]
        grid = _docx_grid(rows)
        header = 0
        for tr in rows:
            if _val(tr, "w:trPr/w:tblHeader") in (None, "0", "false", "off"):
                break
            header += 1
        if any(any(row) for row in grid):
            caption = ""
            if self.caption is not None and self.blocks and self.blocks[-1] is self.caption:
                caption = self.blocks.pop().text
            self.blocks.append(Block(TABLE, text=caption, rows=grid, header_rows=max(header, 1)))
        self.images(tbl)


def _heading_level(style_name: str, own_outline: str | None, style_outline: int | None) -> int:
    """1 and deeper for a heading paragraph, 0 for body text."""
    if own_outline is not None and own_outline.isdigit():
        return int(own_outline) + 1 if int(own_outline) < 9 else 0
    match = _HEADING_STYLE.match(style_name.strip())
    if match:
        return int(match.group(1))
    if style_name.strip().lower() == "title":
        return 1
    return style_outline + 1 if style_outline is not None and style_outline < 9 else 0


def _run_text(el: Any) -> str:
    """The visible text of a paragraph's runs, hyperlinks, fields and content controls."""
    parts: list[str] = []
    for child in el.iterchildren():
        tag = child.tag
        if tag == T:
            parts.append(child.text or "")
        elif tag in _CHARS:
            kind = child.get(_q("w:type"))
            parts.append(" " if kind in ("page", "column") else _CHARS[tag])
        elif tag not in _SKIP_RUN and isinstance(tag, str):
            parts.append(_run_text(child))
    return "".join(parts)


def _docx_grid(rows: list[Any]) -> list[list[str]]:
    """Cell text by grid position, a merged cell's text in each position it covers."""
    grid: list[list[str]] = []
    for tr in rows:
        before = _val(tr, "w:trPr/w:gridBefore")
        out = [""] * min(int(before) if before and before.isdigit() else 0, MAX_SPAN)
        for tc in tr.iter(TC):
            if _inside(tc, tr, frozenset((TC,))):
                continue  # a nested table's cell: read into its outer cell's text
            span_val = _val(tc, "w:tcPr/w:gridSpan")
            span = min(int(span_val), MAX_SPAN) if span_val and span_val.isdigit() else 1
            merge = _val(tc, "w:tcPr/w:vMerge")
            continued = merge is not None and merge != "restart"  # the cell above goes on
            above = grid[-1] if grid else []
            text = "" if continued else _cell_text(tc)
            for _ in range(max(span, 1)):
                col = len(out)
                out.append((above[col] if col < len(above) else "") if continued else text)
        grid.append(out)
    width = max((len(r) for r in grid), default=0)
    return [r + [""] * (width - len(r)) for r in grid]


def _cell_text(tc: Any) -> str:
    paragraphs = (p for p in tc.iter(P) if not _inside(p, tc, frozenset((FALLBACK,))))
    return " ".join(t for t in (_clean(_run_text(p)).replace("\n", " ") for p in paragraphs) if t)


# --- PowerPoint -----------------------------------------------------------------------


def read_pptx(path: Path, uri: str) -> Parsed:
    """Parse the PowerPoint file at ``path``; ``uri`` names it in errors and warnings."""
    check_zip(path, uri, ".pptx")
    import pptx
    from pptx.exc import PythonPptxError

    with broken_file(uri, ".pptx", PythonPptxError):
        deck = pptx.Presentation(str(path))
        slides = list(deck.slides)
        parsed = Parsed(paged=True, pages=min(len(slides), MAX_PAGES))
        if len(slides) > MAX_PAGES:
            parsed.warnings.append(f"{len(slides)} slides, only the first {MAX_PAGES} read")
        for number, slide in enumerate(slides[:MAX_PAGES], start=1):
            _Slide(number, parsed.warnings).read(slide, parsed.blocks)
        title = (deck.core_properties.title or "").strip()
    first = next((b.text for b in parsed.blocks if b.kind == HEADING), "")
    parsed.title = title or first
    return parsed


_SKIP_PLACEHOLDERS = ("DATE", "FOOTER", "SLIDE_NUMBER", "HEADER")
_UNBULLETED_PLACEHOLDERS = ("TITLE", "CENTER_TITLE", "SUBTITLE", "VERTICAL_TITLE")


def _placeholder(shape: Any) -> str:
    """The placeholder type's name (``BODY``), or "" for a shape that is not one."""
    if not shape.is_placeholder:
        return ""
    kind = shape.placeholder_format.type
    return str(getattr(kind, "name", kind) or "OBJECT")


class _Slide:
    """Reads one slide: the title, then the shapes in position order, then the notes."""

    def __init__(self, number: int, warnings: list[str]) -> None:
        self.number = number
        self.warnings = warnings
        self.blocks: list[Block] = []

    def read(self, slide: Any, out: list[Block]) -> None:
        title = slide.shapes.title
        if title is not None and title.has_text_frame:
            text = _clean(title.text_frame.text.replace("\v", " ").replace("\n", " "))
            if text:
                self.add(Block(HEADING, text=text, level=1))
        self.shapes(s for s in slide.shapes if title is None or s.shape_id != title.shape_id)
        if slide.has_notes_slide:
            frame = slide.notes_slide.notes_text_frame
            notes = _clean(frame.text.replace("\v", "\n")) if frame is not None else ""
            if notes:
                self.add(Block(TEXT, text=f"Notes: {notes}"))
        out.extend(self.blocks)

    def add(self, block: Block) -> None:
        block.page = self.number
        self.blocks.append(block)

    def shapes(self, shapes: Any) -> None:
        from pptx.shapes.group import GroupShape
        from pptx.shapes.picture import Picture

        for shape in sorted(shapes, key=lambda s: (s.top or 0, s.left or 0)):
            kind = _placeholder(shape)
            if kind in _SKIP_PLACEHOLDERS:
                continue
            if isinstance(shape, GroupShape):
                self.shapes(shape.shapes)
            elif isinstance(shape, Picture):
                self.picture(shape)
            elif getattr(shape, "has_table", False):
                self.table(shape.table)
            elif shape.has_text_frame:
                self.text(
                    shape.text_frame, bulleted=bool(kind) and kind not in _UNBULLETED_PLACEHOLDERS
                )

    def text(self, frame: Any, bulleted: bool) -> None:
        for paragraph in frame.paragraphs:
            text = _clean(paragraph.text.replace("\v", "\n"))
            if not text:
                continue
            ppr = paragraph._p.find("a:pPr", NS)
            if ppr is not None and ppr.find("a:buNone", NS) is not None:
                bullet = False
            elif ppr is not None and (
                ppr.find("a:buChar", NS) is not None or ppr.find("a:buAutoNum", NS) is not None
            ):
                bullet = True
            else:
                bullet = bulleted
            if bullet:
                text = "  " * paragraph.level + "- " + text
            self.add(Block(TEXT, text=text))

    def table(self, table: Any) -> None:
        grid = [[_clean(cell.text).replace("\n", " ") for cell in row.cells] for row in table.rows]
        for r, row in enumerate(table.rows):
            for c, cell in enumerate(row.cells):
                if not cell.is_merge_origin:
                    continue
                for dr in range(cell.span_height):
                    for dc in range(cell.span_width):
                        if r + dr < len(grid) and c + dc < len(grid[r + dr]):
                            grid[r + dr][c + dc] = grid[r][c]
        if any(any(row) for row in grid):
            self.add(Block(TABLE, rows=grid[:MAX_TABLE_ROWS], header_rows=1))

    def picture(self, shape: Any) -> None:
        if _too_small(shape.width, shape.height):
            return
        c_nv_pr = shape.element.find("./*/p:cNvPr", NS)
        alt = ""
        if c_nv_pr is not None:
            alt = c_nv_pr.get("descr") or c_nv_pr.get("title") or ""
        try:
            image = shape.image
        except (KeyError, ValueError, AttributeError):
            if alt:  # a linked picture: its bytes live elsewhere
                self.add(Block(IMAGE, alt=_clean(alt)))
            return
        what = f"slide {self.number}: image {shape.name!r}"
        self.add(_image_block(image.blob, image.content_type, _clean(alt), what, self.warnings))
