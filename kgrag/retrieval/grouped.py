"""Units grouped from chunks: a document (every chunk of it) and a page (the chunks
on one page of a PDF or one slide). A group's vector is the mean of its chunks'
vectors; its sparse score is its best chunk's; its leaves are its chunks."""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import cast

import numpy as np

from ..encoders import normalise
from ..store import GraphReader
from ..types import Document
from .items import Item, Source


def document_source(reader: GraphReader, chunk: Source) -> Source:
    """Unit ``document``: every document with chunks."""
    docs = {d.id: d for d in reader.documents()}
    groups: dict[Hashable, list[int]] = {}
    for row, item in enumerate(chunk.items):
        groups.setdefault(item.meta["docId"], []).append(row)

    def make(key: Hashable, rows: list[int]) -> Item:
        d = docs[str(key)]
        first = chunk.items[rows[0]]
        meta = {k: v for k, v in first.meta.items() if k != "section"}
        leaves = tuple(chunk.ids[r] for r in rows)
        citation = {"source": meta["source"], "uri": d.uri, "title": d.title}
        return Item(d.id, d.text, 0, leaves, meta, citation)

    return _grouped("document", chunk, groups, make)


def page_source(reader: GraphReader, chunk: Source) -> Source:
    """Unit ``page``: each page of a paged document (PDF pages, slides), its text the
    page's whole text; a chunk that runs over a page break is a leaf of both pages."""
    groups: dict[Hashable, list[int]] = {}
    for row, it in enumerate(chunk.items):
        page = it.meta.get("page")
        if isinstance(page, int):
            first, last = it.meta.get("pages") or (page, page)
            for number in range(int(first), int(last) + 1):
                groups.setdefault((it.meta["docId"], number), []).append(row)
    ids = {key[0] for key in groups if isinstance(key, tuple)}
    docs = {d.id: d for d in reader.documents(sorted(ids))} if ids else {}

    def make(key: Hashable, rows: list[int]) -> Item:
        doc_id, number = cast(tuple[str, int], key)
        d = docs[doc_id]
        first = chunk.items[rows[0]]
        meta = {k: v for k, v in first.meta.items() if k not in ("section", "pages", "html")}
        meta |= {"page": number, "chunk_type": "page"}
        meta.pop("image", None)
        meta.pop("table", None)
        leaves = tuple(chunk.ids[r] for r in rows)
        uri = f"{d.uri}#page={number}" if d.uri else ""
        citation = {"source": meta["source"], "uri": uri, "title": d.title, "page": number}
        return Item(page_id(doc_id, number), page_text(d, number), 0, leaves, meta, citation)

    return _grouped("page", chunk, groups, make)


def page_id(doc_id: str, number: int) -> str:
    """The id of page ``number`` of a document: ``pg:<document hash>:<number>``."""
    return f"pg:{doc_id.removeprefix('d:')}:{number}"


def page_text(doc: Document, number: int) -> str:
    """The whole text of one page of a document read from a paged file."""
    starts = (doc.meta.get("layout") or {}).get("pages") or []
    for i, (page, offset) in enumerate(starts):
        if int(page) == number:
            end = int(starts[i + 1][1]) if i + 1 < len(starts) else len(doc.text)
            return doc.text[int(offset) : end].strip()
    return ""


def _grouped(
    unit: str,
    chunk: Source,
    groups: dict[Hashable, list[int]],
    item: Callable[[Hashable, list[int]], Item],
) -> Source:
    keys = sorted(groups, key=str)
    dim = chunk.matrix.shape[1] if chunk.matrix.ndim == 2 else 0
    matrix = (
        normalise(np.stack([chunk.matrix[groups[k]].mean(axis=0) for k in keys]))
        if keys
        else np.zeros((0, dim))
    )
    items = [item(k, groups[k]) for k in keys]
    ids = [it.id for it in items]
    of_row: dict[int, list[int]] = {}
    for g, k in enumerate(keys):
        for row in groups[k]:
            of_row.setdefault(row, []).append(g)

    def sparse(query: str, k: int) -> list[tuple[int, float]]:
        best: dict[int, float] = {}
        for row, score in chunk.sparse(query, k * 4):
            for g in of_row.get(row, ()):
                best[g] = max(best.get(g, 0.0), score)
        return sorted(best.items(), key=lambda rs: (-rs[1], rs[0]))[:k]

    return Source(unit, ids, matrix, np.zeros(len(ids), dtype=np.int64), items, sparse)


__all__ = ["document_source", "page_id", "page_source", "page_text"]
