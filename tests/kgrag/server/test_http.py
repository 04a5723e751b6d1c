"""RCP over HTTP on a real loopback server: the rcp-protocol client for every method,
status codes, sessions, auth, limits, SSE, cancellation and concurrent writes."""

from __future__ import annotations

import http.client
import json
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import rcp
from every_method import exercise_every_method

from kgrag.server import Access, Graphs, Limits, Running, create_app

INIT = {"protocolVersion": 1, "client": {"name": "t", "version": "1"}, "capabilities": {}}


@pytest.fixture(scope="module")
def server(graphs: Graphs) -> Iterator[Running]:
    with Running(create_app(graphs)) as running:
        yield running


def post(
    base: str, path: str, body: Any, headers: dict[str, str] | None = None
) -> tuple[int, dict[str, str], bytes]:
    """A raw POST; returns status, headers (lower-cased) and body."""
    host, port = base.removeprefix("http://").rsplit(":", 1)
    conn = http.client.HTTPConnection(host, int(port), timeout=120)
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    conn.request("POST", path, data, {"Content-Type": "application/json"} | (headers or {}))
    resp = conn.getresponse()
    out = resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read()
    conn.close()
    return out


def rpc(base: str, path: str, method: str, params: Any = None, **headers: str) -> Any:
    status, _, body = post(
        base,
        f"{path}/{method}",
        {"jsonrpc": "2.0", "id": 1, "method": method, "params": params or {}},
        headers,
    )
    assert status == 200, body
    return json.loads(body)


def session_path(graph: str | None = None) -> str:
    """A fresh session's base path (each test gets its own lifecycle)."""
    prefix = f"/graphs/{graph}" if graph else ""
    return f"{prefix}/s/{uuid.uuid4().hex}/rcp"


def client(server: Running, graph: str | None = None) -> rcp.Client:
    return rcp.connect_http(server.url + session_path(graph))


def test_the_rcp_client_reaches_every_advertised_method(server: Running):
    c = client(server, "second")
    assert "log" not in c.capabilities  # logs are a stdio feature here
    exercise_every_method(c)


def test_index_add_then_find_then_delete_over_http(server: Running):
    c = client(server, "second")
    doc = {"id": "http-probe", "text": "The quokka is a small marsupial living on Rottnest Island."}
    added = c.index_add({"documents": [doc]})
    assert added["ids"] == ["d:http-probe"] and added["chunks"] >= 1
    again = c.index_add({"documents": [doc]})  # the same id: an upsert, no duplicate
    assert again["ids"] == added["ids"]
    found = c.retrieve("quokka marsupial island", 5)
    assert sum(h["chunk"]["docId"] == "d:http-probe" for h in found) == 1
    assert c.index_delete({"ids": ["http-probe"]})["deleted"] == 1
    assert c.index_delete({"ids": ["http-probe"]})["deleted"] == 0
    gone = c.retrieve("quokka marsupial island", 5)
    assert all(h["chunk"]["docId"] != "d:http-probe" for h in gone)


def test_status_codes_follow_the_transport_rules(server: Running):
    base = server.url
    status, _, body = post(base, "/rcp/ping", b"{not json")
    assert status == 400 and json.loads(body)["error"]["code"] == -32700
    status, _, body = post(base, "/rcp/info", {"jsonrpc": "2.0", "id": 3, "method": "ping"})
    assert status == 200 and json.loads(body)["error"]["code"] == -32600
    assert post(base, "/nowhere", {})[0] == 404
    status, _, body = post(base, "/graphs/nope/rcp/info", {})
    assert status == 404 and json.loads(body)["error"]["code"] == -32015
    status, _, _ = post(base, "/rcp/ping", {"jsonrpc": "2.0", "method": "ping"})
    assert status == 204  # a notification gets no JSON-RPC body
    path = session_path()
    answer = rpc(base, path, "retrieve", {"query": "x", "k": 1})
    assert answer["error"]["code"] == -32001
    status, _, body = post(
        base,
        path,
        [
            {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": INIT},
            {"jsonrpc": "2.0", "id": 2, "method": "ping", "params": {"nonce": "x"}},
            {"jsonrpc": "2.0", "method": "ping"},
        ],
    )
    answers = {a["id"]: a for a in json.loads(body)}
    assert status == 200 and set(answers) == {1, 2} and answers[2]["result"] == {"nonce": "x"}
    assert rpc(base, path, "initialize", INIT)["error"]["code"] == -32600
    assert rpc(base, path, "retrieve", {"query": "sun", "k": 1})["result"]["hits"]
    assert rpc(base, path, "shutdown")["result"] == {}
    assert rpc(base, path, "retrieve", {"query": "x", "k": 1})["error"]["code"] == -32001


def test_the_session_header_and_the_shared_session(server: Running):
    base = server.url
    key = uuid.uuid4().hex
    first = rpc(base, "/rcp", "initialize", INIT, **{"RCP-Session": key})
    assert first["result"]["_meta"]["session"] == key
    ok = rpc(base, "/rcp", "retrieve", {"query": "sun", "k": 1}, **{"RCP-Session": key})
    assert ok["result"]["hits"]
    other = rpc(base, "/rcp", "retrieve", {"query": "sun", "k": 1}, **{"RCP-Session": "other"})
    assert other["error"]["code"] == -32001


def test_several_graphs_are_served_and_listed(server: Running):
    c = client(server)
    assert c.capabilities["catalog"] == {"engines": 2}
    engines = c.catalog()["engines"]
    assert [e["id"] for e in engines] == ["science", "second"]
    assert engines[1]["endpoint"]["url"].endswith("/graphs/second/rcp")
    second = client(server, "second")
    assert second.capabilities["x-kgrag"]["graph"] == "second"
    routed = c.call("retrieve", {"query": "sun", "k": 1, "x-kgrag-graph": "second"})
    assert routed["hits"]
    with pytest.raises(rcp.RcpError) as err:
        c.call("retrieve", {"query": "sun", "k": 1, "x-kgrag-graph": "missing"})
    assert err.value.code == -32015


def test_sse_streams_progress_then_the_response(server: Running):
    base = server.url
    path = session_path()
    rpc(base, path, "initialize", INIT)
    body = {
        "jsonrpc": "2.0",
        "id": "s1",
        "method": "retrieve",
        "params": {"query": "plants", "k": 2, "_meta": {"progressToken": 7}},
    }
    status, headers, raw = post(base, f"{path}/retrieve", body, {"Accept": "text/event-stream"})
    assert status == 200 and headers["content-type"].startswith("text/event-stream")
    frames = [json.loads(block[len("data: ") :]) for block in raw.decode().split("\n\n") if block]
    assert frames[-1]["id"] == "s1" and len(frames[-1]["result"]["hits"]) == 2
    progress = frames[:-1]
    assert progress and all(f["method"] == "notifications/progress" for f in progress)
    assert all(f["params"]["progressToken"] == 7 for f in progress)
    del body["params"]["_meta"]  # no token: a plain JSON answer even when SSE is accepted
    status, headers, raw = post(base, f"{path}/retrieve", body, {"Accept": "text/event-stream"})
    assert headers["content-type"].startswith("application/json") and json.loads(raw)["result"]


def test_auth_is_checked_before_anything_and_writes_need_the_write_token(graphs: Graphs):
    access = Access(token="read-secret", write_token="write-secret")
    with Running(create_app(graphs, access=access)) as running:
        base = running.url
        info = {"jsonrpc": "2.0", "id": 1, "method": "info"}
        status, headers, body = post(base, "/rcp/info", info)
        assert status == 401 and headers["www-authenticate"] == "Bearer"
        assert json.loads(body)["error"]["code"] == -32012
        wrong = {"Authorization": "Bearer nope"}
        assert post(base, "/rcp/info", info, wrong)[0] == 401
        path = session_path()
        reader = {"Authorization": "Bearer read-secret"}
        assert rpc(base, path, "initialize", INIT, **reader)["result"]
        assert rpc(base, path, "retrieve", {"query": "sun", "k": 1}, **reader)["result"]["hits"]
        refused = rpc(base, path, "index/delete", {"ids": ["x"]}, **reader)
        assert refused["error"]["code"] == -32012
        writer = {"Authorization": "Bearer write-secret"}
        assert rpc(base, path, "index/delete", {"ids": ["x"]}, **writer)["result"]["deleted"] == 0


def test_rate_limit_and_payload_limit(graphs: Graphs):
    app = create_app(graphs, rate=1.0, limits=Limits(max_body=4096))
    with Running(app) as running:
        base = running.url
        ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
        codes = [post(base, "/rcp/ping", ping)[0] for _ in range(2)]
        status, headers, body = post(base, "/rcp/ping", ping)
        assert codes == [200, 200] and status == 429
        assert int(headers["retry-after"]) >= 1
        assert json.loads(body)["error"]["code"] == -32011
    with Running(create_app(graphs, limits=Limits(max_body=4096))) as running:
        big = {"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {"pad": "x" * 10_000}}
        status, _, body = post(running.url, "/rcp/ping", big)
        assert status == 413 and json.loads(body)["error"]["code"] == -32013
        small = {"jsonrpc": "2.0", "id": 2, "method": "ping"}
        assert post(running.url, "/rcp/ping", small)[0] == 200


def test_cancel_over_http_answers_the_waiting_request(graphs: Graphs):
    app = create_app(graphs, limits=Limits(workers=1))
    gate = threading.Event()
    app.state.rcp.server.executor.submit(gate.wait, 120)  # the only worker is busy
    with Running(app) as running:
        key = uuid.uuid4().hex
        base, path = running.url, f"/graphs/second/s/{key}/rcp"
        rpc(base, path, "initialize", INIT)
        results: dict[str, Any] = {}

        def call(name: str, method: str, params: dict[str, Any], rid: Any) -> None:
            body = {"jsonrpc": "2.0", "id": rid, "method": method, "params": params}
            results[name] = json.loads(post(base, f"{path}/{method}", body)[2])

        docs = [{"id": f"c{i}", "text": f"Cancel probe {i}: lichens on rocks."} for i in range(3)]
        threads = [
            threading.Thread(target=call, args=("add", "index/add", {"documents": docs}, 1)),
            threading.Thread(target=call, args=("read", "retrieve", {"query": "x", "k": 1}, 2)),
        ]
        for t in threads:
            t.start()
        session = app.state.rcp.sessions.get("second", key)
        for _ in range(400):  # until both requests wait in the session
            if len(session.inflight) == 2:
                break
            time.sleep(0.025)
        for rid in (1, 2):  # the write ignores it, the read is answered -32006
            cancel = {"jsonrpc": "2.0", "method": "notifications/cancel", "params": {"id": rid}}
            assert post(base, f"{path}/notifications/cancel", cancel)[0] == 204
        threads[1].join(30)
        assert results["read"]["error"]["code"] == -32006
        assert "add" not in results
        gate.set()
        threads[0].join(120)
        assert len(results["add"]["result"]["ids"]) == 3
        rpc(base, path, "index/delete", {"ids": results["add"]["result"]["ids"]})


def test_retrieves_keep_answering_while_another_client_adds(server: Running):
    reader, writer = client(server, "second"), client(server, "second")
    errors: list[Exception] = []
    answered = 0
    stop = threading.Event()

    def read() -> None:
        nonlocal answered
        while not stop.is_set():
            try:
                hits = reader.retrieve("How do plants make food?", 3)
                assert hits and hits[0]["score"] >= hits[-1]["score"]
                answered += 1
            except Exception as exc:  # collected, asserted below
                errors.append(exc)

    thread = threading.Thread(target=read)
    thread.start()
    try:
        docs = [
            {"id": f"conc-{i}", "text": f"Axolotls regrow limbs; note {i} on regeneration."}
            for i in range(4)
        ]
        added = writer.index_add({"documents": docs})
    finally:
        stop.set()
        thread.join(60)
    assert not errors and answered > 0
    hits = reader.retrieve("axolotl limb regeneration", 3)
    assert any(h["chunk"]["docId"].startswith("d:conc-") for h in hits)
    assert writer.index_delete({"ids": added["ids"]})["deleted"] == 4
