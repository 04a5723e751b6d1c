"""``kgrag serve --mcp``: a graph's searches as Model Context Protocol tools over stdio.

An agent host (Claude Desktop, an IDE, an agent framework) starts
``kgrag serve --mcp --graph DIR`` and calls the tools ``retrieve``,
``local_search``, ``global_search``, ``drift_search``, ``neighbors`` and,
unless ``--read-only``, ``add_documents`` and ``delete_documents``. Their
arguments mirror the engine's params (RCP/1 ``retrieve``, ``graph``,
``index/add``, ``index/delete``). A result is text a model reads (each hit's
text, citation and the quoted relations behind it) plus structured content,
the engine's whole JSON result. A bad argument or a kgrag error is a tool
error carrying its message, and the server keeps serving. Engine calls block,
so they run on worker threads (``--workers`` of them at once).

Built on the official ``mcp`` SDK's low-level server (the ``mcp`` extra), of either
major version: 2.x registers handlers in the server's constructor, 1.x by decorators;
both get the same tools. ``kgrag serve --http`` also serves them over MCP's streamable
HTTP transport (:mod:`kgrag.adapters.mcp_http`), where each call carries its caller's
rights: the tools list only the graphs, and the writes, that the caller's token allows.
"""

from __future__ import annotations

import functools
import io
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from importlib.metadata import version
from typing import IO, Any, Protocol

from ..engine import (
    LOCAL_UNITS,
    MAX_DEPTH,
    MAX_HOPS,
    RETRIEVE_MODES,
    TRANSFORM_METHODS,
    UNITS,
    Engine,
)
from ..errors import InvalidParams, KgragError, NotFound, Unauthorized
from ..server.access import EVERYONE, Caller, not_served
from .render import render

try:
    import anyio
    import jsonschema
    from mcp import types
    from mcp.server.lowlevel import Server
    from mcp.server.stdio import stdio_server

    #: the installed SDK's major version (1 and 2 are supported)
    MCP_MAJOR = int(version("mcp").split(".")[0])
except ImportError as exc:
    raise ImportError(
        f"kgrag serve --mcp needs the mcp package: pip install 'kgrag[mcp]' ({exc})",
        name=exc.name,
    ) from exc

log = logging.getLogger("kgrag.mcp")

#: hits a search tool returns when the call names no ``k`` (per unit for local_search)
DEFAULT_K = 5
INSTRUCTIONS = (
    "Search a knowledge graph built from documents. Use retrieve or local_search for "
    "questions about particular people, places or things (local_search follows the "
    "relations between them, e.g. for multi-hop questions), global_search for themes "
    "across the whole corpus, drift_search to explore a question through follow-ups, "
    "and neighbors to see the graph around entity ids from earlier hits. Cite hits by "
    "their citation."
)

_QUERY = {"type": "string", "minLength": 1, "description": "the question or search text"}
_K = {"type": "integer", "minimum": 1, "description": f"how many hits (default {DEFAULT_K})"}
_LEVEL = {"type": "integer", "minimum": 0, "description": "community level (0 is the finest)"}
_SESSION = {"type": "string", "description": "hits already returned in this session are skipped"}
_VERSION = {"type": "string", "description": "answer from this pinned index version"}


def _obj(**properties: Any) -> dict[str, Any]:
    return {"type": "object", "properties": properties}


RETRIEVE_ARGS: dict[str, Any] = {
    "query": _QUERY,
    "k": _K,
    "mode": {
        "type": "string",
        "enum": list(RETRIEVE_MODES),
        "description": "recall (default hybrid)",
    },
    "unit": {
        "type": "string",
        "enum": list(UNITS),
        "description": "what to return: passages (chunk, the default), whole documents, "
        "community reports, RAPTOR tree nodes, entities (node), facts (triplet), paths",
    },
    "level": _LEVEL | {"description": "level of unit community or tree-node"},
    "filter": {
        "type": "object",
        "description": 'a metadata filter, e.g. {"field": "title", "op": "eq", "value": "X"}',
    },
    "rerank": _obj(
        method={"type": "string", "enum": ["colbert", "cross-encoder"]},
        topN={"type": "integer", "minimum": 1, "description": "candidates reranked"},
    )
    | {"required": ["method"], "additionalProperties": False},
    "rewrite": {
        "type": "string",
        "enum": list(TRANSFORM_METHODS),
        "description": "transform the query",
    },
    "minScore": {"type": "number", "description": "drop hits scoring below this"},
    "tokenBudget": {"type": "integer", "minimum": 1, "description": "pack hits up to this"},
    "sessionId": _SESSION,
    "cursor": {"type": "string", "description": "the nextCursor of an earlier call"},
    "indexVersion": _VERSION,
}
LOCAL_ARGS: dict[str, Any] = {
    "query": _QUERY,
    "k": _K,
    "unit": {
        "type": "array",
        "items": {"type": "string", "enum": list(LOCAL_UNITS)},
        "minItems": 1,
        "description": "hit units (default all): passages, entities, facts, cited paths",
    },
    "sessionId": _SESSION,
    "indexVersion": _VERSION,
}
GLOBAL_ARGS: dict[str, Any] = {"query": _QUERY, "k": _K, "level": _LEVEL, "indexVersion": _VERSION}
DRIFT_ARGS: dict[str, Any] = {
    **GLOBAL_ARGS,
    "depth": {"type": "integer", "minimum": 1, "maximum": MAX_DEPTH, "description": "rounds"},
    "followups": {"type": "integer", "minimum": 0, "maximum": 10, "description": "per round"},
}
NEIGHBORS_ARGS: dict[str, Any] = {
    "seedIds": {
        "type": "array",
        "items": {"type": "string"},
        "minItems": 1,
        "description": "entity or passage ids (e.g. the ids of local_search node hits)",
    },
    "hops": {"type": "integer", "minimum": 1, "maximum": MAX_HOPS, "description": "default 1"},
    "k": {"type": "integer", "minimum": 1, "description": "most nodes returned (default 100)"},
    "indexVersion": _VERSION,
}
ADD_ARGS: dict[str, Any] = {
    "documents": {
        "type": "array",
        "minItems": 1,
        "items": _obj(
            id={"type": "string", "description": "replaces the stored document of this id"},
            text={"type": "string", "minLength": 1},
            title={"type": "string"},
            meta={"type": "object", "description": "metadata to filter on"},
        )
        | {"required": ["text"], "additionalProperties": False},
    },
    "chunk": {"type": "boolean", "description": "split into passages (default true)"},
    "contextual": {"type": "boolean", "description": "prefix passages with context"},
}
DELETE_ARGS: dict[str, Any] = {
    "ids": {"type": "array", "items": {"type": "string"}, "minItems": 1},
}


class Graphs(Protocol):
    """The graphs the tools reach by name (:class:`kgrag.server.Graphs` is one)."""

    @property
    def names(self) -> tuple[str, ...]: ...

    @property
    def default(self) -> str: ...

    def get(self, name: str | None = None) -> Engine: ...


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """One tool: its arguments (JSON schema properties) and the engine call it makes."""

    name: str
    description: str
    properties: dict[str, Any]
    required: tuple[str, ...]
    call: Callable[[Engine, dict[str, Any]], dict[str, Any]]
    write: bool = False


def _graph_op(op: str) -> Callable[[Engine, dict[str, Any]], dict[str, Any]]:
    def call(engine: Engine, args: dict[str, Any]) -> dict[str, Any]:
        if op != "neighbors":
            args.setdefault("k", DEFAULT_K)
        return engine.graph({**args, "op": op})

    return call


def _retrieve(engine: Engine, args: dict[str, Any]) -> dict[str, Any]:
    return engine.retrieve({"k": DEFAULT_K, **args})


def _add(engine: Engine, args: dict[str, Any]) -> dict[str, Any]:
    return engine.add(
        args["documents"], chunk=args.get("chunk", True), contextual=args.get("contextual", False)
    )


def _delete(engine: Engine, args: dict[str, Any]) -> dict[str, Any]:
    return engine.delete(args["ids"])


TOOLS: tuple[ToolSpec, ...] = (
    ToolSpec(
        "retrieve",
        "Passages (or other units) that best match a query, by dense + keyword search; "
        "each hit with its citation and the passages it rests on.",
        RETRIEVE_ARGS,
        ("query",),
        _retrieve,
    ),
    ToolSpec(
        "local_search",
        "Graph search from the entities a question names (personalized PageRank over the "
        "knowledge graph): passages, entities, facts and paths, each with the quoted "
        "relations that connect it to the question. Best for multi-hop questions.",
        LOCAL_ARGS,
        ("query",),
        _graph_op("local"),
    ),
    ToolSpec(
        "global_search",
        "Corpus-wide themes: the community reports that match a query and a summary "
        "picked from them, each sentence citing its community.",
        GLOBAL_ARGS,
        ("query",),
        _graph_op("global"),
    ),
    ToolSpec(
        "drift_search",
        "DRIFT search: community reports prime follow-up questions, each answered by a "
        "local search; passages found by any of them, with the follow-ups asked.",
        DRIFT_ARGS,
        ("query",),
        _graph_op("drift"),
    ),
    ToolSpec(
        "neighbors",
        "The knowledge graph around some entity or passage ids: nodes and the relations "
        "between them, up to a few hops out.",
        NEIGHBORS_ARGS,
        ("seedIds",),
        _graph_op("neighbors"),
    ),
    ToolSpec(
        "add_documents",
        "Add or replace documents; publishes a new index version the searches then use.",
        ADD_ARGS,
        ("documents",),
        _add,
        write=True,
    ),
    ToolSpec(
        "delete_documents",
        "Remove documents by id and everything only they supported; unknown ids are ignored.",
        DELETE_ARGS,
        ("ids",),
        _delete,
        write=True,
    ),
)


def _schema(
    spec: ToolSpec, names: tuple[str, ...], default: str, served: list[str]
) -> dict[str, Any]:
    properties = dict(spec.properties)
    if len(names) > 1:  # no enum: a validation error would name every graph
        shown = _default(default, served)  # the caller's: never a graph it may not read
        properties["graph"] = {
            "type": "string",
            "description": f"the graph to use, one of {', '.join(served)} (default {shown})",
        }
    return {
        "type": "object",
        "properties": properties,
        "required": list(spec.required),
        "additionalProperties": False,
    }


@functools.lru_cache(maxsize=16)
def _validators(names: tuple[str, ...], default: str) -> dict[str, Any]:
    """Each tool's schema for every served graph (what calls are checked against and 2.x's
    ``get_tool_input_schema`` gives), with its compiled validator: made once per set of
    graphs, not per call."""
    return {
        spec.name: jsonschema.Draft202012Validator(_schema(spec, names, default, list(names)))
        for spec in TOOLS
    }


def default_graph(graphs: Graphs, served: list[str]) -> str | None:
    """The graph a call naming none uses: the server's default, else the caller's first."""
    return _default(graphs.default, served)


def _default(default: str, served: list[str]) -> str | None:
    if default in served:
        return default
    return served[0] if served else None


def tool_list(graphs: Graphs, *, writable: bool, caller: Caller = EVERYONE) -> list[types.Tool]:
    """The tools offered to ``caller``: every search, the writes unless read-only or the
    caller may write no graph. With several graphs served, each tool takes a ``graph``
    argument naming one of those the caller may read."""
    served = caller.visible(graphs.names)
    writes = writable and any(caller.may_write(n) for n in served)
    tools = []
    for spec in TOOLS:
        if spec.write and not writes:
            continue
        hints = types.ToolAnnotations(
            readOnlyHint=not spec.write,
            destructiveHint=spec.name == "delete_documents",
            idempotentHint=not spec.write,
            openWorldHint=False,
        )
        tools.append(
            types.Tool(
                name=spec.name,
                description=spec.description,
                inputSchema=_schema(spec, tuple(graphs.names), graphs.default, served),
                annotations=hints,
            )
        )
    return tools


def call_tool(
    graphs: Graphs,
    name: str,
    arguments: Mapping[str, Any],
    *,
    writable: bool,
    caller: Caller = EVERYONE,
) -> types.CallToolResult:
    """Run one tool call for ``caller`` (blocking); a kgrag error becomes an error result.
    A graph the caller may not read is "not served", as on the RCP and REST routes."""
    spec = next((s for s in TOOLS if s.name == name and (writable or not s.write)), None)
    try:
        if spec is None:
            raise NotFound(f"no tool named {name!r}", field="name")
        args = dict(arguments)
        check_arguments(spec, graphs, args)
        served = caller.visible(graphs.names)
        graph = args.pop("graph", None)
        if graph is None:
            graph = default_graph(graphs, served)
        if not isinstance(graph, str) or graph not in served:
            raise NotFound(not_served(graph), field="graph")
        if spec.write and not caller.may_write(graph):
            raise Unauthorized(f"this caller may not write to graph {graph!r}", field="graph")
        result = spec.call(graphs.get(graph), args)
    except KgragError as exc:
        return _error(exc)
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=render(name, result))],
        structuredContent=result,
    )


def check_arguments(spec: ToolSpec, graphs: Graphs, args: Mapping[str, Any]) -> None:
    """Refuse arguments outside the tool's schema, in the same words under either SDK
    (1.x checks them itself first; 2.x leaves it to the server)."""
    validator = _validators(tuple(graphs.names), graphs.default)[spec.name]
    errors = sorted(validator.iter_errors(args), key=lambda e: list(e.path))
    if errors:
        where = ".".join(str(part) for part in errors[0].path) or None
        raise InvalidParams(f"Input validation error: {errors[0].message}", field=where)


def _error(exc: KgragError) -> types.CallToolResult:
    kind = type(exc).__name__
    field = exc.data.get("field") or exc.data.get("option")
    where = f" ({field})" if field else ""
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=f"{kind}{where}: {exc.message}")],
        structuredContent={"error": {"code": exc.code, "message": exc.message, "data": exc.data}},
        isError=True,
    )


#: the ASGI scope key holding an HTTP request's :class:`Caller`
CALLER_KEY = "kgrag.caller"
#: the rights of an HTTP request that reached a tool without passing the access check
_NOBODY = Caller(frozenset(), frozenset())


def caller_of(request: Any) -> Caller:
    """Who sent the message being handled: everyone over stdio (no HTTP request), else
    the caller :mod:`kgrag.adapters.mcp_http` put on the request's scope."""
    if request is None:
        return EVERYONE
    caller = getattr(request, "scope", {}).get(CALLER_KEY)
    return caller if isinstance(caller, Caller) else _NOBODY


def build_server(graphs: Graphs, *, writable: bool = True, workers: int = 4) -> Server[Any]:
    """An MCP server offering ``graphs``' searches (and writes when ``writable``)."""
    from .. import __version__

    limiter = anyio.CapacityLimiter(workers)

    def listed(request: Any) -> list[types.Tool]:
        return tool_list(graphs, writable=writable, caller=caller_of(request))

    async def called(name: str, arguments: Mapping[str, Any], request: Any) -> Any:
        caller = caller_of(request)

        def run() -> types.CallToolResult:
            return call_tool(graphs, name, arguments, writable=writable, caller=caller)

        try:
            return await anyio.to_thread.run_sync(run, limiter=limiter)
        except Exception:  # a bug, not a bad call: logged in full, answered briefly
            log.exception("tool %s failed", name)
            raise

    if MCP_MAJOR >= 2:
        schemas = {
            name: v.schema for name, v in _validators(tuple(graphs.names), graphs.default).items()
        }

        async def on_list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
            return types.ListToolsResult(tools=listed(ctx.request))

        async def on_call_tool(ctx: Any, params: Any) -> Any:
            return await called(params.name, params.arguments or {}, ctx.request)

        return Server(
            "kgrag",
            version=__version__,
            instructions=INSTRUCTIONS,
            get_tool_input_schema=schemas.get,
            on_list_tools=on_list_tools,
            on_call_tool=on_call_tool,
        )

    server: Any = Server("kgrag", version=__version__, instructions=INSTRUCTIONS)

    def request() -> Any:
        return server.request_context.request

    @server.list_tools()  # type: ignore[untyped-decorator,unused-ignore]
    async def list_tools() -> list[types.Tool]:
        return listed(request())

    @server.call_tool()  # type: ignore[untyped-decorator,unused-ignore]
    async def handle(name: str, arguments: dict[str, Any]) -> types.CallToolResult:
        return await called(name, arguments, request())  # type: ignore[no-any-return]

    return server  # type: ignore[no-any-return]


def serve_mcp(
    graphs: Graphs, *, writable: bool = True, workers: int = 4, stdout: IO[bytes] | None = None
) -> None:
    """Serve MCP on stdin and ``stdout`` (the process's stdout when None) until EOF."""
    server = build_server(graphs, writable=writable, workers=workers)
    logging.getLogger("mcp").setLevel(logging.WARNING)  # not a line per request
    text_out = None
    if stdout is not None:
        raw: Any = io.BufferedWriter(stdout) if isinstance(stdout, io.RawIOBase) else stdout
        text_out = anyio.wrap_file(io.TextIOWrapper(raw, encoding="utf-8"))

    async def main() -> None:
        async with stdio_server(stdout=text_out) as (read, write):
            await server.run(read, write, server.create_initialization_options())

    anyio.run(main)
