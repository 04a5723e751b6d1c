"""The three routers of the REST route, the scope they share, and the response shape."""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import rcp

from kgrag.engine import explore
from kgrag.errors import KgragError
from kgrag.server.rest.evidence import chunk_type_of, doc_of, file_of, response, section_of
from kgrag.server.rest.models import QueryBody, QueryBodyV2

CHUNK_TYPES = ("text", "image", "table", "page")


def _doc_ids(ids: Iterable[str]) -> frozenset[str]:
    """Client document ids as stored ids: ours carry a ``d:`` prefix, accepted without."""
    return frozenset(i if i.startswith("d:") else f"d:{i}" for i in ids)


@dataclass(frozen=True)
class Scope:
    """Which chunks a request may see: documents, chunk types, section paths."""

    include: frozenset[str] | None
    exclude: frozenset[str]
    types: frozenset[str] | None
    paths: tuple[str, ...]
    keep: bool

    @classmethod
    def of(cls, body: QueryBody) -> Scope:
        include = body.include_document_ids
        return cls(
            None if include is None else _doc_ids(include),
            _doc_ids(body.exclude_document_ids or ()),
            body.chunk_type_set(),
            tuple(p.casefold() for p in (body.signal_paths or ()) if p.strip()),
            body.filter_mode == "keep",
        )

    @property
    def post_filters(self) -> bool:
        """Whether some of the scope can only be checked after recall."""
        return self.types is not None or bool(self.paths)

    def admits(self, hit: dict[str, Any]) -> bool:
        doc = doc_of(hit)
        if doc in self.exclude or (self.include is not None and doc not in self.include):
            return False
        if self.types is not None and chunk_type_of(hit) not in self.types:
            return False
        if self.paths:  # signal paths match the file's path and the section path
            where = f"{file_of(hit)} / {section_of(hit)}".casefold()
            under = any(p in where for p in self.paths)
            return under if self.keep else not under
        return True

    def rcp_filter(self) -> dict[str, Any] | None:
        """The document part of the scope as an RCP filter, applied before recall."""
        leaves = []
        if self.include is not None:
            leaves.append({"field": "docId", "op": "in", "value": sorted(self.include)})
        if self.exclude:
            leaves.append({"field": "docId", "op": "nin", "value": sorted(self.exclude)})
        if not leaves:
            return None
        return leaves[0] if len(leaves) == 1 else {"and": leaves}


def _rerank_method(engine: Any) -> str | None:
    rerank = engine.capabilities().get("rerank")
    return rerank["methods"][0] if rerank else None


def recall(
    engine: Any,
    body: QueryBody,
    scope: Scope,
    recall_k: int,
    *,
    k: int | None = None,
    mode: str = "hybrid",
) -> list[dict[str, Any]]:
    """Recall by ``mode`` inside the scope (documents filtered before recall, the rest
    after); hybrid hits carry their RRF score as ``scores.rrf``."""
    max_k = engine.config.max_k
    want = k if k is not None else recall_k
    if scope.post_filters:  # recall wider so the post-filter still leaves enough
        want = min(max_k, max(want * 4, 50))
    params: dict[str, Any] = {"query": body.query, "k": want, "mode": mode}
    params["candidateK"] = max(want, 100)
    found = scope.rcp_filter()
    if found is not None:
        params["filter"] = found
    hits: list[dict[str, Any]] = []
    if scope.types is None or scope.types - {"page"}:
        hits = [h for h in engine.retrieve(params)["hits"] if scope.admits(h)]
    if scope.types is not None and "page" in scope.types:  # pages are a unit of their own
        pages = engine.retrieve(params | {"unit": "page"})["hits"]
        hits = sorted(hits + [h for h in pages if scope.admits(h)], key=lambda h: -h["score"])
    if mode == "hybrid":
        for h in hits:
            h["scores"] = h.get("scores", {}) | {"rrf": h["score"]}
    return hits


def classic_bm25(engine: Any, body: QueryBody, scope: Scope, recall_k: int) -> list[dict[str, Any]]:
    """The classic router: BM25 over the chunks (the map units), ``recall_k`` of them,
    fused by RRF (the rcp SDK's, as with several channels), then reranked if asked."""
    found = recall(engine, body, scope, recall_k, mode="sparse")
    by_id = {h["id"]: h for h in found}
    fused = rcp.rrf_fuse({"bm25": [{"id": h["id"]} for h in found]})
    hits = []
    for f in fused:
        rrf = round(float(f["meta"]["fusedScore"]), 6)
        hit = by_id[f["id"]]
        hits.append(hit | {"score": rrf, "scores": hit.get("scores", {}) | {"rrf": rrf}})
    return rerank_fused(engine, body, hits)


def rerank_fused(engine: Any, body: QueryBody, hits: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``hits`` (fused) reranked by the engine's reranker when the body asks for it:
    the rerank score becomes the score; ``scores.rrf`` keeps the fusion's."""
    if not body.rerank or not hits or not (method := _rerank_method(engine)):
        return hits
    passages = [h.get("text", "") for h in hits]
    scored = engine.rerank({"query": body.query, "passages": passages, "method": method})
    out = []
    for i in scored["order"]:
        hit, value = hits[i], scored["scores"][i]
        out.append(hit | {"score": value, "scores": hit.get("scores", {}) | {"rerank": value}})
    return out


def rrf_score(hit: dict[str, Any]) -> float:
    """The RRF score a hit had after fusion (``threshold`` is a minimum of it)."""
    return float((hit.get("scores") or {}).get("rrf", hit["score"]))


def _trace(index: int, observation: str, decision: str, result: str, started: float) -> dict:
    return {
        "step_index": index,
        "observation": observation,
        "decision": decision,
        "result": result,
        "latency_ms": round((time.perf_counter() - started) * 1000, 1),
    }


@dataclass
class Routed:
    """What a router found, and how its run went."""

    router: str
    hits: list[dict[str, Any]]
    stop: str
    failure: str = ""
    trace: list[dict[str, Any]] = field(default_factory=list)


def answer(engine: Any, namespace: str, body: QueryBody) -> dict[str, Any]:
    """The response to ``body`` over ``engine`` (the graph of ``namespace``)."""
    started = time.perf_counter()
    notes: list[str] = []
    if isinstance(body, QueryBodyV2) and (body.llm_config or body.llm):
        notes.append("an LLM configuration was sent and ignored: this server answers without one")
    max_k = engine.config.max_k
    top_k = min(body.top_k, max_k)
    if top_k < body.top_k:
        notes.append(f"top_k clamped to {max_k}")
    recall_k = min(max(body.internal_recall_k or 2 * top_k, top_k), max_k)
    if body.agent_explore_model:
        notes.append(f"agent_explore_model {body.agent_explore_model!r} recorded; none is called")
    scope = Scope.of(body)
    scoped = [c for c in engine.chunks() if scope.admits(c)]
    if scope.types is not None and "page" in scope.types:
        scoped += [p for p in engine.pages() if scope.admits(p)]
    if len(scoped) <= top_k:
        routed = _small_corpus(engine, body, scope, scoped, top_k, started)
    elif body.use_agentic is False:
        routed = _classic(engine, body, scope, len(scoped), recall_k, started)
    else:
        routed = _agentic(engine, body, scope, top_k, recall_k)
    hits = routed.hits
    if body.threshold is not None:
        hits = [h for h in hits if rrf_score(h) >= body.threshold]
    hits = hits[:top_k]
    return response(namespace, body, routed, hits, notes)


def _small_corpus(
    engine: Any,
    body: QueryBody,
    scope: Scope,
    scoped: list[dict[str, Any]],
    top_k: int,
    started: float,
) -> Routed:
    """Router ``small_corpus_all``: every chunk in scope, ranked."""
    hits = _all_ranked(engine, body, scope, scoped)
    step = _trace(
        0,
        f"{len(scoped)} chunks in scope, top_k {top_k}",
        "return every chunk in scope, ranked by hybrid relevance",
        f"{len(hits)} chunks",
        started,
    )
    return Routed("small_corpus_all", hits, "small_corpus", trace=[step])


def _classic(
    engine: Any, body: QueryBody, scope: Scope, in_scope: int, recall_k: int, started: float
) -> Routed:
    """Router ``classic_topk``: map-unit BM25, RRF, and a rerank if asked."""
    hits = classic_bm25(engine, body, scope, recall_k)
    step = _trace(
        0,
        f"{in_scope} chunks in scope",
        "classic map-unit BM25, RRF" + (" then rerank" if body.rerank else ""),
        f"{len(hits)} chunks recalled (internal_recall_k {recall_k})",
        started,
    )
    return Routed("classic_topk", hits, "completed", trace=[step])


def _agentic(engine: Any, body: QueryBody, scope: Scope, top_k: int, recall_k: int) -> Routed:
    """Router ``agentic``: the graph exploration; classic recall when it fails."""
    trace: list[dict[str, Any]] = []
    try:
        run = explore(engine, body, scope, top_k, recall_k, classic=recall)
        hits, trace = run.hits, run.trace
        for h in hits:  # the exploration's fused score is its RRF score
            h["scores"] = h.get("scores", {}) | {"rrf": h["score"]}
        if body.rerank and hits:
            t0 = time.perf_counter()
            hits = rerank_fused(engine, body, hits)
            trace.append(_trace(len(trace), f"{len(hits)} fused chunks", "rerank", "reordered", t0))
        return Routed("agentic", hits, run.stop_reason, run.failure_reason, trace)
    except KgragError as exc:  # the exploration failed: answer with classic recall
        hits = classic_bm25(engine, body, scope, recall_k)
        failure = f"agentic route failed ({exc.message}); classic results"
        return Routed("agentic", hits, "failure", failure, trace)


def _all_ranked(
    engine: Any, body: QueryBody, scope: Scope, scoped: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """Every scoped chunk, the ones recall finds first (in its order), then the rest."""
    if not scoped:
        return []
    ranked = rerank_fused(engine, body, recall(engine, body, scope, len(scoped), k=len(scoped)))
    seen = {h["id"] for h in ranked}
    floor = min((h["score"] for h in ranked), default=0.0)
    rest = [c | {"score": floor} for c in scoped if c["id"] not in seen]
    return ranked + rest
