"""The ground the RCP conformance checker (conformance/check.py of github.com/1ay1/rcp)
covers, L0 to L2, against ``kgrag serve`` itself, over stdio and over HTTP.

The checker cannot be fetched in CI, so its checks are restated here, one
assertion each, against the real command in a subprocess. Running the checker
itself is a manual step (see docs/rcp-server.md).
"""

from __future__ import annotations

import http.client
import json
import os
import re
import select
import shutil
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import rcp
from every_method import exercise_every_method

from tests.conftest import copy_into_neo4j

Raw = Callable[[dict[str, Any]], dict[str, Any]]
Notify = Callable[[dict[str, Any]], Any]


def _serve(graph: Path | str, *how: str, stderr: int = subprocess.PIPE) -> subprocess.Popen[bytes]:
    env = dict(os.environ, HF_HUB_OFFLINE="1")
    # writes apart (the default) are checked on the folder; on Neo4j the same checks
    # make their writes in process (a writer process's start-up is seconds each)
    where = ["--writes-in-process"] if not isinstance(graph, Path) else []
    return subprocess.Popen(
        [sys.executable, "-m", "kgrag", "serve", "--graph", str(graph), *where, *how],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=stderr,
        env=env,
    )


def _close(proc: subprocess.Popen[bytes]) -> None:
    for stream in (proc.stdin, proc.stdout, proc.stderr):
        if stream is not None:
            stream.close()


@pytest.fixture(scope="module", params=["folder", "neo4j"])
def graph_copy(
    request: pytest.FixtureRequest, science_graph: Path, tmp_path_factory: pytest.TempPathFactory
) -> Path | str:
    """The science graph, copied: as a folder, and into Neo4j (the same checks pass over
    both)."""
    if request.param == "neo4j":
        return copy_into_neo4j(science_graph, f"{request.getfixturevalue('neo4j_uri')}/conformance")
    root = tmp_path_factory.mktemp("conformance") / "science"
    shutil.copytree(science_graph, root)
    return root


class StdioPeer:
    def __init__(self, graph: Path | str) -> None:
        self.proc = _serve(graph, "--stdio", stderr=subprocess.DEVNULL)
        self.lines: list[bytes] = []

    def _line(self, timeout: float) -> bytes | None:
        assert self.proc.stdout is not None
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        if not ready:
            return None
        line = self.proc.stdout.readline()
        self.lines.append(line)
        return line

    def raw(self, message: dict[str, Any]) -> dict[str, Any]:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(message).encode() + b"\n")
        self.proc.stdin.flush()
        while True:
            line = self._line(180)
            assert line, "the server closed stdout"
            frame = json.loads(line)
            if "method" not in frame:  # skip notifications
                return frame

    def notify(self, message: dict[str, Any]) -> Any:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(message).encode() + b"\n")
        self.proc.stdin.flush()
        line = self._line(0.5)
        return json.loads(line) if line else None

    def close(self) -> None:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.close()
        self.lines.extend(self.proc.stdout.readlines())
        self.proc.wait(60)
        _close(self.proc)


class HttpPeer:
    def __init__(self, graph: Path | str) -> None:
        self.proc = _serve(graph, "--http", "127.0.0.1:0")
        assert self.proc.stderr is not None
        self.stderr: list[str] = []
        for raw in self.proc.stderr:
            line = raw.decode()
            self.stderr.append(line)
            found = re.search(r"serving RCP/1 on http://([\d.]+):(\d+)/rcp", line)
            if found:
                self.host, self.port = found[1], int(found[2])
                break
        else:
            raise AssertionError("kgrag serve --http did not start: " + "".join(self.stderr))
        # keep draining stderr so the server never blocks on a full pipe
        self.drain = threading.Thread(target=self.stderr.extend, args=(self.proc.stderr,))
        self.drain.start()

    def _post(self, message: dict[str, Any], timeout: float) -> tuple[int, bytes]:
        conn = http.client.HTTPConnection(self.host, self.port, timeout=timeout)
        conn.request(
            "POST",
            f"/rcp/{message.get('method', '')}",
            json.dumps(message).encode(),
            {"Content-Type": "application/json"},
        )
        resp = conn.getresponse()
        out = resp.status, resp.read()
        conn.close()
        return out

    def raw(self, message: dict[str, Any]) -> dict[str, Any]:
        status, body = self._post(message, 180)
        assert status == 200, (status, body)
        return json.loads(body)

    def notify(self, message: dict[str, Any]) -> Any:
        status, body = self._post(message, 30)
        return None if status == 204 or not body.strip() else json.loads(body)

    def close(self) -> None:
        self.proc.terminate()
        self.proc.wait(60)
        self.drain.join(10)
        _close(self.proc)


@pytest.fixture(params=["stdio", "http"])
def peer(request: pytest.FixtureRequest, graph_copy: Path | str) -> Iterator[Any]:
    p = StdioPeer(graph_copy) if request.param == "stdio" else HttpPeer(graph_copy)
    try:
        yield p
    finally:
        p.close()


def test_the_checkers_ground_at_l0_l1_l2(peer: Any):
    raw: Raw = peer.raw
    notify: Notify = peer.notify

    def req(id_: Any, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        return raw({"jsonrpc": "2.0", "id": id_, "method": method, "params": params or {}})

    # L0 before initialize
    assert req(0, "info")["result"]["server"]
    assert req(100, "ping", {"nonce": 777})["result"]["nonce"] == 777
    assert req(1, "retrieve", {"query": "x", "k": 1})["error"]["code"] == -32001
    for message in (
        {"jsonrpc": "2.0", "method": "retrieve", "params": {"query": "x", "k": 1}},
        {"jsonrpc": "2.0", "method": "info", "params": {}},
        {"jsonrpc": "2.0", "method": "does/not/exist", "params": {}},
        {"jsonrpc": "2.0", "method": "notifications/cancel", "params": {"id": 12345}},
    ):
        assert notify(message) is None
    client = {"name": "conf", "version": "1"}
    bad = req(200, "initialize", {"protocolVersion": 0, "client": client})
    assert bad["error"]["code"] == -32002
    assert req(201, "retrieve", {"query": "x", "k": 1})["error"]["code"] == -32001
    init = req(2, "initialize", {"protocolVersion": 1, "client": client, "capabilities": {}})
    res = init["result"]
    caps = res["capabilities"]
    assert res["protocolVersion"] >= 1 and res["server"]["name"]
    assert any(k in caps for k in ("embed", "rerank", "retrieve", "graph"))
    again = req("reinit", "initialize", {"protocolVersion": 1, "client": client})
    assert again["error"]["code"] == -32600
    assert res["_meta"]["conformance"] == "L2"
    assert req(3, "does/not/exist")["error"]["code"] == -32004
    echoed = req("str-id-1", "info")
    assert echoed["id"] == "str-id-1" and echoed["jsonrpc"] == "2.0"
    # L1
    hits = req(5, "retrieve", {"query": "test", "k": 3})["result"]["hits"]
    assert isinstance(hits, list) and len(hits) <= 3
    assert all(isinstance(h["score"], (int, float)) and "id" in h for h in hits)
    scores = [h["score"] for h in hits]
    assert scores == sorted(scores, reverse=True) and len({h["id"] for h in hits}) == len(hits)
    max_k = caps["retrieve"]["maxK"]
    over = req(6, "retrieve", {"query": "test", "k": max_k + 1000})["result"]["hits"]
    assert len(over) <= max_k
    assert req(7, "retrieve", {"query": "test", "k": -5})["error"]["code"] == -32602
    funnel = req(8, "retrieve", {"query": "test", "k": 10, "candidateK": 2})
    assert funnel["error"]["code"] == -32602
    # L2
    assert "hybrid" in caps["retrieve"]["modes"]
    hybrid = req(9, "retrieve", {"query": "test", "k": 3, "mode": "hybrid"})
    assert isinstance(hybrid["result"]["hits"], list)
    if "rerank" in caps:
        ranked = req(10, "rerank", {"query": "test", "documents": ["a b c", "d e f"], "topN": 2})
        assert isinstance(ranked["result"]["results"], list)
    assert caps["index"]["writable"] is True
    doc = {"id": "rcp-conf://upsert", "text": "conformance upsert probe document one"}
    first = req(20, "index/add", {"documents": [doc]})["result"]
    assert isinstance(first["ids"], list) and len(first["ids"]) == 1
    doc2 = {"id": "rcp-conf://upsert", "text": "conformance upsert probe document two updated"}
    second = req(21, "index/add", {"documents": [doc2]})
    assert "error" not in second
    req(22, "index/delete", {"ids": ["rcp-conf://upsert"]})
    assert req(23, "index/delete", {"ids": ["rcp-conf://upsert"]})["result"]["deleted"] == 0
    assert req(99, "shutdown")["result"] == {}


def test_the_rcp_client_reaches_every_method_over_stdio(graph_copy: Path | str):
    argv = [sys.executable, "-m", "kgrag", "serve", "--stdio", "--graph", str(graph_copy)]
    if not isinstance(graph_copy, Path):
        argv.append("--writes-in-process")  # as _serve
    exercise_every_method(rcp.connect_stdio(argv))


def test_stdout_carries_protocol_frames_only(graph_copy: Path | str):
    peer = StdioPeer(graph_copy)
    peer.raw(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {"protocolVersion": 1, "capabilities": {"log": {}}},
        }
    )
    for i, method in enumerate(("retrieve", "graph", "embed", "memory/recall"), start=2):
        params: dict[str, Any] = {"query": "plants and sunlight", "k": 2}
        if method == "graph":
            params["op"] = "local"
        if method == "embed":
            params = {"inputs": ["plants"]}
        peer.raw({"jsonrpc": "2.0", "id": i, "method": method, "params": params})
    peer.close()
    frames = [json.loads(line) for line in peer.lines if line.strip()]
    assert len(frames) == len([line for line in peer.lines if line.strip()])
    assert all(f.get("jsonrpc") == "2.0" for f in frames)
    assert any(f.get("method") == "notifications/log" for f in frames)


def test_read_only_serving_offers_no_writes(graph_copy: Path | str):
    proc = _serve(graph_copy, "--stdio", "--read-only")
    assert proc.stdin is not None and proc.stdout is not None
    lines = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}},
        {"jsonrpc": "2.0", "id": 2, "method": "index/add", "params": {"documents": []}},
    ]
    out, _ = proc.communicate(b"".join(json.dumps(m).encode() + b"\n" for m in lines), 180)
    _close(proc)
    first, second = (json.loads(line) for line in out.splitlines())
    assert "index" not in first["result"]["capabilities"]
    assert second["error"]["code"] == -32003


def test_a_bad_graph_folder_fails_with_a_message(tmp_path: Path):
    proc = _serve(tmp_path / "missing", "--stdio")
    _, err = proc.communicate(b"", 120)
    _close(proc)
    assert proc.returncode == 2 and b"no graph here" in err
