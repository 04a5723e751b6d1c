"""Faults a served graph survives, for real: a client that sends its body slowly, one
that leaves mid-stream, and SIGTERM to a `kgrag serve --http` process while a write and
reads are in flight."""

from __future__ import annotations

import http.client
import json
import shutil
import signal
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kgrag.server import Graphs, Limits, Running, create_app
from tests.kgrag.server.served import Served, start

INIT = {"protocolVersion": 1, "client": {"name": "t", "version": "1"}, "capabilities": {}}


@pytest.fixture(scope="module")
def running(graphs: Graphs) -> Iterator[Running]:
    app = create_app(graphs, limits=Limits(body_timeout=1.0))
    with Running(app) as server:
        server.app = app  # type: ignore[attr-defined]
        yield server


def _address(url: str) -> tuple[str, int]:
    host, port = url.removeprefix("http://").rsplit(":", 1)
    return host, int(port)


def post(url: str, path: str, body: Any, headers: dict[str, str] | None = None) -> Any:
    conn = http.client.HTTPConnection(*_address(url), timeout=120)
    conn.request("POST", path, json.dumps(body).encode(), headers or {})
    resp = conn.getresponse()
    out = resp.status, resp.read()
    conn.close()
    return out


def test_a_slow_body_is_answered_408_and_holds_nothing(running: Running):
    for path in ("/rcp/ping", "/v1/retrieval/query"):
        started = time.monotonic()
        with socket.create_connection(_address(running.url), timeout=30) as sock:
            sock.sendall(
                f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                'Content-Length: 200\r\n\r\n{"jsonrpc"'.encode()
            )
            answer = b""
            while chunk := sock.recv(65536):
                answer += chunk
        waited = time.monotonic() - started
        assert answer.startswith(b"HTTP/1.1 408"), answer[:200]
        assert b"did not arrive within 1 s" in answer
        assert waited < 20, waited
    ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    assert post(running.url, "/rcp/ping", ping)[0] == 200


def test_a_client_that_leaves_mid_stream_frees_its_call(running: Running):
    rcp = running.app.state.rcp  # type: ignore[attr-defined]
    path = "/graphs/second/s/leaver/rcp"
    assert post(running.url, f"{path}/initialize", {"jsonrpc": "2.0", "id": 0,
                "method": "initialize", "params": INIT})[0] == 200  # fmt: skip
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "graph",
        "params": {"op": "drift", "query": "What does the sun do?", "_meta": {"progressToken": 1}},
    }
    for _ in range(3):
        with socket.create_connection(_address(running.url), timeout=30) as sock:
            raw = json.dumps(body).encode()
            sock.sendall(
                f"POST {path}/graph HTTP/1.1\r\nHost: x\r\nAccept: text/event-stream\r\n"
                f"Content-Type: application/json\r\nContent-Length: {len(raw)}\r\n\r\n".encode()
                + raw
            )
            assert sock.recv(64).startswith(b"HTTP/1.1 200")
        # closed after the first bytes of the stream
    deadline = time.monotonic() + 60
    while rcp.server._pending and time.monotonic() < deadline:
        time.sleep(0.05)
    assert rcp.server._pending == 0
    ok = post(running.url, "/graphs/second/rcp/ping", {"jsonrpc": "2.0", "id": 2, "method": "ping"})
    assert ok[0] == 200


def _serve(folder: Path) -> Served:
    return start("--graph", f"g={folder}", "--no-explorer", "--grace", "60")


def test_sigterm_finishes_what_is_in_flight_and_exits_0(served_copy: Path, tmp_path: Path):
    folder = tmp_path / "g"
    shutil.copytree(served_copy, folder)
    before = json.loads((folder / "manifest.json").read_text())["indexVersion"]
    server = _serve(folder)
    proc, url, lines = server.proc, server.url, server.lines
    try:
        assert post(url, "/rcp/initialize", {"jsonrpc": "2.0", "id": 0, "method": "initialize",
                                              "params": INIT})[0] == 200  # fmt: skip
        docs = [
            {"id": f"sig-{i}", "text": f"Signal probe {i} met the comet Vela."} for i in range(6)
        ]
        add = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "index/add",
            "params": {"documents": docs, "_meta": {"progressToken": "add"}},
        }
        conn = http.client.HTTPConnection(*_address(url), timeout=120)
        conn.request("POST", "/rcp/index/add", json.dumps(add).encode(),
                     {"Accept": "text/event-stream"})  # fmt: skip
        resp = conn.getresponse()
        first = resp.readline()  # the first progress frame: the write has started
        assert first.startswith(b"data: ") and b"notifications/progress" in first
        reads: list[int] = []

        def reader() -> None:
            ask = {"jsonrpc": "2.0", "id": 2, "method": "retrieve", "params": {"query": "comet"}}
            while True:
                try:
                    reads.append(post(url, "/rcp/retrieve", ask)[0])
                except OSError:
                    return

        thread = threading.Thread(target=reader, daemon=True)
        thread.start()
        time.sleep(0.3)
        proc.send_signal(signal.SIGTERM)
        rest = resp.read().decode()  # the stream runs to its end
        conn.close()
        assert proc.wait(120) == 0, "".join(lines)
        thread.join(30)
    finally:
        if proc.poll() is None:
            proc.kill()
        server.stop()
    blocks = [b.strip() for b in rest.split("\n\n")]
    frames = [json.loads(b[len("data: ") :]) for b in blocks if b.startswith("data: ")]
    final = frames[-1]
    assert final["id"] == 1 and final["result"]["ids"] == [f"d:{d['id']}" for d in docs]
    assert reads and set(reads) == {200}  # every read that got in was answered
    with pytest.raises(OSError):  # and nothing is taken any more
        socket.create_connection(_address(url), timeout=5)
    after = json.loads((folder / "manifest.json").read_text())["indexVersion"]
    assert after != before
    graphs = Graphs.open([f"g={folder}"])
    try:
        stored = graphs.get("g").retriever().reader.documents(final["result"]["ids"])
        assert len(stored) == len(docs)
        found = graphs.get("g").retrieve({"query": "Signal probe met the comet Vela", "k": 6})
        assert "Vela" in found["hits"][0]["text"]
    finally:
        graphs.close()
    assert not any("Traceback" in line for line in lines), "".join(lines)
