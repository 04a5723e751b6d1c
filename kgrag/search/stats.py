"""What a search derives from the store's push-down reads: an entity's specificity
and statistics, name lookups, a passage's graph vertex and title entity. Each is one
read of the store (:meth:`kgrag.store.GraphReader.attribute` or
:meth:`~kgrag.store.GraphReader.lookup`), so it costs what the store's read costs."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from kgrag.store import GraphReader


def lookup_names(reader: GraphReader, keys: Sequence[str]) -> dict[str, int]:
    """Entity rows by name key (:meth:`GraphReader.lookup` of ``entities``)."""
    return reader.lookup("entities", keys)


def entity_stats(reader: GraphReader, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per entity row: how many passages mention it, and its graph degree."""
    return reader.attribute("entities", "chunks", rows), reader.attribute(
        "entities", "degree", rows
    )


def specificity(reader: GraphReader, rows: np.ndarray) -> np.ndarray:
    """1 / the number of passages mentioning each entity (HippoRAG's node specificity)."""
    chunks = reader.attribute("entities", "chunks", rows)
    return 1.0 / np.maximum(1, chunks).astype(np.float64)


def chunk_vertices(reader: GraphReader, rows: np.ndarray | None = None) -> np.ndarray:
    """The graph vertex of each chunk row (every row when None)."""
    return np.asarray(reader.attribute("chunks", "vertex", rows))


def title_entity(reader: GraphReader, rows: np.ndarray) -> np.ndarray:
    """The entity row that each chunk row's document title names (-1 none)."""
    return np.asarray(reader.attribute("chunks", "title_entity", rows))
