"""The knowledge graph as an igraph object, built from stored records."""

from .build import build_graph

__all__ = ["build_graph"]
