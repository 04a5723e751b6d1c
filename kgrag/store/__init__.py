"""Graph stores. ``open_store`` returns the embedded SQLite + numpy store."""

from __future__ import annotations

from pathlib import Path

from .base import (
    GRAPHS,
    RECORD_KINDS,
    VECTOR_KINDS,
    Adjacency,
    GraphReader,
    GraphStore,
    GraphWriter,
)
from .sqlite import SQLiteGraphStore


def open_store(
    root: str | Path, *, keep_versions: int = 3, ann_min_rows: int = 200_000
) -> GraphStore:
    """The graph folder ``root`` (it need not exist yet)."""
    return SQLiteGraphStore(root, keep_versions=keep_versions, ann_min_rows=ann_min_rows)


__all__ = [
    "GRAPHS",
    "Adjacency",
    "RECORD_KINDS",
    "VECTOR_KINDS",
    "GraphReader",
    "GraphStore",
    "GraphWriter",
    "SQLiteGraphStore",
    "open_store",
]
