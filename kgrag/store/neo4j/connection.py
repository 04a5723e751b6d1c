"""The connection to one graph in a Neo4j database: the process's driver for its
server (one per server and credentials, as Neo4j advises; closed at exit), and the
query helpers the store, the upload and the readers run their Cypher through.

The credentials come from ``KGRAG_NEO4J_USER`` / ``KGRAG_NEO4J_PASSWORD`` (or
``KGRAG_NEO4J_PASSWORD_FILE``, a file holding it); no authentication when none is set.
"""

from __future__ import annotations

import atexit
import contextlib
import itertools
import os
import threading
from collections.abc import Iterable
from typing import Any

from kgrag.errors import StoreError, Unavailable
from kgrag.store.location import Location

BATCH = 5000  # rows per UNWIND


class Connection:
    """The graph ``location`` names, reached through the process's driver for its
    server (``driver``: one given, for tests)."""

    def __init__(self, location: Location, driver: Any = None) -> None:
        self.location = location
        self.driver = driver or connect(location)
        self._procedures: set[str] | None = None

    def run(self, cypher: str, **params: Any) -> list[Any]:
        """Run one auto-committed query; its records."""
        from neo4j.exceptions import Neo4jError, ServiceUnavailable

        quiet = {k: _Quiet(v) if isinstance(v, list) else v for k, v in params.items()}
        try:
            with self.driver.session(database=self.location.database) as s:
                return list(s.run(cypher, **quiet))
        except ServiceUnavailable as exc:
            uri = self.location.uri
            raise Unavailable(f"{uri}: Neo4j is unreachable: {one_line(exc)}") from exc
        except Neo4jError as exc:
            raise StoreError(f"{self.location.uri}: {exc.code}: {exc.message}") from exc

    def write(self, cypher: str, rows: Iterable[dict[str, Any]], **params: Any) -> None:
        """``UNWIND $rows AS row`` + ``cypher``, in batches, each its own transaction;
        ``rows`` is read a batch at a time (an upload's rows are made as they go)."""
        it = iter(rows)
        while batch := list(itertools.islice(it, BATCH)):
            self.run(f"UNWIND $rows AS row {cypher}", rows=batch, **params)

    def procedures(self) -> set[str]:
        """kgrag's procedures the server has (``kgrag.push``: the launcher registers
        it; a server a team runs has it when the launcher's jar is in its plugins
        folder). Asked once per connection."""
        if self._procedures is None:
            found = self.run(
                "SHOW PROCEDURES YIELD name WHERE name STARTS WITH 'kgrag.' RETURN name"
            )
            self._procedures = {str(r[0]) for r in found}
        return self._procedures


class _Quiet(list):  # type: ignore[type-arg]
    """A query parameter list whose ``repr`` is its length. The driver formats every
    RUN's parameters for its debug log before it asks whether anything logs; for an
    upload batch (5,000 rows of vectors) that was most of the client's time."""

    def __repr__(self) -> str:
        return f"<{len(self)} items>"


_DRIVERS: dict[tuple[str, Any], Any] = {}
_DRIVERS_LOCK = threading.Lock()


def _close_drivers() -> None:
    with _DRIVERS_LOCK:
        for driver in _DRIVERS.values():
            with contextlib.suppress(Exception):
                driver.close()
        _DRIVERS.clear()


atexit.register(_close_drivers)


def connect(location: Location) -> Any:
    """The process's driver for the server ``location`` names (made once)."""
    user = os.environ.get("KGRAG_NEO4J_USER")
    password = os.environ.get("KGRAG_NEO4J_PASSWORD") or _secret_file("KGRAG_NEO4J_PASSWORD_FILE")
    auth = (user or "neo4j", password or "") if (user or password) else None
    key = (location.uri, auth)
    with _DRIVERS_LOCK:
        if key not in _DRIVERS:
            _DRIVERS[key] = _new_driver(location, auth)
        return _DRIVERS[key]


def _secret_file(env: str) -> str | None:
    """The secret in the file ``$env`` names (a container's secret), or None."""
    path = os.environ.get(env)
    if not path:
        return None
    try:
        return open(path, encoding="utf-8").read().strip() or None
    except OSError as exc:
        raise StoreError(f"{env}={path}: cannot read the Neo4j password: {exc}") from exc


def _new_driver(location: Location, auth: Any) -> Any:
    try:
        import neo4j
    except ImportError as exc:  # pragma: no cover - a dependency
        raise StoreError("the neo4j Python driver is not installed") from exc
    driver = None
    try:
        driver = neo4j.GraphDatabase.driver(
            location.uri, auth=auth, connection_timeout=10, notifications_min_severity="OFF"
        )
        driver.verify_connectivity()
    except BaseException as exc:
        if driver is not None:
            driver.close()
        if isinstance(exc, neo4j.exceptions.AuthError):
            raise StoreError(
                f"{location.uri}: Neo4j refused the credentials: {exc.message}"
            ) from exc
        if isinstance(exc, (neo4j.exceptions.ServiceUnavailable, OSError)):
            raise Unavailable(f"{location.uri}: Neo4j is unreachable: {one_line(exc)}") from exc
        if isinstance(exc, (neo4j.exceptions.Neo4jError, neo4j.exceptions.DriverError, ValueError)):
            raise StoreError(f"{location.uri}: cannot connect to Neo4j: {one_line(exc)}") from exc
        raise
    return driver


def one_line(exc: BaseException) -> str:
    """An error's message on one line."""
    return " ".join(str(exc).split())
