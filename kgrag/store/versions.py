"""What both stores do alike when a writer publishes a version: number it after
every version there is, keep the newest ``keep_versions`` in the manifest, check a
manifest is one this kgrag reads, and die at a named point for the crash tests."""

from __future__ import annotations

import os
import re
import signal
from collections.abc import Iterable
from typing import Any

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


def publish(manifest: dict[str, Any], version: str, meta: dict[str, Any], keep: int) -> list[str]:
    """Make ``version`` (described by ``meta``) the latest of ``manifest``, keeping the
    newest ``keep`` versions; the versions dropped from it, oldest first (the caller
    deletes their data once the manifest is written)."""
    versions = dict(manifest.get("versions", {}))
    versions[version] = meta
    dropped = sorted(versions)[: max(0, len(versions) - keep)]
    for old in dropped:
        versions.pop(old)
    manifest.update(indexVersion=version, versions=versions)
    return dropped


def crash_point(name: str) -> None:
    """Fault injection for the crash tests: die here, as a killed process would, if
    ``KGRAG_CRASH_AT`` names this point."""
    if os.environ.get("KGRAG_CRASH_AT") == name:
        os.kill(os.getpid(), signal.SIGKILL)
