"""The protocol over NDJSON stdio: lifecycle, gating, errors, batching, cancel, limits."""

from __future__ import annotations

import contextlib
import time

from stdio_pipe import Pipe, blocked

from kgrag.server import Limits

INIT = {"protocolVersion": 1, "client": {"name": "t", "version": "1"}, "capabilities": {}}


def test_info_and_ping_answer_before_initialize_and_gated_calls_are_refused(pipe: Pipe):
    info = pipe.call("info")["result"]
    assert info["server"]["name"] == "kgrag" and info["_meta"]["conformance"] == "L2"
    assert "retrieve" in info["capabilities"] and "log" in info["capabilities"]
    assert pipe.call("ping", {"nonce": 777})["result"] == {"nonce": 777}
    assert pipe.call("ping", {"nonce": "n-1"})["result"] == {"nonce": "n-1"}
    assert pipe.call("retrieve", {"query": "x", "k": 1})["error"]["code"] == -32001


def test_a_failed_handshake_leaves_the_session_closed_and_a_second_one_is_refused(pipe: Pipe):
    bad = pipe.call("initialize", {"protocolVersion": 0, "client": {"name": "t"}})
    assert bad["error"]["code"] == -32002
    assert pipe.call("retrieve", {"query": "x", "k": 1})["error"]["code"] == -32001
    assert pipe.call("initialize", {"protocolVersion": "1"})["error"]["code"] == -32602
    good = pipe.call("initialize", dict(INIT, protocolVersion=7))["result"]
    assert good["protocolVersion"] == 1  # min(client, server)
    assert pipe.call("initialize", INIT)["error"]["code"] == -32600
    assert "hits" in pipe.call("retrieve", {"query": "photosynthesis", "k": 2})["result"]


def test_notifications_are_never_answered(pipe: Pipe):
    for message in (
        {"jsonrpc": "2.0", "method": "retrieve", "params": {"query": "x", "k": 1}},
        {"jsonrpc": "2.0", "method": "info", "params": {}},
        {"jsonrpc": "2.0", "method": "does/not/exist", "params": {}},
        {"jsonrpc": "2.0", "method": "notifications/cancel", "params": {"id": 12345}},
        {"jsonrpc": "2.0", "method": "notifications/whatever", "params": {}},
    ):
        pipe.send(message)
    assert pipe.recv(timeout=0.5) is None
    assert pipe.call("ping")["result"] == {}  # and the server still answers


def test_envelope_errors_get_the_right_codes_and_the_server_keeps_serving(pipe: Pipe):
    pipe.initialize()
    pipe.send_raw(b'{"jsonrpc": "2.0", "id": 1, "method": \n')
    assert pipe.recv()["error"]["code"] == -32700
    pipe.send_raw(b"\n\n")  # blank lines are ignored
    pipe.send({"id": 2, "method": "ping"})
    assert pipe.recv()["error"]["code"] == -32600
    pipe.send({"jsonrpc": "2.0", "id": None, "method": "ping"})
    assert pipe.recv() == {
        "jsonrpc": "2.0",
        "id": None,
        "error": {"code": -32600, "message": "id must be a string or a number"},
    }
    assert pipe.call("retrieve", ["x", 1])["error"]["code"] == -32602
    assert pipe.call("does/not/exist")["error"]["code"] == -32004
    refused = pipe.call("embed/sparse", {"texts": ["a"]})
    assert refused["error"]["code"] == -32003  # a defined method this server does not offer
    assert pipe.call("info", id="str-id-1")["id"] == "str-id-1"
    assert pipe.call("info", id=4.5)["id"] == 4.5
    assert pipe.call("retrieve", {"query": "x", "k": -5})["error"]["code"] == -32602
    funnel = pipe.call("retrieve", {"query": "x", "k": 10, "candidateK": 2})["error"]
    assert funnel["code"] == -32602 and funnel["data"]["field"] == "candidateK"
    assert pipe.call("retrieve", {"query": "x", "mode": "psychic"})["error"]["code"] == -32005
    max_k = pipe.call("info")["result"]["capabilities"]["retrieve"]["maxK"]
    hits = pipe.call("retrieve", {"query": "plants", "k": max_k + 1000})["result"]["hits"]
    assert 0 < len(hits) <= max_k
    assert pipe.call("ping")["result"] == {}


def test_batches_answer_each_request_once_and_notifications_not_at_all(pipe: Pipe):
    pipe.initialize()
    pipe.send(
        [
            {"jsonrpc": "2.0", "id": "a", "method": "ping", "params": {"nonce": 1}},
            {"jsonrpc": "2.0", "method": "ping"},
            {"jsonrpc": "2.0", "id": "b", "method": "retrieve", "params": {"query": "sun", "k": 1}},
            {"jsonrpc": "2.0", "id": "c", "method": "nope"},
            7,
        ]
    )
    answers = pipe.recv()
    assert isinstance(answers, list) and len(answers) == 4
    by_id = {a["id"]: a for a in answers if a["id"] is not None}
    assert by_id["a"]["result"] == {"nonce": 1}
    assert len(by_id["b"]["result"]["hits"]) == 1
    assert by_id["c"]["error"]["code"] == -32004
    assert [a["error"]["code"] for a in answers if a["id"] is None] == [-32600]
    pipe.send([])
    assert pipe.recv() == {
        "jsonrpc": "2.0",
        "id": None,
        "error": {"code": -32600, "message": "an empty batch is not a request"},
    }
    pipe.send([{"jsonrpc": "2.0", "method": "ping"}])
    assert pipe.recv(timeout=0.5) is None


def test_an_oversized_frame_is_refused_and_the_next_one_served(graphs):
    p = Pipe(graphs, Limits(max_body=2048))
    try:
        big = {"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {"pad": "x" * 10_000}}
        p.send(big)
        assert p.recv()["error"]["code"] == -32013
        assert p.call("ping", {"nonce": 2})["result"] == {"nonce": 2}
    finally:
        p.close()


def test_progress_frames_echo_the_token_and_come_only_when_asked(pipe: Pipe):
    pipe.initialize()
    pipe.notes = []
    params = {"query": "how do plants make food", "k": 3, "_meta": {"progressToken": "t-1"}}
    answer = pipe.call("retrieve", params)
    assert answer["result"]["hits"]
    frames = [n for n in pipe.notes if n.get("method") == "notifications/progress"]
    assert frames and all(f["params"]["progressToken"] == "t-1" for f in frames)
    stages = [f["params"]["stage"] for f in frames]
    assert "recall" in stages
    assert all(0 <= f["params"]["progress"] <= 1 for f in frames)
    pipe.notes = []
    pipe.call("retrieve", {"query": "how do plants make food", "k": 3})
    assert not [n for n in pipe.notes if n.get("method") == "notifications/progress"]


def test_logs_flow_only_to_a_client_that_opted_in(graphs):
    quiet, chatty = Pipe(graphs), Pipe(graphs)
    try:
        quiet.initialize()
        quiet.notes = []
        quiet.call("retrieve", {"query": "volcano", "k": 1})
        assert not [n for n in quiet.notes if n.get("method") == "notifications/log"]
        chatty.call(
            "initialize",
            dict(INIT, capabilities={"log": {}}, _meta={"logLevel": "info"}),
        )
        chatty.notes = []
        chatty.call("retrieve", {"query": "volcano", "k": 1})
        time.sleep(0.2)
        while (frame := chatty.recv(timeout=0.2)) is not None:
            chatty.notes.append(frame)
        logs = [n for n in chatty.notes if n.get("method") == "notifications/log"]
        assert logs and any("retrieve" in n["params"]["message"] for n in logs)
        assert {n["params"]["level"] for n in logs} <= {"info", "warning", "error", "debug"}
    finally:
        quiet.close()
        chatty.close()


def test_cancel_answers_a_waiting_read_at_once_and_a_write_runs_to_completion(graphs):
    p, gate = blocked(graphs, workers=1)
    try:
        p.initialize()
        docs = [{"id": f"cancel-{i}", "text": f"Glaciers carve valleys ({i})."} for i in range(3)]
        p.send({"jsonrpc": "2.0", "id": "w1", "method": "index/add", "params": {"documents": docs}})
        p.send({"jsonrpc": "2.0", "id": 9, "method": "retrieve", "params": {"query": "x", "k": 1}})
        p.send({"jsonrpc": "2.0", "method": "notifications/cancel", "params": {"id": "w1"}})
        p.send({"jsonrpc": "2.0", "method": "notifications/cancel", "params": {"id": 9}})
        first = p.recv()
        assert first["id"] == 9 and first["error"]["code"] == -32006
        assert p.recv(timeout=0.3) is None  # the write waits for a worker, uncancelled
        gate.set()
        added = p.wait_for("w1")
        assert len(added["result"]["ids"]) == 3  # writes are never cancelled
        deleted = p.call("index/delete", {"ids": added["result"]["ids"]})["result"]
        assert deleted["deleted"] == 3
    finally:
        gate.set()
        p.close()


def test_deadline_and_load_shedding(graphs):
    p, gate = blocked(graphs, workers=1, timeout=0.3, max_pending=2)
    try:
        p.initialize()
        for rid in (1, 2, 3):
            params = {"query": "x", "k": 1}
            p.send({"jsonrpc": "2.0", "id": rid, "method": "retrieve", "params": params})
        shed = p.recv()
        assert shed["id"] == 3 and shed["error"]["code"] == -32011
        assert shed["error"]["data"]["retryAfterMs"] > 0
        expired = [p.recv(), p.recv()]
        assert sorted(e["id"] for e in expired) == [1, 2]
        assert all(e["error"]["code"] == -32014 for e in expired)
        gate.set()  # the expired calls leave the queue as no-ops; then calls go through
        for _ in range(100):
            answer = p.call("retrieve", {"query": "sun", "k": 1})
            if answer.get("error", {}).get("code") != -32011:
                break
            time.sleep(0.05)
        assert answer["result"]["hits"]
    finally:
        gate.set()
        p.close()


def test_eof_finishes_in_flight_requests_before_the_server_exits(graphs):
    p = Pipe(graphs)
    p.initialize()
    p.send({"jsonrpc": "2.0", "id": 5, "method": "retrieve", "params": {"query": "sun", "k": 2}})
    p._to_server.close()  # EOF right behind the request
    answer = p.recv()
    assert answer["id"] == 5 and len(answer["result"]["hits"]) == 2
    p.thread.join(60)
    assert not p.thread.is_alive()


def test_shutdown_stops_reading(graphs):
    p = Pipe(graphs)
    try:
        assert p.call("shutdown")["result"] == {}
        with contextlib.suppress(BrokenPipeError):  # the server may have closed its end
            p.send({"jsonrpc": "2.0", "id": 2, "method": "ping"})
        p.thread.join(60)
        assert not p.thread.is_alive()
        assert p.recv(timeout=0.2) is None  # the request after shutdown got nothing
    finally:
        p.close()
