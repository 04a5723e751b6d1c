"""Export a stored graph for other tools: GraphML or node-link JSON (networkx)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import networkx as nx

from kgrag.errors import InvalidParams
from kgrag.store import GraphReader

FORMATS = ("graphml", "json")


def to_networkx(reader: GraphReader) -> nx.MultiDiGraph:
    """Entities and passages as nodes; relation, mention and synonym edges."""
    g = nx.MultiDiGraph(indexVersion=reader.index_version)
    for e in reader.entities():
        g.add_node(e.id, kind="entity", name=e.name, type=e.type, aliases="|".join(e.aliases))
    for c in reader.chunks():
        g.add_node(c.id, kind="passage", name=c.context, doc_id=c.doc_id, text=c.text)
    for r in reader.relations():
        g.add_edge(
            r.src,
            r.dst,
            key=r.id,
            kind="relation",
            predicate=r.predicate,
            relation_kind=r.kind,
            weight=r.weight,
            evidence="|".join(r.evidence),
        )
    for m in reader.mentions():
        g.add_edge(m.entity_id, m.chunk_id, kind="mention", weight=float(m.count))
    for s in reader.synonyms():
        g.add_edge(s.src, s.dst, kind="synonym", weight=s.score)
    return g


def export_graph(reader: GraphReader, fmt: str, out: Path) -> dict[str, int]:
    """Write the graph to ``out`` in ``fmt``; return node and edge counts."""
    if fmt not in FORMATS:
        raise InvalidParams(
            f"unknown export format {fmt!r}; one of {', '.join(FORMATS)}", field="format"
        )
    g = to_networkx(reader)
    tmp = out.with_name(out.name + ".part")
    if fmt == "graphml":
        nx.write_graphml(g, tmp)
    else:
        data: dict[str, Any] = nx.node_link_data(g, edges="edges")
        tmp.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    tmp.replace(out)
    return {"nodes": g.number_of_nodes(), "edges": g.number_of_edges()}
