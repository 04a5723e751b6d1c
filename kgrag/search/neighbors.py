"""Graph op ``neighbors``: the weighted neighbourhood of seed nodes (RCP/1 §7.9).

Scoring: a seed scores 1.0. Parallel edges between two nodes are merged first
(weights summed, all kinds together); each merged edge out of a node ``u`` is
normalised by ``u``'s strongest merged edge, so it weighs in [0, 1], and
halved (``DECAY``) per hop. A node's score is the best product of these
factors over the paths of at most ``hops`` edges from any seed (a max-product
Bellman-Ford, one round per hop): the strongest neighbour of a seed scores
0.5, a node two hops away at most 0.25, and a weak direct tie can rank below a
strong two-hop path. Nodes are returned seeds first, then by score
descending, then id, and cut at ``limit``.

Edges: every graph edge between two returned nodes, with parallel edges of
the same kind merged into one (weights summed). The graph is undirected, so
``src``/``dst`` follow vertex order (entities before passages, then id);
merged relation edges carry the predicates (strongest first, the first also
as ``predicate``) and the relation ids, whose records give the direction.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import igraph as ig

from kgrag.errors import InvalidParams, NotFound

DECAY = 0.5  # factor per hop on top of the normalised edge weight


def neighbors(
    graph: ig.Graph, seed_ids: Sequence[str], hops: int, *, limit: int = 100
) -> dict[str, list[dict[str, Any]]]:
    """``{"nodes": [{id, score, kind, label}], "edges": [{src, dst, weight, kind, ...}]}``."""
    _check(seed_ids, hops, limit)
    ids: list[str] = graph.vs["id"] if graph.vcount() else []
    index = {v: i for i, v in enumerate(ids)}
    unknown = sorted({s for s in seed_ids if s not in index})
    if unknown:
        raise NotFound(f"unknown seed ids: {', '.join(unknown)}", field="seedIds", ids=unknown)
    seeds = {index[s] for s in seed_ids}
    scores = _spread(graph, seeds, hops)
    kept = sorted(scores, key=lambda v: (v not in seeds, -scores[v], ids[v]))[:limit]
    nodes = [
        {
            "id": ids[v],
            "score": scores[v],
            "kind": graph.vs[v]["kind"],
            "label": graph.vs[v]["label"],
        }
        for v in kept
    ]
    return {"nodes": nodes, "edges": _edges(graph, kept, ids)}


def _check(seed_ids: Sequence[str], hops: int, limit: int) -> None:
    if isinstance(seed_ids, str) or not seed_ids:
        raise InvalidParams("seedIds must be a non-empty list of node ids", field="seedIds")
    for value, field in ((hops, "hops"), (limit, "limit")):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise InvalidParams(f"{field} must be an integer >= 1, got {value!r}", field=field)


def _spread(graph: ig.Graph, seeds: set[int], hops: int) -> dict[int, float]:
    """Best max-product path score of every node within ``hops`` of a seed."""
    score = dict.fromkeys(seeds, 1.0)
    frontier = set(seeds)
    for _ in range(hops):
        before = {u: score[u] for u in frontier}
        changed: set[int] = set()
        for u in sorted(frontier):
            strength = _strength(graph, u)
            top = max(strength.values(), default=0.0)
            for v, w in sorted(strength.items()):
                s = before[u] * DECAY * (w / top if top > 0 else 0.0)
                if s > score.get(v, -1.0):
                    score[v] = s
                    changed.add(v)
        if not changed:
            break
        frontier = changed
    return score


def _strength(graph: ig.Graph, u: int) -> dict[int, float]:
    """Merged (summed, clipped at 0) edge weight from ``u`` to each neighbour."""
    out: dict[int, float] = {}
    for e in graph.es.select(graph.incident(u)):
        other = e.target if e.source == u else e.source
        if other != u:
            out[other] = out.get(other, 0.0) + max(0.0, float(e["weight"]))
    return out


def _edges(graph: ig.Graph, kept: list[int], ids: list[str]) -> list[dict[str, Any]]:
    merged: dict[tuple[int, int, str], dict[str, Any]] = {}
    for e in graph.es.select(_within=kept):
        a, b = sorted(e.tuple)
        rec = merged.setdefault(
            (a, b, e["kind"]), {"weight": 0.0, "predicates": {}, "relations": []}
        )
        rec["weight"] += float(e["weight"])
        if e["kind"] == "relation":
            rec["predicates"][e["predicate"]] = rec["predicates"].get(e["predicate"], 0.0) + float(
                e["weight"]
            )
            rec["relations"].append(e["rid"])
    out = []
    for (a, b, kind), rec in merged.items():
        edge: dict[str, Any] = {"src": ids[a], "dst": ids[b], "weight": rec["weight"], "kind": kind}
        if kind == "relation":
            preds = sorted(rec["predicates"].items(), key=lambda p: (-p[1], p[0]))
            edge["predicate"] = preds[0][0]
            edge["predicates"] = [p for p, _ in preds]
            edge["relations"] = sorted(rec["relations"])
        out.append(edge)
    return sorted(out, key=lambda d: (-d["weight"], d["src"], d["dst"], d["kind"]))
