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
    #: relation: a stated one (subject, verb, object); cooccurrence: named in one
    #: sentence, no statement joins them; mention: the passage names the entity;
    #: names: a passage names another's title; child: a tree node's part
    kind: Literal["relation", "cooccurrence", "mention", "names", "child"] | None = None
    predicate: str | None = None
    relation: str | None = None
    evidence: str | None = None  # the chunk that evidences the edge (among the leaves)
    quote: str | None = None  # the evidence's sentence that states the edge


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


class GraphCommunity(_Strict):
    id: str
    level: int = Field(ge=0)
    summary: str
    score: float | None = None
    title: str | None = None
    rating: float | None = None
    leaves: list[str] | int | None = None
    parent: str | None = None
    children: list[str] | None = None
    size: int | None = None
    leafCount: int | None = None
    members: list[str] | None = None


class GraphNode(_Strict):
    id: str
    score: float
    kind: str | None = None
    label: str | None = None


class GraphEdge(_Strict):
    src: str
    dst: str
    weight: float | None = None
    kind: str | None = None
    predicate: str | None = None
    predicates: list[str] | None = None
    relations: list[str] | None = None


class GraphResult(_Strict):
    """The ``graph`` result (spec §7.9): the keys of one op, plus kgrag's extras."""

    hits: list[Hit] | None = None
    followups: list[str] | None = None
    primer: list[dict[str, Any]] | None = None
    summary: str | None = None
    level: int | None = None
    communities: list[GraphCommunity] | None = None
    nodes: list[GraphNode] | None = None
    edges: list[GraphEdge] | None = None
    nextCursor: str | None = None
    indexVersion: str | None = None
    usage: dict[str, Any] | None = None


class RetrieveResult(_Strict):
    hits: list[Hit]
    nextCursor: str | None = None
    indexVersion: str | None = None
    usage: Usage | None = None
    rewrittenQuery: str | None = None
