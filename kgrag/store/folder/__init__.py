"""The embedded store: one SQLite file per version for records and BM25
(:mod:`.store`), and the serving files opened by memory map (:mod:`.files`,
:mod:`.arrays`)."""

from .store import SQLiteGraphStore

__all__ = ["SQLiteGraphStore"]
