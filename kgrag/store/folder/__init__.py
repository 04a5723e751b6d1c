"""The embedded store: one SQLite file per version for records and BM25, written and
published by :mod:`.store`, read by :mod:`.reader`, with the serving files opened by
memory map (:mod:`.files`, :mod:`kgrag.store.arrays`)."""

from .store import SQLiteGraphStore

__all__ = ["SQLiteGraphStore"]
