"""Keep a graph in step with folders: new, edited and removed files become small writes.

:func:`watch` ingests the paths once (removing the documents of files gone from the
folders, as ``kgrag ingest --prune``), then looks at them every ``interval`` seconds.
A file is taken once it has stayed the same (size and modification time) for one
look, so a file still being written is not read half-way. Each change is one write:

- a new or edited file: its documents are read and upserted; documents it held before
  and holds no more (an edited collection file) are deleted in the same write;
- a removed file: the documents it held are deleted;
- a file that no longer reads (broken, half-copied): an error line, and the documents
  it held stay as they were until it reads again;
- a write that fails (no room, a store that is down): an error line; the graph keeps
  its version and the change is tried again at the next look.

Each change gets one line (:class:`Change`, ``str()``): what happened, to which file,
the documents and chunks written, the new ``indexVersion`` and the seconds it took.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from kgrag.config import Config
from kgrag.errors import KgragError
from kgrag.store import open_store
from kgrag.types import Document

from .load import FileRead, find_files, read_file_at
from .pipeline import build

__all__ = ["Change", "watch"]

#: a file's signature: (size, modification time in ns)
Signature = tuple[int, int]


@dataclass(frozen=True, slots=True)
class Change:
    """One change of the watched files and the write it made."""

    kind: str  # "added" | "updated" | "removed" | "error" | "synced"
    path: str
    documents: int = 0
    deleted: int = 0
    index_version: str | None = None
    seconds: float = 0.0
    reason: str = ""

    def __str__(self) -> str:
        if self.kind == "error":
            return f"error    {self.path}: {self.reason} (the graph keeps what it held)"
        what = {
            "added": f"{self.documents} document(s)",
            "updated": f"{self.documents} document(s), {self.deleted} deleted",
            "removed": f"{self.deleted} document(s) deleted",
            "synced": f"{self.documents} document(s), {self.deleted} of gone files deleted",
        }[self.kind]
        version = self.index_version or "unchanged"
        return f"{self.kind:<8} {self.path}: {what} -> {version} in {self.seconds:.2f} s"


@dataclass(slots=True)
class _File:
    path: Path
    signature: Signature
    ids: set[str] = field(default_factory=set)


def _signature(path: Path) -> Signature | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_size, st.st_mtime_ns


def _scan(paths: Sequence[str | Path]) -> dict[str, tuple[Path, Signature]]:
    """The loadable files under ``paths`` now: key -> (path, signature)."""
    out = {}
    for path, key in find_files(paths).files:
        sig = _signature(path)
        if sig is not None:
            out[key] = (path, sig)
    return out


def watch(
    paths: Sequence[str | Path],
    graph: str | Path,
    config: Config | None = None,
    *,
    interval: float = 1.0,
    on_change: Callable[[Change], None] = print,
    stop: threading.Event | None = None,
) -> None:
    """Ingest ``paths`` into ``graph`` and keep it in step with them until ``stop`` is
    set (or the process is interrupted); ``on_change`` gets each change as it is
    written."""
    config = config or Config()
    stop = stop or threading.Event()
    files = _first_sync(paths, graph, config, on_change)
    pending: dict[str, Signature | None] = {}  # seen changed at the last look
    while not stop.wait(interval):
        now = _scan(paths)
        changed: dict[str, Signature | None] = {
            key: sig
            for key, (_, sig) in now.items()
            if key not in files or files[key].signature != sig
        }
        changed.update({key: None for key in files if key not in now})
        ready = [key for key, sig in changed.items() if pending.get(key, ()) == sig]
        pending = {key: sig for key, sig in changed.items() if key not in ready}
        for key in sorted(ready):
            try:
                if key in now:
                    on_change(_upsert(key, now[key][0], now[key][1], files, graph, config))
                else:
                    on_change(_remove(key, files, graph, config))
            except KgragError as exc:  # the write failed (no room, store down): the
                # graph keeps its version, and the change is tried again at the next look
                on_change(Change("error", key, reason=f"the write failed: {exc.message}"))


def _first_sync(
    paths: Sequence[str | Path],
    graph: str | Path,
    config: Config,
    on_change: Callable[[Change], None],
) -> dict[str, _File]:
    """Ingest every file under ``paths`` and drop the documents of files gone from the
    folders given; the files as the watch starts from."""
    t0 = time.perf_counter()
    found = find_files(paths)
    reads: list[tuple[Path, FileRead]] = [(p, read_file_at(p, key)) for p, key in found.files]
    loaded = found.result([read for _, read in reads])
    for err in loaded.errors:
        on_change(Change("error", err.path, reason=err.reason))
    store = open_store(graph, **config.store.model_dump())
    gone: list[str] = []
    if store.current():
        with store.reader() as reader:
            gone = loaded.gone(reader.documents())
    report = build(loaded.documents, graph, config, delete=gone)
    files = {}
    for path, read in reads:
        sig = _signature(path)
        if sig is not None and read.error is None:
            files[read.key] = _File(path, sig, {d.id for d in read.documents})
    on_change(
        Change(
            "synced",
            ", ".join(str(p) for p in paths),
            documents=len(loaded.documents),
            deleted=len(gone),
            index_version=report.index_version,
            seconds=time.perf_counter() - t0,
        )
    )
    return files


def _write(
    graph: str | Path, config: Config, add: Sequence[Document], delete: Sequence[str]
) -> str | None:
    report = build(add, graph, config, delete=delete)
    return report.index_version if report.changed else None


def _upsert(
    key: str, path: Path, sig: Signature, files: dict[str, _File], graph: str | Path, config: Config
) -> Change:
    t0 = time.perf_counter()
    read = read_file_at(path, key)
    before = files.get(key)
    if read.error is not None:  # told once; looked at again when it changes again
        files[key] = _File(path, sig, before.ids if before else set())
        return Change("error", key, reason=read.error.reason)
    ids = {d.id for d in read.documents}
    gone = sorted(before.ids - ids) if before else []
    version = _write(graph, config, read.documents, gone)
    files[key] = _File(path, sig, ids)
    kind = "updated" if before else "added"
    return Change(kind, key, len(read.documents), len(gone), version, time.perf_counter() - t0)


def _remove(key: str, files: dict[str, _File], graph: str | Path, config: Config) -> Change:
    t0 = time.perf_counter()
    held = files[key]
    version = _write(graph, config, [], sorted(held.ids)) if held.ids else None
    del files[key]  # only once written: a failed write is tried again
    return Change("removed", key, 0, len(held.ids), version, time.perf_counter() - t0)
