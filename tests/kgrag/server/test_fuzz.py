"""The HTTP surface under generated input: schemathesis against the REST route's
``/openapi.json``, and generated JSON-RPC bodies (hypothesis) against the RCP
endpoint. Bounded in examples: no 5xx, every 4xx names what was wrong, every RCP
reply a JSON-RPC error or result, and the server still answering afterwards."""

from __future__ import annotations

import http.client
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kgrag.server import Graphs, Running, create_app

#: JSON-RPC codes a reply may carry (spec §5: the standard ones and RCP's own)
CODES = {-32700, -32600, -32601, -32602, -32603} | set(range(-32099, -31999))
EXAMPLES = settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=list(HealthCheck),
    database=None,
    derandomize=True,
)


@pytest.fixture(scope="module")
def url(served_copy: Path) -> Iterator[str]:
    graphs = Graphs.open([f"science={served_copy}"])
    with Running(create_app(graphs)) as running:
        yield running.url
    graphs.close()


def _post(url: str, path: str, body: bytes, **headers: str) -> tuple[int, Any]:
    host, port = url.removeprefix("http://").rsplit(":", 1)
    conn = http.client.HTTPConnection(host, int(port), timeout=120)
    conn.request("POST", path, body, {"Content-Type": "application/json", **headers})
    response = conn.getresponse()
    raw = response.read()
    conn.close()
    return response.status, json.loads(raw) if raw else None


def _healthy(url: str) -> None:
    host, port = url.removeprefix("http://").rsplit(":", 1)
    conn = http.client.HTTPConnection(host, int(port), timeout=30)
    conn.request("GET", "/health")
    assert conn.getresponse().status == 200
    conn.close()


def test_the_rest_route_under_generated_bodies(url: str):
    schema = schemathesis.openapi.from_url(f"{url}/openapi.json")
    operations = [result.ok() for result in schema.get_all_operations()]
    assert {op.path for op in operations} >= {"/v1/retrieval/query", "/v2/retrieval/query"}
    seen: dict[int, int] = {}
    for op in operations:

        @EXAMPLES
        @given(case=op.as_strategy())
        def check(case: Any) -> None:
            response = case.call(base_url=url)
            seen[response.status_code] = seen.get(response.status_code, 0) + 1
            assert response.status_code < 500, (case.body, response.text)
            if response.status_code >= 400:
                detail = response.json()["detail"]
                assert detail, response.text  # FastAPI-style: each names a field
                if response.status_code == 422:
                    assert all(d["loc"] and d["msg"] for d in detail), detail

        check()
    assert 200 in seen  # generated bodies were answered, not only refused
    _healthy(url)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
methods = st.sampled_from(
    ["initialize", "retrieve", "graph", "embed", "rerank", "index/add", "index/delete", "nope"]
) | st.text(max_size=12)
requests = st.fixed_dictionaries(
    {"jsonrpc": st.sampled_from(["2.0", "1.0", 2]), "method": methods},
    optional={"id": st.integers() | st.text(max_size=6) | st.none(), "params": json_values},
)


@settings(EXAMPLES, max_examples=150)
@given(body=requests | json_values)
def _rcp_case(url: str, codes: set[int], body: Any) -> None:
    status, reply = _post(url, "/s/fuzz/rcp", json.dumps(body).encode())
    assert status in (200, 204, 400, 413), (status, body, reply)
    if reply is None:  # a notification (no id) gets no answer
        assert isinstance(body, dict) and "id" not in body and status == 204
        return
    expected = _expected(body)
    if expected is not None:  # a frame that is plainly not a request: its code is known
        assert not isinstance(reply, list) and reply["error"]["code"] == expected, (body, reply)
    for answer in reply if isinstance(reply, list) else [reply]:
        assert answer["jsonrpc"] == "2.0"
        if "error" in answer:
            codes.add(answer["error"]["code"])
            assert answer["error"]["code"] in CODES, answer
            assert isinstance(answer["error"]["message"], str) and answer["error"]["message"]
        else:
            assert "result" in answer, answer


def _expected(body: Any) -> int | None:
    """The code JSON-RPC 2.0 fixes for ``body`` where it is plainly not a request (a
    scalar, an empty batch, a wrong ``jsonrpc``, a method that is no non-empty string
    or params that are not an object), None otherwise."""
    if isinstance(body, list):
        return -32600 if not body else None
    if not isinstance(body, dict):
        return -32600
    if "id" in body and not isinstance(body["id"], (str, int)):
        return -32600 if body["id"] is not None else None
    if body.get("jsonrpc") != "2.0" or not isinstance(body.get("method"), str):
        return -32600
    if not body["method"]:
        return -32600
    params = body.get("params")
    if "id" in body and params is not None and not isinstance(params, dict):
        return -32602
    return None


def test_the_rcp_endpoint_under_generated_json_rpc(url: str):
    init = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": 1}}
    status, reply = _post(url, "/s/fuzz/rcp", json.dumps(init).encode())
    assert status == 200 and "result" in reply  # the methods then check their params
    codes: set[int] = set()
    _rcp_case(url, codes)
    assert {-32600, -32602} <= codes  # bad requests and bad params were among them
    nope = {"jsonrpc": "2.0", "id": 1, "method": "nope"}
    assert (
        _post(url, "/s/fuzz/rcp", json.dumps(nope).encode())[1]["error"]["code"] == -32004
    )  # RCP: unknown method
    status, reply = _post(url, "/s/fuzz/rcp", b"{not json")
    assert status == 400 and reply["error"]["code"] == -32700
    _healthy(url)
