"""A Neo4j that stops and starts again under a running server, for real: the test starts
its own Neo4j, serves a graph from it over HTTP, stops it, and starts it again on the
same port. During the outage every call gets a clear, retryable error at once (no
hang), /health names the graph unavailable and /ready is 503; once Neo4j is back the
same server answers again, without a restart."""

from __future__ import annotations

import http.client
import json
import socket
import time
from pathlib import Path
from typing import Any

from kgrag.server import Graphs, Running, create_app
from tests.conftest import copy_into_neo4j

INIT = {"protocolVersion": 1, "client": {"name": "t", "version": "1"}, "capabilities": {}}


def call(base: str, verb: str, path: str, body: Any = None) -> tuple[int, Any, float]:
    host, port = base.removeprefix("http://").rsplit(":", 1)
    conn = http.client.HTTPConnection(host, int(port), timeout=120)
    started = time.monotonic()
    conn.request(verb, path, None if body is None else json.dumps(body).encode())
    resp = conn.getresponse()
    out = resp.status, json.loads(resp.read()), time.monotonic() - started
    conn.close()
    return out


def retrieve(base: str) -> tuple[int, Any, float]:
    body = {"jsonrpc": "2.0", "id": 1, "method": "retrieve", "params": {"query": "sun", "k": 2}}
    return call(base, "POST", "/rcp/retrieve", body)


def test_a_neo4j_outage_is_reported_and_survived(
    launcher: Any, science_graph: Path, tmp_path: Path
):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    home = tmp_path / "neo4j"
    proc, uri = launcher.start(home, port=port, heap_mib=512)
    graphs = None
    try:
        location = copy_into_neo4j(science_graph, f"{uri}/outage")
        graphs = Graphs.open([f"sci={location}"])
        with Running(create_app(graphs)) as running:
            base = running.url
            init = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": INIT}
            assert call(base, "POST", "/rcp/initialize", init)[0] == 200
            status, before, _ = retrieve(base)
            assert before["result"]["hits"]
            assert call(base, "GET", "/ready")[0] == 200

            launcher.stop(home)
            proc.wait(60)
            status, down, seconds = retrieve(base)
            assert status == 200 and seconds < 30, seconds
            assert "Neo4j is unreachable" in down["error"]["message"]
            assert down["error"]["data"]["retryable"] is True
            status, health, _ = call(base, "GET", "/health")
            assert status == 200 and "Neo4j is unreachable" in health["unavailable"]["sci"]
            status, ready, seconds = call(base, "GET", "/ready")
            assert status == 503 and ready["status"] == "not ready" and seconds < 30
            assert "Neo4j is unreachable" in ready["graphs"]["sci"]
            query = {"query": "sun", "namespace": "sci", "top_k": 2}
            status, rest, _ = call(base, "POST", "/v1/retrieval/query", query)
            assert status == 503 and rest["retryable"] is True

            proc, again = launcher.start(home, port=port, heap_mib=512)
            assert again == uri
            deadline = time.monotonic() + 60
            while (answer := retrieve(base))[1].get("error") and time.monotonic() < deadline:
                time.sleep(0.5)
            assert answer[1]["result"]["hits"] == before["result"]["hits"]
            status, health, _ = call(base, "GET", "/health")
            assert "unavailable" not in health
            assert call(base, "GET", "/ready")[0] == 200
            assert call(base, "POST", "/v1/retrieval/query", query)[0] == 200
    finally:
        if graphs is not None:
            graphs.close()
        launcher.stop(home)
        proc.wait(60)
