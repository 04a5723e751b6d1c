"""A graph in Neo4j, behind the same store interface as the embedded store.

    kgrag ingest docs/ --graph neo4j://127.0.0.1:7687/NAME[?database=DB]

NAME is the graph's name inside the database (several graphs share one); the
connection and its credentials: :mod:`.connection`.

**Versions.** A version is written under its own labels (:mod:`.model`). The graph's
``:KgragGraph`` node holds the manifest; a commit writes the whole version first
(:mod:`.upload`), waits for its indexes (:mod:`.indexes`), and then replaces the
manifest in one transaction, so readers never see half a build, and a reader
(:mod:`.reader`) pinned to a version keeps reading its labels until the version is
collected (:class:`~kgrag.store.versions.Retention`: superseded a while ago and
not leased; a lease is a ``:KgragLease`` node). One writer at a time holds the
graph's lock, a property of its ``:KgragGraph`` node; the lock of a writer that died
on this machine is taken over.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import socket
import tempfile
import time
import uuid
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from kgrag.errors import StoreError, VersionGone
from kgrag.store.ann import ANN_MIN_ROWS
from kgrag.store.base import GraphStore, GraphWriter
from kgrag.store.composed import FactParts
from kgrag.store.location import Location
from kgrag.store.neo4j.connection import Connection
from kgrag.store.neo4j.model import FORMAT, LABELS, labels_of, version_tag
from kgrag.store.neo4j.reader import Neo4jGraphReader
from kgrag.store.neo4j.upload import upload
from kgrag.store.versions import (
    KEEP,
    LEASE_SECONDS,
    RETAIN_SECONDS,
    Retention,
    check_manifest,
    crash_point,
    new_manifest,
    next_version,
    publish,
)


class Neo4jGraphStore(GraphStore):
    """One named graph in a Neo4j database."""

    def __init__(
        self,
        location: str,
        *,
        keep_versions: int = KEEP,
        ann_min_rows: int = ANN_MIN_ROWS,
        retain_seconds: float = RETAIN_SECONDS,
        lease_seconds: float = LEASE_SECONDS,
        driver: Any = None,
    ) -> None:
        self.location = Location.parse(location)
        self.retention = Retention(keep_versions, retain_seconds, lease_seconds)
        #: kinds of at least this many rows carry product-quantised codes
        #: (``kgrag.nearest``; 0: none)
        self.ann_min_rows = ann_min_rows
        self.name = self.location.name
        # sidecars (feedback.sqlite) live in a local folder named after the graph
        cache = Path(os.environ.get("KGRAG_NEO4J_SIDECARS", Path.home() / ".cache" / "kgrag"))
        host = re.sub(r"[^A-Za-z0-9._-]", "_", self.location.uri.split("://", 1)[1])
        self.root = cache / "neo4j" / host / (self.location.database or "default") / self.name
        with contextlib.suppress(OSError):
            self.root.mkdir(parents=True, exist_ok=True)
        self.connection = Connection(self.location, driver)

    def close(self) -> None:
        """Nothing to release: connections are pooled per server for the process
        (one driver per server, as Neo4j advises) and closed at exit."""

    # -- the manifest -----------------------------------------------------------------

    def manifest(self) -> dict[str, Any]:
        found = self.connection.run(
            "MATCH (g:KgragGraph {name: $name}) RETURN g.manifest", name=self.name
        )
        if not found or not found[0][0]:
            return {}
        data: dict[str, Any] = json.loads(found[0][0])
        where = f"{self.location.uri}/{self.name}"
        return check_manifest(data, FORMAT, where, f"{where}: not a kgrag graph")

    def versions(self) -> list[str]:
        return sorted(self.manifest().get("versions", {}))

    def current(self) -> str | None:
        version: str | None = self.manifest().get("indexVersion")
        return version

    def reader(self, version: str | None = None) -> Neo4jGraphReader:
        manifest = self.manifest()
        if not manifest:
            raise StoreError(
                f"{self.location.uri}/{self.name}: no graph here (run `kgrag ingest ... "
                f"--graph {self.location.uri}/{self.name}`)"
            )
        version = version or manifest["indexVersion"]
        if version not in manifest["versions"]:
            raise VersionGone(f"indexVersion {version!r} is no longer stored", indexVersion=version)
        meta = dict(manifest["versions"][version], indexVersion=version)
        return Neo4jGraphReader(self.connection, version, meta)

    def writer(self) -> Neo4jGraphWriter:
        return Neo4jGraphWriter(self)

    def lease(self, version: str) -> bool:
        """Hold (or renew) a lease on ``version``: a ``:KgragLease`` node of the graph
        whose ``expires`` (seconds since the epoch) no publish passes over; renewed
        only when less than half of it is left."""
        if version not in self.versions():
            return False
        now, seconds = time.time(), self.retention.lease_seconds
        self.connection.run(
            "MERGE (l:KgragLease {graph: $name, version: $version}) "
            "WITH l WHERE coalesce(l.expires, 0.0) - $now <= $half "
            "SET l.expires = $expires",
            name=self.name,
            version=version,
            now=now,
            half=seconds / 2,
            expires=now + seconds,
        )
        return True

    def _leases(self) -> dict[str, float]:
        found = self.connection.run(
            "MATCH (l:KgragLease {graph: $name}) RETURN l.version, l.expires", name=self.name
        )
        return {str(v): float(e or 0.0) for v, e in found}

    def _drop_leases(self, versions: Iterable[str]) -> None:
        self.connection.run(
            "MATCH (l:KgragLease {graph: $name}) WHERE l.version IN $gone DETACH DELETE l",
            name=self.name,
            gone=list(versions),
        )

    # -- used by the writer -----------------------------------------------------------

    def _lock(self, token: str) -> None:
        """Take the graph's writer lock (one writer at a time); a lock whose holder
        is a dead process on this machine is taken over."""
        self.connection.run("MERGE (g:KgragGraph {name: $name})", name=self.name)
        for _ in range(600):
            got = self.connection.run(
                "MATCH (g:KgragGraph {name: $name}) "
                "WITH g, coalesce(g.writer, '') AS held "
                "SET g.writer = CASE WHEN held = '' THEN $token ELSE held END "
                "RETURN g.writer = $token, held",
                name=self.name,
                token=token,
            )
            ok, held = bool(got[0][0]), str(got[0][1])
            if ok:
                return
            if _dead_holder(held):
                self.connection.run(
                    "MATCH (g:KgragGraph {name: $name}) WHERE g.writer = $held "
                    "SET g.writer = $token",
                    name=self.name,
                    held=held,
                    token=token,
                )
                continue
            time.sleep(0.5)
        raise StoreError(f"{self.location.uri}/{self.name}: another writer holds the graph")

    def _unlock(self, token: str) -> None:
        with contextlib.suppress(StoreError):
            self.connection.run(
                "MATCH (g:KgragGraph {name: $name}) WHERE g.writer = $token REMOVE g.writer",
                name=self.name,
                token=token,
            )

    def _tags_written(self) -> set[str]:
        """Versions with indexes in the database (published or left by a dead writer)."""
        prefix = f"kg_{version_tag(self.name, '')}"
        found = self.connection.run(
            "SHOW INDEXES YIELD name WHERE name STARTS WITH $p RETURN name", p=prefix
        )
        return {str(r[0])[len(prefix) :].split("__")[0] for r in found}

    def _drop(self, version: str) -> None:
        """Delete a version's nodes and drop its indexes."""
        tag = version_tag(self.name, version)
        for kind in LABELS:
            label = labels_of(tag)[kind]
            self.connection.run(
                f"MATCH (n:`{label}`) CALL {{ WITH n DETACH DELETE n }} "
                "IN TRANSACTIONS OF 10000 ROWS"
            )
        prefix = f"kg_{tag}__"
        for (name,) in self.connection.run(
            "SHOW CONSTRAINTS YIELD name WHERE name STARTS WITH $p RETURN name", p=prefix
        ):
            self.connection.run(f"DROP CONSTRAINT `{name}` IF EXISTS")
        for (name,) in self.connection.run(
            "SHOW INDEXES YIELD name WHERE name STARTS WITH $p RETURN name", p=prefix
        ):
            self.connection.run(f"DROP INDEX `{name}` IF EXISTS")


def _dead_holder(held: str) -> bool:
    """Whether the writer lock ``held`` (``host:pid:nonce``) is a process on this
    machine that is gone."""
    host, _, pid = held.rpartition(":")[0].rpartition(":")
    if pid == "" or host != socket.gethostname():
        return False
    try:
        os.kill(int(pid), 0)
    except (ProcessLookupError, ValueError):
        return True
    except PermissionError:
        return False
    return False


class Neo4jGraphWriter(GraphWriter):
    """Stages a version in a private embedded store, then uploads and publishes it."""

    def __init__(self, store: Neo4jGraphStore) -> None:
        from kgrag.store.folder.store import SQLiteGraphStore

        self.store = store
        self.token = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        store._lock(self.token)
        self._done = False
        try:
            published = set(store.versions())
            for stale in store._tags_written() - published:  # left by a writer that died
                store._drop(stale)
            self._tmp = Path(tempfile.mkdtemp(prefix="kgrag-neo4j-"))
            # no ANN files: Neo4j's vector indexes answer nearest neighbours
            self._stage = SQLiteGraphStore(self._tmp, keep_versions=1, ann_min_rows=2**62)
            self._writer = self._stage.writer()
        except BaseException:
            store._unlock(self.token)
            raise

    def add(self, kind: str, records: Iterable[Any]) -> None:
        self._writer.add(kind, records)

    def add_vectors(self, kind: str, ids: Sequence[str], matrix: np.ndarray) -> None:
        self._writer.add_vectors(kind, ids, matrix)

    def add_vector_blocks(
        self, kind: str, ids: Sequence[str], dim: int, blocks: Iterable[np.ndarray]
    ) -> None:
        self._writer.add_vector_blocks(kind, ids, dim, blocks)

    def add_fact_parts(self, ids: Sequence[str], parts: FactParts, entities: Any) -> None:
        self._writer.add_fact_parts(ids, parts, entities)

    def commit(self, meta: dict[str, Any]) -> str:
        staged = self._writer.commit(meta)
        store = self.store
        manifest = store.manifest() or new_manifest(FORMAT)
        version = next_version([*manifest.get("versions", {}), *store._tags_written()])
        folder = self._tmp / "versions" / staged
        tag = version_tag(store.name, version)
        coded = upload(store.connection, tag, folder, store.ann_min_rows)
        version_meta = json.loads((folder / "version.json").read_text())
        version_meta["pq_kinds"] = coded
        with self._stage.reader(staged) as reader:
            version_meta["counts"] = reader.counts()
        crash_point("neo4j-before-publish")  # uploaded, not published
        dropped = publish(manifest, version, version_meta, store.retention, store._leases())
        done = store.connection.run(
            "MATCH (g:KgragGraph {name: $name}) WHERE g.writer = $token "
            "SET g.manifest = $manifest RETURN count(g)",
            name=store.name,
            token=self.token,
            manifest=json.dumps(manifest, sort_keys=True),
        )
        if not done or not done[0][0]:
            raise StoreError(f"{store.location.uri}/{store.name}: lost the writer lock")
        for old in dropped:
            store._drop(old)
        if dropped:
            store._drop_leases(dropped)
        self._finish()
        return version

    def abort(self) -> None:
        if self._done:
            return
        with contextlib.suppress(Exception):
            self._writer.abort()
        self._finish()

    def _finish(self) -> None:
        self._done = True
        shutil.rmtree(self._tmp, ignore_errors=True)
        self.store._unlock(self.token)
