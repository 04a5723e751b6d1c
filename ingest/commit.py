"""Commit stage: write every record and vector of a build, publish one version.

Nothing is visible to readers until the store's commit renames the finished
version into place and swaps the manifest, so a crash anywhere before that
leaves the previous version as it was.
"""

from __future__ import annotations

from collections.abc import MutableMapping, Sequence
from typing import Any

import numpy as np

from kgrag.rcp.fields import chunk_meta, infer_fields
from kgrag.store import GraphStore, GraphWriter
from kgrag.threads import give_back
from kgrag.types import Chunk, Document


def commit(
    store: GraphStore,
    records: MutableMapping[str, Sequence[Any]],
    vectors: MutableMapping[str, tuple[Sequence[str], np.ndarray]],
    meta: dict[str, Any],
) -> str:
    """Write ``records`` (kind -> records) and ``vectors`` (kind -> ids, matrix); publish.
    Both mappings are emptied as they are written (:func:`commit_with`)."""
    with store.writer() as writer:
        return commit_with(writer, records, vectors, meta)


def commit_with(
    writer: GraphWriter,
    records: MutableMapping[str, Sequence[Any]],
    vectors: MutableMapping[str, tuple[Sequence[str], np.ndarray]],
    meta: dict[str, Any],
) -> str:
    """:func:`commit` through a writer the caller already holds (and so the store lock).
    The manifest also gets the chunks' filterable fields (``filterFields``), so that a
    reader advertises them without reading every chunk. Each kind is taken out of
    ``records`` and ``vectors`` once written, so that what the caller held is freed
    before the writer derives the serving files (a build's peak memory)."""
    if "chunks" in records and "documents" in records:
        meta = dict(meta, filterFields=filter_fields(records["chunks"], records["documents"]))
    for kind in list(records):
        writer.add(kind, records.pop(kind))
    for kind in list(vectors):
        ids, matrix = vectors.pop(kind)
        writer.add_vectors(kind, ids, matrix)
        del ids, matrix
    give_back()
    return writer.commit(meta)


def filter_fields(chunks: Sequence[Chunk], documents: Sequence[Document]) -> dict[str, str]:
    """The ``filter.fields`` a retriever advertises for these chunks."""
    docs = {d.id: d for d in documents}
    return infer_fields(chunk_meta(c, docs[c.doc_id]) for c in chunks if c.doc_id in docs)
