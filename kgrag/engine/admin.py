"""The facade's calls on a whole graph rather than a query: build one from files,
export it, describe its versions, and tell a folder from a Neo4j location.

The CLI, the server and the benchmarks reach the write side (:mod:`ingest`)
and the stores through these, as they reach the read side through
:class:`~kgrag.engine.facade.Engine`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kgrag.config import Config
from kgrag.errors import InvalidParams

if TYPE_CHECKING:
    from ingest import BuildReport
    from ingest.load import LoadResult


def ingest(
    paths: Sequence[str | Path],
    graph: str | Path,
    config: Config | None = None,
    *,
    progress: bool = False,
    prune: bool = False,
    ray: str | None = None,
    ray_workers: int | None = None,
) -> BuildReport:
    """Load ``paths`` (files or folders) and build or extend the graph at ``graph``,
    publishing one new version; the report names every file that failed. ``prune``
    removes the documents of files gone from the folders given. ``ray`` ("auto",
    "local" or a cluster's address) reads and parses on a Ray cluster's workers,
    ``ray_workers`` of them (default one per CPU; :mod:`ingest.distributed`)."""
    from ingest import ingest_paths

    options = None
    if ray is not None or ray_workers is not None:
        from ingest.distributed import RayOptions

        if ray_workers is not None and ray_workers < 1:
            raise InvalidParams("ray_workers must be at least 1", field="ray_workers")
        options = RayOptions(address=ray or "auto", workers=ray_workers)
    return ingest_paths(paths, graph, config, progress=progress, prune=prune, ray=options)


def watch(
    paths: Sequence[str | Path],
    graph: str | Path,
    config: Config | None = None,
    *,
    interval: float = 1.0,
    on_change: Callable[[Any], None] = print,
    stop: threading.Event | None = None,
) -> None:
    """Ingest ``paths`` into ``graph``, then keep the graph in step with them (new,
    edited and removed files become one small write each, told to ``on_change``) until
    ``stop`` is set (:func:`ingest.watch.watch`)."""
    from ingest.watch import watch as run

    if interval <= 0:
        raise InvalidParams("the watch interval must be positive", field="interval")
    run(paths, graph, config, interval=interval, on_change=on_change, stop=stop)


def load_documents(paths: Sequence[str | Path]) -> LoadResult:
    """The documents of ``paths`` as :func:`ingest` reads them, and the files that failed."""
    from ingest.load import load_paths

    return load_paths(paths)


def export_file(graph: str | Path, fmt: str, out: Path) -> dict[str, int]:
    """Write the latest version of ``graph`` to ``out`` as ``fmt`` (graphml or json);
    its node and edge counts."""
    from kgrag.engine.export import export_graph
    from kgrag.store import open_store

    with open_store(graph).reader() as reader:
        return export_graph(reader, fmt, out)


def current_version(graph: str | Path) -> str | None:
    """The version ``graph`` serves now; None when nothing is published there."""
    from kgrag.store import open_store

    return open_store(graph).current()


def info(graph: str | Path) -> dict[str, Any] | None:
    """The current ``indexVersion``, every version kept, and the current version's
    build record (counts, models, settings); None when ``graph`` holds no graph."""
    from kgrag.store import open_store

    manifest = open_store(graph).manifest()
    if not manifest:
        return None
    current = manifest["indexVersion"]
    meta = manifest["versions"][current]
    return {"indexVersion": current, "versions": sorted(manifest["versions"])} | meta


def is_graph_uri(location: str | Path) -> bool:
    """Whether a graph location names a Neo4j server rather than a folder."""
    from kgrag.store.neo4j import is_uri

    return is_uri(location)


def uri_graph_name(location: str) -> str:
    """The graph a Neo4j location names (``neo4j://HOST:PORT/NAME``)."""
    from kgrag.store.neo4j import Location

    return Location.parse(location).name
