"""The graphs one server serves, by name, and the capabilities of each.

``kgrag serve --graph DIR --graph NAME=DIR2`` serves several graph folders at
once; the REST route calls them namespaces. The first is the default: plain
``/rcp`` calls and the ``default`` namespace reach it. Capabilities are worked
out once, when the server starts, and stay fixed for its lifetime (spec §13.2):
a graph that later gains a level or a filter field still answers calls that use
it, it is just not re-advertised.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ..config import Config
from ..engine import Engine, is_graph_uri, uri_graph_name
from ..errors import InvalidParams, NotFound
from .access import not_served

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
LOG_LEVELS = ["debug", "info", "notice", "warning", "error"]


def parse_spec(spec: str) -> tuple[str, Path | str]:
    """``NAME=DIR`` or ``DIR`` (named after the folder) as (name, path); DIR may be a
    Neo4j URI (``neo4j://HOST:PORT/NAME``, named after its graph)."""
    if is_graph_uri(spec):
        return uri_graph_name(spec), spec
    name, sep, path = spec.partition("=")
    if not sep:
        name, path = Path(spec.rstrip("/")).name, spec
    if not _NAME.match(name):
        raise InvalidParams(
            f"graph name {name!r}: use letters, digits, '.', '_' or '-' (at most 64)",
            field="graph",
        )
    return name, (path if is_graph_uri(path) else Path(path))


class Graphs:
    """Named engines; ``default`` is the one unqualified calls reach."""

    def __init__(
        self, engines: dict[str, Engine], *, default: str | None = None, writable: bool = True
    ) -> None:
        if not engines:
            raise InvalidParams("serve at least one graph", field="graph")
        self.engines = dict(engines)
        self.names = tuple(self.engines)
        self.default = default or self.names[0]
        if self.default not in self.engines:
            raise NotFound(f"no graph named {self.default!r}", field="graph")
        self.writable = writable
        self._caps: dict[tuple[str, str], dict[str, Any]] = {}
        self._lock = threading.Lock()
        #: graphs whose store could not be reached at their last call or probe, and why
        self.unavailable: dict[str, str] = {}
        #: index/add results by idempotency key, per graph (spec §7.10)
        self.idempotent: dict[str, dict[str, dict[str, Any]]] = {n: {} for n in self.names}

    @classmethod
    def open(
        cls,
        specs: Iterable[str],
        *,
        config: Config | None = None,
        writable: bool = True,
        write_apart: bool = False,
    ) -> Graphs:
        """Open every ``NAME=DIR`` / ``DIR`` in ``specs``; a bad one closes the others.
        With ``write_apart`` each graph's writes run in a child process of their own
        (:meth:`kgrag.Engine.write_apart`)."""
        import kgrag

        engines: dict[str, Engine] = {}
        try:
            for spec in specs:
                name, path = parse_spec(spec)
                if name in engines:
                    raise InvalidParams(f"two graphs are named {name!r}", field="graph")
                engines[name] = kgrag.open(path, config=config)
                if writable and write_apart:
                    engines[name].write_apart()
        except BaseException:
            for engine in engines.values():
                engine.close()
            raise
        graphs = cls(engines, writable=writable)
        for name in graphs.names:  # load now: the first call should not pay for it
            graphs.capabilities(name, "http")
        return graphs

    def get(self, name: str | None = None) -> Engine:
        name = name or self.default
        if name not in self.engines:
            raise NotFound(not_served(name), field="graph")
        return self.engines[name]

    def capabilities(self, name: str, transport: str) -> dict[str, Any]:
        """What ``name`` offers over ``transport`` ("stdio" or "http"), fixed once computed."""
        key = (name, transport)
        with self._lock:
            if key not in self._caps:
                caps = self.get(name).capabilities()
                if not self.writable:
                    caps.pop("index", None)
                caps["streaming"] = {}
                if transport == "stdio":
                    caps["log"] = {"levels": list(LOG_LEVELS)}
                if len(self.names) > 1:
                    caps["catalog"] = {"engines": len(self.names)}
                caps["x-kgrag"] = {"graph": name, "graphs": list(self.names)}
                self._caps[key] = caps
            return self._caps[key]

    def note(self, name: str, trouble: str | None) -> None:
        """Record that ``name``'s store answered (None) or could not be reached."""
        if trouble is not None:
            self.unavailable[name] = trouble
        elif name in self.unavailable:
            self.unavailable.pop(name, None)

    def close(self) -> None:
        for engine in self.engines.values():
            engine.close()
