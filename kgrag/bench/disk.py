"""Where a folder graph's bytes go: each part of its serving version, by kind.

A version folder holds the SQLite records (``graph.sqlite``: each table with its
indexes and, for a full-text table, its shadow tables), the vectors (``vectors/KIND.npy``
and their sidecar files) and the serving structures (``serving/``: nearest-neighbour
indexes, BM25 postings, sorted ids, the walk and relation matrices, the name lookup).
"""

from __future__ import annotations

import sqlite3
from collections import Counter
from pathlib import Path
from typing import Any

from ..errors import InputError

#: the FTS5 shadow tables of a full-text table ``X``: ``X_data``, ``X_idx``, ...
_FTS_SHADOWS = ("_data", "_idx", "_docsize", "_config", "_content")


def version_folder(graph: Path) -> Path:
    """The folder of ``graph``'s published version (a folder store's)."""
    from ..store.folder.store import SQLiteGraphStore

    latest = SQLiteGraphStore(graph).current()
    folder = graph / "versions" / latest if latest else None
    if folder is None or not folder.is_dir():
        raise InputError(str(graph), "not a folder graph with a published version")
    return folder


def sqlite_tables(path: Path) -> Counter[str]:
    """Bytes of each table of the SQLite file at ``path``, its indexes and full-text
    shadow tables counted with it (SQLite's ``dbstat``)."""
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        owner = dict(con.execute("SELECT name, tbl_name FROM sqlite_master").fetchall())
        sizes = con.execute("SELECT name, SUM(pgsize) FROM dbstat GROUP BY name").fetchall()
    finally:
        con.close()
    out: Counter[str] = Counter()
    for name, size in sizes:
        table = owner.get(name, name)
        for suffix in _FTS_SHADOWS:
            if table.endswith(suffix) and table[: -len(suffix)] in owner:
                table = table[: -len(suffix)]
        out[table] += int(size)
    return out


def _part(rel: Path) -> str:
    """The part of the version a file belongs to: ``vectors facts``, ``serving bm25``..."""
    if rel.parts[0] == "vectors" and len(rel.parts) == 2:
        return f"vectors {rel.name.split('.')[0]}"
    if rel.parts[0] == "serving" and len(rel.parts) == 2:
        return f"serving {rel.name.split('.')[0]}"
    if rel.parts[0] == "cooc":  # the co-occurrence relations' columns
        return "co-occurrence columns"
    return str(rel)


def where_bytes(graph: Path) -> dict[str, Any]:
    """Bytes of each part of ``graph``'s newest version, largest first, with the whole."""
    folder = version_folder(graph)
    parts: Counter[str] = Counter()
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        rel = path.relative_to(folder)
        if rel.suffix == ".sqlite" and len(rel.parts) == 1:
            tables = sqlite_tables(path)
            for table, size in tables.items():
                parts[f"sqlite {table}"] += size
            parts[f"sqlite (free pages and header of {rel.name})"] += path.stat().st_size - sum(
                tables.values()
            )
        else:
            parts[_part(rel)] += path.stat().st_size
    return {
        "version": folder.name,
        "bytes": sum(parts.values()),
        "parts": dict(sorted(parts.items(), key=lambda kv: -kv[1])),
    }
