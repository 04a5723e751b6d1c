"""Reading an HTTP request's body within a size and a time limit."""

from __future__ import annotations

import asyncio

from starlette.requests import Request

from .protocol import Limits

__all__ = ["SlowBody", "read_body"]


class SlowBody(Exception):
    """The client did not send its body within the limit."""


async def read_body(request: Request, limits: Limits) -> bytes | None:
    """The request body; None when it exceeds ``limits.max_body`` bytes; :class:`SlowBody`
    when it has not all come within ``limits.body_timeout`` seconds."""
    limit = limits.max_body
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        return None

    async def read() -> bytes | None:
        chunks, size = [], 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                return None
            chunks.append(chunk)
        return b"".join(chunks)

    try:
        return await asyncio.wait_for(read(), limits.body_timeout)
    except asyncio.TimeoutError:
        raise SlowBody(
            f"the request body did not arrive within {limits.body_timeout:g} s"
        ) from None
