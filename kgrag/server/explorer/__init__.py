"""The graph explorer: a static page at ``/`` that searches a served graph over RCP.

The page, its script and its style sheet ship in this package and hold no data;
everything they show comes from the browser's own RCP calls (``/health`` for the
graphs, ``/graphs/<name>/s/<key>/rcp/<method>`` for the rest, with the bearer
token the user types in when the server asks for one). They are served without a
token and with a Content-Security-Policy that allows only these files' own script
and style, so stored text that looks like markup can never run as such.
"""

from __future__ import annotations

from functools import cache
from importlib.resources import files

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

#: the page's own files and their content types
ASSETS = {
    "index.html": "text/html; charset=utf-8",
    "explorer.js": "text/javascript; charset=utf-8",
    "explorer.css": "text/css; charset=utf-8",
}
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)
HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",  # a shared ?q= stays on this server
    "Cache-Control": "no-cache",
}


@cache
def _read(name: str) -> bytes:
    return files(__name__).joinpath(name).read_bytes()


def _serve(name: str) -> Response:
    return Response(_read(name), 200, HEADERS, ASSETS[name])


async def _index(request: Request) -> Response:
    return _serve("index.html")


async def _asset(request: Request) -> Response:
    name = request.path_params["name"]
    if name not in ASSETS or name == "index.html":
        return Response(b"not found\n", 404, HEADERS, "text/plain; charset=utf-8")
    return _serve(name)


def explorer_routes() -> list[BaseRoute]:
    """``GET /`` (the page) and ``GET /explorer/<file>`` (its script and style), for
    :func:`kgrag.server.create_app`'s ``routes``."""
    return [
        Route("/", _index, methods=["GET"]),
        Route("/explorer/{name}", _asset, methods=["GET"]),
    ]
