"""The RCP/1 ``retrieve`` parameters (spec §7.7) as one validated pydantic model.

Names are the spec's; the aliases ``transform`` -> ``rewrite``, ``session`` ->
``sessionId`` and ``includeVector`` -> ``includeVectors`` are accepted too.
Unknown fields are ignored (spec §4.6). A structurally invalid value raises
:class:`InvalidParams` with ``data.field`` naming its path; values above a
limit are clamped, never rejected.
"""

from __future__ import annotations

from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, ValidationError

from kgrag.errors import InvalidParams

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
    from kgrag.errors import Unsupported

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
