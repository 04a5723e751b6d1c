"""RCP/1 over HTTP: ``POST /rcp/<method>``, SSE progress, one ASGI app (spec §5.2).

Paths::

    POST /rcp[/<method>]                     the default graph
    POST /graphs/<name>/rcp[/<method>]       graph <name>
    POST [/graphs/<name>]/s/<key>/rcp[/...]  an explicit session (or header RCP-Session: <key>)
    GET  /health                             liveness and the served graphs

Sessions: HTTP carries no connection state, so requests without a session key
share one session per graph, whose lifecycle follows the spec (initialize
once, -32001 before it, -32600 on a repeat; ``shutdown`` ends it). A client
that wants its own lifecycle sends ``RCP-Session: <key>`` or uses the
``/s/<key>/rcp`` base URL; sessions idle for an hour are forgotten.

Every JSON-RPC answer, error or not, is HTTP 200. Transport failures that
never reach JSON-RPC get their own status, each still with a JSON-RPC error
body so a client can read the code: 400 (-32700 / -32600) for a body that is
not a request, 401 (-32012) for a missing or wrong bearer token, 404 for an
unknown path or graph, 413 (-32013) over the body limit, 429 (-32011, with
Retry-After) past the rate limit. Engine work runs on the server's worker
threads; the event loop only parses, routes and awaits.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import re
import socket
import threading
import time
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import BaseRoute, Route

from .access import EVERYONE, Access, Caller, not_served
from .frames import dumps, error
from .graphs import Graphs
from .http_body import SlowBody, read_body
from .ops import Metrics, Observe, ops_routes
from .protocol import GATES, WRITES, Context, Job, Limits, Rcp, Reply, Session

_PATH = re.compile(
    r"^(?:/graphs/(?P<graph>[^/]+))?(?:/s/(?P<session>[^/]+))?/rcp(?:/(?P<method>.+?))?/?$"
)
SESSION_TTL = 3600.0
MAX_SESSIONS = 10_000
_JSON = "application/json"


class RateLimiter:
    """A token bucket per client address: ``rate`` requests a second, bursts of ``burst``."""

    def __init__(self, rate: float, burst: float | None = None) -> None:
        self.rate = rate
        self.burst = burst if burst is not None else max(1.0, 2 * rate)
        self._buckets: dict[str, tuple[float, float]] = {}
        self._lock = threading.Lock()

    def wait(self, client: str) -> float:
        """0 when ``client`` may go now (and charge it), else the seconds to wait."""
        now = time.monotonic()
        with self._lock:
            tokens, then = self._buckets.get(client, (self.burst, now))
            tokens = min(self.burst, tokens + (now - then) * self.rate)
            if tokens >= 1:
                self._buckets[client] = (tokens - 1, now)
                return 0.0
            self._buckets[client] = (tokens, now)
            if len(self._buckets) > MAX_SESSIONS:
                self._buckets.pop(next(iter(self._buckets)))
            return (1 - tokens) / self.rate


class Sessions:
    """HTTP sessions by (graph, key); the empty key is the shared one."""

    def __init__(self) -> None:
        self._sessions: dict[tuple[str, str], Session] = {}
        self._lock = threading.Lock()

    def get(self, graph: str, key: str) -> Session:
        now = time.monotonic()
        with self._lock:
            session = self._sessions.pop((graph, key), None)
            if session is None:
                if len(self._sessions) >= MAX_SESSIONS:
                    self._sessions.pop(next(iter(self._sessions)))
                session = Session(key, graph)
            self._sessions[(graph, key)] = session  # most recent last
            stale = [k for k, s in self._sessions.items() if now - s.last_seen > SESSION_TTL]
            for k in stale[:16]:
                if not self._sessions[k].inflight:
                    del self._sessions[k]
            session.last_seen = now
            return session


def _transport_error(status: int, code: int, message: str, **headers: str) -> Response:
    return Response(dumps(error(None, code, message)), status, headers or None, _JSON)


class HttpRcp:
    """The RCP endpoint of the app: auth, limits, sessions, then :class:`Rcp`."""

    def __init__(
        self,
        graphs: Graphs,
        *,
        limits: Limits | None = None,
        access: Access | None = None,
        rate: float | None = None,
    ) -> None:
        self.server = Rcp(graphs, transport="http", limits=limits)
        self.graphs = graphs
        self.access = access or Access()
        self.limiter = RateLimiter(rate) if rate else None
        self.sessions = Sessions()
        self.metrics: Metrics | None = None

    def guard(self, request: Request) -> tuple[Response | None, Caller]:
        """Auth and rate limit, in that order (§5.2: auth comes before anything else)."""
        caller = self.access.caller(request.headers.get("authorization"))
        if caller is None:
            return _transport_error(
                401, -32012, "missing or wrong bearer token", **{"WWW-Authenticate": "Bearer"}
            ), EVERYONE
        if self.limiter is not None:
            client = request.client.host if request.client else "?"
            wait = self.limiter.wait(client)
            if wait > 0:
                body = error(
                    None,
                    -32011,
                    "rate limit exceeded; retry later",
                    {"retryable": True, "retryAfterMs": math.ceil(wait * 1000)},
                )
                headers = {"Retry-After": str(max(1, math.ceil(wait)))}
                return Response(dumps(body), 429, headers, _JSON), caller
        return None, caller

    def readable(self, caller: Caller, graph: str) -> bool:
        """Whether ``graph`` is served and ``caller`` may read it (else it is "not served")."""
        return graph in self.graphs.names and caller.may_read(graph)

    async def handle(self, request: Request) -> Response:
        match = _PATH.match(request.url.path)
        if match is None:
            return JSONResponse({"error": f"{request.url.path} is not an RCP endpoint"}, 404)
        if request.method != "POST":
            return Response(status_code=405, headers={"Allow": "POST"})
        request.state.rcp_method = match["method"]
        refused, caller = self.guard(request)
        if refused is not None:
            return refused
        graph = match["graph"] or self.graphs.default
        if not self.readable(caller, graph):
            return _transport_error(404, -32015, not_served(graph))
        request.state.graph = graph
        try:
            body = await read_body(request, self.server.limits)
        except SlowBody as exc:
            return _transport_error(408, -32600, str(exc), Connection="close")
        if body is None:
            return _transport_error(
                413, -32013, f"request body exceeds {self.server.limits.max_body} bytes"
            )
        try:
            message = json.loads(body)
        except ValueError as exc:
            return _transport_error(400, -32700, f"not valid JSON: {exc}")
        key = match["session"] or request.headers.get("rcp-session", "")
        session = self.sessions.get(graph, key)
        base = str(request.base_url).rstrip("/")
        ctx = Context(session, None, caller=caller, base_url=base)
        if isinstance(message, list):
            return await self._batch(message, ctx, match["method"])
        method = match["method"]
        if method and isinstance(message, dict) and message.get("method") != method:
            id_ = message.get("id") if isinstance(message.get("id"), (str, int)) else None
            return _answer(
                error(id_, -32600, f"URL names {method!r}, the body {message.get('method')!r}")
            )
        if not isinstance(message, dict):
            return _transport_error(400, -32600, "a request must be a JSON object")
        wants_sse = "text/event-stream" in request.headers.get("accept", "")
        if wants_sse and _progress_token(message) is not None:
            return await self._stream(message, ctx)
        request.state.rcp_method = message.get("method")
        future = asyncio.get_running_loop().create_future()
        ctx.send = _settle(future)
        outcome = self.server.route(message, ctx)
        if isinstance(outcome, Reply):
            if outcome.shutdown:
                session.reset()
            _noted(request, outcome.response)
            return _answer(outcome.response)
        if outcome is None:
            return Response(status_code=204)
        request.state.graph = outcome.call.graph
        metrics = self.metrics if outcome.call.method in WRITES else None
        if metrics is not None:
            metrics.writing.labels(outcome.call.graph).inc()
        try:
            self.server.submit(outcome)
            if outcome.call.id is None:
                return Response(status_code=204)
            frame = await future
        finally:
            if metrics is not None:
                metrics.writing.labels(outcome.call.graph).dec()
        if b'"error":' in frame or metrics is not None:
            answered = json.loads(frame)
            _noted(request, answered)
            if metrics is not None and "result" in answered:
                metrics.written(outcome.call.method, outcome.call.graph, answered["result"])
        return Response(frame, 200, media_type=_JSON)

    async def _batch(self, batch: list[Any], ctx: Context, method: str | None) -> Response:
        if method:
            return _answer(error(None, -32600, "send a batch to the base path, not to a method"))
        if not batch:
            return _answer(error(None, -32600, "an empty batch is not a request"))
        if len(batch) > self.server.limits.max_batch:
            return _answer(
                error(None, -32013, f"a batch holds at most {self.server.limits.max_batch}")
            )
        loop = asyncio.get_running_loop()
        answers: list[bytes] = []
        waiting = []
        for message in batch:
            future = loop.create_future()
            member = Context(ctx.session, _settle(future), None, ctx.caller, ctx.base_url)
            outcome = self.server.route(message, member)
            if isinstance(outcome, Reply):
                if outcome.shutdown:
                    ctx.session.reset()
                answers.append(dumps(outcome.response))
            elif isinstance(outcome, Job):
                self.server.submit(outcome)
                if outcome.call.id is not None:
                    waiting.append(future)
        answers.extend(await asyncio.gather(*waiting))
        if not answers:
            return Response(status_code=204)
        return Response(b"[" + b",".join(answers) + b"]", 200, media_type=_JSON)

    async def _stream(self, message: dict[str, Any], ctx: Context) -> Response:
        """SSE: progress frames as they come, then the response frame (§5.2, §9)."""
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[bytes | None] = asyncio.Queue()

        def push(frame: bytes | None) -> None:
            loop.call_soon_threadsafe(queue.put_nowait, frame)

        def send(response: dict[str, Any]) -> None:
            push(dumps(response))
            push(None)

        ctx.send = send
        ctx.emit = lambda frame: push(dumps(frame))
        outcome = self.server.route(message, ctx)
        if isinstance(outcome, Reply):
            if outcome.shutdown:
                ctx.session.reset()
            return _answer(outcome.response)
        if outcome is None:
            return Response(status_code=204)
        self.server.submit(outcome)

        async def frames() -> AsyncIterator[bytes]:
            finished = False
            try:
                while (frame := await queue.get()) is not None:
                    yield b"data: " + frame + b"\n\n"
                finished = True
            finally:
                if not finished:  # the client went away: a read stops waiting for a worker
                    outcome.call.cancel("the client disconnected")

        return StreamingResponse(
            frames(), media_type="text/event-stream", headers={"Cache-Control": "no-cache"}
        )


def _noted(request: Request, response: dict[str, Any]) -> None:
    """Keep a JSON-RPC error's code for the request's metrics."""
    err = response.get("error")
    if isinstance(err, dict):
        request.state.rpc_error = err.get("code")


def _progress_token(message: Any) -> Any:
    params = message.get("params") if isinstance(message, dict) else None
    meta = params.get("_meta") if isinstance(params, dict) else None
    return meta.get("progressToken") if isinstance(meta, dict) else None


def _settle(future: asyncio.Future[bytes]) -> Callable[[dict[str, Any]], None]:
    """A thread-safe ``send`` that resolves ``future`` with the encoded response."""
    loop = future.get_loop()

    def set_once(frame: bytes) -> None:
        if not future.done():
            future.set_result(frame)

    def send(response: dict[str, Any]) -> None:
        loop.call_soon_threadsafe(set_once, dumps(response))

    return send


def _answer(response: dict[str, Any]) -> Response:
    return Response(dumps(response), 200, media_type=_JSON)


def create_app(
    graphs: Graphs,
    *,
    limits: Limits | None = None,
    access: Access | None = None,
    rate: float | None = None,
    cors: list[str] | None = None,
    routes: list[BaseRoute] | None = None,
    lifespans: Sequence[Callable[[], contextlib.AbstractAsyncContextManager[Any]]] = (),
) -> Starlette:
    """The ASGI app: the RCP endpoint, the Knowhere-style REST route, /health, and any
    extra ``routes`` (whose ``lifespans`` run while the app does)."""
    from kgrag.server.rest.app import rest_routes

    endpoint = HttpRcp(graphs, limits=limits, access=access, rate=rate)
    endpoint.metrics = Metrics(graphs, GATES)

    async def health(request: Request) -> Response:
        """Alive; the graphs the caller may read (none without a token where one is needed)."""
        caller = endpoint.access.caller(request.headers.get("authorization"))
        body: dict[str, Any] = {
            "status": "ok",
            "graphs": caller.visible(graphs.names) if caller else [],
        }
        down = {n: why for n, why in graphs.unavailable.items() if n in body["graphs"]}
        if down:
            body["unavailable"] = down
        if caller is None:
            body["auth"] = "required"
        return JSONResponse(body)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with contextlib.AsyncExitStack() as stack:
            for extra in lifespans:
                await stack.enter_async_context(extra())
            yield
        await asyncio.to_thread(endpoint.server.close)  # finish in-flight calls

    app = Starlette(
        routes=[
            Route("/health", health, methods=["GET"]),
            *ops_routes(endpoint),
            *rest_routes(endpoint),
            *(routes or []),
            Route("/{path:path}", endpoint.handle, methods=["GET", "POST", "PUT", "DELETE"]),
        ],
        lifespan=lifespan,
    )
    app.state.rcp = endpoint
    app.add_middleware(Observe, metrics=endpoint.metrics)
    if cors:
        from starlette.middleware.cors import CORSMiddleware

        app.add_middleware(
            CORSMiddleware,
            allow_origins=cors,
            allow_methods=["POST", "GET", "OPTIONS"],
            allow_headers=["Authorization", "Content-Type", "RCP-Session", "Accept"],
        )
    return app


def listen(host: str, port: int) -> tuple[socket.socket, str]:
    """A listening TCP socket on ``host:port`` (port 0: any free one) and its base URL.

    The protocol is named (IPPROTO_TCP) because asyncio turns Nagle off only on
    sockets that say they are TCP; without it every response that goes out in
    two writes waits ~40 ms for the client's delayed ACK."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(2048)  # connections queue from now on, before uvicorn accepts them
    bound_host, bound_port = sock.getsockname()[:2]
    shown = f"[{bound_host}]" if ":" in bound_host else bound_host
    return sock, f"http://{shown}:{bound_port}"


class Running:
    """A uvicorn server on its own thread (tests, benchmarks, ``kgrag serve``)."""

    def __init__(self, app: Starlette, host: str = "127.0.0.1", port: int = 0) -> None:
        import uvicorn

        self.sock, self.url = listen(host, port)
        config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="on")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(
            target=self.server.run, kwargs={"sockets": [self.sock]}, daemon=True
        )

    def start(self, timeout: float = 30.0) -> Running:
        self.thread.start()
        deadline = time.monotonic() + timeout
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the HTTP server did not start")
            time.sleep(0.02)
        return self

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(10)
        self.sock.close()

    def __enter__(self) -> Running:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
