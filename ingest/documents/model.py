"""What a document parser returns: the file's content as typed blocks in reading order.

Every parser (PDF, Word, PowerPoint, HTML, spreadsheets, images) turns one file into a
:class:`Parsed` of :class:`Block` records; :mod:`ingest.documents.assemble` turns that
into a :class:`~kgrag.types.Document` whose layout the chunker reads. Parsers know
nothing of chunks or the graph.
"""

from __future__ import annotations

from dataclasses import dataclass, field

#: block kinds
HEADING = "heading"
TEXT = "text"
TABLE = "table"
IMAGE = "image"

#: limits every parser keeps to, so a hostile file costs bounded memory and time
MAX_UNZIPPED_BYTES = 512 * 1024 * 1024  # an Office file that unzips to more is refused
MAX_PAGES = 5000  # pages (or slides) read from one file; the rest are warned about
MAX_TABLE_ROWS = 20000  # rows read from one table or sheet
MAX_IMAGE_PIXELS = 64_000_000  # an image that decodes to more is refused
MAX_IMAGE_BYTES = 8 * 1024 * 1024  # an embedded image larger than this is not kept
MIN_IMAGE_SIDE = 24  # smaller pictures (rules, bullets, spacers) are not figures


@dataclass(slots=True)
class Block:
    """One piece of a document in reading order.

    - ``heading``: ``text`` is the title, ``level`` 1 (top) and deeper;
    - ``text``: a paragraph, list item or code block, its line breaks kept where they
      carry meaning (lists, code);
    - ``table``: ``rows`` of cell strings, the first ``header_rows`` rows the header;
      ``text`` is the caption;
    - ``image``: ``data`` (the encoded bytes) and ``mime``; ``text`` the caption,
      ``alt`` the alternative text, ``ocr`` text read from the pixels.

    ``page`` is the 1-based page or slide the block is on (0 for unpaged formats).
    """

    kind: str
    text: str = ""
    page: int = 0
    level: int = 0
    rows: list[list[str]] = field(default_factory=list)
    header_rows: int = 1
    data: bytes = b""
    mime: str = ""
    alt: str = ""
    ocr: str = ""


@dataclass(slots=True)
class Parsed:
    """A parsed file: its title (the first heading or the file name when empty), the
    blocks, whether it is paged (PDF, slides), its page count, and warnings that name
    a page or part that was read only in part (an OCR-less scan, a truncated sheet)."""

    title: str = ""
    blocks: list[Block] = field(default_factory=list)
    paged: bool = False
    pages: int = 0
    warnings: list[str] = field(default_factory=list)
