"""A graph in Neo4j 5, behind the same store interface as the embedded store.

:mod:`.store` (the store, its writer and version locks), :mod:`.connection` (the
driver and the query helpers), :mod:`.model` (labels and row properties),
:mod:`.upload` and :mod:`.indexes` (the write side), :mod:`.reads`, :mod:`.search` and
:mod:`.reader` (the read side), :mod:`.memo` (what a reader keeps)."""

from kgrag.store.location import Location, is_uri

from .reader import Neo4jGraphReader
from .store import Neo4jGraphStore, Neo4jGraphWriter

__all__ = ["Location", "Neo4jGraphReader", "Neo4jGraphStore", "Neo4jGraphWriter", "is_uri"]
