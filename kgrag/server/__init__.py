"""The RCP/1 server: one protocol core (:mod:`.protocol`) behind two transports,
NDJSON over stdio (:mod:`.stdio`) and HTTP with SSE (:mod:`.http`), serving one
or more graphs (:mod:`.graphs`)."""

from .graphs import Graphs
from .http import Access, Running, create_app
from .protocol import CONFORMANCE, PROTOCOL_VERSION, Limits, Rcp
from .stdio import serve_stdio

__all__ = [
    "CONFORMANCE",
    "PROTOCOL_VERSION",
    "Access",
    "Graphs",
    "Limits",
    "Rcp",
    "Running",
    "create_app",
    "serve_stdio",
]
