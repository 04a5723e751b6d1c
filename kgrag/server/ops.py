"""What an operator reads of a running server: request ids, JSON logs, metrics, readiness.

* Every HTTP answer carries ``X-Request-Id``: the caller's own (letters, digits and
  ``._:-``, at most 128) or a new one; the access log line and any error logged while
  the request is handled carry it too.
* ``--log-format json`` writes one JSON object a line (``ts``, ``level``, ``logger``,
  ``msg`` and, for a request, ``request_id``, ``route``, ``method``, ``graph``,
  ``status``, ``ms``); headers, bodies and tokens are never logged.
* ``GET /metrics`` is Prometheus's text format (prometheus-client): requests and their
  latency by route, RCP method and graph; errors by JSON-RPC or HTTP code; requests in
  flight; writes running and documents written per graph; each graph's index version.
* ``GET /ready`` is 200 when every served graph's store answers within
  :data:`READY_TIMEOUT` seconds (a folder's manifest read, a Neo4j query), else 503
  naming the graphs that did not; ``GET /health`` only says the process is alive.
"""

from __future__ import annotations

import asyncio
import contextvars
import json
import logging
import re
import time
import uuid
from collections.abc import Iterable, Iterator
from datetime import datetime, timezone
from typing import Any

from .graphs import Graphs

__all__ = ["REQUEST_ID", "JsonFormatter", "Metrics", "Observe", "readiness", "request_id"]

REQUEST_ID = "X-Request-Id"
_ID = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")
#: seconds a graph's store has to answer the readiness probe
READY_TIMEOUT = 5.0
#: the id of the request being handled, for log records made on its behalf
request_id: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "kgrag_request_id", default=None
)
_FIELDS = ("route", "method", "graph", "status", "ms", "client")
BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 120.0)
access_log = logging.getLogger("kgrag.access")


class JsonFormatter(logging.Formatter):
    """One JSON object a line; a record's request fields when it has them."""

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, timezone.utc).isoformat(
                timespec="milliseconds"
            ),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        rid = getattr(record, "request_id", None) or request_id.get()
        if rid:
            out["request_id"] = rid
        for key in _FIELDS:
            if hasattr(record, key):
                out[key] = getattr(record, key)
        if record.exc_info:
            out["exc"] = self.formatException(record.exc_info)
        return json.dumps(out, ensure_ascii=False, default=str)


class Metrics:
    """The server's Prometheus metrics, in a registry of its own (one per app)."""

    def __init__(self, graphs: Graphs, methods: Iterable[str]) -> None:
        from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

        self.graphs = graphs
        self.methods = frozenset(methods)
        r = self.registry = CollectorRegistry()
        by = ["route", "method", "graph"]
        self.requests = Counter(
            "kgrag_requests", "HTTP requests answered", [*by, "status"], registry=r
        )
        self.latency = Histogram(
            "kgrag_request_seconds",
            "Seconds from request to answer",
            by,
            buckets=BUCKETS,
            registry=r,
        )
        self.errors = Counter(
            "kgrag_errors",
            "Errors answered, by JSON-RPC code or HTTP status",
            [*by, "code"],
            registry=r,
        )
        self.inflight = Gauge("kgrag_requests_in_flight", "Requests being handled", registry=r)
        self.writing = Gauge(
            "kgrag_index_writes_in_progress",
            "index/add and index/delete calls running",
            ["graph"],
            registry=r,
        )
        self.documents = Counter(
            "kgrag_documents_written", "Documents added or deleted", ["graph", "op"], registry=r
        )
        r.register(_Versions(graphs))

    def labels(self, method: Any, graph: Any) -> tuple[str, str]:
        """Label values from a request's own words, kept to the known ones."""
        m = method if isinstance(method, str) and method in self.methods else "-"
        g = graph if isinstance(graph, str) and graph in self.graphs.names else "-"
        return m, g

    def written(self, method: str, graph: str, result: Any) -> None:
        """Count the documents an answered write touched."""
        if not isinstance(result, dict):
            return
        if method == "index/add":
            self.documents.labels(graph, "add").inc(len(result.get("ids") or []))
        elif method == "index/delete":
            self.documents.labels(graph, "delete").inc(int(result.get("deleted") or 0))

    def exposition(self) -> bytes:
        from prometheus_client import generate_latest

        return bytes(generate_latest(self.registry))


class _Versions:
    """``kgrag_index_version_info{graph, version} 1`` for each graph's served version."""

    def __init__(self, graphs: Graphs) -> None:
        self.graphs = graphs

    def describe(self) -> list[Any]:
        return []

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import GaugeMetricFamily

        family = GaugeMetricFamily(
            "kgrag_index_version_info",
            "The index version each graph serves",
            labels=["graph", "version"],
        )
        for name in self.graphs.names:
            try:
                version = self.graphs.get(name).index_version
            except Exception:  # a store that cannot say: leave it out of this scrape
                continue
            family.add_metric([name, str(version)], 1.0)
        yield family


def _route(path: str) -> str:
    if path.endswith("/rcp") or "/rcp/" in path:
        return "rcp"
    if path.startswith("/v1/retrieval/images/"):
        return "image"
    if path.startswith(("/v1/", "/v2/")):
        return "rest"
    if path in ("/health", "/ready", "/metrics", "/openapi.json"):
        return path[1:]
    return "page"


class Observe:
    """ASGI middleware: the request id, the access log line and the request metrics."""

    def __init__(self, app: Any, metrics: Metrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        given = _header(scope, b"x-request-id")
        rid = given if given is not None and _ID.match(given) else uuid.uuid4().hex
        state = scope.setdefault("state", {})
        state["request_id"] = rid
        token = request_id.set(rid)
        status = 500
        started = time.perf_counter()

        async def send_with_id(message: dict[str, Any]) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                message["headers"] = [
                    *message.get("headers", []),
                    (REQUEST_ID.lower().encode(), rid.encode()),
                ]
            await send(message)

        m = self.metrics
        m.inflight.inc()
        try:
            await self.app(scope, receive, send_with_id)
        finally:
            m.inflight.dec()
            seconds = time.perf_counter() - started
            route = _route(scope.get("path", ""))
            method, graph = m.labels(state.get("rcp_method"), state.get("graph"))
            m.requests.labels(route, method, graph, str(status)).inc()
            m.latency.labels(route, method, graph).observe(seconds)
            code = state.get("rpc_error")
            if code is not None or status >= 400:
                m.errors.labels(
                    route, method, graph, str(code if code is not None else status)
                ).inc()
            client = scope.get("client")
            access_log.info(
                "%s %s %d",
                scope.get("method"),
                scope.get("path"),
                status,
                extra={
                    "request_id": rid,
                    "route": route,
                    "method": method,
                    "graph": graph,
                    "status": status,
                    "ms": round(seconds * 1000, 2),
                    "client": client[0] if client else None,
                },
            )
            request_id.reset(token)


def _header(scope: dict[str, Any], name: bytes) -> str | None:
    for key, value in scope.get("headers", []):
        if key == name:
            return str(value.decode("latin-1"))
    return None


async def readiness(graphs: Graphs, names: Iterable[str]) -> dict[str, str]:
    """Each of ``names``: "ready", or why its store did not answer in time."""

    def probe(name: str) -> str:
        engine = graphs.get(name)
        if engine.store.current() is None and engine.index_version:
            return "its published versions are gone"
        return "ready"

    async def one(name: str) -> str:
        try:
            return await asyncio.wait_for(asyncio.to_thread(probe, name), READY_TIMEOUT)
        except asyncio.TimeoutError:
            return f"no answer in {READY_TIMEOUT:g} s"
        except Exception as exc:
            return " ".join(str(getattr(exc, "message", exc)).split()) or type(exc).__name__

    listed = list(names)
    found = dict(zip(listed, await asyncio.gather(*(one(n) for n in listed)), strict=True))
    for name, state in found.items():
        graphs.note(name, None if state == "ready" else state)
    return found


def ops_routes(endpoint: Any) -> list[Any]:
    """``GET /ready`` and ``GET /metrics``, behind ``endpoint``'s access rules."""
    from starlette.requests import Request
    from starlette.responses import JSONResponse, Response
    from starlette.routing import Route

    graphs = endpoint.graphs

    async def ready(request: Request) -> Response:
        """503 unless every graph answers; names only the graphs the caller may read."""
        caller = endpoint.access.caller(request.headers.get("authorization"))
        found = await readiness(graphs, graphs.names)
        ok = all(state == "ready" for state in found.values())
        body: dict[str, Any] = {"status": "ready" if ok else "not ready"}
        if caller is not None:
            body["graphs"] = {n: found[n] for n in caller.visible(graphs.names)}
        return JSONResponse(body, 200 if ok else 503)

    async def metrics(request: Request) -> Response:
        """Prometheus text; where tokens are needed, for a token that reads every graph."""
        from prometheus_client import CONTENT_TYPE_LATEST

        refused, caller = endpoint.guard(request)
        if refused is not None:
            return refused
        if caller.read is not None:
            return JSONResponse({"error": "/metrics needs a token for every graph"}, 404)
        return Response(endpoint.metrics.exposition(), media_type=CONTENT_TYPE_LATEST)

    return [
        Route("/ready", ready, methods=["GET"]),
        Route("/metrics", metrics, methods=["GET"]),
    ]
