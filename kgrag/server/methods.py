"""The engine-backed RCP/1 methods: each takes the call and returns its result.

They run on worker threads (:meth:`Rcp.submit`) and reach the engine facade
only. Parameter checking belongs to the engine; what is here is the protocol's
own part: idempotency keys on index/add, progress frames, catalog/list. The
table (:data:`TABLE`) names each method's result model (:mod:`kgrag.rcp.wire`),
which the protocol holds every result to (:meth:`Method.check`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from pydantic import BaseModel

from kgrag.rcp import wire
from kgrag.rcp.params import AddParams, DeleteParams, validate

from ..errors import InvalidParams
from .graphs import Graphs


class Rcp(Protocol):
    """What a method reads of the server (:class:`kgrag.server.protocol.Rcp`)."""

    @property
    def graphs(self) -> Graphs: ...

    def capabilities(self, name: str, caller: Any = ...) -> dict[str, Any]: ...


class Call(Protocol):
    """What a method reads of its call (:class:`kgrag.server.protocol.Call`)."""

    @property
    def graph(self) -> str: ...

    @property
    def params(self) -> Any: ...

    def progress(
        self,
        stage: str,
        progress: float,
        message: str | None = None,
        partial: dict[str, Any] | None = None,
    ) -> None: ...


class Context(Protocol):
    """What a method reads of the sender (:class:`kgrag.server.protocol.Context`)."""

    @property
    def base_url(self) -> str | None: ...

    @property
    def caller(self) -> Any: ...


#: index/add results remembered per graph for ``_meta.idempotencyKey``
IDEMPOTENCY_KEYS = 1024


def _engine(server: Rcp, call: Call) -> Any:
    return server.graphs.get(call.graph)


def retrieve(server: Rcp, call: Call, ctx: Context) -> dict[str, Any]:
    call.progress("recall", 0.0)
    result = _engine(server, call).retrieve(call.params, progress=call.progress)
    return result


def graph(server: Rcp, call: Call, ctx: Context) -> dict[str, Any]:
    op = call.params.get("op")
    call.progress(op if isinstance(op, str) else "graph", 0.0)
    return _engine(server, call).graph(call.params)


def embed(server: Rcp, call: Call, ctx: Context) -> dict[str, Any]:
    return _engine(server, call).embed(call.params)


def rerank(server: Rcp, call: Call, ctx: Context) -> dict[str, Any]:
    call.progress("rerank", 0.0)
    return _engine(server, call).rerank(call.params)


def transform(server: Rcp, call: Call, ctx: Context) -> dict[str, Any]:
    return _engine(server, call).transform(call.params)


def index_add(server: Rcp, call: Call, ctx: Context) -> dict[str, Any]:
    p = validate(AddParams, call.params)
    meta = call.params.get("_meta")
    key = meta.get("idempotencyKey") if isinstance(meta, dict) else None
    if key is not None and not isinstance(key, str):
        raise InvalidParams("_meta.idempotencyKey must be a string", field="_meta.idempotencyKey")
    seen = server.graphs.idempotent[call.graph]
    if key is not None and key in seen:
        return dict(seen[key])
    call.progress("index", 0.0, f"adding {len(p.documents)} documents")
    result = _engine(server, call).add(p.documents, chunk=p.chunk, contextual=p.contextual)
    if key is not None:
        if len(seen) >= IDEMPOTENCY_KEYS:
            seen.pop(next(iter(seen)))
        seen[key] = dict(result)
    return result


def index_delete(server: Rcp, call: Call, ctx: Context) -> dict[str, Any]:
    p = validate(DeleteParams, call.params)
    return _engine(server, call).delete(p.ids)


def feedback(server: Rcp, call: Call, ctx: Context) -> dict[str, Any]:
    return _engine(server, call).feedback(call.params)


def memory_build(server: Rcp, call: Call, ctx: Context) -> dict[str, Any]:
    return _engine(server, call).memory_build(call.params)


def memory_recall(server: Rcp, call: Call, ctx: Context) -> dict[str, Any]:
    return _engine(server, call).memory_recall(call.params)


def catalog_list(server: Rcp, call: Call, ctx: Context) -> dict[str, Any]:
    """Every served graph as an engine entry (spec §7.13); HTTP ones carry their URL."""
    from .. import __version__

    engines = []
    for name in ctx.caller.visible(server.graphs.names):
        entry: dict[str, Any] = {
            "id": name,
            "server": {"name": "kgrag", "version": __version__},
            "capabilities": server.capabilities(name, ctx.caller),
            "x-kgrag-graph": name,
        }
        if ctx.base_url is not None:
            entry["endpoint"] = {"transport": "http", "url": f"{ctx.base_url}/graphs/{name}/rcp"}
        engines.append(entry)
    return {"engines": engines}


log = logging.getLogger("kgrag.server")


class ResultShapeError(Exception):
    """A method's result is not the shape its model declares (a bug in the engine)."""


@dataclass(frozen=True, slots=True)
class Method:
    """One engine-backed method: the function that answers it, and its result's model."""

    name: str
    run: Callable[[Rcp, Call, Context], dict[str, Any]]
    result: type[BaseModel]

    def check(self, result: dict[str, Any], *, whole: bool) -> None:
        """Hold ``result`` to the model (:func:`kgrag.rcp.wire.check_result`): a result
        that fails the cheap check is logged and sent as it is; with ``whole``, one that
        fails the model raises :class:`ResultShapeError` (answered -32603)."""
        problem = wire.check_result(self.result, result, whole=whole)
        if problem is None:
            return
        if whole:
            raise ResultShapeError(f"{self.name}: {problem}")
        log.error("%s result is not a %s: %s", self.name, self.result.__name__, problem)


TABLE: dict[str, Method] = {
    m.name: m
    for m in (
        Method("retrieve", retrieve, wire.RetrieveResult),
        Method("graph", graph, wire.GraphResult),
        Method("embed", embed, wire.EmbedResult),
        Method("rerank", rerank, wire.RerankResult),
        Method("query/transform", transform, wire.TransformResult),
        Method("index/add", index_add, wire.IndexAddResult),
        Method("index/delete", index_delete, wire.IndexDeleteResult),
        Method("feedback", feedback, wire.FeedbackResult),
        Method("memory/build", memory_build, wire.MemoryBuildResult),
        Method("memory/recall", memory_recall, wire.MemoryRecallResult),
        Method("catalog/list", catalog_list, wire.CatalogResult),
    )
}
