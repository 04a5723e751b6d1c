"""Graph search over stored records: the igraph build, local (PPR + bridge hop) with
provenance paths, global and DRIFT over community reports, neighbours, RAPTOR trees.

The engine reaches them through :mod:`kgrag.retrieval.graph_ops`; they are usable
alone with a :class:`~kgrag.store.GraphReader` and an encoder.
"""

from .build import build_graph
from .drift import DriftResult, drift
from .global_search import GlobalResult, GlobalSearch
from .local import LocalResult, LocalSearch, LocalSettings
from .neighbors import neighbors
from .paths import Explanation, PathFinder
from .tree_search import TreeHit, TreeSearch

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
