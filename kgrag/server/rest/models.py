"""Request and response bodies of the Knowhere-compatible route, and its OpenAPI document."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, field_validator

ChunkType = Literal["text", "image", "table", "page"]

#: the ``data_type`` codes of the Knowhere API as chunk-type sets (None: every type);
#: ``chunk_types`` overrides it
DATA_TYPES: dict[int, tuple[str, ...] | None] = {
    1: None,
    2: ("text",),
    3: ("image",),
    4: ("table",),
    5: ("text", "image"),
    6: ("text", "table"),
    7: ("page",),
    8: ("text", "image", "table"),
}


class QueryBody(BaseModel):
    """``POST /v1/retrieval/query``."""

    model_config = ConfigDict(extra="ignore")

    namespace: str | None = Field(None, description="A served graph; blank or missing: default.")
    query: str = Field(min_length=1, description="The question.")
    top_k: StrictInt = Field(10, ge=1, description="Results wanted (clamped to the engine's maxK).")
    include_document_ids: list[str] | None = Field(
        None, description="Only these documents (null: all; []: none). Exclusions win."
    )
    exclude_document_ids: list[str] | None = Field(None, description="Never these documents.")
    data_type: StrictInt | None = Field(
        None,
        ge=1,
        le=8,
        description="Chunk type filter: 1=all, 2=text, 3=image, 4=table, 5=text+image, "
        "6=text+table, 7=page, 8=text+image+table. chunk_types overrides it.",
    )
    chunk_types: list[ChunkType] | None = Field(
        None, description="Chunk types to search (empty or null: all)."
    )
    signal_paths: list[str] | None = Field(
        None, description="Section-path fragments (case-insensitive substring match)."
    )
    filter_mode: str = Field(
        "delete", description="delete: drop chunks under a signal path; keep: keep only those."
    )
    rerank: StrictBool = Field(
        False, description="Rerank after RRF fusion (the engine's reranker; no LLM)."
    )
    threshold: float | None = Field(
        None, description="Minimum RRF score (of the fusion, before any rerank)."
    )
    internal_recall_k: StrictInt | None = Field(
        None, ge=1, description="Per-channel recall count (default top_k x 2)."
    )
    use_agentic: StrictBool | None = Field(
        None,
        description="Unset or true: the agentic route; false: classic map-unit BM25 "
        "(sparse recall over the chunks, RRF, optional rerank).",
    )
    agent_explore_model: str | None = Field(
        None, description="Recorded in the trace; the agentic route needs no model."
    )
    conversation_id: str | None = Field(None, description="Tracing only.")

    @field_validator("filter_mode")
    @classmethod
    def _mode(cls, value: str) -> str:
        mode = value.strip().lower()
        if mode not in ("delete", "keep"):
            raise ValueError("filter_mode must be 'delete' or 'keep'")
        return mode

    def chunk_type_set(self) -> frozenset[str] | None:
        """The chunk types in scope (None: all)."""
        if self.chunk_types:
            return frozenset(self.chunk_types)
        if self.chunk_types is None and self.data_type is not None:
            kinds = DATA_TYPES[self.data_type]
            return None if kinds is None else frozenset(kinds)
        return None

    def resolved_namespace(self, graphs: Any) -> str | None:
        """The served graph this body names, or None when there is none of that name."""
        name = (self.namespace or "").strip() or "default"
        if name in graphs.names:
            return name
        return graphs.default if name == "default" else None


class QueryBodyV2(QueryBody):
    """``POST /v2/retrieval/query``: v1 plus an optional LLM configuration."""

    llm_config: dict[str, Any] | None = Field(
        None, description="Accepted and ignored: this engine answers without an LLM."
    )
    llm: dict[str, Any] | None = Field(None, description="Alias of llm_config; ignored too.")


class EvidencePart(BaseModel):
    chunk_id: str
    document_id: str
    chunk_index: int
    text: str


class EvidenceGroup(BaseModel):
    label: str = Field(description="E1, E2, ... in rank order of each group's best chunk.")
    header: str = Field(description="[E<n>] [§ source_file_name / parent_path]")
    document_id: str
    source_file_name: str
    parent_path: str
    text: str
    parts: list[EvidencePart]


class ReferencedChunk(BaseModel):
    chunk_id: str
    document_id: str
    chunk_type: str
    section_path: str
    file_path: str


class ResultSource(BaseModel):
    document_id: str
    source_file_name: str
    section_path: str


class Result(BaseModel):
    chunk_id: str
    document_id: str
    content: str
    chunk_type: str
    score: float
    source: ResultSource


class TraceStep(BaseModel):
    step_index: int
    observation: str
    decision: str
    result: str
    latency_ms: float


class QueryResponse(BaseModel):
    namespace: str
    query: str
    router_used: Literal["agentic", "classic_topk", "small_corpus_all"]
    evidence: list[EvidenceGroup]
    evidence_text: str = Field("", description="Deprecated; always empty.")
    answer_text: str = Field("", description="Deprecated; always empty.")
    referenced_chunks: list[ReferencedChunk]
    results: list[Result]
    stop_reason: str
    failure_reason: str
    decision_trace: list[TraceStep]
    notes: list[str] = Field(default_factory=list)
    conversation_id: str | None = None


def openapi() -> dict[str, Any]:
    """The OpenAPI 3.1 document of the REST route."""
    from kgrag import __version__

    components: dict[str, Any] = {}

    def ref(model: type[BaseModel]) -> dict[str, str]:
        schema = model.model_json_schema(ref_template="#/components/schemas/{model}")
        for name, sub in schema.pop("$defs", {}).items():
            components[name] = sub
        components[model.__name__] = schema
        return {"$ref": f"#/components/schemas/{model.__name__}"}

    def operation(body: type[BaseModel], summary: str) -> dict[str, Any]:
        return {
            "summary": summary,
            "requestBody": {
                "required": True,
                "content": {"application/json": {"schema": ref(body)}},
            },
            "responses": {
                "200": {
                    "description": "Evidence, results and the decision trace.",
                    "content": {"application/json": {"schema": ref(QueryResponse)}},
                },
                "401": {"description": "Missing or wrong bearer token."},
                "404": {"description": "Unknown namespace."},
                "422": {"description": "Invalid body; detail[].loc names the field."},
            },
        }

    return {
        "openapi": "3.1.0",
        "info": {"title": "kgrag retrieval", "version": __version__},
        "paths": {
            "/v1/retrieval/query": {"post": operation(QueryBody, "Retrieve evidence (v1)")},
            "/v2/retrieval/query": {"post": operation(QueryBodyV2, "Retrieve evidence (v2)")},
        },
        "components": {"schemas": components},
    }
