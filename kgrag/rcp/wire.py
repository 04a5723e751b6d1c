"""Wire shapes of the RCP/1 results this engine returns (spec §7), as pydantic models:
the server's boundary.

The engine builds plain dicts for speed; these models are the contract the
server holds them to. Unknown fields are rejected here, so a typo in the engine
cannot leak onto the wire unnoticed. The server's method table names each
method's result model and :func:`check_result` holds a result
to it on the way out: always the cheap part (a result object whose top-level
fields the model declares, a few hundred nanoseconds), and the whole model when
the server runs with ``KGRAG_CHECK_RESULTS=1`` (the test suite does). A check
never changes a response: a result that fails it is logged, or, in the full
check, refused as an internal error.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

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
    excerpt: str | None = None
    score: float | None = None
    title: str | None = None
    rating: float | None = None
    leaves: list[str] | int | None = None
    parent: str | None = None
    children: list[str] | None = None
    size: int | None = None
    leafCount: int | None = None
    members: list[str] | None = None


class GraphCitation(_Strict):
    """One sentence of the global summary: the community it cites, the passage it quotes."""

    text: str
    community: str
    passage: str


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
    citations: list[GraphCitation] | None = None
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


class EmbedResult(_Strict):
    """``embed`` (§7.3): JSON vectors, or f32-base64 blobs with their encoding."""

    vectors: list[list[float]] | list[str]
    encoding: str | None = None
    dimension: int | None = None


class RerankScore(_Strict):
    index: int = Field(ge=0)
    score: float


class RerankResult(_Strict):
    """``rerank`` (§7.6): a score per passage; ``order`` and ``results`` best first."""

    scores: list[float]
    order: list[int]
    results: list[RerankScore]


class TransformResult(_Strict):
    """``query/transform`` (§7.8)."""

    queries: list[str]
    hypothetical: str | None = None


class IndexAddResult(_Strict):
    """``index/add`` (§7.10): the documents' ids in input order."""

    ids: list[str]
    chunks: int
    indexVersion: str | None = None


class IndexDeleteResult(_Strict):
    """``index/delete`` (§7.11)."""

    deleted: int
    indexVersion: str | None = None


class FeedbackResult(_Strict):
    """``feedback`` (§7.16)."""

    accepted: int


class MemoryBuildResult(_Strict):
    """``memory/build`` (§7.17)."""

    memoryId: str
    tokens: int


class Clue(_Strict):
    query: str
    seedIds: list[str]
    weight: float


class MemoryRecallResult(_Strict):
    """``memory/recall`` (§7.17): entry points into the graph, and the passages."""

    clues: list[Clue]
    hits: list[Hit]


class CatalogResult(_Strict):
    """``catalog/list`` (§7.13)."""

    engines: list[dict[str, Any]]


#: each model's field names, for the cheap check
_DECLARED: dict[type[BaseModel], frozenset[str]] = {}


def check_result(model: type[BaseModel], result: Any, *, whole: bool = False) -> str | None:
    """What is wrong with ``result`` as a ``model``, or None. Cheap unless ``whole``:
    the result is an object and the model declares each of its fields; with
    ``whole``, the result validates against the model, nested shapes and all."""
    if not isinstance(result, dict):
        return f"the result is a {type(result).__name__}, not an object"
    declared = _DECLARED.get(model)
    if declared is None:
        declared = _DECLARED.setdefault(model, frozenset(model.model_fields))
    if not declared.issuperset(result):
        unknown = sorted(result.keys() - declared)
        return f"undeclared result fields: {', '.join(unknown)}"
    if whole:
        try:
            model.model_validate(result)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"]) or "result"
            return f"{where}: {first['msg']}"
    return None
