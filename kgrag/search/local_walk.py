"""The walks of local search: personalized PageRank over the entity + passage graph.

The first walk starts from the query's seeds (:mod:`kgrag.search.seeds`) and its
best passages; :func:`second_walk` starts from the specific entities of the first
hop's passages, the names a first hop's passage gives the next hop. PageRank itself
is :mod:`kgrag.search.pagerank`: thresholded pushes by default, an exact solve on
request, on the undirected graph with parallel edges merged.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import igraph as ig
import numpy as np

from kgrag.search.links import names, text_key, title_text
from kgrag.search.local_rerank import HOP_DEPTH
from kgrag.search.pagerank import personalized_pagerank, pushed_pagerank, transition, walk_matrix
from kgrag.search.ranking import top_k
from kgrag.search.stats import specificity
from kgrag.store import GraphReader
from kgrag.text.keys import COOC, WALK_WEIGHTS


class LocalWalk:
    """Personalized PageRank mass from a reset over every vertex. With the store's walk
    weights (:data:`~kgrag.text.keys.WALK_WEIGHTS`) and pushes the store's walk serves
    (the reader pushes); other ``weights`` (by edge class), or the exact solve
    (``push_eps`` 0), build the walk from every edge of ``whole_graph()``."""

    def __init__(
        self,
        reader: GraphReader,
        whole_graph: Callable[[], ig.Graph],
        *,
        weights: dict[str, float],
        damping: float,
        push_eps: float,
        ppr_tol: float,
    ) -> None:
        self.reader, self.damping, self.push_eps, self.ppr_tol = reader, damping, push_eps, ppr_tol
        if push_eps > 0 and weights == WALK_WEIGHTS:
            self.matrix: Any = None  # the store's walk: the reader pushes
            return
        graph = weighted(whole_graph(), weights)
        # float32: half the bytes per round; ranks settle long before float32 rounding
        # (~1e-7 relative) could matter
        if push_eps > 0:
            self.matrix = walk_matrix(graph)
        else:
            import torch

            self.matrix = transition(graph).astype(torch.float32)

    def mass(self, reset: np.ndarray) -> np.ndarray:
        """Personalized PageRank mass of every vertex from ``reset``."""
        if self.push_eps > 0 and self.matrix is None:
            return self.reader.pushed_pagerank(reset, self.damping, self.push_eps)
        if self.push_eps > 0:
            return pushed_pagerank(self.matrix, reset, self.damping, self.push_eps)
        return personalized_pagerank(self.matrix, reset, self.damping, self.ppr_tol)


def weighted(g: ig.Graph, weights: dict[str, float]) -> ig.Graph:
    """A simple undirected graph whose edge weights sum the parallel edges, scaled by
    kind (``weights`` by edge class: relation, cooc, mention, synonym)."""
    scale = {
        "relation": weights["relation"],
        "mention": weights["mention"],
        "synonym": weights["synonym"],
    }
    out = g.copy()
    if out.ecount():
        kinds, preds = out.es["kind"], out.es["predicate"]
        out.es["weight"] = [
            w * (weights["cooc"] if pred == COOC else scale[kind])
            for w, kind, pred in zip(out.es["weight"], kinds, preds, strict=True)
        ]
        out.delete_edges([e.index for e in out.es if e["weight"] <= 0])
    out.simplify(multiple=True, loops=True, combine_edges={"weight": "sum"})
    return out


@dataclass(frozen=True, slots=True)
class Hop:
    """The second walk's best passages (at most :data:`HOP_DEPTH`): chunk row -> rank
    (0 best, in that order) and -> mass over the best passage's."""

    rank: dict[int, int] = field(default_factory=dict)
    share: dict[int, float] = field(default_factory=dict)


def second_walk(
    reader: GraphReader,
    walk: LocalWalk,
    chunk_vertex: np.ndarray,
    n_vertices: int,
    query: str,
    rows: list[int],
    titles: list[str],
    seeds: dict[int, float],
    *,
    hop_from: int,
    hop_named: int,
    hop_specific: float,
) -> Hop:
    """The second walk from candidates ``rows`` (best first; ``titles`` their document
    titles): the best ``hop_from`` and the first ``hop_named`` whose title the query
    names. Their entities that are not ``seeds`` and at least ``hop_specific`` specific
    reset it, each by its specificity. ``chunk_vertex``: the vertex of each chunk row;
    ``n_vertices``: entities and passages."""
    query_key = text_key(query)
    named = [
        row for row, title in zip(rows, titles, strict=True) if names(query_key, title_text(title))
    ]
    start = list(dict.fromkeys(rows[:hop_from] + named[:hop_named]))
    if not start:
        return Hop()
    ents = np.unique(reader.adjacency("mentions", np.array(start, dtype=np.int64)).indices)
    ents = ents[~np.isin(ents, np.fromiter(seeds, dtype=np.int64, count=len(seeds)))]
    spec = specificity(reader, ents.astype(np.int64)) if len(ents) else np.zeros(0)
    keep = spec >= hop_specific
    if not keep.any():
        return Hop()
    reset = np.zeros(n_vertices)
    reset[ents[keep]] = spec[keep]
    mass = walk.mass(reset)[chunk_vertex]
    best = [(row, m) for row, m in top_k(mass, HOP_DEPTH) if m > 0]
    if not best:
        return Hop()
    top = best[0][1]
    return Hop({row: n for n, (row, _) in enumerate(best)}, {row: m / top for row, m in best})
