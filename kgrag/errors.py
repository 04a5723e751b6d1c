"""One error tree for the whole engine, each class carrying its JSON-RPC code.

    KgragError (-32603)
    ├── InvalidParams (-32602)          a parameter is wrong; data.field names it
    ├── Unsupported (-32005)            an option this engine does not offer; data.option
    ├── VersionGone (-32010)            a pinned indexVersion is no longer stored
    ├── NotFound (-32015)               an id, cursor, session or graph that does not exist
    ├── InputError (-32602)             a source file could not be loaded; names the file
    ├── StoreError (-32603)             the on-disk graph is missing, broken or incompatible
    ├── ModelError (-32603)             a configured model cannot be loaded (no download is tried)
    ├── Cancelled (-32006)              the client cancelled the request (notifications/cancel)
    ├── RateLimited (-32011)            the server is shedding load; data.retryAfterMs says when
    ├── Unauthorized (-32012)           the caller may not do this (no or wrong bearer token)
    ├── PayloadTooLarge (-32013)        a request exceeds a limit (body bytes, batch size, inputs)
    └── Timeout (-32014)                the server's own deadline for the request elapsed

The server maps an exception to a JSON-RPC error with :func:`to_jsonrpc`.
"""

from __future__ import annotations

from typing import Any


class KgragError(Exception):
    """Base of every error kgrag raises on purpose."""

    code = -32603

    def __init__(self, message: str, **data: Any) -> None:
        super().__init__(message)
        self.message = message
        self.data = data


class InvalidParams(KgragError):
    code = -32602


class Unsupported(KgragError):
    code = -32005


class VersionGone(KgragError):
    code = -32010


class NotFound(KgragError):
    code = -32015


class InputError(KgragError):
    """A source file that cannot be ingested; ``path`` and ``reason`` say why."""

    code = -32602

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"{path}: {reason}", path=path, reason=reason)
        self.path = path
        self.reason = reason

    def __reduce__(self) -> tuple[type[InputError], tuple[str, str]]:
        return (type(self), (self.path, self.reason))  # read on one process, reported on another


class StoreError(KgragError):
    code = -32603


class Unavailable(StoreError):
    """The graph's store cannot be reached now (a Neo4j that is down); worth retrying."""

    def __init__(self, message: str, **data: Any) -> None:
        super().__init__(message, retryable=True, **data)


class ModelError(KgragError):
    code = -32603


class ClusterError(KgragError):
    """A Ray cluster that cannot be reached, or work on it that failed past its retries."""

    code = -32603


class Cancelled(KgragError):
    code = -32006


class RateLimited(KgragError):
    code = -32011


class Unauthorized(KgragError):
    code = -32012


class PayloadTooLarge(KgragError):
    code = -32013


class Timeout(KgragError):
    code = -32014


def to_jsonrpc(exc: KgragError) -> dict[str, Any]:
    """The JSON-RPC ``error`` object for ``exc``."""
    err: dict[str, Any] = {"code": exc.code, "message": exc.message}
    if exc.data:
        err["data"] = exc.data
    return err
