"""What both stores do alike when a writer publishes a version: number it after
every version there is, decide which older versions stay (:class:`Retention`: the
newest few, those superseded a short while ago, and those a reader holds a lease on),
check a manifest is one this kgrag reads, and die at a named point for the crash
tests."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kgrag.config import KEEP, LEASE_SECONDS, RETAIN_SECONDS
from kgrag.errors import StoreError
from kgrag.store import schema

_VERSION = re.compile(r"v\d{6}")


def is_version(name: str) -> bool:
    """Whether ``name`` is a version's name (``v000001``)."""
    return bool(_VERSION.fullmatch(name))


def next_version(known: Iterable[str]) -> str:
    """The name after every version in ``known`` (published, or left by a writer that
    died): one more than the highest number; other names are not versions."""
    numbers = [int(v[1:]) for v in known if is_version(v)] or [0]
    return f"v{max(numbers) + 1:06d}"


def new_manifest(kind: str) -> dict[str, Any]:
    """The manifest of a graph without a version yet, in the store format ``kind``."""
    return {"format": kind, "schema": schema.SCHEMA_VERSION}


def check_manifest(data: dict[str, Any], kind: str, where: str, not_ours: str) -> dict[str, Any]:
    """``data``, a manifest read at ``where``, when it is of the store format ``kind``
    and the schema this kgrag reads; else a StoreError (``not_ours``: the message for
    another format)."""
    if data.get("format") != kind:
        raise StoreError(not_ours)
    if data.get("schema") != schema.SCHEMA_VERSION:
        raise StoreError(
            f"{where}: schema {data.get('schema')} but this kgrag reads "
            f"schema {schema.SCHEMA_VERSION}; rebuild the graph"
        )
    return data


@dataclass(frozen=True, slots=True)
class Retention:
    """Which published versions a publish keeps besides the new one.

    Retention is by age and lease, not by count: a version superseded less than
    ``retain_seconds`` ago stays, and so does one a reader holds an unexpired lease on
    (a call pinned to an ``indexVersion`` takes or renews one for ``lease_seconds``);
    the newest ``keep`` versions stay whatever their age. The rest are dropped."""

    keep: int = KEEP
    retain_seconds: float = RETAIN_SECONDS
    lease_seconds: float = LEASE_SECONDS


def publish(
    manifest: dict[str, Any],
    version: str,
    meta: dict[str, Any],
    retention: Retention,
    leases: Mapping[str, float] | None = None,
    now: float | None = None,
) -> list[str]:
    """Make ``version`` (described by ``meta``) the latest of ``manifest``; the older
    versions that ``retention`` no longer keeps are dropped from it and returned, oldest
    first (the caller deletes their data once the manifest is written). ``leases``:
    version -> the time (``time.time()``) its lease runs out. Each version the new one
    supersedes is stamped ``superseded`` (seconds since the epoch) the first time."""
    now = time.time() if now is None else now
    leases = leases or {}
    versions = {k: dict(v) for k, v in manifest.get("versions", {}).items()}
    for old in versions.values():
        old.setdefault("superseded", now)
    versions[version] = meta
    order = sorted(versions)
    newest = set(order[-max(1, retention.keep) :])
    dropped = [
        v
        for v in order
        if v not in newest
        and leases.get(v, 0.0) <= now
        and now - float(versions[v]["superseded"]) >= retention.retain_seconds
    ]
    for old in dropped:
        versions.pop(old)
    manifest.update(indexVersion=version, versions=versions)
    return dropped


def renew_lease(folder: Path, version: str, seconds: float, now: float | None = None) -> None:
    """Hold a lease on ``version`` for ``seconds`` from now in the lease folder
    ``folder`` (one file a version holding the time it runs out); a lease with more
    than half its time left is not written again, so a stream of pinned calls costs a
    write a half-lease."""
    now = time.time() if now is None else now
    path = folder / version
    with contextlib.suppress(OSError, ValueError):
        if float(path.read_text(encoding="ascii")) - now > seconds / 2:
            return
    folder.mkdir(parents=True, exist_ok=True)
    tmp = folder / f".{version}.{os.getpid()}.{threading.get_ident()}"
    tmp.write_text(repr(now + seconds), encoding="ascii")
    os.replace(tmp, path)


def read_leases(folder: Path) -> dict[str, float]:
    """The leases in ``folder``: version -> when it runs out (unreadable files skipped)."""
    out: dict[str, float] = {}
    try:
        entries = list(folder.iterdir())
    except OSError:
        return out
    for path in entries:
        if not is_version(path.name):
            continue
        try:
            out[path.name] = float(path.read_text(encoding="ascii"))
        except (OSError, ValueError):
            continue
    return out


def drop_leases(folder: Path, keep: Iterable[str]) -> None:
    """Remove the lease files of versions not in ``keep`` (they are gone), and what a
    renewal killed before its rename left a minute ago or more."""
    kept, now = set(keep), time.time()
    try:
        entries = list(folder.iterdir())
    except OSError:
        return
    for path in entries:
        name = path.name
        with contextlib.suppress(OSError):
            gone = is_version(name) and name not in kept
            stale = name.startswith(".") and now - path.stat().st_mtime > 60
            if gone or stale:
                path.unlink(missing_ok=True)


def crash_point(name: str) -> None:
    """Fault injection for the crash tests: die here, as a killed process would, if
    ``KGRAG_CRASH_AT`` names this point."""
    if os.environ.get("KGRAG_CRASH_AT") == name:
        os.kill(os.getpid(), signal.SIGKILL)
