"""Graph stage: assemble the entity + passage graph and check it is whole.

Every relation end, mention and synonymy end must be a known entity or
chunk; a record pointing elsewhere is a bug upstream and stops the build
before anything is written.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import igraph as ig

from kgrag.errors import KgragError
from kgrag.search import build_graph
from kgrag.types import Chunk, Entity, Mention, Relation, Synonym


def assemble(
    entities: Sequence[Entity],
    chunks: Sequence[Chunk],
    mentions: Sequence[Mention],
    relations: Sequence[Relation],
    synonyms: Sequence[Synonym],
) -> tuple[ig.Graph, dict[str, int]]:
    """The graph and its statistics (vertices, edges per kind, connected components)."""
    known = {e.id for e in entities} | {c.id for c in chunks}
    dangling = [r.id for r in relations if r.src not in known or r.dst not in known]
    dangling += [
        f"{m.entity_id}@{m.chunk_id}"
        for m in mentions
        if m.entity_id not in known or m.chunk_id not in known
    ]
    dangling += [f"{s.src}~{s.dst}" for s in synonyms if s.src not in known or s.dst not in known]
    if dangling:
        raise KgragError(f"graph has {len(dangling)} edges to unknown nodes, e.g. {dangling[0]}")
    g = build_graph(entities, [c.id for c in chunks], mentions, relations, synonyms)
    stats = {"vertices": g.vcount(), "components": len(g.connected_components())}
    for kind, n in sorted(Counter(g.es["kind"] if g.ecount() else []).items()):
        stats[f"{kind}_edges"] = n
    return g, stats
