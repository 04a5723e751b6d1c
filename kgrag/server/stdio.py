"""RCP/1 over stdio: newline-delimited JSON on stdin and stdout (spec §5.1).

stdout carries protocol frames and nothing else: before serving, file
descriptor 1 is pointed at stderr and the frames go out on a private copy of
the original, so a stray ``print`` or a C library writing to fd 1 cannot
corrupt the stream. Requests run concurrently on the server's workers and are
answered as they finish (clients correlate by id, §4.7). EOF or ``shutdown``
stops the reading; in-flight requests are finished and flushed before exit.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import threading
from typing import IO, Any

from .frames import dumps, error
from .graphs import Graphs
from .protocol import Context, Job, Limits, Rcp, Reply, Session

log = logging.getLogger("kgrag.server")
_LEVELS = {"debug": 10, "info": 20, "notice": 25, "warning": 30, "error": 40}


class _Writer:
    """Whole frames onto the protocol stream, one writer at a time."""

    def __init__(self, out: IO[bytes]) -> None:
        self._out = out
        self._lock = threading.Lock()

    def __call__(self, message: Any) -> None:
        frame = dumps(message) + b"\n"
        with self._lock:
            try:
                self._out.write(frame)
                self._out.flush()
            except (BrokenPipeError, ValueError, OSError):  # the client went away
                pass


class _LogBridge(logging.Handler):
    """kgrag's log records as notifications/log, for a client that opted in (§17.1)."""

    def __init__(self, session: Session, write: _Writer) -> None:
        super().__init__(logging.DEBUG)
        self.session = session
        self.write = write

    def emit(self, record: logging.LogRecord) -> None:
        level = self.session.log_level
        if level is None or record.levelno < _LEVELS[level]:
            return
        name = {10: "debug", 20: "info", 30: "warning"}.get(record.levelno, "error")
        self.write(
            {
                "jsonrpc": "2.0",
                "method": "notifications/log",
                "params": {"level": name, "message": record.getMessage(), "logger": record.name},
            }
        )


class _Batch:
    """Collects the answers of one batch's requests and sends them as one array."""

    def __init__(self, write: _Writer) -> None:
        self.write = write
        self.answers: list[dict[str, Any]] = []
        self.waiting = 0
        self.lock = threading.Lock()
        self.sealed = False

    def member(self) -> Any:
        with self.lock:
            self.waiting += 1

        def send(response: dict[str, Any]) -> None:
            with self.lock:
                self.answers.append(response)
                self.waiting -= 1
            self._flush()

        return send

    def add(self, response: dict[str, Any]) -> None:
        with self.lock:
            self.answers.append(response)

    def seal(self) -> None:
        with self.lock:
            self.sealed = True
        self._flush()

    def _flush(self) -> None:
        with self.lock:
            if not self.sealed or self.waiting or not self.answers:
                return
            answers, self.answers = self.answers, []
        self.write(answers)


def protected_stdout() -> IO[bytes]:
    """A private handle on the real stdout; fd 1 and sys.stdout now go to stderr."""
    sys.stdout.flush()
    fd = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return os.fdopen(fd, "wb", buffering=0)


def _lines(stream: IO[bytes], limit: int) -> Any:
    """Frames from ``stream``; a frame over ``limit`` bytes is skipped and yields None."""
    while True:
        line = stream.readline(limit + 1)
        if not line:
            return
        if len(line) > limit and not line.endswith(b"\n"):
            while line and not line.endswith(b"\n"):  # drain the rest of the oversized frame
                line = stream.readline(1 << 20)
            yield None
            continue
        yield line


def serve_stdio(
    graphs: Graphs,
    *,
    limits: Limits | None = None,
    stdin: IO[bytes] | None = None,
    stdout: IO[bytes] | None = None,
    server: Rcp | None = None,
) -> None:
    """Serve RCP/1 on stdin/stdout (or the given streams) until EOF or ``shutdown``.
    ``server`` is a protocol engine to use instead of a fresh one."""
    server = server or Rcp(graphs, transport="stdio", limits=limits)
    write = _Writer(stdout if stdout is not None else protected_stdout())
    session = Session("", graphs.default)
    bridge = _LogBridge(session, write)
    for name in ("kgrag", "ingest"):
        logging.getLogger(name).addHandler(bridge)
    logging.getLogger("kgrag").setLevel(logging.INFO)
    source = stdin if stdin is not None else sys.stdin.buffer
    try:
        for line in _lines(source, server.limits.max_body):
            if line is None:
                write(error(None, -32013, f"frame exceeds {server.limits.max_body} bytes"))
                continue
            if not line.strip():
                continue
            if _handle(server, session, write, line):
                break
    finally:
        for name in ("kgrag", "ingest"):
            logging.getLogger(name).removeHandler(bridge)
        server.close()  # finishes in-flight requests; their answers are written


def _handle(server: Rcp, session: Session, write: _Writer, line: bytes) -> bool:
    """Dispatch one frame; True when the session shut down."""
    try:
        message = json.loads(line)
    except ValueError as exc:
        write(error(None, -32700, f"not valid JSON: {exc}"))
        return False
    if isinstance(message, list):
        return _handle_batch(server, session, write, message)
    outcome = server.route(message, Context(session, write, emit=write))
    if isinstance(outcome, Reply):
        write(outcome.response)
        return outcome.shutdown
    if isinstance(outcome, Job):
        server.submit(outcome)
    return False


def _handle_batch(server: Rcp, session: Session, write: _Writer, batch: list[Any]) -> bool:
    if not batch:
        write(error(None, -32600, "an empty batch is not a request"))
        return False
    if len(batch) > server.limits.max_batch:
        write(error(None, -32013, f"a batch holds at most {server.limits.max_batch} requests"))
        return False
    collector = _Batch(write)
    shutdown = False
    for message in batch:
        is_request = isinstance(message, dict) and "id" in message
        send = collector.member() if is_request else None
        outcome = server.route(message, Context(session, send, emit=write))
        if isinstance(outcome, Reply):
            if send is not None:
                send(outcome.response)
            else:
                collector.add(outcome.response)
            shutdown = shutdown or outcome.shutdown
        elif isinstance(outcome, Job):
            server.submit(outcome)
        elif send is not None:  # routed as nothing: close its slot
            send(error(None, -32600, "not a request"))
    collector.seal()
    return shutdown
