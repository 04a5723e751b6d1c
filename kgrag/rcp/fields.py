"""The metadata fields an RCP/1 filter (spec §8) can name, and their types.

A chunk's filterable metadata is its own and its document's, plus the built-in
fields (:func:`chunk_meta`); :func:`infer_fields` types the fields of a set of
chunks as a server advertises them in ``capabilities.filter.fields``. The write
side records them in a version's manifest at commit and the read side filters on
them, so both sides import them from here.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from datetime import date, datetime, timezone
from typing import Any

from kgrag.types import Chunk, Document

#: fields every chunk carries; ``section`` is the chunk's context path
BUILTIN_FIELDS: dict[str, str] = {
    "docId": "keyword",
    "title": "keyword",
    "source": "keyword",
    "section": "text",
}

_ISO_DATE = re.compile(
    r"\d{4}-\d{2}-\d{2}"
    r"(?:[Tt ]\d{2}:\d{2}(?::\d{2}(?:[.,]\d{1,9})?)?(?:[Zz]|[+-]\d{2}:?\d{2})?)?"
)


def chunk_meta(chunk: Chunk, doc: Document) -> dict[str, Any]:
    """The filterable fields of a chunk: its own and its document's metadata, plus
    ``docId``, ``title``, ``source`` and ``section``."""
    source = str(doc.meta.get("source", ""))
    return dict(chunk.meta) | {
        "docId": chunk.doc_id,
        "title": doc.title,
        "source": source,
        "section": chunk.context,
    }


def infer_fields(metas: Iterable[Mapping[str, Any]]) -> dict[str, str]:
    """The ``filter.fields`` to advertise for metadata dicts like ``metas``.

    A list-valued field gets its element type (lists answer ``contains``).
    ``int`` mixed with ``float`` is ``float``; date strings mixed with other
    strings are ``keyword``; any other mix, or nested objects, drop the field.
    The :data:`BUILTIN_FIELDS` are always present and win over metadata keys.
    """
    kinds: dict[str, set[str]] = {}
    for meta in metas:
        for key, value in meta.items():
            if value is None:
                continue
            values = value if isinstance(value, (list, tuple)) else [value]
            kinds.setdefault(key, set()).update(_kind(v) for v in values)
    fields = {key: t for key, ks in kinds.items() if (t := _resolve(ks)) is not None}
    fields.update(BUILTIN_FIELDS)
    return dict(sorted(fields.items()))


def _kind(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "float"
    if isinstance(value, (date, datetime)):
        return "date"
    if isinstance(value, str):
        return "date" if parse_date(value) is not None else "keyword"
    return "bad"


def _resolve(kinds: set[str]) -> str | None:
    if len(kinds) == 1 and "bad" not in kinds:
        return next(iter(kinds))
    if kinds == {"int", "float"}:
        return "float"
    if kinds == {"keyword", "date"}:
        return "keyword"
    return None


def parse_date(text: str) -> datetime | None:
    """An RFC 3339 date or timestamp as an aware datetime (naive: UTC); None if not one."""
    if not _ISO_DATE.fullmatch(text):
        return None
    text = text.replace(",", ".")
    if text[-1] in "Zz":
        text = text[:-1] + "+00:00"
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=timezone.utc)
