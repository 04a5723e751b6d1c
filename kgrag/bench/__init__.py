"""Measurement behind ``kgrag bench`` and ``kgrag eval``: :mod:`.measure` times ingest,
queries and HTTP; :mod:`.report` writes the figures; :mod:`.evaluation` scores
passage recall as HippoRAG 2 does."""
