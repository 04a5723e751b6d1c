"""A graph in Neo4j 5, behind the same store interface as the embedded store."""

from kgrag.store.location import Location, is_uri

from .store import Neo4jGraphReader, Neo4jGraphStore, Neo4jGraphWriter

__all__ = ["Location", "Neo4jGraphReader", "Neo4jGraphStore", "Neo4jGraphWriter", "is_uri"]
