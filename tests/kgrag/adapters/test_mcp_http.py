"""``/mcp`` on ``kgrag serve --http``: MCP's streamable HTTP transport behind the
server's per-graph access, with the official SDK's clients of both major versions
against kgrag's server under both (the 1.x line from ``.venv/mcp1``, see
tests/make_mcp1_env.py), each a real process on loopback."""

from __future__ import annotations

import contextlib
import hashlib
import http.client
import json
import shutil
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client, types
from mcp.client.streamable_http import streamable_http_client

from tests.kgrag.server.served import LISTENING, start

QUESTION = "Where was Marie Curie born?"
READ_TOOLS = ["retrieve", "local_search", "global_search", "drift_search", "neighbors"]
WRITE_TOOLS = ["add_documents", "delete_documents"]
GRANTS = [
    {"token": "alpha-read", "graphs": ["science"], "rights": ["read"]},
    {"token": "alpha-write", "graphs": ["science"], "rights": ["read", "write"]},
    {"token": "beta-read", "graphs": ["second"], "rights": ["read"]},
    {"token": "all-read", "graphs": "*", "rights": ["read"]},
]
#: what each token reads and writes, written out
READS = {
    "alpha-read": ["science"],
    "alpha-write": ["science"],
    "beta-read": ["second"],
    "all-read": ["science", "second"],
}
WRITES = {"alpha-write": ["science"]}


def _sha(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


@pytest.fixture(scope="module")
def folders(science_graph: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("mcp-http")
    for name in ("science", "second"):
        shutil.copytree(science_graph, root / name)
    entries = [{"sha256": _sha(g["token"]), "graphs": g["graphs"], "rights": g["rights"]}
               for g in GRANTS]  # fmt: skip
    (root / "access.json").write_text(json.dumps(entries), encoding="utf-8")
    return {"science": root / "science", "second": root / "second", "access": root / "access.json"}


@contextlib.contextmanager
def serving(python: Path | str, folders: dict[str, Path], log: Path) -> Iterator[str]:
    """``kgrag serve --http`` under ``python``; yields the base URL, then stops it."""
    server = start(
        "--no-explorer", "--graph", f"science={folders['science']}",
        "--graph", f"second={folders['second']}", "--access-file", str(folders["access"]),
        python=python, listening=LISTENING + r".*MCP on \S+/mcp",
    )  # fmt: skip
    try:
        yield server.url
    finally:
        status = server.stop()
        log.write_text(server.log, encoding="utf-8")
    assert status == 0, server.log
    for token in READS:
        assert token not in server.log  # tokens are never logged


@contextlib.asynccontextmanager
async def client(base: str, token: str) -> AsyncIterator[Client]:
    """A 2.x SDK client of ``base``/mcp, sending ``token``."""
    headers = {"Authorization": f"Bearer {token}"}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=120) as http,
        Client(streamable_http_client(f"{base}/mcp", http_client=http)) as session,
    ):
        yield session


def text(result: types.CallToolResult) -> str:
    return "\n".join(c.text for c in result.content if isinstance(c, types.TextContent))


def raw_post(base: str, token: str | None) -> tuple[int, dict[str, str], Any]:
    host, port = base.removeprefix("http://").rsplit(":", 1)
    conn = http.client.HTTPConnection(host, int(port), timeout=60)
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    conn.request("POST", "/mcp", json.dumps(body).encode(), headers)
    resp = conn.getresponse()
    raw = resp.read()
    conn.close()
    headers = {k.lower(): v for k, v in resp.getheaders()}
    return resp.status, headers, json.loads(raw) if raw.startswith(b"{") else raw


def check_table(base: str) -> None:
    """The 2.x client: each token against each graph and each kind of tool, as the
    tables say (within four minutes)."""

    async def bounded() -> None:
        with anyio.fail_after(240):
            await _table(base)

    anyio.run(bounded)


def old_client(mcp1: Any, base: str, *calls: dict[str, Any]) -> list[dict[str, Any]]:
    """The 1.x client's outcomes of ``calls`` on ``base``/mcp."""
    outcomes: list[dict[str, Any]] = mcp1.run({"url": f"{base}/mcp", "calls": list(calls)})[
        "outcomes"
    ]
    return outcomes


async def _table(base: str) -> None:
    for token, reads in READS.items():
        writes = WRITES.get(token, [])
        async with client(base, token) as session:
            listed = (await session.list_tools()).tools
            assert [t.name for t in listed] == READ_TOOLS + (WRITE_TOOLS if writes else []), token
            graph_arg = listed[0].input_schema["properties"]["graph"]
            assert "enum" not in graph_arg, token  # a validation error would name them all
            for name in ("science", "second"):  # the description names only what it reads
                assert (name in graph_arg["description"]) == (name in reads), token
            default = await session.call_tool("retrieve", {"query": QUESTION, "k": 1})
            assert not default.is_error and "Warsaw" in text(default), token
            for graph in ("science", "second"):
                where = (token, graph)
                found = await session.call_tool(
                    "retrieve", {"query": QUESTION, "k": 1, "graph": graph}
                )
                if graph in reads:
                    assert not found.is_error and found.structured_content["hits"], where
                else:  # the words of a graph that is not served
                    assert found.is_error, where
                    assert f"no graph named {graph!r} is served" in text(found), where
                    assert found.structured_content["error"]["code"] == -32015, where
                if not writes:
                    continue
                gone = await session.call_tool(
                    "delete_documents", {"ids": ["d:nothing-here"], "graph": graph}
                )
                if graph in writes:
                    assert not gone.is_error and gone.structured_content["deleted"] == 0, where
                else:
                    assert gone.is_error and "is served" in text(gone), where
        if not writes:  # a reader that names a write tool anyway is refused by its rights
            async with client(base, token) as session:
                refused = await session.call_tool("delete_documents", {"ids": ["x"]})
                assert refused.is_error and "may not write" in text(refused), token


def test_the_2x_server_answers_both_sdks_as_the_grants_say(
    folders: dict[str, Path], tmp_path: Path, mcp1: Any
):
    with serving(sys.executable, folders, tmp_path / "server.log") as base:
        status, headers, body = raw_post(base, None)
        assert status == 401 and headers["www-authenticate"] == "Bearer"
        assert body["error"]["code"] == -32012
        assert raw_post(base, "not-a-token")[0] == 401
        check_table(base)
        elsewhere = {"query": QUESTION, "graph": "second"}
        listed, found, hidden, refused = old_client(
            mcp1,
            base,
            {"token": "alpha-read", "list": True},
            {"token": "alpha-read", "tool": "retrieve", "args": {"query": QUESTION}},
            {"token": "alpha-read", "tool": "retrieve", "args": elsewhere},
            {"token": "wrong", "list": True},
        )
        assert listed["tools"] == READ_TOOLS
        assert not found["isError"] and "Warsaw" in found["text"]
        assert found["structured"]["hits"][0]["citation"]["title"] == "Marie Curie"
        assert hidden["isError"] and "no graph named 'second' is served" in hidden["text"]
        assert "401" in refused["raised"]


def test_the_1x_server_answers_both_sdks_as_the_grants_say(
    folders: dict[str, Path], tmp_path: Path, mcp1: Any
):
    with serving(mcp1.python, folders, tmp_path / "server.log") as base:
        assert raw_post(base, None)[0] == 401
        check_table(base)
        listed, local = old_client(
            mcp1,
            base,
            {"token": "alpha-write", "list": True},
            {"token": "beta-read", "tool": "local_search", "args": {"query": QUESTION}},
        )
        assert listed["tools"] == READ_TOOLS + WRITE_TOOLS
        assert not local["isError"] and "Cite: Marie Curie" in local["text"]
