"""A client end of an in-process stdio server, for the server tests."""

from __future__ import annotations

import contextlib
import json
import os
import select
import threading
from typing import Any

from kgrag.server import Graphs, Limits, Rcp, serve_stdio


class Pipe:
    """A client end of an in-process stdio server: NDJSON over real OS pipes."""

    def __init__(
        self, graphs: Graphs, limits: Limits | None = None, server: Rcp | None = None
    ) -> None:
        c2s_r, self._c2s_w = os.pipe()
        self._s2c_r, s2c_w = os.pipe()
        self._to_server = os.fdopen(self._c2s_w, "wb", buffering=0)
        self._buf = b""
        server_in = os.fdopen(c2s_r, "rb")
        server_out = os.fdopen(s2c_w, "wb", buffering=0)

        def serve() -> None:
            try:
                serve_stdio(
                    graphs, limits=limits, stdin=server_in, stdout=server_out, server=server
                )
            finally:
                server_out.close()
                server_in.close()

        self.thread = threading.Thread(target=serve, daemon=True)
        self.thread.start()
        self._next = 0

    def send_raw(self, data: bytes) -> None:
        self._to_server.write(data)

    def send(self, message: Any) -> None:
        self.send_raw(json.dumps(message).encode() + b"\n")

    def recv(self, timeout: float = 60.0) -> Any:
        """The next frame, or None when nothing came within ``timeout`` seconds."""
        while b"\n" not in self._buf:
            ready, _, _ = select.select([self._s2c_r], [], [], timeout)
            if not ready:
                return None
            data = os.read(self._s2c_r, 1 << 16)
            if not data:
                return None
            self._buf += data
        line, self._buf = self._buf.split(b"\n", 1)
        return json.loads(line)

    def call(self, method: str, params: dict[str, Any] | None = None, **extra: Any) -> Any:
        """Send a request and return its response, collecting notifications on the way."""
        self._next += 1
        rid = extra.pop("id", self._next)
        self.send({"jsonrpc": "2.0", "id": rid, "method": method, "params": params or {}})
        return self.wait_for(rid)

    def wait_for(self, rid: Any, timeout: float = 120.0) -> Any:
        self.notes: list[Any] = getattr(self, "notes", [])
        while True:
            frame = self.recv(timeout)
            assert frame is not None, f"no answer to request {rid!r}"
            if isinstance(frame, dict) and "method" in frame:
                self.notes.append(frame)
                continue
            if isinstance(frame, dict) and frame.get("id") != rid:
                self.notes.append(frame)
                continue
            return frame

    def initialize(self, **caps: Any) -> Any:
        return self.call(
            "initialize",
            {"protocolVersion": 1, "client": {"name": "t", "version": "1"}, "capabilities": caps},
        )

    def close(self) -> None:
        with contextlib.suppress(BrokenPipeError):
            self._to_server.close()
        self.thread.join(60)
        os.close(self._s2c_r)


def blocked(graphs: Graphs, **limits: Any) -> tuple[Pipe, threading.Event]:
    """A pipe whose server's workers are all busy until the returned event is set."""
    lim = Limits(**limits)
    server = Rcp(graphs, transport="stdio", limits=lim)
    gate = threading.Event()
    for _ in range(lim.workers):
        server.executor.submit(gate.wait, 120)
    return Pipe(graphs, server=server), gate
