"""Spreadsheets (.xlsx) and comma-separated files (.csv) as tables.

Each non-empty sheet of a workbook is a level-1 heading (the sheet's name) and one
table; a CSV file is one table. Empty rows are dropped and empty columns at either
side trimmed; the first row is the header. Values read as a person sees them in a
cell: whole numbers without ``.0``, other numbers in at most 15 significant digits,
dates in ISO form, booleans as ``TRUE``/``FALSE``. A workbook is read for its cached
values (what Excel last computed), never its formulas.
"""

from __future__ import annotations

import codecs
import csv
import datetime as dt
import re
import warnings
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from kgrag.errors import InputError

from .model import HEADING, MAX_TABLE_ROWS, TABLE, Block, Parsed
from .zipguard import broken_file, check_zip

#: how much of a CSV file the dialect is guessed from
SNIFF_BYTES = 8192
#: the delimiters a CSV file is taken to use
DELIMITERS = ",;\t|"
_CHUNK = 1024 * 1024
_WS = re.compile(r"\s+")
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


def read_xlsx(path: Path, uri: str) -> Parsed:
    """Parse the Excel workbook at ``path``; ``uri`` names it in errors and warnings."""
    check_zip(path, uri, ".xlsx")
    import openpyxl
    from openpyxl.utils.exceptions import InvalidFileException

    parsed = Parsed()
    with (
        broken_file(uri, ".xlsx", InvalidFileException),
        path.open("rb") as f,
        warnings.catch_warnings(),
    ):
        # openpyxl warns about features it drops (data validation, default styles)
        warnings.simplefilter("ignore")
        book = openpyxl.load_workbook(f, read_only=True, data_only=True)
        try:
            parsed.title = (book.properties.title or "").strip()
            for sheet in book.worksheets:
                declared = sheet.max_row
                sheet.reset_dimensions()  # some writers declare less than they hold
                what = f"sheet {sheet.title!r}"
                rows = _rows(sheet.iter_rows(values_only=True), what, parsed.warnings, declared)
                if rows:
                    parsed.blocks.append(Block(HEADING, text=str(sheet.title), level=1))
                    parsed.blocks.append(Block(TABLE, rows=rows, header_rows=1))
        finally:
            book.close()
    return parsed


def read_csv(path: Path, uri: str) -> Parsed:
    """Parse the UTF-8 CSV file at ``path`` (a BOM is allowed); the dialect is guessed
    from its start. ``uri`` names it in errors and warnings."""
    sample = _check_utf8(path, uri)
    try:
        dialect: Any = csv.Sniffer().sniff(sample, delimiters=DELIMITERS)
    except csv.Error:
        dialect = csv.excel
    parsed = Parsed()
    try:
        with path.open(encoding="utf-8-sig", newline="") as f:
            reader = csv.reader(f, dialect)
            try:
                rows = _rows(reader, "table", parsed.warnings, None)
            except csv.Error as exc:
                reason = f"not a readable CSV file (line {reader.line_num}: {exc})"
                raise InputError(uri, reason) from None
    except OSError as exc:
        raise InputError(uri, f"cannot read the file ({exc.strerror or exc})") from None
    if rows:
        parsed.blocks.append(Block(TABLE, rows=rows, header_rows=1))
    return parsed


def _check_utf8(path: Path, uri: str) -> str:
    """Check the whole file decodes as UTF-8, and return its start for the sniffer.

    Decoding in chunks keeps memory flat and lets the error name the byte's offset.
    """
    decoder = codecs.getincrementaldecoder("utf-8-sig")()
    sample: list[str] = []
    offset = 0
    try:
        with path.open("rb") as f:
            while chunk := f.read(_CHUNK):
                try:
                    text = decoder.decode(chunk)
                except UnicodeDecodeError as exc:
                    at = offset + exc.start
                    bad = chunk[exc.start : exc.start + 1].hex().upper()
                    raise InputError(
                        uri, f"not UTF-8 text (byte 0x{bad} at offset {at}); save it as UTF-8"
                    ) from None
                if offset < SNIFF_BYTES:
                    sample.append(text[:SNIFF_BYTES])
                offset += len(chunk)
            decoder.decode(b"", final=True)
    except UnicodeDecodeError:
        raise InputError(
            uri, f"not UTF-8 text (ends inside a character at offset {offset})"
        ) from None
    except OSError as exc:
        raise InputError(uri, f"cannot read the file ({exc.strerror or exc})") from None
    if offset == 0:
        raise InputError(uri, "empty file")
    head = "".join(sample)[:SNIFF_BYTES]
    # a sample cut inside a line misleads the sniffer: keep whole lines when there are some
    return head[: head.rfind("\n") + 1] if "\n" in head else head


def _rows(
    source: Iterable[Iterable[Any]], what: str, notes: list[str], total: int | None
) -> list[list[str]]:
    """The non-empty rows of ``source`` as cell strings, at most :data:`MAX_TABLE_ROWS`,
    the columns empty in every row trimmed from both sides.

    Past the cap, the rest is counted for the warning when ``total`` (a sheet's own
    row count, too slow to count in openpyxl) is not given.
    """
    rows: list[list[str]] = []
    it: Iterator[Iterable[Any]] = iter(source)
    for values in it:
        row = [cell_text(v) for v in values]
        if not any(row):
            continue
        if len(rows) == MAX_TABLE_ROWS:
            if total is None:
                rest = sum(1 for more in it if any(cell_text(v) for v in more))
                count = f"{MAX_TABLE_ROWS + 1 + rest} rows"
            else:
                count = f"{total} rows" if total > MAX_TABLE_ROWS else "more rows"
            notes.append(f"{what}: {count}, only the first {MAX_TABLE_ROWS} read")
            break
        rows.append(row)
    if not rows:
        return []
    first = min(next(i for i, c in enumerate(r) if c) for r in rows)
    last = max(max(i for i, c in enumerate(r) if c) for r in rows) + 1
    return [(r + [""] * (last - len(r)))[first:last] for r in rows]


def cell_text(value: Any) -> str:
    """A cell's value as the text a person reads in it."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if value.is_integer() and abs(value) < 1e15:
            return str(int(value))
        return format(value, ".15g")
    if isinstance(value, dt.datetime):
        if value.time() == dt.time(0):
            return value.date().isoformat()
        return value.isoformat(timespec="seconds" if not value.microsecond else "auto")
    if isinstance(value, (dt.date, dt.time)):
        return value.isoformat()
    return _WS.sub(" ", _CONTROL.sub("", str(value))).strip()
