"""A Knowhere-compatible retrieval route: ``POST /v1/retrieval/query`` and ``/v2/...``.

Namespaces are the served graphs (a blank or missing one is ``default``: the
graph of that name, else the server's default graph). Three routers answer:

* ``small_corpus_all`` when the scoped corpus holds at most ``top_k`` chunks:
  every one of them, ranked;
* ``classic_topk`` (``use_agentic: false``): classic map-unit BM25, sparse recall
  over the scope (``internal_recall_k`` chunks) fused by RRF, optionally reranked
  after the fusion, cut at ``threshold`` (a minimum RRF score) and ``top_k``;
* ``agentic`` (the default): an exploration of the graph that needs no LLM
  (see :mod:`.agentic`), every step recorded in ``decision_trace``.

Bad bodies get FastAPI-style 422 answers naming the field; an unknown
namespace is 404. The OpenAPI document is served at ``/openapi.json``.
"""

from __future__ import annotations

import asyncio
import json
import logging
from functools import partial
from typing import Any

from pydantic import ValidationError
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from kgrag.errors import KgragError, Unavailable
from kgrag.server.http_body import SlowBody, read_body
from kgrag.server.rest.evidence import IMAGES
from kgrag.server.rest.models import QueryBody, QueryBodyV2, openapi
from kgrag.server.rest.route import answer

__all__ = ["rest_routes"]

log = logging.getLogger("kgrag.server")


def _unprocessable(errors: list[dict[str, Any]]) -> JSONResponse:
    return JSONResponse({"detail": errors}, 422)


def _pydantic_errors(exc: ValidationError) -> list[dict[str, Any]]:
    return [
        {
            "type": e["type"],
            "loc": ["body", *e["loc"]],
            "msg": e["msg"],
            "input": e.get("input"),
        }
        for e in exc.errors(include_url=False, include_context=False)
    ]


def rest_routes(endpoint: Any) -> list[Route]:
    """The REST routes, sharing ``endpoint``'s auth, limits, graphs and workers."""
    graphs = endpoint.graphs
    server = endpoint.server

    async def query(request: Request, model: type[QueryBody]) -> Response:
        refused, caller = endpoint.guard(request)
        if refused is not None:
            return refused
        try:
            raw = await read_body(request, server.limits)
        except SlowBody as exc:
            return JSONResponse({"detail": str(exc)}, 408, {"Connection": "close"})
        if raw is None:
            return JSONResponse({"detail": f"body exceeds {server.limits.max_body} bytes"}, 413)
        try:
            data = json.loads(raw)
        except ValueError as exc:
            return _unprocessable(
                [{"type": "json_invalid", "loc": ["body"], "msg": f"JSON decode error: {exc}"}]
            )
        try:
            body = model.model_validate(data)
        except ValidationError as exc:
            return _unprocessable(_pydantic_errors(exc))
        name = body.resolved_namespace(graphs)
        if name is None or not caller.may_read(name):
            served = ", ".join(caller.visible(graphs.names))
            return JSONResponse(
                {"detail": f"namespace {body.namespace!r} not found (served: {served})"}, 404
            )
        request.state.graph = name
        loop = asyncio.get_running_loop()
        try:
            result = await loop.run_in_executor(
                server.executor, answer, graphs.get(name), name, body
            )
        except Unavailable as exc:  # the store is down: say so, and when to ask again
            graphs.note(name, exc.message)
            down = {"detail": exc.message, "code": exc.code, "retryable": True}
            return JSONResponse(down, 503, {"Retry-After": "5"})
        except KgragError as exc:  # the engine refused the request as asked
            return JSONResponse({"detail": exc.message, "code": exc.code}, 400)
        except Exception as exc:  # a bug: say so, keep serving
            log.exception("retrieval query failed")
            return JSONResponse({"detail": f"internal error: {type(exc).__name__}: {exc}"}, 500)
        graphs.note(name, None)
        return JSONResponse(result)

    async def v1(request: Request) -> Response:
        return await query(request, QueryBody)

    async def v2(request: Request) -> Response:
        return await query(request, QueryBodyV2)

    async def schema(request: Request) -> Response:
        return JSONResponse(openapi())

    return [
        Route("/v1/retrieval/query", v1, methods=["POST"]),
        Route("/v2/retrieval/query", v2, methods=["POST"]),
        Route("/openapi.json", schema, methods=["GET"]),
        Route(IMAGES + "/{doc}/{number}", partial(_image, endpoint), methods=["GET"]),
    ]


async def _image(endpoint: Any, request: Request) -> Response:
    """A picture of a document read from a file, for the evidence's image parts."""
    refused, caller = endpoint.guard(request)
    if refused is not None:
        return refused
    graphs = endpoint.graphs
    asked = (request.query_params.get("namespace") or "").strip() or "default"
    name = asked if asked in graphs.names else graphs.default if asked == "default" else None
    if name is None or not caller.may_read(name):
        return JSONResponse({"detail": f"namespace {asked!r} not found"}, 404)
    request.state.graph = name
    doc = request.path_params["doc"]
    try:
        number = int(request.path_params["number"])
        data, mime = graphs.get(name).image(doc if doc.startswith("d:") else f"d:{doc}", number)
    except ValueError:
        return JSONResponse({"detail": "the picture number must be an integer"}, 422)
    except KgragError as exc:
        return JSONResponse({"detail": exc.message, "code": exc.code}, 404)
    return Response(data, media_type=mime or "application/octet-stream")
