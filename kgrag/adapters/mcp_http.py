"""``/mcp`` on ``kgrag serve --http``: the MCP tools over MCP's streamable HTTP transport.

The same tools as ``kgrag serve --mcp`` (:mod:`kgrag.adapters.mcp`), served by the
official SDK's ``StreamableHTTPSessionManager`` (either major version) beside the RCP
endpoint, the REST route and the explorer, behind the same bearer tokens: a request
without a token the server knows is refused with 401 before the SDK sees it, the rate
limit applies as on ``/rcp``, and each tool call carries its caller's rights, so a
token scoped to graph A finds no graph B (the words of a name that is not served) and a
read token is offered no writes. Each request stands alone (the manager's stateless
mode): any worker answers any call, and nothing is held between requests.
"""

from __future__ import annotations

import contextlib
import ipaddress
from collections.abc import AsyncIterator

from starlette.requests import Request
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from .mcp import CALLER_KEY, Graphs, build_server

try:
    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
    from mcp.server.transport_security import TransportSecuritySettings
except ImportError as exc:  # pragma: no cover - the mcp import above fails first
    raise ImportError(f"/mcp needs the mcp package: pip install 'kgrag[mcp]' ({exc})") from exc

__all__ = ["McpHttp", "PATH"]

#: where the transport is served
PATH = "/mcp"


def _loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


class McpHttp:
    """The ``/mcp`` ASGI endpoint: access and rate checks, then the SDK's transport.

    Its :meth:`lifespan` must run inside the app's (the SDK's manager keeps a task
    group for the requests it serves)."""

    def __init__(
        self, graphs: Graphs, *, writable: bool = True, workers: int = 4, host: str = "127.0.0.1"
    ) -> None:
        self.server = build_server(graphs, writable=writable, workers=workers)
        # a server bound to loopback answers only requests addressed to loopback, so a
        # web page cannot reach it through a rebound DNS name (as the SDK does itself)
        security = None
        if _loopback(host):
            security = TransportSecuritySettings(
                enable_dns_rebinding_protection=True,
                allowed_hosts=["127.0.0.1:*", "localhost:*", "[::1]:*"],
                allowed_origins=["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"],
            )
        self.manager = StreamableHTTPSessionManager(
            app=self.server, stateless=True, security_settings=security
        )

    @contextlib.asynccontextmanager
    async def lifespan(self) -> AsyncIterator[None]:
        async with self.manager.run():
            yield

    def routes(self) -> list[Route]:
        return [Route(PATH, self, methods=["GET", "POST", "DELETE"])]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        endpoint = scope["app"].state.rcp  # the app's HttpRcp: its access and rate limit
        refused, caller = endpoint.guard(Request(scope, receive))
        if refused is not None:
            await refused(scope, receive, send)
            return
        scope[CALLER_KEY] = caller
        await self.manager.handle_request(scope, receive, send)
