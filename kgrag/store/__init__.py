"""Graph stores. ``open_store`` returns the embedded SQLite + numpy store for a folder
and the Neo4j store for a ``neo4j://`` / ``bolt://`` URI."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kgrag.store.ann import ANN_MIN_ROWS
from kgrag.store.composed import FactParts
from kgrag.store.folder.store import SQLiteGraphStore
from kgrag.store.location import is_uri
from kgrag.store.versions import KEEP, LEASE_SECONDS, RETAIN_SECONDS

from .base import (
    GRAPHS,
    RECORD_KINDS,
    VECTOR_KINDS,
    Adjacency,
    GraphReader,
    GraphStore,
    GraphWriter,
    PassageText,
    PathLimits,
)


def open_store(
    root: str | Path,
    *,
    keep_versions: int = KEEP,
    ann_min_rows: int = ANN_MIN_ROWS,
    retain_seconds: float = RETAIN_SECONDS,
    lease_seconds: float = LEASE_SECONDS,
) -> GraphStore:
    """The graph folder ``root`` (it need not exist yet), or the graph a Neo4j URI names
    (``neo4j://HOST:PORT/NAME``; :mod:`kgrag.store.neo4j`). The keyword arguments are
    :class:`~kgrag.config.StoreConfig`'s fields (``open_store(p, **c.store.model_dump())``)."""
    options: dict[str, Any] = {
        "keep_versions": keep_versions,
        "ann_min_rows": ann_min_rows,
        "retain_seconds": retain_seconds,
        "lease_seconds": lease_seconds,
    }
    if is_uri(root):
        from kgrag.store.neo4j.store import Neo4jGraphStore

        return Neo4jGraphStore(str(root), **options)
    return SQLiteGraphStore(root, **options)


def copy_graph(
    reader: GraphReader,
    target: GraphStore,
    *,
    fact_parts: tuple[list[str], FactParts] | None = None,
) -> str:
    """Write the version ``reader`` sees as a new version of ``target`` (every record
    and vector; the serving structures are derived again): a folder graph into Neo4j,
    or back. Facts the reader keeps as parts stay parts; ``fact_parts``: the facts' ids
    and what their vectors are composed of (``ingest.embed.fact_parts`` over the
    records, rows of the reader's entity vectors), stored in place of the reader's fact
    rows. The new version's id."""
    if fact_parts is None:
        fact_parts = reader.fact_parts()
    with target.writer() as w:
        w.add("documents", reader.documents())
        w.add("chunks", reader.chunks())
        w.add("sentences", reader.sentences())
        w.add("entities", reader.entities())
        w.add("mentions", reader.mentions())
        w.add("relations", reader.relations())
        w.add("synonyms", reader.synonyms())
        w.add("communities", reader.communities())
        w.add("tree_nodes", reader.tree_nodes())
        for kind in VECTOR_KINDS:
            ids, matrix = reader.vectors(kind)
            if kind == "facts" and fact_parts is not None:
                w.add_fact_parts(fact_parts[0], fact_parts[1], reader.vectors("entities")[1])
            elif ids:
                w.add_vectors(kind, ids, matrix)
        meta = {
            k: v
            for k, v in reader.manifest.items()
            if k not in ("indexVersion", "created", "counts", "superseded")
        }
        return w.commit(meta)


__all__ = [
    "copy_graph",
    "GRAPHS",
    "Adjacency",
    "PathLimits",
    "RECORD_KINDS",
    "VECTOR_KINDS",
    "GraphReader",
    "GraphStore",
    "GraphWriter",
    "PassageText",
    "SQLiteGraphStore",
    "open_store",
]
