"""Documents in their own formats: PDF, Word, PowerPoint, HTML, spreadsheets, CSV and
images, each read into typed blocks (:mod:`.model`) and written out as one
:class:`~kgrag.types.Document` with its layout (:mod:`.assemble`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from kgrag.errors import InputError
from kgrag.types import Document

from .assemble import LAYOUT, document
from .model import Parsed

#: file extensions read here, and the format each names
FORMATS = {
    ".pdf": "pdf",
    ".docx": "docx",
    ".pptx": "pptx",
    ".xlsx": "xlsx",
    ".csv": "csv",
    ".html": "html",
    ".htm": "html",
    ".png": "image",
    ".jpg": "image",
    ".jpeg": "image",
    ".tif": "image",
    ".tiff": "image",
}

Progress = Callable[[int, int], None]


@dataclass(slots=True)
class Read:
    """One file read: its document and the warnings about parts read only in part."""

    document: Document
    warnings: list[str] = field(default_factory=list)


def read_file(path: Path, uri: str, progress: Progress | None = None) -> Read:
    """Read one file of a :data:`FORMATS` type; an unreadable file raises
    :class:`~kgrag.errors.InputError` naming it and saying why."""
    fmt = FORMATS[path.suffix.lower()]
    try:
        if path.stat().st_size == 0:
            raise InputError(uri, "empty file")
        parsed = _parse(fmt, path, uri, progress)
    except InputError:
        raise
    except MemoryError:
        raise InputError(uri, "ran out of memory reading the file") from None
    except Exception as exc:  # noqa: BLE001 - a parser's own failure names the file
        raise InputError(uri, f"cannot read {fmt} file ({type(exc).__name__}: {exc})") from None
    if not any(b.text.strip() or b.rows or b.data or b.ocr for b in parsed.blocks):
        raise InputError(uri, _nothing(parsed))
    return Read(document(parsed, path, uri, fmt), parsed.warnings)


def _nothing(parsed: Parsed) -> str:
    if parsed.warnings:
        return "no content could be read: " + "; ".join(parsed.warnings[:3])
    return "no content found in the file"


def _parse(fmt: str, path: Path, uri: str, progress: Progress | None) -> Parsed:
    if fmt == "pdf":
        from . import pdf

        return pdf.read(path, uri, progress)
    if fmt == "image":
        from . import images

        return images.read(path, uri)
    if fmt in ("docx", "pptx"):
        from . import office

        return office.read_docx(path, uri) if fmt == "docx" else office.read_pptx(path, uri)
    if fmt in ("xlsx", "csv"):
        from . import sheets

        return sheets.read_xlsx(path, uri) if fmt == "xlsx" else sheets.read_csv(path, uri)
    from . import html

    return html.read(path, uri)


__all__ = ["FORMATS", "LAYOUT", "Read", "read_file"]
