"""``retrieve``: transform -> recall -> fuse -> rerank -> MMR -> recency ->
feedback -> minScore -> session dedup -> paginate -> pack -> cite (RCP/1 §7.7).

One :class:`Retriever` serves one graph version. Every step is
deterministic: ties break on row order and nothing samples, so the same
(query, params, indexVersion) gives the same hits whatever the seed, as long
as no integrity ``feedback`` (§7.16) arrives in between: hits reported as
poisoned or injected sink below the rest (:mod:`kgrag.rcp.feedback`).
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from kgrag.rcp import feedback as fb
from kgrag.rcp import sessions as state
from kgrag.rcp.params import RetrieveParams, parse_params
from kgrag.retrieval import filters, stages
from kgrag.text.tokens import cached_tokens

from ..config import RetrievalConfig
from ..encoders import Encoder
from ..errors import InvalidParams
from ..store import GraphReader
from .graph_hits import GraphHits
from .hits import HitBuilder
from .items import Source, prefetch
from .plan import FUSIONS, GRAPH_UNITS, MODES, TREE_STRATEGIES, Plan, plan_call
from .searches import GraphSearches
from .transform import EntityFacts
from .units import UNITS, canonical_rows, load_sources

if TYPE_CHECKING:
    from .rerank import Reranker

__all__ = ["FUSIONS", "MODES", "TREE_STRATEGIES", "Plan", "Progress", "Retriever"]

#: told of each stage: (stage, progress in [0, 1], message, partial result)
Progress = Callable[[str, float, "str | None", "dict[str, Any] | None"], None]
#: RRF weight of each transformed query's list against the original query's 1.0
TRANSFORM_WEIGHT = 0.2


class Retriever:
    """Chunk, document, community and tree-node retrieval over one graph version."""

    def __init__(
        self,
        reader: GraphReader,
        encoder: Encoder,
        config: RetrievalConfig,
        *,
        sessions: state.Sessions | None = None,
        feedback: fb.FeedbackStore | None = None,
    ) -> None:
        self.reader = reader
        self.encoder = encoder
        self.config = config
        self.sessions = sessions or state.Sessions()
        #: the graph's feedback (None: reports change nothing)
        self.feedback = feedback
        self.sources: Mapping[str, Source] = load_sources(reader)
        #: builds every hit of this version that a source row backs
        self.hits = HitBuilder(config)
        #: the graph searches of this version (local, paths, global, tree), built on first use
        self.searches = GraphSearches(reader, encoder, config)
        #: hits drawn from those searches: units path, subgraph and RAPTOR tree routes here,
        #: the graph method's ops in :mod:`kgrag.engine.graph`
        self.graph_hits = GraphHits(reader, encoder, self.sources, self.hits, self.searches)
        #: HyDE's facts about the entities a query names
        self.facts = EntityFacts(reader)
        self._fields: dict[str, str] | None = None
        self._rerankers: dict[str, Reranker] = {}
        self._rerank_lock = threading.Lock()
        #: every chunk hit-shaped, built by Engine.chunks on first use
        self.chunk_records: list[dict[str, Any]] | None = None
        self.page_records: list[dict[str, Any]] | None = None

    @property
    def fields(self) -> dict[str, str]:
        """The filterable fields of the chunks: from the version's manifest, where the
        write side put them; inferred from every chunk for a graph written before."""
        if self._fields is None:
            stored = self.reader.manifest.get("filterFields")
            if isinstance(stored, dict):
                self._fields = dict(stored)
            else:
                self._fields = filters.infer_fields(it.meta for it in self.sources["chunk"].items)
        return self._fields

    # -- capabilities ------------------------------------------------------------------

    def rerank_methods(self) -> list[str]:
        from .rerank import available_methods

        return available_methods(self.config.cross_encoder, self.encoder)

    def transform_methods(self) -> list[str]:
        from .transform import METHODS

        return list(METHODS)

    def reranker(self, method: str) -> Reranker:
        """The reranker of ``method``, loaded on first use and shared by the rerank
        stage of ``retrieve`` and the ``rerank`` method."""
        from .rerank import load_reranker

        with self._rerank_lock:
            if method not in self._rerankers:
                self._rerankers[method] = load_reranker(
                    method, cross_encoder_model=self.config.cross_encoder, encoder=self.encoder
                )
            return self._rerankers[method]

    @property
    def rerankers(self) -> Mapping[str, Reranker]:
        """The rerankers loaded so far, by method."""
        return dict(self._rerankers)

    def capabilities(self) -> dict[str, Any]:
        """The ``retrieve`` capability metadata (spec §6.1) this retriever honours."""
        levels = max(
            (
                int(level) + 1
                for key in ("communities_per_level", "tree_nodes_per_level")
                for level in self.reader.manifest.get(key, {})
            ),
            default=1,
        )
        return {
            "maxK": self.config.max_k,
            "modes": list(MODES),
            "fusion": list(FUSIONS),
            "mmr": True,
            "rerankBuiltin": bool(self.rerank_methods()),
            "units": list(UNITS),
            "levels": levels,
            "tokenBudget": True,
            "confidence": True,
            "deterministic": True,
            "snapshots": True,
            "scoreScale": "unbounded",
            "defaultMode": "hybrid",
        }

    # -- the call ----------------------------------------------------------------------

    def flags(self) -> Mapping[str, fb.Flag]:
        """The integrity reports a call starting now applies (taken once per call, so
        feedback recorded meanwhile never alters a call in flight)."""
        return self.feedback.flagged() if self.feedback is not None else {}

    def retrieve(self, raw: Any, *, progress: Progress | None = None) -> dict[str, Any]:
        """The RCP ``retrieve`` result for params ``raw``; ``progress`` (when given) is
        told of each stage, with the recall stage's best candidates as partial hits."""
        started = time.perf_counter()
        flags = self.flags()
        params = parse_params(raw)
        plan = self.plan(params)
        plan.flags = flags
        if plan.unit in GRAPH_UNITS or plan.strategy:
            return self._graph_units(plan, started)
        source = self.sources[plan.unit]
        queries, rewritten = self._transform(plan)
        eligible = self._eligible(plan, source)
        sims = source.matrix @ self.encoder.encode(queries).T  # (rows, queries), computed once
        dense_all = sims.max(axis=1) if len(source.ids) else np.zeros(0)
        ranked, stage_scores, candidates = self._recall(plan, source, queries, sims, eligible)
        if progress is not None:
            head = [{"id": source.ids[r], "score": round(float(s), 6)} for r, s in ranked[: plan.k]]
            progress("recall", 0.5, f"{candidates} candidates", {"hits": head})
        ranked, reranked = self._rerank(plan, source, ranked, stage_scores)
        if progress is not None and reranked:
            progress("rerank", 0.8, f"reranked {reranked}", None)
        if params.mmr is not None:
            ranked = stages.mmr(ranked, source.matrix, dense_all, params.mmr.lambda_, len(ranked))
        ranked = self._recency(plan, source, ranked, stage_scores)
        ranked = self._feedback(plan, source, ranked, stage_scores)
        if params.minScore is not None:
            ranked = [(r, s) for r, s in ranked if s >= params.minScore]
        if params.sessionId:
            seen = self.sessions.seen(params.sessionId)
            ranked = [(r, s) for r, s in ranked if source.ids[r] not in seen]
        hits, next_offset = self._page(plan, source, ranked, dense_all, stage_scores, raw)
        if params.sessionId:
            self.sessions.add(params.sessionId, [h["id"] for h in hits])
        result: dict[str, Any] = {"hits": hits, "indexVersion": self.reader.index_version}
        if next_offset is not None:
            key = state.request_key(raw if isinstance(raw, dict) else params.model_dump())
            result["nextCursor"] = state.make_cursor(next_offset, key, self.reader.index_version)
        result["usage"] = {
            "candidates": candidates,
            "reranked": reranked,
            "latencyMs": round((time.perf_counter() - started) * 1000, 1),
            "tokens": sum(cached_tokens(h.get("text", "")) for h in hits)
            if params.includeText
            else 0,
        }
        if plan.notes:
            result["usage"]["notes"] = plan.notes
        if rewritten is not None:
            result["rewrittenQuery"] = rewritten
        return result

    # -- planning ------------------------------------------------------------------------

    def plan(self, p: RetrieveParams) -> Plan:
        """What a call with params ``p`` will do here (:mod:`kgrag.retrieval.plan`)."""
        return plan_call(
            p,
            self.config,
            rerank_methods=self.rerank_methods,
            transform_methods=self.transform_methods,
        )

    def _graph_units(self, plan: Plan, started: float) -> dict[str, Any]:
        """``retrieve`` of unit path or subgraph (local search), or of tree nodes by a
        RAPTOR strategy."""
        if plan.strategy:
            hits = self.graph_hits.tree_hits(
                plan.hit_options(),
                plan.strategy,
                plan.query,
                plan.k,
                level=plan.level,
                token_budget=plan.p.tokenBudget,
                beam=plan.p.beam,
            )
        else:
            hits = self.graph_hits.units(plan.unit, plan.query, plan.k, plan.p.includeText)
        hits, sunk = fb.sink_hits(hits, plan.flags)
        if sunk:
            plan.notes.append(f"{sunk} hits down-weighted by feedback")
        hits = self.sessions.fresh(plan.p.sessionId, hits)
        usage: dict[str, Any] = {
            "candidates": len(self.sources["chunk"].ids),
            "reranked": 0,
            "latencyMs": round((time.perf_counter() - started) * 1000, 1),
            "tokens": sum(cached_tokens(h.get("text", "")) for h in hits),
        }
        if plan.notes:
            usage["notes"] = plan.notes
        return {"hits": hits, "indexVersion": self.reader.index_version, "usage": usage}

    def _transform(self, plan: Plan) -> tuple[list[str], str | None]:
        """The queries recall runs, and the rewritten query to report."""
        if not plan.rewrite:
            return [plan.query], None
        from kgrag.text.nlp import load_spacy

        from .transform import transform

        out = transform(
            plan.query,
            plan.rewrite,
            nlp=load_spacy(self.reader.manifest.get("models", {}).get("spacy", "auto")),
            facts=self.facts,
            n=3,
        )
        extra = list(out.queries)
        if plan.rewrite == "hyde" and out.hypothetical:
            extra = [out.hypothetical]
        rewritten = " | ".join(extra)
        # the original query always runs too: a transform adds evidence, it never replaces the ask
        return list(dict.fromkeys([plan.query, *extra])), rewritten

    def _eligible(self, plan: Plan, source: Source) -> np.ndarray:
        """Rows that may be returned: the level, no carried-down copies, the filter."""
        rows = source.rows(plan.level)
        if source.unit == "community" and plan.level is None:
            rows = np.intersect1d(rows, canonical_rows(source, self.reader))
        if plan.p.filter is not None and source.unit in ("chunk", "document", "page"):
            predicate = filters.compile_filter(plan.p.filter, self.fields)
            if predicate is not None:
                rows = np.array(
                    [r for r in rows if predicate(source.items[r].meta)], dtype=np.int64
                )
        return rows

    # -- stages ----------------------------------------------------------------------------

    def _recall(
        self,
        plan: Plan,
        source: Source,
        queries: list[str],
        sims: np.ndarray,
        eligible: np.ndarray,
    ) -> tuple[stages.Ranked, dict[str, dict[int, float]], int]:
        """Dense, sparse or hybrid recall for every query, fused into one list."""
        scores: dict[str, dict[int, float]] = {"dense": {}, "sparse": {}}
        every_row = len(eligible) == len(source.ids)  # no filter: nothing to screen out
        allowed = set() if every_row else set(eligible.tolist())
        per_query: dict[str, stages.Ranked] = {}
        for i, q in enumerate(queries):
            lists: dict[str, stages.Ranked] = {}
            if plan.mode in ("dense", "hybrid"):
                lists["dense"] = stages.top_rows(sims[:, i], eligible, plan.candidate_k)
            if plan.mode in ("sparse", "hybrid"):
                found = source.sparse(q, plan.candidate_k * (4 if plan.p.filter else 1))
                kept = found if every_row else [(r, s) for r, s in found if r in allowed]
                lists["sparse"] = kept[: plan.candidate_k]
            for name, ranked in lists.items():
                for r, s in ranked:
                    scores[name][r] = max(scores[name].get(r, -math.inf), s)
            per_query[f"q{i}"] = (
                self._fuse(plan, lists) if len(lists) > 1 else next(iter(lists.values()))
            )
        if len(per_query) == 1:
            ranked = next(iter(per_query.values()))
        else:
            weights = {name: (1.0 if name == "q0" else TRANSFORM_WEIGHT) for name in per_query}
            ranked = stages.fuse(per_query, "rrf", rrf_k=self._rrf_k(plan), weights=weights)
        if plan.mode == "hybrid" or len(per_query) > 1:
            scores["fused"] = dict(ranked)
        candidates = len({r for lst in per_query.values() for r, _ in lst})
        return ranked[: plan.candidate_k], scores, candidates

    def _rrf_k(self, plan: Plan) -> int:
        return plan.p.fusion.rrfK if plan.p.fusion else 60

    def _fuse(self, plan: Plan, lists: dict[str, stages.Ranked]) -> stages.Ranked:
        weights = plan.p.fusion.weights if plan.p.fusion else None
        if weights is not None and not set(weights) <= {"dense", "sparse"}:
            raise InvalidParams(
                "fusion.weights keys must be 'dense' and/or 'sparse'", field="fusion.weights"
            )
        return stages.fuse(lists, plan.fusion, rrf_k=self._rrf_k(plan), weights=weights)

    def _rerank(
        self, plan: Plan, source: Source, ranked: stages.Ranked, scores: dict[str, dict[int, float]]
    ) -> tuple[stages.Ranked, int]:
        if not plan.rerank or not ranked:
            return ranked, 0
        reranker = self.reranker(plan.rerank)
        head = ranked[: plan.top_n]
        prefetch(source, [r for r, _ in head])
        values = reranker.score(plan.query, [source.items[r].text for r, _ in head])
        scores["rerank"] = {r: float(v) for (r, _), v in zip(head, values, strict=True)}
        order = sorted(range(len(head)), key=lambda i: (-values[i], head[i][0]))
        return [(head[i][0], float(values[i])) for i in order], len(head)

    def _recency(
        self, plan: Plan, source: Source, ranked: stages.Ranked, scores: dict[str, dict[int, float]]
    ) -> stages.Ranked:
        rec = plan.p.recency
        if rec is None or not ranked:
            return ranked
        if source.unit not in ("chunk", "document", "page"):
            return ranked  # refused or noted by _plan
        if self.fields.get(rec.field) not in ("date", "int", "float"):
            raise InvalidParams(
                f"recency.field {rec.field!r} is not a date field of this graph",
                field="recency.field",
            )
        factors = stages.recency_factors(
            [source.items[r].meta for r, _ in ranked], rec.field, rec.halfLifeDays
        )
        scores["recency"] = {r: float(f) for (r, _), f in zip(ranked, factors, strict=True)}
        out = [(r, s * float(f)) for (r, s), f in zip(ranked, factors, strict=True)]
        return sorted(out, key=lambda rs: (-rs[1], rs[0]))

    def _feedback(
        self, plan: Plan, source: Source, ranked: stages.Ranked, scores: dict[str, dict[int, float]]
    ) -> stages.Ranked:
        """Sink candidates reported as poisoned or injected below every other one."""
        if not plan.flags:
            return ranked
        flagged = {r for r, _ in ranked if source.ids[r] in plan.flags}
        if not flagged:
            return ranked
        ranked, shift = fb.sink(ranked, flagged)
        scores["feedback"] = dict.fromkeys(flagged, -shift)
        plan.notes.append(f"{len(flagged)} candidates down-weighted by feedback")
        return ranked

    def _page(
        self,
        plan: Plan,
        source: Source,
        ranked: stages.Ranked,
        dense: np.ndarray,
        scores: dict[str, dict[int, float]],
        raw: Any,
    ) -> tuple[list[dict[str, Any]], int | None]:
        offset = 0
        if plan.p.cursor:
            key = state.request_key(raw if isinstance(raw, dict) else plan.p.model_dump())
            offset = state.read_cursor(plan.p.cursor, key, self.reader.index_version)
        rest = ranked[offset:]
        prefetch(source, [r for r, _ in rest[: plan.k]])
        texts = [source.items[r].text for r, _ in rest[: plan.k]]
        n = stages.pack(texts, [cached_tokens(t) for t in texts], plan.k, plan.p.tokenBudget)
        options = plan.hit_options()
        hits = [self.hits.hit(options, source, r, s, dense, scores) for r, s in rest[:n]]
        more = offset + n < len(ranked)
        return hits, (offset + n if more else None)
