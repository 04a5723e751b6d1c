"""JSON-RPC 2.0 frames (spec §4): results, errors, request ids, and the one-line
UTF-8 encoding every transport writes."""

from __future__ import annotations

import json
import logging
import math
from typing import Any

from ..errors import KgragError

log = logging.getLogger("kgrag.server")


def ok(id_: Any, result: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": id_, "result": result}


def error(id_: Any, code: int, message: str, data: dict[str, Any] | None = None) -> dict[str, Any]:
    err: dict[str, Any] = {"code": code, "message": message}
    if data:
        err["data"] = data
    return {"jsonrpc": "2.0", "id": id_, "error": err}


def failure(id_: Any, exc: KgragError) -> dict[str, Any]:
    return error(id_, exc.code, exc.message, dict(exc.data) if exc.data else None)


def _finite(value: Any) -> Any:
    """A copy of ``value`` with NaN and infinities replaced by 0.0 (spec §4.6)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else 0.0
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def dumps(message: Any) -> bytes:
    """One compact, single-line UTF-8 JSON frame; never NaN or Infinity."""
    try:
        text = json.dumps(message, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    except ValueError:
        log.warning("a result carried a non-finite number; sent as 0.0")
        text = json.dumps(_finite(message), ensure_ascii=False, separators=(",", ":"))
    return text.encode("utf-8")


def id_key(id_: Any) -> str:
    """In-flight key of a request id: 1 and "1" are different ids."""
    return json.dumps(id_)


def valid_id(id_: Any) -> bool:
    return isinstance(id_, str) or (isinstance(id_, (int, float)) and not isinstance(id_, bool))
