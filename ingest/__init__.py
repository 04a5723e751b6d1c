"""The write side of kgrag: documents in, a published knowledge-graph version out."""

from .pipeline import BuildReport, build, ingest_paths

__all__ = ["BuildReport", "build", "ingest_paths"]
