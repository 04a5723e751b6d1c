"""Commit stage: write every record and vector of a build, publish one version.

Nothing is visible to readers until the store's commit renames the finished
version into place and swaps the manifest, so a crash anywhere before that
leaves the previous version as it was.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from kgrag.store import GraphStore, GraphWriter


def commit(
    store: GraphStore,
    records: Mapping[str, Sequence[Any]],
    vectors: Mapping[str, tuple[Sequence[str], np.ndarray]],
    meta: dict[str, Any],
) -> str:
    """Write ``records`` (kind -> records) and ``vectors`` (kind -> ids, matrix); publish."""
    with store.writer() as writer:
        return commit_with(writer, records, vectors, meta)


def commit_with(
    writer: GraphWriter,
    records: Mapping[str, Sequence[Any]],
    vectors: Mapping[str, tuple[Sequence[str], np.ndarray]],
    meta: dict[str, Any],
) -> str:
    """:func:`commit` through a writer the caller already holds (and so the store lock)."""
    for kind, batch in records.items():
        writer.add(kind, batch)
    for kind, (ids, matrix) in vectors.items():
        writer.add_vectors(kind, ids, matrix)
    return writer.commit(meta)
