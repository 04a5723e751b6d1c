"""Graph search over stored records: the igraph build, local (PPR + bridge hop) with
provenance paths, global and DRIFT over community reports, neighbours, RAPTOR trees.

The engine reaches them through :mod:`kgrag.engine.graph`; they are usable
alone with a :class:`~kgrag.store.GraphReader` and an encoder.
"""

from kgrag.search.drift import DriftResult, drift
from kgrag.search.global_search import GlobalResult, GlobalSearch
from kgrag.search.local import LocalResult, LocalSearch, LocalSettings
from kgrag.search.neighbors import neighbors
from kgrag.search.paths import Explanation, PathFinder
from kgrag.search.tree import TreeHit, TreeSearch
from kgrag.whole_graph import build_graph

__all__ = [
    "DriftResult",
    "Explanation",
    "GlobalResult",
    "GlobalSearch",
    "LocalResult",
    "LocalSearch",
    "LocalSettings",
    "PathFinder",
    "TreeHit",
    "TreeSearch",
    "build_graph",
    "drift",
    "neighbors",
]
