"""The old import path of :mod:`kgrag.search` (graph search), kept for code that
imports ``kgrag.graph``; new code imports :mod:`kgrag.search`."""

from kgrag.search import (
    DriftResult,
    Explanation,
    GlobalResult,
    GlobalSearch,
    LocalResult,
    LocalSearch,
    LocalSettings,
    PathFinder,
    TreeHit,
    TreeSearch,
    build_graph,
    drift,
    neighbors,
)

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
