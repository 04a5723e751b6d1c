"""How a version of a graph is laid out in Neo4j: labels, the per-row properties a
reader reads together, and the names of a version's labels.

A version is written under its own labels: every node carries its kind's label
(``Chunk``, ``Entity``, ...) and that kind's label for the version (``Chunk_<tag>``,
the tag naming the graph and version, :func:`version_tag`), which is what the
version's indexes and constraints cover.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

import numpy as np

from kgrag.errors import InvalidParams
from kgrag.store.base import VECTOR_KINDS

FORMAT = "kgrag-neo4j"
#: node label of each kind
LABELS = {
    "documents": "Document",
    "chunks": "Chunk",
    "sentences": "Sentence",
    "entities": "Entity",
    "facts": "Fact",
    "communities": "Community",
    "tree_nodes": "TreeNode",
    "names": "NameKey",
    "sentence_keys": "SentenceKey",
    "bm25_terms": "Bm25Term",
    "bm25_indexes": "Bm25Index",
    "codebooks": "PQCodebook",
}
#: full-text indexed properties of the sparse kinds
FULLTEXT = {"chunks": ("text", "context"), "communities": ("report",), "tree_nodes": ("summary",)}
#: the per-row properties read together (:meth:`~.reads.VersionReads._row_props`)
ROW_PROPS = {
    "chunks": ("id", "title", "title_entity", "vertex", "mentioned", "links", "links_in"),
    "entities": ("id", "name", "a_chunks", "a_degree", "a_component"),
}
LIST_PROPS = {"mentioned", "links", "links_in"}
#: the kinds whose row properties are a few numbers: a read that finds such rows by
#: another key (an id, a name, a vector) brings their properties along
SMALL_PROPS = frozenset(k for k, names in ROW_PROPS.items() if not LIST_PROPS & set(names))
#: the attributes of each kind (:meth:`kgrag.store.GraphReader.attribute`)
ATTRIBUTES = {
    "chunks": ("title", "vertex", "title_entity"),
    "entities": ("chunks", "degree", "component"),
    "communities": ("level", "rating", "size", "id_rank", "canonical", "hierarchy"),
}


def props_columns(kind: str, var: str) -> tuple[str, ...]:
    """The Cypher columns of :data:`ROW_PROPS` of ``kind`` on node ``var``."""
    return tuple(
        f"coalesce({var}.{f}, [])" if f in LIST_PROPS else f"{var}.{f}" for f in ROW_PROPS[kind]
    )


def props_by_row(
    kind: str, rows: Sequence[Any], cols: Sequence[Sequence[Any]]
) -> dict[int, dict[str, Any]]:
    """Rows' :data:`ROW_PROPS` by row, from :func:`props_columns`'s columns (a node
    without a row, such as an entity without a vector, left out)."""
    names = ROW_PROPS[kind]
    return {
        int(r): dict(zip(names, values, strict=True))
        for r, *values in zip(rows, *cols, strict=True)
        if r is not None and r >= 0
    }


def version_tag(name: str, version: str) -> str:
    """The tag of the graph ``name``'s ``version`` in its labels and index names."""
    digest = hashlib.sha1(name.encode()).hexdigest()[:10]
    return f"g{digest}_{version}"


def label(kind: str, tag: str) -> str:
    """The label of a kind's nodes in the version ``tag``."""
    return f"{LABELS[kind]}_{tag}"


def labels_of(tag: str) -> dict[str, str]:
    """The label of every kind's nodes in the version ``tag``."""
    return {kind: label(kind, tag) for kind in LABELS}


def vector_kind(kind: str) -> str:
    """``kind``, when it is one of the vector kinds."""
    if kind not in VECTOR_KINDS:
        raise InvalidParams(f"unknown vector kind {kind!r}", field="kind")
    return kind


def ids_of(arr: np.ndarray) -> list[str]:
    """Fixed-width byte ids as strings."""
    return [b.decode() for b in np.asarray(arr).tolist()]


def plain(value: Any) -> Any:
    """A numpy scalar as the Python value the driver sends."""
    return value.item() if hasattr(value, "item") else value
