"""The RCP/1 ``feedback`` method (spec §7.16): client signals about earlier hits.

Every signal is recorded in ``feedback.sqlite`` beside the graph's versions
(a sidecar outside the versioned data, so feedback outlives index versions;
ids are content hashes, so a signal applies wherever its id still exists).
Only the integrity signals act: a hit id reported ``poisonSuspected`` or
``injectionSuspected`` sinks below every unflagged candidate of later calls
and is marked ``trust.level: "untrusted"`` (§15.3). ``used``, ``cited``,
``helpful`` and ``reward`` are stored for offline use and change nothing.

Signals are untrusted, advisory input (§15.2): nothing in them is ever read
as an instruction, a flag can only demote a hit (never promote one; only a
``minScore`` can drop it), and a later ``false`` does not clear an earlier report.

A call never sees feedback recorded while it runs: :meth:`FeedbackStore.flagged`
returns an immutable snapshot, taken once at the start of each call.
"""

from __future__ import annotations

import logging
import math
import os
import sqlite3
import threading
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from types import MappingProxyType
from typing import Any, TypeVar

from kgrag.errors import StoreError
from kgrag.rcp.params import MAX_SIGNALS, parse_feedback

__all__ = ["FILENAME", "MAX_SIGNALS", "FeedbackStore", "Flag", "mark", "sink", "sink_hits"]

log = logging.getLogger(__name__)

FILENAME = "feedback.sqlite"
#: stored length of the optional query text
MAX_QUERY_CHARS = 2000

_SCHEMA = """
CREATE TABLE IF NOT EXISTS feedback (
    received_at TEXT NOT NULL,
    session_id TEXT,
    query TEXT,
    hit_id TEXT NOT NULL,
    used INTEGER,
    cited INTEGER,
    helpful INTEGER,
    reward REAL,
    poison INTEGER,
    injection INTEGER
);
CREATE INDEX IF NOT EXISTS feedback_flagged ON feedback (hit_id)
    WHERE poison = 1 OR injection = 1;
"""
_COLUMNS = "received_at, session_id, query, hit_id, used, cited, helpful, reward, poison, injection"
_INSERT = f"INSERT INTO feedback ({_COLUMNS}) VALUES ({', '.join('?' * 10)})"
_FLAGGED = (
    "SELECT hit_id, SUM(poison IS 1), SUM(injection IS 1) FROM feedback"
    " WHERE poison = 1 OR injection = 1 GROUP BY hit_id"
)


@dataclass(frozen=True, slots=True)
class Flag:
    """How many integrity reports one hit id has received."""

    poison: int
    injection: int


# -- the store ---------------------------------------------------------------------------


class FeedbackStore:
    """Feedback of one graph folder, in ``ROOT/feedback.sqlite`` (WAL, thread-safe).

    The file is created by the first :meth:`record`, so serving a graph that
    never receives feedback writes nothing into its folder. With no folder, or
    one it cannot write, the store lives in memory and says so: ``persistent``
    is False and ``reason`` tells why. Reports already in an unwritable file
    are still loaded, so old flags keep applying.
    """

    def __init__(self, root: str | Path | None) -> None:
        self.path = Path(root) / FILENAME if root is not None else None
        self._lock = threading.Lock()
        self._generation = 0  # bumped by every integrity report recorded here
        self._seen: tuple[int, int] | None = None  # (generation, data_version) of the cache
        self._flags: Mapping[str, Flag] = MappingProxyType({})
        self._db: sqlite3.Connection | None = None
        self.persistent = False
        self.reason = ""
        if self.path is None:
            self.reason = "no graph folder; feedback kept in memory"
            self._db = self._memory()
        elif self.path.exists():
            self._db = self._open(self.path)
        elif not os.access(self.path.parent, os.W_OK):
            self._db = self._fallback(self.path, "its folder is not writable")
        else:
            self.persistent = True

    def _connection(self, *, create: bool) -> sqlite3.Connection | None:
        """The open database (lock held); the file is opened once it exists, or
        created when ``create``."""
        if self._db is None and self.path is not None and (create or self.path.exists()):
            self._db = self._open(self.path)
        return self._db

    def _open(self, path: Path) -> sqlite3.Connection:
        try:
            db = sqlite3.connect(path, check_same_thread=False, timeout=5.0)
            try:
                db.execute("PRAGMA journal_mode=WAL")
                db.executescript(_SCHEMA)
            except sqlite3.Error:
                db.close()
                raise
        except (sqlite3.Error, OSError) as exc:
            return self._fallback(path, str(exc))
        self.persistent = True
        return db

    def _fallback(self, path: Path, why: str) -> sqlite3.Connection:
        self.persistent = False
        self.reason = f"{path} is not writable ({why}); feedback kept in memory"
        log.warning("%s", self.reason)
        db = self._memory()
        if path.exists():
            self._load_readonly(db, path)
        return db

    @staticmethod
    def _memory() -> sqlite3.Connection:
        db = sqlite3.connect(":memory:", check_same_thread=False)
        db.executescript(_SCHEMA)
        return db

    @staticmethod
    def _load_readonly(db: sqlite3.Connection, path: Path) -> None:
        """Copy the reports of an unwritable feedback file into the memory store."""
        try:
            src = sqlite3.connect(f"{path.resolve().as_uri()}?immutable=1", uri=True)
            try:
                rows = src.execute(f"SELECT {_COLUMNS} FROM feedback").fetchall()
            finally:
                src.close()
        except sqlite3.Error as exc:
            log.warning("%s: old feedback not loaded (%s)", path, exc)
            return
        db.executemany(_INSERT, rows)
        db.commit()

    def record(self, raw: Any) -> dict[str, int]:
        """RCP ``feedback``: store every signal of a valid call; ``{"accepted": n}``."""
        p = parse_feedback(raw)
        now = datetime.now(timezone.utc).isoformat(timespec="milliseconds")
        query = p.query[:MAX_QUERY_CHARS] if p.query is not None else None
        rows = [
            (now, p.sessionId, query, s.hitId, s.used, s.cited, s.helpful, s.reward)
            + (s.poisonSuspected, s.injectionSuspected)
            for s in p.signals
        ]
        with self._lock:
            db = self._connection(create=True)
            assert db is not None
            try:
                with db:
                    db.executemany(_INSERT, rows)
            except sqlite3.Error as exc:
                raise StoreError(f"feedback could not be recorded: {exc}") from exc
            if any(s.poisonSuspected or s.injectionSuspected for s in p.signals):
                self._generation += 1
        return {"accepted": len(rows)}

    def flagged(self) -> Mapping[str, Flag]:
        """Hit ids with integrity reports: an immutable snapshot, rebuilt only after a
        new report (here, or by another process on the same file)."""
        with self._lock:
            db = self._connection(create=False)
            if db is None:
                return self._flags
            try:
                version = db.execute("PRAGMA data_version").fetchone()[0]
                if self._seen != (self._generation, version):
                    rows = db.execute(_FLAGGED).fetchall()
                    self._flags = MappingProxyType({h: Flag(int(p), int(i)) for h, p, i in rows})
                    self._seen = (self._generation, version)
            except sqlite3.Error as exc:  # a broken file must not break retrieval
                log.warning("feedback flags not refreshed: %s", exc)
            return self._flags

    def signals(self, hit_id: str) -> list[dict[str, Any]]:
        """Every stored signal about ``hit_id``, oldest first (for audits and tests)."""
        with self._lock:
            db = self._connection(create=False)
            if db is None:
                return []
            cur = db.execute(
                f"SELECT {_COLUMNS} FROM feedback WHERE hit_id = ? ORDER BY rowid", (hit_id,)
            )
            names = [d[0] for d in cur.description]
            return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]

    def close(self) -> None:
        with self._lock:
            if self._db is not None:
                self._db.close()
                self._db = None

    def __enter__(self) -> FeedbackStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# -- applying the flags --------------------------------------------------------------------

K = TypeVar("K")


def sink(
    ranked: Sequence[tuple[K, float]], flagged: Collection[K]
) -> tuple[list[tuple[K, float]], float]:
    """Move the ``flagged`` keys below every other one, each group keeping its order.

    Scores shift by ``D = max - min + 1`` over the list (never a product: scores
    may be negative), so a flagged score ends at least 1 below every unflagged
    one and stays finite. Returns the new list and ``D`` (0.0 when none is flagged).
    """
    if not any(key in flagged for key, _ in ranked):
        return list(ranked), 0.0
    finite = [s for _, s in ranked if math.isfinite(s)] or [0.0]
    shift = max(finite) - min(finite) + 1.0
    kept = [(key, s) for key, s in ranked if key not in flagged]
    sunk = [(key, s - shift) for key, s in ranked if key in flagged]
    return kept + sunk, shift


def mark(hit: dict[str, Any], flag: Flag) -> None:
    """Mark a reported hit's ``trust``: untrusted, and injection-suspected if so reported."""
    trust = dict(hit.get("trust") or {})
    trust["level"] = "untrusted"
    if flag.injection:
        trust["injectionSuspected"] = True
    hit["trust"] = trust


def sink_hits(
    hits: list[dict[str, Any]], flags: Mapping[str, Flag], *, by_unit: bool = False
) -> tuple[list[dict[str, Any]], int]:
    """:func:`sink` over wire hits: shift their ``score``, record ``scores.feedback``
    and mark ``trust``. ``by_unit`` treats each unit's hits as their own list (a
    ``graph`` local result lists chunks, nodes, triplets and paths in blocks whose
    scores do not compare). Returns the hits and how many were sunk."""
    if not flags or not any(h["id"] in flags for h in hits):
        return hits, 0
    groups: dict[Any, list[dict[str, Any]]] = {}
    for h in hits:
        groups.setdefault(h.get("unit") if by_unit else None, []).append(h)
    out: list[dict[str, Any]] = []
    count = 0
    for group in groups.values():
        order, shift = sink(
            [(i, float(h["score"])) for i, h in enumerate(group)],
            {i for i, h in enumerate(group) if h["id"] in flags},
        )
        for i, score in order:
            h = group[i]
            if h["id"] in flags:
                h["score"] = round(score, 6)
                h["scores"] = dict(h.get("scores") or {}) | {"feedback": round(-shift, 6)}
                mark(h, flags[h["id"]])
                count += 1
            out.append(h)
    return out, count
