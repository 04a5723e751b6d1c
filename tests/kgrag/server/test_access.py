"""Per-graph access (kgrag/server/access.py) on a real server on loopback: every route,
each token against each graph and each kind of call, from one table; the access file's
errors, its reloading, and ``kgrag serve --access-file`` as a process."""

from __future__ import annotations

import hashlib
import http.client
import json
import os
import re
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kgrag.errors import InvalidParams
from kgrag.server import Access, Graphs, Running, create_app
from kgrag.server.access import RECHECK, read_grants
from kgrag.server.explorer import explorer_routes
from tests.kgrag.server.served import start

INIT = {"protocolVersion": 1, "client": {"name": "t", "version": "1"}, "capabilities": {}}
GRAPHS = ("science", "second")

#: the policy, written out: what each token reads and writes
READS = {
    "alpha-read": {"science"},
    "alpha-write": {"science"},
    "beta-write": {"second"},
    "all-read": {"science", "second"},
    "all-write": {"science", "second"},
    "no-token": set(),
    "wrong-token": set(),
}
WRITES = {"alpha-write": {"science"}, "beta-write": {"second"}, "all-write": set(GRAPHS)}
GRANTS = [
    {"token": "alpha-read", "graphs": ["science"], "rights": ["read"]},
    {"token": "alpha-write", "graphs": ["science"], "rights": ["read", "write"]},
    {"token": "beta-write", "graphs": ["second"], "rights": ["read", "write"]},
    {"token": "all-read", "graphs": "*", "rights": ["read"]},
    # a token listed twice gets both grants
    {"token": "all-write", "graphs": ["science"], "rights": ["read", "write"]},
    {"token": "all-write", "graphs": ["second", "elsewhere"], "rights": ["read", "write"]},
]


def sha(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def access_file(path: Path, grants: list[dict[str, Any]]) -> Path:
    entries = [
        {"sha256": sha(g["token"])} | {k: g[k] for k in ("graphs", "rights")} for g in grants
    ]
    path.write_text(json.dumps(entries), encoding="utf-8")
    return path


def call(base: str, method: str, path: str, token: str | None, body: Any = None) -> tuple[int, Any]:
    host, port = base.removeprefix("http://").rsplit(":", 1)
    conn = http.client.HTTPConnection(host, int(port), timeout=120)
    headers = {"Content-Type": "application/json"}
    if token is not None and token != "no-token":
        headers["Authorization"] = f"Bearer {token}"
    data = None if body is None else json.dumps(body).encode()
    conn.request(method, path, data, headers)
    resp = conn.getresponse()
    raw = resp.read()
    conn.close()
    try:
        return resp.status, json.loads(raw) if raw else None
    except ValueError:
        return resp.status, raw


def rpc(base: str, path: str, token: str, method: str, params: Any = None) -> tuple[int, Any]:
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params or {}}
    return call(base, "POST", f"{path}/{method}", token, body)


@pytest.fixture(scope="module")
def server(graphs: Graphs, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
    file = access_file(tmp_path_factory.mktemp("access") / "access.json", GRANTS)
    app = create_app(graphs, access=Access(file=file), routes=explorer_routes())
    with Running(app) as running:
        yield running


def test_every_route_answers_each_token_as_the_table_says(server: Running, graphs: Graphs):
    base = server.url
    doc = "d:nothing-here"  # the graph answers for itself: no such document
    for token, reads in READS.items():
        known = token in WRITES or bool(reads)
        status, health = call(base, "GET", "/health", token)
        assert status == 200 and health["graphs"] == [g for g in GRAPHS if g in reads], token
        assert ("auth" in health) == (not known), token
        for graph in GRAPHS:
            where = (token, graph)
            path = f"/graphs/{graph}/s/{uuid.uuid4().hex}/rcp"
            status, body = rpc(base, path, token, "initialize", INIT)
            if not known:
                assert status == 401 and body["error"]["code"] == -32012, where
            elif graph not in reads:  # the same answer as for a graph that is not served
                assert status == 404 and body["error"]["code"] == -32015, where
                assert body["error"]["message"] == f"no graph named {graph!r} is served"
                _, ghost = rpc(base, "/graphs/ghost/rcp", token, "ping")
                assert ghost["error"]["message"] == "no graph named 'ghost' is served"
            else:
                meta = body["result"]["_meta"]
                assert meta["graphs"] == [g for g in GRAPHS if g in reads], where
                caps = body["result"]["capabilities"]
                assert caps["x-kgrag"]["graphs"] == meta["graphs"], where
                status, found = rpc(base, path, token, "retrieve", {"query": "sun", "k": 1})
                assert status == 200 and found["result"]["hits"], where
                status, deleted = rpc(base, path, token, "index/delete", {"ids": ["nope"]})
                if graph in WRITES.get(token, set()):
                    assert deleted["result"]["deleted"] == 0, where
                else:
                    assert deleted["error"]["code"] == -32012, where
                _, listed = rpc(base, path, token, "catalog/list")
                assert [e["id"] for e in listed["result"]["engines"]] == meta["graphs"]
                for other in GRAPHS:  # naming another graph inside a call
                    _, across = rpc(
                        base, path, token, "retrieve", {"query": "sun", "x-kgrag-graph": other}
                    )
                    if other in reads:
                        assert across["result"]["hits"], (where, other)
                    else:
                        served = ", ".join(meta["graphs"])
                        message = f"no graph named {other!r} is served (served: {served})"
                        assert across["error"]["message"] == message, (where, other)
            query = {"query": "sun", "namespace": graph, "top_k": 1, "use_agentic": False}
            status, answer = call(base, "POST", "/v1/retrieval/query", token, query)
            picture = f"/v1/retrieval/images/{doc}/1?namespace={graph}"
            status_image, image = call(base, "GET", picture, token)
            if not known:
                assert status == 401 and status_image == 401, where
            elif graph not in reads:
                assert status == 404 and "not found" in answer["detail"], where
                assert graph not in answer["detail"].split("served:")[1], where
                assert status_image == 404 and "namespace" in image["detail"], where
            else:
                assert status == 200 and answer["namespace"] == graph, where
                assert status_image == 404 and "in this graph" in image["detail"], where
        status, _ = call(base, "GET", "/", token)  # the page holds no data: no token needed
        assert status == 200


def test_the_default_path_and_notifications_keep_to_the_grants(server: Running):
    base = server.url
    # /rcp reaches the default graph, science: beta's token may not read it
    assert rpc(base, "/rcp", "beta-write", "ping")[0] == 404
    assert rpc(base, "/rcp", "alpha-read", "ping")[0] == 200
    # a notification that writes is dropped for a token that may not write
    path = f"/graphs/science/s/{uuid.uuid4().hex}/rcp"
    rpc(base, path, "alpha-read", "initialize", INIT)
    note = {"jsonrpc": "2.0", "method": "index/add", "params": {"documents": [{"text": "x"}]}}
    status, _ = call(base, "POST", f"{path}/index/add", "alpha-read", note)
    assert status == 204


def test_an_access_file_with_an_error_is_refused_by_name(tmp_path: Path):
    cases = {
        "not json": "is not JSON",
        '{"sha256": "x"}': "must hold a JSON list",
        "[1]": "entry 0 must be an object",
        '[{"sha256": "00", "graphs": "*", "rights": ["read"]}]': "64 hex digits",
        f'[{{"sha256": "{sha("a")}", "graphs": [], "rights": ["read"]}}]': "non-empty list",
        f'[{{"sha256": "{sha("a")}", "graphs": "*", "rights": ["write"]}}]': "must also read",
        f'[{{"sha256": "{sha("a")}", "graphs": "*", "rights": ["admin"]}}]': '["read"] or',
        f'[{{"sha256": "{sha("a")}", "graphs": "*", "rights": ["read"], "right": 1}}]': "unknown",
        f'[{{"sha256": "{sha("a")}", "rights": ["read"]}}]': "lacks ['graphs']",
    }
    for text, words in cases.items():
        path = tmp_path / "access.json"
        path.write_text(text, encoding="utf-8")
        with pytest.raises(InvalidParams, match=re.escape(words)) as err:
            read_grants(path)
        assert str(path) in err.value.message
    with pytest.raises(InvalidParams, match="cannot read the access file"):
        Access(file=tmp_path / "missing.json")


def test_the_file_is_read_again_when_it_changes(graphs: Graphs, tmp_path: Path):
    file = access_file(tmp_path / "access.json", GRANTS[:1])
    with Running(create_app(graphs, access=Access(file=file))) as running:
        base = running.url
        assert rpc(base, "/graphs/science/rcp", "alpha-read", "ping")[0] == 200
        assert rpc(base, "/graphs/science/rcp", "all-read", "ping")[0] == 401
        time.sleep(RECHECK * 1.1)
        access_file(file, GRANTS[3:4])  # alpha revoked, all-read granted
        os.utime(file, (time.time() + 5, time.time() + 5))
        time.sleep(RECHECK * 1.1)
        assert rpc(base, "/graphs/science/rcp", "alpha-read", "ping")[0] == 401
        assert rpc(base, "/graphs/second/rcp", "all-read", "ping")[0] == 200
        file.write_text("[{broken", encoding="utf-8")  # an edit half done: grants stay
        os.utime(file, (time.time() + 10, time.time() + 10))
        time.sleep(RECHECK * 1.1)
        assert rpc(base, "/graphs/second/rcp", "all-read", "ping")[0] == 200


def test_kgrag_serve_takes_the_access_file_and_never_logs_a_token(
    served_copy: Path, tmp_path: Path
):
    file = access_file(tmp_path / "access.json", GRANTS[:2])
    env = dict(os.environ, HF_HUB_OFFLINE="1", KGRAG_ACCESS_FILE=str(file))
    bad = subprocess.run(
        [sys.executable, "-m", "kgrag", "serve", "--graph", f"science={served_copy}"]
        + ["--http", "127.0.0.1:0", "--access-file", str(tmp_path / "nope.json")],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert bad.returncode != 0 and "cannot read the access file" in bad.stderr
    server = start("--graph", f"science={served_copy}", "--no-explorer", env=env)
    base = server.url
    try:
        assert rpc(base, "/rcp", "alpha-read", "ping")[0] == 200
        assert rpc(base, "/rcp", "no-token", "ping")[0] == 401
        assert rpc(base, "/rcp", "s3cret-wrong", "ping")[0] == 401
        status, body = rpc(base, "/rcp", "alpha-read", "index/add", {"documents": []})
        assert status == 200 and body["error"]["code"] in (-32001, -32012)
        host, port = base.removeprefix("http://").rsplit(":", 1)
        conn = http.client.HTTPConnection(host, int(port), timeout=60)
        conn.request("GET", "/health", headers={"X-Request-Id": "probe-access-1"})
        assert conn.getresponse().getheader("X-Request-Id") == "probe-access-1"
        conn.close()
    finally:
        server.stop()
    err = server.log
    for secret in ("alpha-read", "s3cret-wrong"):
        assert secret not in err
    logged = [json.loads(line) for line in err.splitlines() if line.startswith("{")]
    probe = [r for r in logged if r.get("request_id") == "probe-access-1"]
    assert probe and probe[0]["route"] == "health" and probe[0]["status"] == 200, err
    refused = [r for r in logged if r.get("status") == 401]
    assert len(refused) == 2 and all(r["route"] == "rcp" for r in refused), err


def test_kgrag_token_adds_a_grant_the_server_honours(tmp_path: Path, capsys: Any):
    from kgrag.cli.main import main

    file = tmp_path / "access.json"
    assert main(["token", "--graph", "docs", "--graph", "wiki", "--access-file", str(file)]) == 0
    reader = capsys.readouterr().out.strip()
    assert main(["token", "--graph", "*", "--write", "--access-file", str(file)]) == 0
    writer = capsys.readouterr().out.strip()
    assert reader != writer and reader not in file.read_text() and writer not in file.read_text()
    assert file.stat().st_mode & 0o077 == 0  # the owner's alone
    access = Access(file=file)
    who = access.caller(f"Bearer {reader}")
    assert who is not None and who.read == {"docs", "wiki"} and who.write == frozenset()
    both = access.caller(f"Bearer {writer}")
    assert both is not None and both.read is None and both.write is None
    assert access.caller("Bearer something-else") is None
    file.write_text("[{broken", encoding="utf-8")  # a broken file is refused, left as it is
    assert main(["token", "--graph", "docs", "--access-file", str(file)]) != 0
    assert "is not JSON" in capsys.readouterr().err
    assert file.read_text() == "[{broken"
    assert main(["token", "--graph", "bad name", "--access-file", str(tmp_path / "n.json")]) != 0
    assert not (tmp_path / "n.json").exists()
