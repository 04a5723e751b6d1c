"""Who may read and write which served graph: bearer tokens, scoped by graph and right.

Two ways to say it, which combine:

* one token for every graph (``--token-file`` / ``KGRAG_TOKEN``; with
  ``--write-token-file`` / ``KGRAG_WRITE_TOKEN`` a second one that also writes);
* an access file (``--access-file`` / ``KGRAG_ACCESS_FILE``), a JSON list of grants::

      [{"sha256": "<hex digest of the token>", "graphs": ["docs", "wiki"] or "*",
        "rights": ["read"] or ["read", "write"]}]

The file holds digests, never tokens, and nothing here logs a token. A caller whose
token matches no grant is refused as a whole (HTTP 401); a caller whose token reads
other graphs is told that a graph it may not read does not exist (404, with the same
words as for a name that is not served), so names do not leak between teams. The
file is read again when it changes (checked at most once a second): a grant revoked
there is revoked without a restart, and a file broken by an edit keeps the grants it
held before, with the error logged.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import os
import re
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kgrag.errors import InvalidParams

__all__ = ["EVERYONE", "Access", "Caller", "Grant", "digest", "not_served", "read_grants"]

log = logging.getLogger("kgrag.server")
_HEX = re.compile(r"^[0-9a-fA-F]{64}$")
_KEYS = {"sha256", "graphs", "rights"}
RIGHTS = ("read", "write")
#: seconds between looks at the access file's modification time
RECHECK = 1.0


def not_served(name: object) -> str:
    """The words for a graph that is not served and for one the caller may not read: the
    same for both on every route, so that names do not leak between teams."""
    return f"no graph named {name!r} is served"


def digest(token: str) -> bytes:
    """The SHA-256 digest of ``token`` (what an access file holds, as hex)."""
    return hashlib.sha256(token.encode("utf-8")).digest()


@dataclass(frozen=True)
class Caller:
    """What one request's sender may do: graphs it reads and writes (None: every one)."""

    read: frozenset[str] | None
    write: frozenset[str] | None

    def may_read(self, graph: str) -> bool:
        return self.read is None or graph in self.read

    def may_write(self, graph: str) -> bool:
        return self.write is None or graph in self.write

    def visible(self, names: Iterable[str]) -> list[str]:
        """``names`` this caller may read, in their order."""
        return [n for n in names if self.may_read(n)]


EVERYONE = Caller(None, None)
_READERS = Caller(None, frozenset())


@dataclass(frozen=True)
class Grant:
    """One access-file entry: a token's digest, its graphs (None: all) and whether it writes."""

    sha256: bytes
    graphs: frozenset[str] | None
    write: bool


def _grant(entry: Any, where: str) -> Grant:
    if not isinstance(entry, dict):
        raise InvalidParams(f"{where} must be an object with sha256, graphs and rights")
    unknown = sorted(set(entry) - _KEYS)
    if unknown:
        raise InvalidParams(f"{where} has unknown keys {unknown} (known: sha256, graphs, rights)")
    missing = sorted(_KEYS - set(entry))
    if missing:
        raise InvalidParams(f"{where} lacks {missing}")
    hexed = entry["sha256"]
    if not isinstance(hexed, str) or not _HEX.match(hexed):
        raise InvalidParams(f"{where}.sha256 must be 64 hex digits (a SHA-256 digest of the token)")
    graphs = entry["graphs"]
    if graphs == "*" or graphs == ["*"]:
        scope = None
    elif (
        isinstance(graphs, list)
        and graphs
        and all(isinstance(g, str) and g and g != "*" for g in graphs)
    ):
        scope = frozenset(graphs)
    else:
        raise InvalidParams(f'{where}.graphs must be "*" or a non-empty list of graph names')
    rights = entry["rights"]
    if not isinstance(rights, list) or not rights or any(r not in RIGHTS for r in rights):
        raise InvalidParams(f'{where}.rights must be ["read"] or ["read", "write"]')
    if "read" not in rights:
        raise InvalidParams(f'{where}.rights: a token that writes must also read ("read")')
    return Grant(bytes.fromhex(hexed), scope, "write" in rights)


def read_grants(path: str | Path) -> list[Grant]:
    """The grants of an access file, or one error naming the file and the bad entry."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise InvalidParams(f"cannot read the access file {path}: {exc}", field="access") from exc
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise InvalidParams(f"access file {path} is not JSON: {exc}", field="access") from exc
    if not isinstance(data, list):
        raise InvalidParams(f"access file {path} must hold a JSON list of grants", field="access")
    try:
        return [_grant(entry, f"{path}: entry {i}") for i, entry in enumerate(data)]
    except InvalidParams as exc:
        raise InvalidParams(exc.message, field="access") from exc


def _union(a: frozenset[str] | None, b: frozenset[str] | None) -> frozenset[str] | None:
    return None if a is None or b is None else a | b


class Access:
    """Checks a request's ``Authorization`` header against the tokens and grants."""

    def __init__(
        self,
        token: str | None = None,
        write_token: str | None = None,
        *,
        grants: Iterable[Grant] = (),
        file: str | Path | None = None,
    ) -> None:
        self.token = token
        self.write_token = write_token
        # the digests of the tokens for every graph, made once (a request hashes its own)
        self._legacy = [
            (digest(secret), who)
            for secret, who in (
                (write_token, EVERYONE),
                (token, EVERYONE if write_token is None else _READERS),
            )
            if secret is not None
        ]
        self.file = Path(file) if file is not None else None
        self._lock = threading.Lock()
        self._checked = time.monotonic()
        self._stamp = self._stat()
        listed = list(grants) if self.file is None else read_grants(self.file)
        self._scoped = self.file is not None or bool(listed)
        self._table = self._index(listed)

    @property
    def required(self) -> bool:
        """Whether a caller without a token is refused reads."""
        return self.token is not None or self._scoped

    @property
    def open(self) -> bool:
        return not self.required and self.write_token is None

    def _index(self, grants: list[Grant]) -> dict[bytes, Caller]:
        """Grants merged per digest (a token listed twice gets the union of its grants)."""
        table: dict[bytes, Caller] = {}
        for g in grants:
            writes = g.graphs if g.write else frozenset()
            old = table.get(g.sha256)
            if old is None:
                table[g.sha256] = Caller(g.graphs, writes)
            else:
                table[g.sha256] = Caller(_union(old.read, g.graphs), _union(old.write, writes))
        return table

    def _stat(self) -> tuple[float, int] | None:
        if self.file is None:
            return None
        try:
            st = os.stat(self.file)
        except OSError:
            return None
        return (st.st_mtime, st.st_size)

    def _reload(self) -> None:
        """Read the file again if it changed; keep the old grants if it is now broken."""
        now = time.monotonic()
        if self.file is None or now - self._checked < RECHECK:
            return
        with self._lock:
            if now - self._checked < RECHECK:
                return
            self._checked = now
            stamp = self._stat()
            if stamp == self._stamp:
                return
            try:
                table = self._index(read_grants(self.file))
            except InvalidParams as exc:
                log.error("access file not reloaded, the previous grants stay: %s", exc.message)
                self._stamp = stamp
                return
            self._table, self._stamp = table, stamp
            log.info("access file %s reloaded: %d tokens", self.file, len(table))

    def caller(self, header: str | None) -> Caller | None:
        """What the sender of ``Authorization: header`` may do; None: refuse it (401)."""
        if self.open:
            return EVERYONE
        self._reload()
        given = header[7:].strip() if header and header[:7].lower() == "bearer " else None
        if not given:
            return None if self.required else _READERS
        hashed = digest(given)
        found: Caller | None = None
        for key, who in self._legacy:
            if hmac.compare_digest(hashed, key):
                found = who if found is None else _merge(found, who)
        table = self._table
        for key, who in table.items():  # every entry compared: the time says nothing
            if hmac.compare_digest(hashed, key):
                found = who if found is None else _merge(found, who)
        if found is None and not self.required:
            return _READERS  # a write token is set, reads are open
        return found

    def check(self, header: str | None) -> tuple[bool, bool]:
        """(may read, may write) every graph, for callers that do not name one."""
        who = self.caller(header)
        if who is None:
            return False, False
        return who.read is None, who.write is None


def _merge(a: Caller, b: Caller) -> Caller:
    return Caller(_union(a.read, b.read), _union(a.write, b.write))
