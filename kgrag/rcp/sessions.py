"""Call-spanning state of ``retrieve``: agentic sessions and pagination cursors."""

from __future__ import annotations

import base64
import hashlib
import json
import threading
import time
from typing import Any

from kgrag.errors import InvalidParams

SESSION_TTL_SECONDS = 3600
MAX_SESSIONS = 10_000


class Sessions:
    """Hits already returned per ``sessionId`` (spec §7.7.3), forgotten after a TTL."""

    def __init__(self, ttl: float = SESSION_TTL_SECONDS) -> None:
        self.ttl = ttl
        self._seen: dict[str, tuple[float, set[str]]] = {}
        self._lock = threading.Lock()

    def seen(self, session: str) -> set[str]:
        with self._lock:
            self._expire()
            entry = self._seen.get(session)
            return set(entry[1]) if entry else set()

    def add(self, session: str, ids: list[str]) -> None:
        with self._lock:
            _, ids_seen = self._seen.get(session, (0.0, set()))
            ids_seen.update(ids)
            self._seen[session] = (time.monotonic(), ids_seen)
            if len(self._seen) > MAX_SESSIONS:
                oldest = min(self._seen, key=lambda s: self._seen[s][0])
                del self._seen[oldest]

    def fresh(self, session: str | None, hits: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The ``hits`` not returned before in ``session``, now recorded as returned
        (every hit when there is no session)."""
        if not session:
            return hits
        seen = self.seen(session)
        hits = [h for h in hits if h["id"] not in seen]
        self.add(session, [h["id"] for h in hits])
        return hits

    def _expire(self) -> None:
        now = time.monotonic()
        for s in [s for s, (t, _) in self._seen.items() if now - t > self.ttl]:
            del self._seen[s]


def request_key(params: dict[str, Any]) -> str:
    """A digest of everything in a request but its cursor, to tie a cursor to it."""
    body = json.dumps(
        {k: v for k, v in params.items() if k != "cursor"}, sort_keys=True, default=str
    )
    return hashlib.blake2b(body.encode(), digest_size=8).hexdigest()


def make_cursor(offset: int, key: str, version: str) -> str:
    raw = json.dumps({"o": offset, "q": key, "v": version}, separators=(",", ":"))
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def read_cursor(cursor: str, key: str, version: str) -> int:
    """The offset a cursor points at; it must come from the same request and version."""
    try:
        data = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
        offset, ckey, cversion = int(data["o"]), data["q"], data["v"]
    except (ValueError, KeyError, TypeError) as exc:
        raise InvalidParams("cursor is not one this server issued", field="cursor") from exc
    if ckey != key or cversion != version or offset < 0:
        raise InvalidParams("cursor belongs to a different request or indexVersion", field="cursor")
    return offset
