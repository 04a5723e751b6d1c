"""Wire shapes of the RCP/1 ``retrieve`` result (spec §7.7), as pydantic models.

The pipeline builds plain dicts for speed; these models are the contract the
server and the tests hold them to (unknown fields are rejected here, so a typo
in the pipeline cannot leak onto the wire unnoticed).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

Unit = Literal[
    "chunk",
    "passage",
    "document",
    "node",
    "triplet",
    "path",
    "subgraph",
    "community",
    "tree-node",
    "page",
]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Citation(_Strict):
    source: str
    uri: str | None = None
    title: str | None = None
    start: int | None = None
    end: int | None = None
    page: int | None = None


class Edge(_Strict):
    src: str
    dst: str


class Provenance(_Strict):
    path: list[str] | None = None
    nodes: list[str] | None = None
    edges: list[Edge] | None = None
    leaves: list[str] | None = None


class Trust(_Strict):
    level: Literal["trusted", "community", "untrusted"]
    score: float | None = Field(None, ge=0, le=1)
    injectionSuspected: bool | None = None
    sanitized: bool | None = None


class ChunkRef(_Strict):
    docId: str
    index: int
    context: str | None = None


class Hit(_Strict):
    id: str
    score: float
    confidence: float | None = Field(None, ge=0, le=1)
    text: str | None = None
    unit: Unit | None = None
    level: int | None = Field(None, ge=0)
    meta: dict[str, Any] | None = None
    vector: list[float] | None = None
    scores: dict[str, float] | None = None
    citation: Citation | None = None
    provenance: Provenance | None = None
    trust: Trust | None = None
    chunk: ChunkRef | None = None


class Usage(_Strict):
    candidates: int
    reranked: int
    latencyMs: float
    tokens: int | None = None
    notes: list[str] | None = None


class RetrieveResult(_Strict):
    hits: list[Hit]
    nextCursor: str | None = None
    indexVersion: str | None = None
    usage: Usage | None = None
    rewrittenQuery: str | None = None
