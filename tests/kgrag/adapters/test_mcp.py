"""``kgrag serve --mcp``, driven by the official MCP SDK's own client over stdio:
a real server process, every tool, errors that leave it serving, read-only mode."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
from mcp import Client, StdioServerParameters, types
from mcp.client.stdio import stdio_client

QUESTION = "Where was Marie Curie born?"
READ_TOOLS = ["retrieve", "local_search", "global_search", "drift_search", "neighbors"]
WRITE_TOOLS = ["add_documents", "delete_documents"]


@contextlib.asynccontextmanager
async def connect(
    graph: Path, log: Path, *flags: str, python: Path | str = sys.executable
) -> AsyncIterator[Client]:
    """A connected 2.x SDK client of ``kgrag serve --mcp`` on ``graph``, run by ``python``."""
    server = StdioServerParameters(
        command=str(python),
        args=["-m", "kgrag.cli", "serve", "--mcp", "--graph", str(graph), *flags],
        env={"HF_HUB_OFFLINE": "1"},
    )
    with log.open("w") as errlog:
        async with Client(stdio_client(server, errlog=errlog), read_timeout_seconds=120) as session:
            yield session


def run(scenario: Callable[[], Awaitable[None]], log: Path) -> None:
    """Run ``scenario`` within two minutes; on failure show the server's stderr."""

    async def bounded() -> None:
        with anyio.fail_after(120):
            await scenario()

    try:
        asyncio.run(bounded())
    except BaseException:
        if log.exists():
            print(log.read_text(), file=sys.stderr)
        raise


def text(result: types.CallToolResult) -> str:
    return "\n".join(c.text for c in result.content if isinstance(c, types.TextContent))


def ok(result: types.CallToolResult) -> dict[str, Any]:
    assert not result.is_error, text(result)
    assert result.structured_content is not None
    return result.structured_content


def test_read_tools_answer_with_passages_citations_and_provenance(
    science_graph: Path, tmp_path: Path
):
    log = tmp_path / "server.log"

    async def scenario() -> None:
        async with connect(science_graph, log, "--read-only") as s:
            listed = (await s.list_tools()).tools
            assert [t.name for t in listed] == READ_TOOLS  # read-only: no write tools
            schema = {t.name: t.input_schema for t in listed}
            assert schema["retrieve"]["required"] == ["query"]
            assert {"query", "k", "mode", "unit", "filter"} <= set(schema["retrieve"]["properties"])
            assert schema["neighbors"]["required"] == ["seedIds"]

            hit = ok(await s.call_tool("retrieve", {"query": QUESTION, "k": 2}))["hits"][0]
            assert hit["citation"]["title"] == "Marie Curie" and "Warsaw" in hit["text"]
            assert hit["provenance"]["leaves"] == [hit["id"]]

            local = await s.call_tool("local_search", {"query": QUESTION, "k": 2})
            assert "Cite: Marie Curie" in text(local)
            assert "“She was born in Warsaw in 1867.”" in text(local)  # the relation, quoted
            units = {h["unit"] for h in ok(local)["hits"]}
            assert units == {"chunk", "node", "triplet", "path"}
            marie = next(h["id"] for h in ok(local)["hits"] if h["text"] == "Marie Curie")

            around = await s.call_tool("neighbors", {"seedIds": [marie], "k": 10})
            labels = {n["label"] for n in ok(around)["nodes"]}
            assert {"Marie Curie", "Warsaw", "Pierre Curie"} <= labels
            assert "Warsaw" in text(around)

            found = await s.call_tool("global_search", {"query": "the Curie family", "k": 2})
            assert text(found).startswith("Summary: ") and ok(found)["communities"]
            assert any("Marie Curie" in c["summary"] for c in ok(found)["communities"])

            drift = await s.call_tool("drift_search", {"query": QUESTION, "k": 2})
            assert ok(drift)["hits"][0]["citation"]["title"] == "Marie Curie"
            assert "Follow-up questions asked:" in text(drift) and ok(drift)["followups"]

            bad = await s.call_tool("retrieve", {"query": QUESTION, "k": 0})
            assert bad.is_error and "minimum of 1" in text(bad)
            unknown = await s.call_tool("neighbors", {"seedIds": ["e:nope"]})
            assert unknown.is_error and "unknown seed ids: e:nope" in text(unknown)
            refused = await s.call_tool("retrieve", {"query": QUESTION, "mode": "fuzzy"})
            assert refused.is_error and "fuzzy" in text(refused)
            write = await s.call_tool("add_documents", {"documents": [{"text": "x"}]})
            assert write.is_error and "no tool named 'add_documents'" in text(write)

            after = ok(await s.call_tool("retrieve", {"query": QUESTION, "k": 1}))  # still serving
            assert after["hits"][0]["id"] == hit["id"]

    run(scenario, log)


def test_write_tools_add_and_delete_documents(science_graph: Path, tmp_path: Path):
    graph = tmp_path / "science"
    shutil.copytree(science_graph, graph)  # the shared graph stays as it is
    log = tmp_path / "server.log"
    question = "Where was Lise Meitner born?"
    meitner = {
        "id": "meitner",
        "title": "Lise Meitner",
        "text": "Lise Meitner was an Austrian physicist. She was born in Vienna in 1878.",
    }

    async def scenario() -> None:
        # the writes in process: writes apart are the engine's, tested there and over RCP
        async with connect(graph, log, "--writes-in-process") as s:
            assert [t.name for t in (await s.list_tools()).tools] == READ_TOOLS + WRITE_TOOLS
            untitled = await s.call_tool("add_documents", {"documents": [{"title": "x"}]})
            assert untitled.is_error and "'text' is a required property" in text(untitled)

            added = await s.call_tool("add_documents", {"documents": [meitner]})
            assert ok(added)["ids"] == ["d:meitner"] and "Added 1 documents" in text(added)
            hit = ok(await s.call_tool("retrieve", {"query": question, "k": 1}))["hits"][0]
            assert hit["citation"]["title"] == "Lise Meitner" and "Vienna" in hit["text"]

            gone = await s.call_tool("delete_documents", {"ids": ok(added)["ids"]})
            assert ok(gone)["deleted"] == 1
            hits = ok(await s.call_tool("retrieve", {"query": question, "k": 3}))["hits"]
            assert all(h["citation"]["title"] != "Lise Meitner" for h in hits)

    run(scenario, log)


def test_a_missing_mcp_package_names_the_extra(science_graph: Path):
    code = (
        "import sys; sys.modules['mcp'] = None; from kgrag.cli import main; "
        f"sys.exit(main(['serve', '--mcp', '--graph', {str(science_graph)!r}]))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env=dict(os.environ, HF_HUB_OFFLINE="1"),
        timeout=120,
    )
    assert done.returncode == 2
    assert "pip install 'kgrag[mcp]'" in done.stderr


def test_both_sdk_lines_meet_over_stdio(science_graph: Path, tmp_path: Path, mcp1: Any):
    """kgrag's server under the 1.x SDK with the 2.x client, and under 2.x with 1.x's."""
    log = tmp_path / "server.log"

    async def scenario() -> None:
        async with connect(science_graph, log, "--read-only", python=mcp1.python) as s:
            assert [t.name for t in (await s.list_tools()).tools] == READ_TOOLS
            found = await s.call_tool("local_search", {"query": QUESTION, "k": 1})
            assert not found.is_error and "Cite: Marie Curie" in text(found)
            bad = await s.call_tool("retrieve", {"query": QUESTION, "k": 0})
            assert bad.is_error and "minimum of 1" in text(bad)

    run(scenario, log)
    command = [sys.executable, "-m", "kgrag.cli", "serve", "--mcp", "--graph", str(science_graph)]
    calls = [
        {"list": True},
        {"tool": "retrieve", "args": {"query": QUESTION, "k": 1}},
        {"tool": "retrieve", "args": {"query": QUESTION, "k": 0}},
    ]
    listed, found, bad = mcp1.run({"command": command + ["--read-only"], "calls": calls})[
        "outcomes"
    ]
    assert listed["tools"] == READ_TOOLS
    assert found["structured"]["hits"][0]["citation"]["title"] == "Marie Curie"
    assert bad["isError"] and "minimum of 1" in bad["text"]
