"""Graph stage: check the entity + passage graph is whole, and count it.

Every relation end, mention and synonymy end must be a known entity or
chunk; a record pointing elsewhere is a bug upstream and stops the build
before anything is written. The graph's statistics for the build report
(vertices, connected components, edges per kind) are counted from the
records: the graph itself is the store's tables
(:func:`kgrag.whole_graph.build_graph` makes an igraph of them when a search
needs one).
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import chain

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components

from kgrag.errors import KgragError
from kgrag.types import Chunk, Entity, Mention, Relation, Synonym

from .relation_table import RelationTable, relation_columns


def check_whole(
    entities: Sequence[Entity],
    chunks: Sequence[Chunk],
    mentions: Sequence[Mention],
    relations: Sequence[Relation],
    synonyms: Sequence[Synonym],
) -> None:
    """Refuse (:class:`KgragError`) a relation, mention or synonymy edge whose end is
    neither a known entity nor a known chunk."""
    known = {e.id for e in entities} | {c.id for c in chunks}
    if isinstance(relations, RelationTable):  # its ends, each once, not every relation
        unknown = {e for e in relations.entities if e not in known}
        dangling = (
            [r.id for r in relations if r.src in unknown or r.dst in unknown] if unknown else []
        )
    else:
        dangling = [r.id for r in relations if r.src not in known or r.dst not in known]
    dangling += [
        f"{m.entity_id}@{m.chunk_id}"
        for m in mentions
        if m.entity_id not in known or m.chunk_id not in known
    ]
    dangling += [f"{s.src}~{s.dst}" for s in synonyms if s.src not in known or s.dst not in known]
    if dangling:
        raise KgragError(f"graph has {len(dangling)} edges to unknown nodes, e.g. {dangling[0]}")


def graph_stats(
    entities: Sequence[Entity],
    chunks: Sequence[Chunk],
    mentions: Sequence[Mention],
    relations: Sequence[Relation],
    synonyms: Sequence[Synonym],
) -> dict[str, int]:
    """The whole graph's statistics: ``vertices`` (entities and passages),
    ``components`` (connected, the graph taken as undirected) and ``<kind>_edges``
    for each kind of edge it has (mention, relation, synonym; parallel edges each
    count), in that order. Refuses a graph that is not whole (:func:`check_whole`)."""
    check_whole(entities, chunks, mentions, relations, synonyms)
    ids = sorted(e.id for e in entities) + sorted(c.id for c in chunks)
    index = {v: i for i, v in enumerate(ids)}
    cols = relation_columns(relations, index)
    src = np.concatenate(
        [
            cols.src,
            np.fromiter(
                chain((index[x.entity_id] for x in mentions), (index[s.src] for s in synonyms)),
                np.int64,
            ),
        ]
    )
    dst = np.concatenate(
        [
            cols.dst,
            np.fromiter(
                chain((index[x.chunk_id] for x in mentions), (index[s.dst] for s in synonyms)),
                np.int64,
            ),
        ]
    )
    del cols
    m = len(src)
    n = len(ids)
    edges = sp.coo_matrix((np.ones(m, dtype=np.int8), (src, dst)), shape=(n, n))
    stats = {"vertices": n, "components": int(connected_components(edges, directed=False)[0])}
    counts = {"relation": len(relations), "mention": len(mentions), "synonym": len(synonyms)}
    for kind, count in sorted(counts.items()):
        if count:
            stats[f"{kind}_edges"] = count
    return stats
