"""The RCP/1 protocol core, the same for every transport (spec §4, §7, §11-§13).

A transport decodes a frame and hands it to :meth:`Rcp.route`, which checks the
JSON-RPC envelope, runs the session lifecycle (``initialize`` once, -32001
before it, -32600 after it), gates each method on the advertised capabilities
and answers the cheap methods (initialize, info, ping, shutdown) on the spot.
Everything that touches an engine becomes a :class:`Job`, run by
:meth:`Rcp.submit` on a worker thread so no transport ever blocks on one.

A :class:`Call` is answered exactly once: by its result, by -32006 when the
client cancels it, or by -32014 when the server's deadline passes, whichever
comes first; the losers are dropped. Writes (index/add, index/delete) are never
cancelled or timed out once they run: their result is the only honest answer.
"""

from __future__ import annotations

import contextvars
import logging
import os
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from ..errors import KgragError, NotFound, Unavailable
from . import methods
from .access import EVERYONE, Caller, not_served
from .frames import error, failure, id_key, ok, valid_id
from .graphs import LOG_LEVELS, Graphs

log = logging.getLogger("kgrag.server")

PROTOCOL_VERSION = 1
#: what the conformance checker certifies this server at (spec §14), on both transports
CONFORMANCE = "L2"

#: every RCP/1 method and the capability that gates it (None: not gated)
GATES: dict[str, str | None] = {
    "initialize": None,
    "info": None,
    "ping": None,
    "shutdown": None,
    "embed": "embed",
    "embed/sparse": "sparseEmbed",
    "embed/multi": "multiVector",
    "rerank": "rerank",
    "retrieve": "retrieve",
    "query/transform": "transform",
    "graph": "graph",
    "index/add": "index",
    "index/delete": "index",
    "catalog/list": "catalog",
    "feedback": "feedback",
    "memory/build": "memory",
    "memory/recall": "memory",
}
#: writes: need write access, and run to completion once started
WRITES = frozenset({"index/add", "index/delete"})
#: methods worth running when they arrive as notifications (executed, never answered)
SIDE_EFFECTS = frozenset({"index/add", "index/delete", "feedback"})

#: vendor param naming the served graph a call is for (spec §6.2 ``x-<vendor>`` fields)
GRAPH_PARAM = "x-kgrag-graph"
#: set to 1 to validate every result against its whole model (:mod:`kgrag.rcp.wire`)
CHECK_RESULTS_ENV = "KGRAG_CHECK_RESULTS"

Send = Callable[[dict[str, Any]], None]
Emit = Callable[[dict[str, Any]], None]


@dataclass
class Session:
    """One client's lifecycle: a stdio connection, or an HTTP session key."""

    key: str
    graph: str
    initialized: bool = False
    protocol_version: int = PROTOCOL_VERSION
    client: dict[str, Any] = field(default_factory=dict)
    #: lowest level of notifications/log the client asked for; None: it did not opt in
    log_level: str | None = None
    inflight: dict[str, Call] = field(default_factory=dict)
    last_seen: float = field(default_factory=time.monotonic)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def reset(self) -> None:
        """Back to before initialize (an HTTP ``shutdown`` ends the session)."""
        self.initialized = False
        self.client = {}
        self.log_level = None


class Call:
    """One request in flight; :meth:`answer` lets exactly one response through."""

    def __init__(
        self,
        id_: Any,
        method: str,
        params: dict[str, Any],
        session: Session,
        send: Send | None,
        *,
        graph: str,
        emit: Emit | None = None,
    ) -> None:
        self.id = id_
        self.method = method
        self.params = params
        self.session = session
        self.graph = graph
        self._send = send
        self._emit = emit
        meta = params.get("_meta")
        token = meta.get("progressToken") if isinstance(meta, dict) else None
        self.progress_token = token if valid_id(token) else None
        self.started = time.perf_counter()
        self._lock = threading.Lock()
        self._answered = False

    @property
    def answered(self) -> bool:
        return self._answered

    def answer(self, response: dict[str, Any]) -> bool:
        """Send ``response`` unless the call was answered already; True when sent."""
        with self._lock:
            if self._answered:
                return False
            self._answered = True
        with self.session.lock:
            key = id_key(self.id)
            if self.id is not None and self.session.inflight.get(key) is self:
                del self.session.inflight[key]
        if self._send is not None and self.id is not None:
            self._send(response)
        return True

    def cancel(self, reason: str | None = None) -> None:
        """notifications/cancel: answer -32006 now; a write runs on and answers itself."""
        if self.method in WRITES:
            return
        message = "cancelled by the client" + (f": {reason}" if reason else "")
        self.answer(error(self.id, -32006, message))

    def progress(
        self,
        stage: str,
        progress: float,
        message: str | None = None,
        partial: dict[str, Any] | None = None,
    ) -> None:
        """A notifications/progress frame, sent only when the client asked for them."""
        if self._emit is None or self.progress_token is None or self._answered:
            return
        params: dict[str, Any] = {
            "progressToken": self.progress_token,
            "progress": round(min(max(progress, 0.0), 1.0), 4),
            "stage": stage,
        }
        if message:
            params["message"] = message
        if partial is not None:
            params["partial"] = partial
        self._emit({"jsonrpc": "2.0", "method": "notifications/progress", "params": params})


@dataclass
class Reply:
    """A response ready now; ``shutdown`` asks the transport to end the session."""

    response: dict[str, Any]
    shutdown: bool = False


@dataclass
class Job:
    """A call to run on a worker thread."""

    call: Call
    run: Callable[[Call], dict[str, Any]]


@dataclass
class Context:
    """What the transport knows about a frame's sender."""

    session: Session
    send: Send | None
    emit: Emit | None = None
    #: the graphs the sender may read and write (stdio: every one)
    caller: Caller = EVERYONE
    #: the HTTP base URL (for catalog/list endpoints); None over stdio
    base_url: str | None = None


@dataclass(frozen=True)
class Limits:
    """Operational bounds (spec §4.7, §15.5); each is enforced, never only advertised."""

    workers: int = 4
    #: requests waiting for a worker beyond which new ones are shed with -32011
    max_pending: int = 256
    #: seconds a read may take before it is answered -32014 (writes are exempt)
    timeout: float = 120.0
    max_body: int = 8 * 1024 * 1024
    max_batch: int = 64
    #: seconds an HTTP client has to send its whole body (a slow sender gets 408)
    body_timeout: float = 30.0


class Rcp:
    """The protocol engine of one server: the graphs it serves and its workers."""

    def __init__(
        self,
        graphs: Graphs,
        *,
        transport: str,
        limits: Limits | None = None,
        check_results: bool | None = None,
    ) -> None:
        self.graphs = graphs
        self.transport = transport
        self.limits = limits or Limits()
        self.methods = methods.TABLE
        #: validate each result against its whole model, not only its fields
        self.check_results = (
            os.environ.get(CHECK_RESULTS_ENV) == "1" if check_results is None else check_results
        )
        self.executor = ThreadPoolExecutor(self.limits.workers, thread_name_prefix="rcp")
        self._pending = 0
        self._pending_lock = threading.Lock()

    # -- results that need no engine --------------------------------------------------------

    def capabilities(self, graph: str, caller: Caller = EVERYONE) -> dict[str, Any]:
        """``graph``'s capabilities as ``caller`` sees them: only graphs it may read are named."""
        caps = self.graphs.capabilities(graph, self.transport)
        if caller.read is None:
            return caps
        visible = caller.visible(self.graphs.names)
        caps = dict(caps)
        if "catalog" in caps:
            caps["catalog"] = {**caps["catalog"], "engines": len(visible)}
        if "x-kgrag" in caps:
            caps["x-kgrag"] = {**caps["x-kgrag"], "graphs": visible}
        return caps

    def info(self, session: Session, caller: Caller = EVERYONE) -> dict[str, Any]:
        from .. import __version__

        graph = session.graph
        return {
            "protocolVersion": session.protocol_version,
            "server": {"name": "kgrag", "version": __version__},
            "capabilities": self.capabilities(graph, caller),
            "_meta": {
                "conformance": CONFORMANCE,
                "graph": graph,
                "graphs": caller.visible(self.graphs.names),
            },
        }

    def _initialize(
        self, id_: Any, params: dict[str, Any], session: Session, caller: Caller
    ) -> dict[str, Any]:
        version = params.get("protocolVersion")
        if not isinstance(version, int) or isinstance(version, bool):
            return error(
                id_, -32602, "protocolVersion must be an integer", {"field": "protocolVersion"}
            )
        if version < 1:
            return error(
                id_,
                -32002,
                f"no common protocol version: the client offers up to {version}, "
                f"this server speaks 1..{PROTOCOL_VERSION}",
                {"supported": list(range(1, PROTOCOL_VERSION + 1))},
            )
        client = params.get("client")
        caps = params.get("capabilities")
        meta = params.get("_meta")
        level = meta.get("logLevel", "info") if isinstance(meta, dict) else "info"
        if level not in LOG_LEVELS:
            return error(
                id_,
                -32602,
                f"_meta.logLevel must be one of {', '.join(LOG_LEVELS)}",
                {"field": "_meta.logLevel"},
            )
        with session.lock:
            if session.initialized:
                return error(
                    id_,
                    -32600,
                    "already initialized: re-negotiating mid-session is not permitted",
                )
            session.initialized = True
            session.protocol_version = min(version, PROTOCOL_VERSION)
            session.client = dict(client) if isinstance(client, dict) else {}
            wants_log = isinstance(caps, dict) and "log" in caps
            session.log_level = level if wants_log and self.transport == "stdio" else None
        result = self.info(session, caller)
        if session.key:
            result["_meta"]["session"] = session.key
        return ok(id_, result)

    # -- routing ----------------------------------------------------------------------------

    def route(self, message: Any, ctx: Context) -> Reply | Job | None:
        """Check one decoded frame and decide: an answer now, a job, or nothing."""
        if not isinstance(message, dict):
            return Reply(error(None, -32600, "a request must be a JSON object"))
        has_id = "id" in message
        id_ = message.get("id")
        if has_id and not valid_id(id_):
            return Reply(error(None, -32600, "id must be a string or a number"))
        reply_id = id_ if has_id else None
        if message.get("jsonrpc") != "2.0":
            return Reply(error(reply_id, -32600, 'jsonrpc must be "2.0"'))
        method = message.get("method")
        if not isinstance(method, str) or not method:
            return Reply(error(reply_id, -32600, "method must be a non-empty string"))
        params = message.get("params")
        if params is None:
            params = {}
        if not has_id:
            return self._notification(method, params, ctx)
        if not isinstance(params, dict):
            return Reply(error(id_, -32602, "params must be an object", {"field": "params"}))
        if method.startswith("notifications/"):
            return Reply(error(id_, -32600, f"{method} is a notification and carries no id"))
        if method not in GATES:
            return Reply(error(id_, -32004, f"unknown method {method!r}"))
        session = ctx.session
        session.last_seen = time.monotonic()
        if method == "initialize":
            return Reply(self._initialize(id_, params, session, ctx.caller))
        if method == "info":
            return Reply(ok(id_, self.info(session, ctx.caller)))
        if method == "ping":
            return Reply(ok(id_, {"nonce": params["nonce"]} if "nonce" in params else {}))
        if method == "shutdown":
            return Reply(ok(id_, {}), shutdown=True)
        refused = self._gate(method, session, ctx)
        if refused is not None:
            return Reply(error(id_, *refused))
        try:
            graph = self._graph_of(params, session, ctx.caller)
        except KgragError as exc:
            return Reply(failure(id_, exc))
        if method in WRITES and not ctx.caller.may_write(graph):
            return Reply(error(id_, -32012, f"this caller may not {method[6:]} documents"))
        call = Call(id_, method, params, session, ctx.send, graph=graph, emit=ctx.emit)
        with session.lock:
            key = id_key(id_)
            if key not in session.inflight:
                session.inflight[key] = call
            elif self.transport == "stdio":  # ids are unique per connection (§4.7)
                return Reply(error(id_, -32600, f"request id {id_!r} is already in flight"))
            # over HTTP, independent clients may share a session and an id: the call
            # runs, and a cancel for that id reaches the first one
        return Job(call, self._runner(method, ctx))

    def _gate(self, method: str, session: Session, ctx: Context) -> tuple[Any, ...] | None:
        """Why ``method`` may not run now, as (code, message), or None."""
        if not session.initialized:
            return (-32001, f"{method} before initialize")
        gate = GATES[method]
        if gate is not None and gate not in self.capabilities(session.graph):
            return (-32003, f"{method} needs capability {gate!r}, which this server does not offer")
        return None

    def _graph_of(self, params: dict[str, Any], session: Session, caller: Caller) -> str:
        name = params.pop(GRAPH_PARAM, None)
        if name is None:
            return session.graph
        if not isinstance(name, str) or name not in self.graphs.names or not caller.may_read(name):
            served = ", ".join(caller.visible(self.graphs.names))
            raise NotFound(f"{not_served(name)} (served: {served})", field=GRAPH_PARAM)
        return name

    def _runner(self, method: str, ctx: Context) -> Callable[[Call], dict[str, Any]]:
        entry = self.methods[method]
        whole = self.check_results

        def run(call: Call) -> dict[str, Any]:
            result = entry.run(self, call, ctx)
            entry.check(result, whole=whole)
            return result

        return run

    def _notification(self, method: str, params: Any, ctx: Context) -> Job | None:
        """Notifications are never answered (§4.5); cancel acts, side effects run."""
        session = ctx.session
        if not isinstance(params, dict):
            return None
        if method == "notifications/cancel":
            target = params.get("id")
            if valid_id(target):
                with session.lock:
                    call = session.inflight.get(id_key(target))
                if call is not None:
                    reason = params.get("reason")
                    call.cancel(reason if isinstance(reason, str) else None)
            return None
        if method not in SIDE_EFFECTS or self._gate(method, session, ctx) is not None:
            return None
        try:
            graph = self._graph_of(params, session, ctx.caller)
        except KgragError:
            return None
        if method in WRITES and not ctx.caller.may_write(graph):
            return None
        call = Call(None, method, params, session, None, graph=graph)
        return Job(call, self._runner(method, ctx))

    # -- running ----------------------------------------------------------------------------

    def submit(self, job: Job) -> None:
        """Run ``job`` on a worker; shed it with -32011 when too many wait already."""
        call = job.call
        with self._pending_lock:
            if self._pending >= self.limits.max_pending:
                call.answer(
                    error(
                        call.id,
                        -32011,
                        f"{self._pending} requests are waiting; retry shortly",
                        {"retryable": True, "retryAfterMs": 500},
                    )
                )
                return
            self._pending += 1
        timer = None
        if call.method not in WRITES and call.id is not None:
            timer = threading.Timer(self.limits.timeout, self._expire, args=(call,))
            timer.daemon = True
            timer.start()
        # the request's context (its id, for log records) goes with it to the worker
        self.executor.submit(contextvars.copy_context().run, self._run, job, timer)

    def _expire(self, call: Call) -> None:
        call.answer(
            error(
                call.id,
                -32014,
                f"{call.method} did not finish within {self.limits.timeout:g} s",
                {"retryable": True},
            )
        )

    def _run(self, job: Job, timer: threading.Timer | None) -> None:
        call = job.call
        try:
            if call.answered:  # cancelled or expired while it waited
                return
            result = job.run(call)
            response = ok(call.id, result)
            self.graphs.note(call.graph, None)
        except KgragError as exc:
            response = failure(call.id, exc)
            if isinstance(exc, Unavailable):
                self.graphs.note(call.graph, exc.message)
        except Exception as exc:  # a bug: report it, keep serving
            log.exception("%s failed", call.method)
            response = error(call.id, -32603, f"internal error: {type(exc).__name__}: {exc}")
        finally:
            if timer is not None:
                timer.cancel()
            with self._pending_lock:
                self._pending -= 1
        elapsed = (time.perf_counter() - call.started) * 1000
        if call.answer(response):
            code = response.get("error", {}).get("code")
            level = logging.INFO if code is None else logging.WARNING
            log.log(level, "%s %s in %.1f ms", call.method, code or "ok", elapsed)

    def close(self) -> None:
        self.executor.shutdown(wait=True)
