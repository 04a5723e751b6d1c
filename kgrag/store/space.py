"""Telling a write that ran out of room from other failures, and saying so plainly."""

from __future__ import annotations

import errno
import shutil
import sqlite3
from pathlib import Path

__all__ = ["out_of_room", "room_message"]

_REASONS = {
    errno.ENOSPC: "the file system is full",
    errno.EDQUOT: "the disk quota is used up",
    errno.EFBIG: "a file passed the file-size limit (ulimit -f)",
}


def out_of_room(exc: BaseException) -> str | None:
    """Why ``exc`` (or an error it was raised from) is a write that found no room, or None."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, OSError) and current.errno in _REASONS:
            return _REASONS[current.errno]
        if isinstance(current, sqlite3.OperationalError):
            text = str(current)
            if "database or disk is full" in text:
                return "the file system is full"
            if "disk I/O error" in text:  # what SQLite says when a write is cut short
                return "a write was cut short (disk I/O error: no room, or a file-size limit)"
        current = current.__cause__ or current.__context__
    return None


def room_message(root: Path, reason: str, current: str | None) -> str:
    """One message naming the graph, the reason, the space left and what still serves."""
    try:
        free = f"{shutil.disk_usage(root).free / 2**20:,.0f} MiB free on its file system"
    except OSError:
        free = "the free space could not be read"
    serving = f"version {current} still serves" if current else "nothing was published before"
    return (
        f"graph {root}: the new version was not written: {reason} ({free}); "
        f"{serving}. Free some space and try again."
    )
