"""What an operator reads of a running server (kgrag/server/ops.py), on a real server on
loopback: request ids, /metrics read by prometheus-client's own parser, /ready against
a graph whose manifest breaks and mends, and /metrics behind per-graph tokens."""

from __future__ import annotations

import hashlib
import http.client
import json
import logging
import re
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from kgrag.server import Access, Graphs, Running, create_app
from kgrag.server.access import Grant
from kgrag.server.ops import JsonFormatter, request_id

INIT = {"protocolVersion": 1, "client": {"name": "t", "version": "1"}, "capabilities": {}}


def request(
    base: str, method: str, path: str, body: Any = None, headers: dict[str, str] | None = None
) -> tuple[int, dict[str, str], bytes]:
    host, port = base.removeprefix("http://").rsplit(":", 1)
    conn = http.client.HTTPConnection(host, int(port), timeout=120)
    data = None if body is None else json.dumps(body).encode()
    conn.request(method, path, data, {"Content-Type": "application/json"} | (headers or {}))
    resp = conn.getresponse()
    out = resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read()
    conn.close()
    return out


def rpc(base: str, path: str, method: str, params: Any = None) -> Any:
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params or {}}
    return json.loads(request(base, "POST", f"{path}/{method}", body)[2])


def samples(base: str, headers: dict[str, str] | None = None) -> dict[tuple[str, str], float]:
    """Every sample of /metrics, keyed by name and sorted labels, as parsed by
    prometheus-client."""
    status, head, raw = request(base, "GET", "/metrics", headers=headers)
    assert status == 200 and head["content-type"].startswith("text/plain"), raw
    out = {}
    for family in text_string_to_metric_families(raw.decode()):
        for s in family.samples:
            out[(s.name, json.dumps(s.labels, sort_keys=True))] = s.value
    return out


def value(found: dict[tuple[str, str], float], name: str, **labels: str) -> float:
    return found.get((name, json.dumps(labels, sort_keys=True)), 0.0)


@pytest.fixture(scope="module")
def folder(served_copy: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("ops") / "ops"
    shutil.copytree(served_copy, root)
    return root


@pytest.fixture(scope="module")
def server(folder: Path) -> Iterator[tuple[Running, Graphs]]:
    graphs = Graphs.open([f"ops={folder}"])
    with Running(create_app(graphs)) as running:
        yield running, graphs
    graphs.close()


def test_each_answer_carries_a_request_id_its_own_or_the_callers(server: Any):
    base = server[0].url
    _, head, _ = request(base, "GET", "/health")
    assert re.fullmatch(r"[0-9a-f]{32}", head["x-request-id"])
    _, again, _ = request(base, "GET", "/health")
    assert again["x-request-id"] != head["x-request-id"]
    _, mine, _ = request(base, "GET", "/health", headers={"X-Request-Id": "trace-42:a.b"})
    assert mine["x-request-id"] == "trace-42:a.b"
    for bad in ("has space", "x" * 129, "<script>"):
        _, head, _ = request(base, "GET", "/health", headers={"X-Request-Id": bad})
        assert re.fullmatch(r"[0-9a-f]{32}", head["x-request-id"]), bad
    status, head, _ = request(base, "POST", "/graphs/ghost/rcp/ping", {"jsonrpc": "2.0"})
    assert status == 404 and re.fullmatch(r"[0-9a-f]{32}", head["x-request-id"])


def test_metrics_count_requests_errors_writes_and_versions(server: Any):
    base, graphs = server[0].url, server[1]
    before = samples(base)
    path = f"/graphs/ops/s/{uuid.uuid4().hex}/rcp"
    assert "result" in rpc(base, path, "initialize", INIT)
    for _ in range(3):
        assert rpc(base, path, "retrieve", {"query": "sun", "k": 2})["result"]["hits"]
    assert rpc(base, path, "nope")["error"]["code"] == -32004
    assert rpc(base, path, "retrieve", {"query": "sun", "k": -1})["error"]["code"] == -32602
    assert request(base, "POST", "/graphs/ghost/rcp/ping", {"jsonrpc": "2.0"})[0] == 404
    added = rpc(base, path, "index/add", {"documents": [{"text": "The ops probe met Lyra."}]})
    ids = added["result"]["ids"]
    assert rpc(base, path, "index/delete", {"ids": ids})["result"]["deleted"] == 1
    after = samples(base)

    def grew(name: str, **labels: str) -> float:
        return value(after, name, **labels) - value(before, name, **labels)

    ok = {"route": "rcp", "graph": "ops", "status": "200"}
    # JSON-RPC errors are HTTP 200 too: three hits and the -32602
    assert grew("kgrag_requests_total", method="retrieve", **ok) == 4
    assert grew("kgrag_request_seconds_count", route="rcp", method="retrieve", graph="ops") == 4
    assert value(after, "kgrag_request_seconds_bucket", route="rcp", method="retrieve",
                 graph="ops", le="+Inf") >= 3  # fmt: skip
    assert grew("kgrag_errors_total", route="rcp", method="-", graph="ops", code="-32004") == 1
    assert grew("kgrag_errors_total", route="rcp", method="retrieve", graph="ops",
                code="-32602") == 1  # fmt: skip
    # an unserved graph's name never becomes a label
    assert grew("kgrag_errors_total", route="rcp", method="ping", graph="-", code="404") == 1
    assert not any("ghost" in labels for _, labels in after)
    assert grew("kgrag_documents_written_total", graph="ops", op="add") == 1
    assert grew("kgrag_documents_written_total", graph="ops", op="delete") == 1
    assert value(after, "kgrag_index_writes_in_progress", graph="ops") == 0
    version = graphs.get("ops").index_version
    assert value(after, "kgrag_index_version_info", graph="ops", version=version) == 1
    assert value(after, "kgrag_requests_in_flight") == 1  # the scrape itself


def test_ready_says_which_graph_cannot_answer_until_it_can(server: Any, folder: Path):
    base = server[0].url
    status, _, body = request(base, "GET", "/ready")
    assert status == 200 and json.loads(body) == {"status": "ready", "graphs": {"ops": "ready"}}
    manifest = folder / "manifest.json"
    saved = manifest.read_bytes()
    try:
        manifest.write_text("{broken", encoding="utf-8")
        status, _, body = request(base, "GET", "/ready")
        found = json.loads(body)
        assert status == 503 and found["status"] == "not ready"
        assert "unreadable manifest" in found["graphs"]["ops"]
        assert request(base, "GET", "/health")[0] == 200  # alive all the same
    finally:
        manifest.write_bytes(saved)
    assert request(base, "GET", "/ready")[0] == 200


def test_metrics_and_ready_keep_to_the_access_rules(graphs: Graphs):
    every = Grant(hashlib.sha256(b"ops-all").digest(), None, False)
    one = Grant(hashlib.sha256(b"ops-one").digest(), frozenset({"second"}), False)
    app = create_app(graphs, access=Access(grants=[every, one]))
    with Running(app) as running:
        base = running.url
        assert request(base, "GET", "/metrics")[0] == 401
        assert (
            request(base, "GET", "/metrics", headers={"Authorization": "Bearer ops-one"})[0] == 404
        )
        assert samples(base, {"Authorization": "Bearer ops-all"})
        status, _, body = request(base, "GET", "/ready")
        assert status == 200 and json.loads(body) == {"status": "ready"}  # no names
        status, _, body = request(
            base, "GET", "/ready", headers={"Authorization": "Bearer ops-one"}
        )
        assert json.loads(body)["graphs"] == {"second": "ready"}


def test_json_log_lines_carry_the_request_id_and_nothing_secret():
    record = logging.LogRecord(
        "kgrag.server", logging.ERROR, __file__, 1, "failed %s", ("x",), None
    )
    token = request_id.set("rid-7")
    try:
        line = JsonFormatter().format(record)
    finally:
        request_id.reset(token)
    out = json.loads(line)
    assert out["request_id"] == "rid-7" and out["msg"] == "failed x" and out["level"] == "error"
    assert out["logger"] == "kgrag.server" and out["ts"].endswith("+00:00")
