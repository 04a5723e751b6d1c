"""A client of the official MCP SDK's 1.x line, run by the tests under the Python that
has it (``.venv/mcp1``, made by ``make install``; see tests/make_mcp1_env.py).

Reads a plan on stdin, ``{"url": ..., "calls": [...]}``, where each call is
``{"token": T, "list": true}`` or ``{"token": T, "tool": NAME, "args": {...}}``, makes
each over streamable HTTP (or over stdio when the plan has ``"command"`` instead of
``"url"``), and prints one JSON line of outcomes: the tool names listed, or a call's
``isError``, text and structured content, or the exception a refused connection raised.
"""

from __future__ import annotations

import asyncio
import json
import sys
from importlib.metadata import version
from typing import Any

from mcp import ClientSession, StdioServerParameters, types
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamablehttp_client


async def make(session: ClientSession, call: dict[str, Any]) -> dict[str, Any]:
    if call.get("list"):
        return {"tools": [t.name for t in (await session.list_tools()).tools]}
    result = await session.call_tool(call["tool"], call.get("args", {}))
    text = "\n".join(c.text for c in result.content if isinstance(c, types.TextContent))
    return {"isError": result.isError, "text": text, "structured": result.structuredContent}


async def over_http(url: str, call: dict[str, Any]) -> dict[str, Any]:
    """One call on a connection of its own, sending the call's token."""
    token = call.get("token")
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with (
        streamablehttp_client(url, headers=headers) as (read, write, _),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        return await make(session, call)


async def main() -> None:
    plan = json.load(sys.stdin)
    outcomes = []
    if "command" in plan:  # one server process, every call on its connection
        command = plan["command"]
        server = StdioServerParameters(
            command=command[0], args=command[1:], env={"HF_HUB_OFFLINE": "1"}
        )
        async with stdio_client(server) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            for call in plan["calls"]:
                outcomes.append(await asyncio.wait_for(make(session, call), 120))
    for call in plan["calls"] if "url" in plan else []:
        try:
            outcomes.append(await asyncio.wait_for(over_http(plan["url"], call), 120))
        except Exception as exc:  # a refused connection: what it raised, for the test to read
            outcomes.append({"raised": f"{type(exc).__name__}: {exc!r}"})
    print(json.dumps({"sdk": version("mcp"), "outcomes": outcomes}))


if __name__ == "__main__":
    asyncio.run(main())
