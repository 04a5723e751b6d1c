"""A graph in Neo4j 5, behind the same store interface as the embedded store."""

from .store import Location, Neo4jGraphReader, Neo4jGraphStore, Neo4jGraphWriter, is_uri

__all__ = ["Location", "Neo4jGraphReader", "Neo4jGraphStore", "Neo4jGraphWriter", "is_uri"]
