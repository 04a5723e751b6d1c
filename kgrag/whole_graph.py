"""Build the igraph knowledge graph: entity and passage nodes (HippoRAG 2 style).

Vertices are the entities (sorted by id) followed by the passages (chunk ids,
sorted). Edges carry ``kind``: ``relation`` (entity-entity, with predicate,
relation id and weight), ``mention`` (entity-passage, weight = mention count)
and ``synonym`` (entity-entity, weight = cosine).
"""

from __future__ import annotations

from collections.abc import Sequence

import igraph as ig

from kgrag.types import Entity, Mention, Relation, Synonym


def build_graph(
    entities: Sequence[Entity],
    chunk_ids: Sequence[str],
    mentions: Sequence[Mention],
    relations: Sequence[Relation],
    synonyms: Sequence[Synonym],
) -> ig.Graph:
    """An undirected multigraph over entities and passages; ends missing from it are skipped."""
    ents = sorted(entities, key=lambda e: e.id)
    passages = sorted(chunk_ids)
    ids = [e.id for e in ents] + passages
    index = {v: i for i, v in enumerate(ids)}
    g = ig.Graph(n=len(ids), directed=False)
    g.vs["id"] = ids
    g.vs["kind"] = ["entity"] * len(ents) + ["passage"] * len(passages)
    g.vs["label"] = [e.name for e in ents] + passages
    edges: list[tuple[int, int]] = []
    attrs: dict[str, list[object]] = {"kind": [], "weight": [], "predicate": [], "rid": []}

    def add(a: str, b: str, kind: str, weight: float, predicate: str = "", rid: str = "") -> None:
        if a in index and b in index:
            edges.append((index[a], index[b]))
            for key, value in zip(attrs, (kind, weight, predicate, rid), strict=True):
                attrs[key].append(value)

    for r in sorted(relations, key=lambda r: r.id):
        add(r.src, r.dst, "relation", r.weight, r.predicate, r.id)
    for m in sorted(mentions, key=lambda m: (m.entity_id, m.chunk_id)):
        add(m.entity_id, m.chunk_id, "mention", float(m.count))
    for s in sorted(synonyms, key=lambda s: (s.src, s.dst)):
        add(s.src, s.dst, "synonym", s.score)
    g.add_edges(edges, attributes=attrs)
    return g
