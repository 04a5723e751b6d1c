"""The RCP/1 ``graph`` method (spec §7.9).

Ops: ``local`` (PPR + bridge hop; hits of units chunk, node, triplet and path,
each with its provenance), ``global`` (community reports at a level and an
extractive summary citing them), ``drift`` (primer, follow-ups, a local
search each), ``communities`` (the hierarchy, paginated) and ``neighbors``
(the graph around ``seedIds``). The searches are the version's
(:class:`~kgrag.retrieval.searches.GraphSearches`, built on first use and
shared by every call on it) and the hits are drawn by
:class:`~kgrag.retrieval.graph_hits.GraphHits`, as for ``retrieve``'s units
path and subgraph. Hits reported through ``feedback`` as poisoned or injected
sink below the rest of their unit.
"""

from __future__ import annotations

import time
from typing import Any

from kgrag.errors import InvalidParams, Unsupported
from kgrag.rcp import sessions as state
from kgrag.rcp.feedback import sink_hits
from kgrag.rcp.params import GRAPH_OPS, GraphParams, parse_graph_params
from kgrag.retrieval.graph_hits import LOCAL_UNITS, render_path
from kgrag.retrieval.hits import HitOptions
from kgrag.retrieval.pipeline import Retriever

__all__ = ["LOCAL_UNITS", "MAX_DEPTH", "MAX_HOPS", "OPS", "GraphOps", "render_path"]

OPS = GRAPH_OPS
MAX_HOPS = 3  # neighbors: hops are clamped here (RCP §15.5, unbounded traversal)
DEFAULT_K = {"local": 10, "global": 5, "drift": 10, "communities": 50, "neighbors": 100}
MAX_DEPTH = 3


class GraphOps:
    """The ``graph`` method over one :class:`~kgrag.retrieval.pipeline.Retriever`'s
    version."""

    def __init__(self, retriever: Retriever) -> None:
        self.retriever = retriever

    def run(self, raw: Any) -> dict[str, Any]:
        started = time.perf_counter()
        retriever = self.retriever
        flags = retriever.flags()  # once, before any work: later feedback waits for the next call
        p = parse_graph_params(raw)
        k = min(p.k or DEFAULT_K[p.op], retriever.config.max_k)
        result: dict[str, Any] = getattr(self, f"_op_{p.op}")(p, k, raw)
        result["indexVersion"] = retriever.reader.index_version
        usage = result.setdefault("usage", {})
        if result.get("hits"):
            result["hits"], sunk = sink_hits(result["hits"], flags, by_unit=True)
            if sunk:
                usage.setdefault("notes", []).append(f"{sunk} hits down-weighted by feedback")
        usage["latencyMs"] = round((time.perf_counter() - started) * 1000, 1)
        return result

    def _op_local(self, p: GraphParams, k: int, raw: Any) -> dict[str, Any]:
        units = self._units(p)
        # path hits skip passages their search only names: they look twice as deep, as
        # retrieve's unit path does (the best k passages are the same either way)
        depth = k * 2 if "path" in units else k
        graph_hits = self.retriever.graph_hits
        call = graph_hits.local(
            str(p.query), depth, records=k if "chunk" in units else 0, quotes=p.includeText
        )
        hits = graph_hits.local_hits(_options(p), call, units, k)
        hits = self._dedup(p, hits)
        return {"hits": hits, "usage": {"candidates": len(self.retriever.sources["chunk"].ids)}}

    def _op_global(self, p: GraphParams, k: int, raw: Any) -> dict[str, Any]:
        res = self.retriever.searches.global_search().search(str(p.query), k, p.level)
        communities = [
            {
                "id": c.id,
                "level": c.level,
                "title": c.title,
                "summary": c.summary,
                "score": round(c.score, 6),
                "rating": c.rating,
                "leaves": list(c.leaves),
                # the community's report for this question (see GlobalSearch's excerpt)
                **({"excerpt": c.excerpt} if c.excerpt else {}),
            }
            for c in res.communities
        ]
        ranked = [(c.id, c.score) for c in res.communities]
        hits = self.retriever.graph_hits.community_hits(_options(p), str(p.query), ranked)
        return {
            "summary": res.summary,
            # each summary sentence with the community it cites and the passage it quotes
            "citations": [
                {"text": q.text, "community": q.community, "passage": q.passage} for q in res.quotes
            ],
            "communities": communities,
            "level": res.level,
            "hits": self._dedup(p, hits),
            "usage": {"candidates": len(self.retriever.sources["community"].ids)},
        }

    def _op_drift(self, p: GraphParams, k: int, raw: Any) -> dict[str, Any]:
        from kgrag.search.drift import drift

        if p.depth > MAX_DEPTH:
            raise InvalidParams(f"depth must be at most {MAX_DEPTH}", field="depth")
        searches = self.retriever.searches
        local = searches.local()
        results: dict[str, Any] = {}

        def run_local(text: str, n: int) -> list[tuple[str, float]]:
            results[text] = local.search(text, n)
            return list(results[text].passages)

        res = drift(
            str(p.query),
            global_search=searches.global_search(),
            local=run_local,
            k=k,
            depth=p.depth,
            followups=p.followups,
            level=p.level,
        )
        hits = self.retriever.graph_hits.drift_hits(_options(p), str(p.query), res, results)
        return {
            "hits": self._dedup(p, hits),
            "followups": [f.text for f in res.followups],
            "primer": [
                {"id": c.id, "level": c.level, "score": round(c.score, 6)} for c in res.primer
            ],
            "usage": {"candidates": len(self.retriever.sources["chunk"].ids)},
        }

    def _op_communities(self, p: GraphParams, k: int, raw: Any) -> dict[str, Any]:
        g = self.retriever.searches.global_search()
        key = state.request_key(raw)
        version = self.retriever.reader.index_version
        offset = state.read_cursor(p.cursor, key, version) if p.cursor else 0
        page, after = g.hierarchy(p.level, offset, k)
        result: dict[str, Any] = {"communities": page}
        if after is not None:
            result["nextCursor"] = state.make_cursor(after, key, version)
        return result

    def _op_neighbors(self, p: GraphParams, k: int, raw: Any) -> dict[str, Any]:
        from kgrag.search.neighbors import neighbors

        if not p.seedIds:
            raise InvalidParams("op neighbors needs seedIds", field="seedIds")
        hops = min(p.hops, MAX_HOPS)
        graph = self.retriever.searches.whole_graph()
        result: dict[str, Any] = neighbors(graph, p.seedIds, hops, limit=k)
        if hops < p.hops:
            result["usage"] = {"notes": [f"hops clamped to {MAX_HOPS}"]}
        return result

    def _units(self, p: GraphParams) -> tuple[str, ...]:
        asked = [p.unit] if isinstance(p.unit, str) else list(p.unit or LOCAL_UNITS)
        bad = [u for u in asked if u not in LOCAL_UNITS]
        if bad:
            message = f"local returns units {', '.join(LOCAL_UNITS)}, not {', '.join(bad)}"
            if p.strict:
                raise Unsupported(message, option="unit")
            asked = [u for u in asked if u in LOCAL_UNITS] or list(LOCAL_UNITS)
        return tuple(u for u in LOCAL_UNITS if u in asked)

    def _dedup(self, p: GraphParams, hits: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return self.retriever.sessions.fresh(p.sessionId, hits)


def _options(p: GraphParams) -> HitOptions:
    """What the op's hits carry: their text unless left out; never vectors. Reports
    are not marked here: :meth:`GraphOps.run` sinks and marks every unit's at once."""
    return HitOptions(include_text=p.includeText)
