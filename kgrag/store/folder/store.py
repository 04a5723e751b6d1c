"""The embedded store: one SQLite file (with an FTS5 BM25 index) and numpy
vector files per version, under one graph folder.

    graphs/NAME/
      manifest.json            published versions; "indexVersion" is the latest
      .lock                    held by the one writer at a time
      versions/v000001/        graph.sqlite, vectors/ (kgrag.store.vectors), version.json
      versions/.tmp-*/         a version being written (removed if its writer died)
      leases/vNNNNNN           a lease a pinned reader holds on an older version

Publishing renames the finished folder into place and then replaces
manifest.json with ``os.replace``; a process killed at any moment leaves the
previous manifest, and so the previous version, intact.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import sqlite3
import uuid
from collections.abc import Iterable, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np

from kgrag.errors import InvalidParams, StoreError, VersionGone
from kgrag.store import schema
from kgrag.store.ann import ANN_MIN_ROWS
from kgrag.store.base import (
    RECORD_KINDS,
    VECTOR_KINDS,
    GraphStore,
    GraphWriter,
)
from kgrag.store.composed import COMPOSED_KIND, FactParts
from kgrag.store.cooc import CoocWriter
from kgrag.store.folder.reader import SQLiteGraphReader
from kgrag.store.packed import community_rows, report_text
from kgrag.store.serving import SERVING, SERVING_FORMAT, derive
from kgrag.store.space import out_of_room, room_message
from kgrag.store.vectors import (
    code_files,
    is_composed,
    load_fact_parts,
    remove_fact_parts,
    save_fact_parts,
    save_ids,
    vector_count,
)
from kgrag.store.versions import (
    KEEP,
    LEASE_SECONDS,
    RETAIN_SECONDS,
    Retention,
    check_manifest,
    crash_point,
    drop_leases,
    new_manifest,
    next_version,
    publish,
    read_leases,
    renew_lease,
)

MANIFEST = "manifest.json"
LEASES = "leases"
FORMAT = "kgrag-graph"
_CACHE_KIB = 256 << 10  # the writer's page cache: inserts by hashed id land all over a table


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _serving_ok(folder: Path) -> bool:
    try:
        meta = json.loads((folder / SERVING / "serving.json").read_text())
    except (OSError, ValueError):
        return False
    return isinstance(meta, dict) and meta.get("format") == SERVING_FORMAT


class SQLiteGraphStore(GraphStore):
    """A graph folder in the embedded format."""

    def __init__(
        self,
        root: str | Path,
        *,
        keep_versions: int = KEEP,
        ann_min_rows: int = ANN_MIN_ROWS,
        retain_seconds: float = RETAIN_SECONDS,
        lease_seconds: float = LEASE_SECONDS,
    ) -> None:
        self.root = Path(root)
        self.retention = Retention(keep_versions, retain_seconds, lease_seconds)
        self.ann_min_rows = ann_min_rows
        self._current: tuple[tuple[int, int, int], tuple[str | None, frozenset[str]]] | None = None

    def manifest(self) -> dict[str, Any]:
        path = self.root / MANIFEST
        if not path.exists():
            return {}
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise StoreError(f"{path}: unreadable manifest: {exc}") from exc
        return check_manifest(data, FORMAT, str(path), f"{path}: not a kgrag graph manifest")

    def versions(self) -> list[str]:
        return sorted(self.manifest().get("versions", {}))

    def current(self) -> str | None:
        """The published version, re-read only when the manifest file changed (every
        query asks; a publish replaces the file, so its inode changes)."""
        latest = self._published()
        return None if latest is None else latest[0]

    def _published(self) -> tuple[str | None, frozenset[str]] | None:
        """The latest version and the versions stored, from the manifest as it is now
        (re-read only when the file changed); None when there is no manifest."""
        try:
            st = (self.root / MANIFEST).stat()
        except FileNotFoundError:
            return None
        key = (st.st_ino, st.st_mtime_ns, st.st_size)
        if self._current is None or self._current[0] != key:
            manifest = self.manifest()
            self._current = (
                key,
                (manifest.get("indexVersion"), frozenset(manifest.get("versions", {}))),
            )
        return self._current[1]

    def lease(self, version: str) -> bool:
        """Hold (or renew) a lease on ``version`` for ``retention.lease_seconds``: no
        publish removes it meanwhile. False when it is no longer stored. A read-only
        folder takes no lease (no writer can publish there)."""
        published = self._published()
        if published is None or version not in published[1]:
            return False
        with contextlib.suppress(OSError):
            renew_lease(self.root / LEASES, version, self.retention.lease_seconds)
        return True

    def reader(self, version: str | None = None) -> SQLiteGraphReader:
        manifest = self.manifest()
        if not manifest:
            raise StoreError(
                f"{self.root}: no graph here (run `kgrag ingest ... --graph {self.root}`)"
            )
        version = version or manifest["indexVersion"]
        folder = self.root / "versions" / version
        if version not in manifest["versions"] or not folder.is_dir():
            raise VersionGone(f"indexVersion {version!r} is no longer stored", indexVersion=version)
        meta = dict(manifest["versions"][version], indexVersion=version)
        if not _serving_ok(folder):
            self._upgrade(folder)
        return SQLiteGraphReader(folder, meta)

    def _upgrade(self, folder: Path) -> None:
        """Derive the serving files of a version written before they existed (once, under
        the writers' lock; the version's records are not touched)."""
        try:
            with open(self.root / ".lock", "a+") as lock:
                fcntl.flock(lock, fcntl.LOCK_EX)
                if _serving_ok(folder):
                    return
                tmp = folder / f".{SERVING}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
                try:
                    derive(folder, tmp, ann_min_rows=self.ann_min_rows)
                    shutil.rmtree(folder / SERVING, ignore_errors=True)
                    os.replace(tmp, folder / SERVING)
                finally:
                    shutil.rmtree(tmp, ignore_errors=True)
        except OSError as exc:
            raise StoreError(
                f"{folder}: this version's serving files are missing or of an older format "
                f"and cannot be written here ({exc}); open the graph once where it is writable"
            ) from exc

    def writer(self) -> SQLiteGraphWriter:
        try:
            return SQLiteGraphWriter(self)
        except (OSError, sqlite3.Error) as exc:
            reason = out_of_room(exc)
            if reason is None:
                raise
            raise StoreError(room_message(self.root, reason, self.current())) from exc

    # -- used by the writer while it holds the lock --------------------------------

    def _next_version(self) -> str:
        known = set(self.manifest().get("versions", {}))
        folder = self.root / "versions"
        if folder.is_dir():
            known.update(p.name for p in folder.iterdir())
        return next_version(known)

    def _publish(self, version: str, meta: dict[str, Any]) -> None:
        manifest = self.manifest() or new_manifest(FORMAT)
        leases = read_leases(self.root / LEASES)
        dropped = publish(manifest, version, meta, self.retention, leases)
        tmp = self.root / f".{MANIFEST}.{uuid.uuid4().hex}"
        tmp.write_text(json.dumps(manifest, indent=2, sort_keys=True), encoding="utf-8")
        _fsync(tmp)
        os.replace(tmp, self.root / MANIFEST)
        _fsync(self.root)
        crash_point("before-clean-up")
        for old in dropped:  # a kill midway leaves folders the next writer removes
            shutil.rmtree(self.root / "versions" / old, ignore_errors=True)
            crash_point("during-clean-up")
        if dropped:
            _fsync(self.root / "versions")
        drop_leases(self.root / LEASES, manifest["versions"])


class SQLiteGraphWriter(GraphWriter):
    """Writes a version into a private temporary folder, then publishes it."""

    def __init__(self, store: SQLiteGraphStore) -> None:
        self.store = store
        (store.root / "versions").mkdir(parents=True, exist_ok=True)
        self._lock = open(store.root / ".lock", "a+")  # noqa: SIM115 - held until commit/abort
        fcntl.flock(self._lock, fcntl.LOCK_EX)
        published = set(store.manifest().get("versions", {}))
        for folder in (store.root / "versions").iterdir():
            if folder.name not in published:  # left by a writer that died; we hold the lock
                shutil.rmtree(folder, ignore_errors=True)
        for stale in store.root.glob(f".{MANIFEST}.*"):
            stale.unlink(missing_ok=True)
        self.folder = store.root / "versions" / f".tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        self._done = False
        try:
            (self.folder / "vectors").mkdir(parents=True)
            self.db = sqlite3.connect(self.folder / "graph.sqlite")
            self.db.executescript(
                f"PRAGMA journal_mode=OFF; PRAGMA synchronous=OFF; "
                f"PRAGMA cache_size=-{_CACHE_KIB};" + schema.DDL
            )
        except BaseException:
            with contextlib.suppress(AttributeError, sqlite3.Error):
                self.db.close()
            shutil.rmtree(self.folder, ignore_errors=True)
            self._release()
            raise
        self._filled: list[np.memmap] = []
        self._cooc = CoocWriter()  # co-occurrences: columns, not rows (kgrag.store.cooc)

    def add(self, kind: str, records: Iterable[Any]) -> None:
        if kind not in RECORD_KINDS:
            raise InvalidParams(f"unknown record kind {kind!r}", field="kind")
        sql, row = schema.INSERTS[kind]
        try:
            if kind == "communities":
                self._communities(list(records))
            elif kind == "relations":  # co-occurrences to their columns, saved now
                self.db.executemany(sql, (row(r) for r in records if not self._cooc.take(r)))
                self._cooc.save(self.folder)
            else:
                self.db.executemany(sql, (row(r) for r in records))
        except sqlite3.IntegrityError as exc:
            raise StoreError(f"duplicate {kind} record: {exc}") from exc

    def _communities(self, batch: list[Any]) -> None:
        """A batch of communities, a copy carried down a level stored as NULLs
        (:func:`~kgrag.store.packed.community_rows`); the full-text index gets every
        row's report as it is added (its rebuild at commit would read the NULLs)."""
        (last,) = self.db.execute("SELECT coalesce(max(rowid), 0) FROM communities").fetchone()
        rows = community_rows(batch)
        self.db.executemany(schema.INSERTS["communities"][0], rows)
        texts = (
            report_text(c) if row[5] is None else row[5] for c, row in zip(batch, rows, strict=True)
        )
        self.db.executemany(
            "INSERT INTO communities_fts(rowid, report) VALUES (?, ?)",
            ((last + 1 + i, text) for i, text in enumerate(texts)),
        )

    def add_vectors(self, kind: str, ids: Sequence[str], matrix: np.ndarray) -> None:
        if kind not in VECTOR_KINDS:
            raise InvalidParams(f"unknown vector kind {kind!r}", field="kind")
        matrix = np.ascontiguousarray(matrix, dtype=np.float32)
        if matrix.ndim != 2 or matrix.shape[0] != len(ids):
            raise StoreError(f"{kind}: {len(ids)} ids but a matrix of shape {matrix.shape}")
        path = self.folder / "vectors" / f"{kind}.npy"
        self._filled = [m for m in self._filled if Path(str(m.filename)) != path]  # replaced
        path.unlink(missing_ok=True)  # a new file: a map of the old one stays valid
        np.save(path, matrix)
        self._vector_ids(kind, ids)

    def add_vector_blocks(
        self, kind: str, ids: Sequence[str], dim: int, blocks: Iterable[np.ndarray]
    ) -> None:
        """Each block written to the kind's file as it comes: no more than one block of
        the matrix is ever in memory."""
        if kind not in VECTOR_KINDS:
            raise InvalidParams(f"unknown vector kind {kind!r}", field="kind")
        path = self.folder / "vectors" / f"{kind}.npy"
        self._filled = [m for m in self._filled if Path(str(m.filename)) != path]
        path.unlink(missing_ok=True)
        rows = 0
        with open(path, "wb") as f:
            header = {"descr": "<f4", "fortran_order": False, "shape": (len(ids), dim)}
            np.lib.format.write_array_header_1_0(f, header)
            for block in blocks:
                block = np.ascontiguousarray(block, dtype="<f4")
                if block.ndim != 2 or block.shape[1] != dim:
                    raise StoreError(f"{kind}: a block of shape {block.shape}, not (n, {dim})")
                rows += len(block)
                f.write(block.tobytes())
        if rows != len(ids):
            raise StoreError(f"{kind}: {len(ids)} ids but {rows} rows in the blocks")
        self._vector_ids(kind, ids)

    def vectors_to_fill(self, kind: str, ids: Sequence[str], dim: int) -> np.ndarray:
        """The vectors of one kind as a zeroed float32 file mapped for writing, shape
        ``(len(ids), dim)``, row i for ids[i]: for a matrix too large to hold in memory
        (the caller fills it in blocks; it is flushed by :meth:`commit`). It takes the
        place of :meth:`add_vectors` for the kind."""
        if kind not in VECTOR_KINDS:
            raise InvalidParams(f"unknown vector kind {kind!r}", field="kind")
        path = self.folder / "vectors" / f"{kind}.npy"
        matrix = np.lib.format.open_memmap(path, "w+", np.float32, (len(ids), dim))
        self._filled.append(matrix)
        self._vector_ids(kind, ids)
        return matrix

    def add_fact_parts(self, ids: Sequence[str], parts: FactParts, entities: Any) -> None:
        """The parts alone are stored (:mod:`kgrag.store.composed`); the rows are composed
        as they are read, from the entity vectors this version stores."""
        if len(parts.ends) != len(ids):
            raise StoreError(f"facts: {len(ids)} ids but parts of {len(parts.ends)} facts")
        path = self.folder / "vectors" / f"{COMPOSED_KIND}.npy"
        self._filled = [m for m in self._filled if Path(str(m.filename)) != path]
        path.unlink(missing_ok=True)
        self._vector_ids(COMPOSED_KIND, ids)
        save_fact_parts(self.folder / "vectors", parts)

    def _vector_ids(self, kind: str, ids: Sequence[str]) -> None:
        if kind == COMPOSED_KIND:  # any other way of storing them replaces the parts
            remove_fact_parts(self.folder / "vectors")
        save_ids(self.folder / "vectors", kind, ids)

    def commit(self, meta: dict[str, Any]) -> str:
        for matrix in self._filled:
            matrix.flush()
        self._filled.clear()
        folder = self.folder / "vectors"
        code_files(folder)
        if is_composed(folder, COMPOSED_KIND):
            entities = vector_count(folder, "entities")[0]
            weights = len(load_fact_parts(folder).weight)
            if entities != weights:
                raise StoreError(f"facts composed of {weights} entities, {entities} stored")
        self._cooc.save(self.folder)
        self.db.executescript(schema.INDEXES)
        for kind, (fts, _, _) in schema.FTS.items():
            if kind != "communities":  # indexed as they were added
                self.db.execute(f"INSERT INTO {fts}({fts}) VALUES ('rebuild')")
        self.db.commit()
        self.db.close()
        derive(self.folder, self.folder / SERVING, ann_min_rows=self.store.ann_min_rows)
        crash_point("after-derive")
        version = self.store._next_version()
        meta = dict(meta, created=datetime.now(timezone.utc).isoformat(timespec="seconds"))
        (self.folder / "version.json").write_text(json.dumps(meta, indent=2, sort_keys=True))
        for path in [*self.folder.rglob("*")]:
            if path.is_file():
                _fsync(path)
        for path in [*self.folder.rglob("*"), self.folder]:  # their entries too
            if path.is_dir():
                _fsync(path)
        final = self.store.root / "versions" / version
        crash_point("before-rename")
        os.replace(self.folder, final)
        _fsync(final.parent)
        crash_point("before-manifest")
        self.store._publish(version, meta)
        self._release()
        return version

    def __exit__(self, *info: object) -> None:
        self.abort()
        exc = info[1] if len(info) > 1 else None
        if not isinstance(exc, BaseException) or isinstance(exc, StoreError):
            return
        reason = out_of_room(exc)
        if reason is not None:
            raise StoreError(room_message(self.store.root, reason, self.store.current())) from exc

    def abort(self) -> None:
        if self._done:
            return
        self._filled.clear()
        with contextlib.suppress(sqlite3.Error):
            self.db.close()
        shutil.rmtree(self.folder, ignore_errors=True)
        self._release()

    def _release(self) -> None:
        self._done = True
        fcntl.flock(self._lock, fcntl.LOCK_UN)
        self._lock.close()
