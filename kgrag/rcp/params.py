"""The params of every RCP/1 method this engine answers, as validated pydantic models.

``retrieve`` (spec §7.7), ``graph`` (§7.9), ``embed`` (§7.3), ``rerank`` (§7.6),
``query/transform`` (§7.8), ``index/add`` and ``index/delete`` (§7.10, §7.11),
``feedback`` (§7.16), ``memory/build`` and ``memory/recall`` (§7.17).

Names are the spec's; for ``retrieve`` the aliases ``transform`` -> ``rewrite``,
``session`` -> ``sessionId`` and ``includeVector`` -> ``includeVectors`` are
accepted too. Unknown fields are ignored (spec §4.6). A structurally invalid
value raises :class:`InvalidParams` with ``data.field`` naming its path
(:func:`validate`); values above a limit are clamped by the method, never
rejected, except where the spec makes a batch too large -32013.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, TypeVar

from pydantic import (
    AliasChoices,
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictInt,
    StrictStr,
    ValidationError,
)

from kgrag.errors import InvalidParams, PayloadTooLarge, Unsupported

ALIASES = {"transform": "rewrite", "session": "sessionId", "includeVector": "includeVectors"}
Number = StrictInt | float


class _Wire(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True, populate_by_name=True)


class Fusion(_Wire):
    method: str = "rrf"
    weights: dict[str, float] | None = None
    rrfK: StrictInt = Field(60, ge=1)
    alpha: float | None = Field(None, ge=0, le=1)


class Rerank(_Wire):
    method: str
    model: str | None = None
    topN: StrictInt | None = Field(None, ge=1)


class Mmr(_Wire):
    lambda_: float = Field(0.5, alias="lambda", ge=0, le=1)


class Recency(_Wire):
    field: str
    halfLifeDays: float = Field(gt=0)


class RetrieveParams(_Wire):
    query: str | dict[str, Any] | list[dict[str, Any]]
    k: StrictInt = Field(10, ge=1)
    mode: str | None = None
    modality: str = "text"
    candidateK: StrictInt | None = Field(None, ge=1)
    fusion: Fusion | None = None
    rerank: Rerank | Literal[False] | None = None
    mmr: Mmr | None = None
    rewrite: str | Literal[False] | None = None
    filter: dict[str, Any] | None = None
    minScore: Number | None = None
    recency: Recency | None = None
    unit: str = "chunk"
    level: StrictInt | None = Field(None, ge=0)
    tokenBudget: StrictInt | None = Field(None, ge=1)
    sessionId: str | None = None
    includeText: StrictBool = True
    includeVectors: StrictBool = False
    seed: StrictInt | None = None
    indexVersion: str | None = None
    strict: StrictBool = True
    cursor: str | None = None
    # kgrag extensions: RAPTOR retrieval over unit tree-node
    strategy: str | None = None  # flat (by level) | collapsed | traverse
    beam: StrictInt = Field(3, ge=1)

    def query_text(self) -> str:
        """The query as text: a string, or the text of its Content blocks."""
        if isinstance(self.query, str):
            return self.query
        blocks: list[dict[str, Any]] = self.query if isinstance(self.query, list) else [self.query]
        texts = []
        for i, block in enumerate(blocks):
            if block.get("type") != "text" or not isinstance(block.get("text"), str):
                raise _unsupported_block(block, i)
            texts.append(block["text"])
        return " ".join(texts)


def _unsupported_block(block: dict[str, Any], index: int) -> Exception:
    kind = block.get("type", "?")
    return Unsupported(
        f"query block {index} has type {kind!r}; this engine retrieves text only",
        option="modality",
    )


def _union_member(part: Any) -> bool:
    """pydantic names union members in error paths ("Rerank", "literal[False]")."""
    text = str(part)
    return (
        text[:1].isupper() or "[" in text or text in ("str", "int", "float", "bool", "dict", "list")
    )


M = TypeVar("M", bound=BaseModel)


def validate(model: type[M], data: dict[str, Any]) -> M:
    """``model`` from ``data``; the first problem raises InvalidParams naming its field."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"] if not _union_member(p)) or "params"
        raise InvalidParams(f"{where}: {first['msg']}", field=where) from exc


def parse_params(raw: Any) -> RetrieveParams:
    """Validate a ``retrieve`` params object (a dict, as decoded from JSON)."""
    if isinstance(raw, RetrieveParams):
        return raw
    if not isinstance(raw, dict):
        raise InvalidParams("params must be an object", field="params")
    data = dict(raw)
    for alias, name in ALIASES.items():
        if alias in data:
            value = data.pop(alias)
            data.setdefault(name, value)
    if "query" not in data:
        raise InvalidParams("query is required", field="query")
    params = validate(RetrieveParams, data)
    if isinstance(params.query, str) and not params.query.strip():
        raise InvalidParams("query must not be empty", field="query")
    return params


# -- graph (§7.9) --------------------------------------------------------------------------

#: the ``graph`` ops this engine offers
GRAPH_OPS = ("local", "global", "drift", "communities", "neighbors")


class GraphParams(BaseModel):
    """``graph`` params: the spec's, plus ``unit`` (local), ``depth`` and ``followups``
    (drift) and ``cursor`` (communities)."""

    model_config = ConfigDict(extra="ignore", frozen=True)
    op: str
    query: str | None = None
    k: StrictInt | None = Field(None, ge=1)
    seedIds: list[str] | None = None
    hops: StrictInt = Field(1, ge=1)
    level: StrictInt | None = Field(None, ge=0)
    unit: str | list[str] | None = None
    depth: StrictInt = Field(1, ge=1)
    followups: StrictInt = Field(3, ge=0, le=10)
    sessionId: str | None = None
    indexVersion: str | None = None
    cursor: str | None = None
    includeText: StrictBool = True
    strict: StrictBool = True


def parse_graph_params(raw: Any) -> GraphParams:
    """Validate a ``graph`` params object: a known op, and a query for the searches."""
    if not isinstance(raw, dict):
        raise InvalidParams("params must be an object", field="params")
    if "op" not in raw:
        raise InvalidParams("op is required", field="op")
    p = validate(GraphParams, raw)
    if p.op not in GRAPH_OPS:
        offered = ", ".join(GRAPH_OPS)
        raise Unsupported(f"graph op {p.op!r} is not offered; offered: {offered}", option="op")
    if p.op in ("local", "global", "drift") and not (p.query or "").strip():
        raise InvalidParams(f"op {p.op} needs a non-empty query", field="query")
    return p


# -- the tool methods: embed, rerank, query/transform, memory (§7.3, §7.6, §7.8, §7.17) ------


class _Tool(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


class EmbedParams(_Tool):
    inputs: list[Any] = Field(validation_alias=AliasChoices("inputs", "texts"))
    kind: Literal["query", "document"] | None = None  # MiniLM is symmetric: no effect
    encoding: str = "json"


class RerankParams(_Tool):
    query: Any
    passages: list[Any] = Field(validation_alias=AliasChoices("passages", "documents"))
    method: str | None = None
    topN: StrictInt | None = Field(None, ge=1)


class TransformParams(_Tool):
    query: Any
    method: str
    n: StrictInt = Field(3, ge=1)


class MemoryBuildParams(_Tool):
    documents: list[Any] | None = None
    memoryId: str | None = None
    scope: str = "global"


class MemoryRecallParams(_Tool):
    query: Any
    memoryId: str | None = None
    sessionId: str | None = None
    n: StrictInt = Field(5, ge=1)


# -- index/add, index/delete (§7.10, §7.11) -------------------------------------------------


class _Index(BaseModel):
    model_config = ConfigDict(extra="ignore")


class AddParams(_Index):
    documents: list[Any]
    chunk: StrictBool = True
    contextual: StrictBool = False


class DeleteParams(_Index):
    ids: list[str]


# -- feedback (§7.16) -----------------------------------------------------------------------

#: signals accepted in one call (RCP §15.5); more is -32013
MAX_SIGNALS = 1000
MAX_ID_CHARS = 1024

Id = Annotated[StrictStr, Field(min_length=1, max_length=MAX_ID_CHARS)]
Reward = Annotated[float, Field(strict=True, ge=-1, le=1, allow_inf_nan=False)]


class Signal(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)
    hitId: Id
    used: StrictBool | None = None
    cited: StrictBool | None = None
    helpful: StrictBool | None = None
    reward: Reward | None = None
    poisonSuspected: StrictBool | None = None
    injectionSuspected: StrictBool | None = None


class FeedbackParams(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)
    sessionId: Id | None = None
    query: StrictStr | None = None
    signals: list[Signal]


def parse_feedback(raw: Any) -> FeedbackParams:
    """Validate ``feedback`` params; the first problem names its field (``signals.2.reward``)."""
    if not isinstance(raw, dict):
        raise InvalidParams("params must be an object", field="params")
    signals = raw.get("signals")
    if signals is None:
        raise InvalidParams("signals is required", field="signals")
    if isinstance(signals, list) and len(signals) > MAX_SIGNALS:
        raise PayloadTooLarge(
            f"at most {MAX_SIGNALS} signals per call, got {len(signals)}",
            field="signals",
            limit=MAX_SIGNALS,
        )
    return validate(FeedbackParams, raw)
