"""The RCP/1 ``graph`` method (spec §7.9) and the graph units of ``retrieve``.

Ops: ``local`` (PPR + bridge hop; hits of units chunk, node, triplet and path,
each with its provenance), ``global`` (community reports at a level and an
extractive summary citing them), ``drift`` (primer, follow-ups, a local
search each), ``communities`` (the hierarchy, paginated) and ``neighbors``
(the graph around ``seedIds``). ``retrieve`` reaches the units ``path`` and
``subgraph`` through :meth:`GraphOps.units`. The searches are built on first
use and shared by every call on the version. Hits reported through
``feedback`` as poisoned or injected sink below the rest of their unit.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt

from kgrag.errors import InvalidParams, Unsupported
from kgrag.ids import content_id
from kgrag.rcp import sessions as state
from kgrag.rcp.feedback import sink_hits
from kgrag.rcp.params import parse_params, validate
from kgrag.retrieval.units import prefetch, rows_of
from kgrag.search.stats import specificity

OPS = ("local", "global", "drift", "communities", "neighbors")
#: hit units ``local`` returns, in this order, unless ``unit`` picks some
LOCAL_UNITS = ("chunk", "node", "triplet", "path")
MAX_HOPS = 3  # neighbors: hops are clamped here (RCP §15.5, unbounded traversal)
DEFAULT_K = {"local": 10, "global": 5, "drift": 10, "communities": 50, "neighbors": 100}
MAX_DEPTH = 3


@dataclass(frozen=True, slots=True)
class LocalCall:
    """One local search with the provenance of its passages."""

    found: Any  # kgrag.search.local.LocalResult
    explained: dict[str, Any]  # chunk id -> kgrag.search.paths.Explanation
    seeds: list[str]  # seed entities, best first
    reading: Any  # kgrag.search.evidence.Reading: what the search read of its passages
    records: Any = None  # the passages' hit records being read beside the explanation

    def records_read(self) -> None:
        """Wait for the passages' records (read beside the explanation) to be in."""
        if self.records is not None:
            self.records.result()


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
    if not isinstance(raw, dict):
        raise InvalidParams("params must be an object", field="params")
    if "op" not in raw:
        raise InvalidParams("op is required", field="op")
    p = validate(GraphParams, raw)
    if p.op not in OPS:
        offered = ", ".join(OPS)
        raise Unsupported(f"graph op {p.op!r} is not offered; offered: {offered}", option="op")
    if p.op in ("local", "global", "drift") and not (p.query or "").strip():
        raise InvalidParams(f"op {p.op} needs a non-empty query", field="query")
    return p


class GraphOps:
    """Graph search over one :class:`~kgrag.retrieval.pipeline.Retriever`'s version."""

    def __init__(self, retriever: Any) -> None:
        self.r = retriever
        self._lock = threading.Lock()
        self._parts: dict[str, Any] = {}

    # -- lazily built searches -----------------------------------------------------------

    def _part(self, name: str) -> Any:
        with self._lock:
            if name not in self._parts:
                self._parts[name] = self._build(name)
            return self._parts[name]

    def _build(self, name: str) -> Any:
        reader, encoder = self.r.reader, self.r.encoder
        if name == "local":
            from kgrag.search.local import LocalSearch

            return LocalSearch(reader, encoder)
        if name == "paths":
            from kgrag.search.paths import PathFinder

            return PathFinder(reader)
        if name == "full":  # every entity, passage and edge: the neighbors op reads it all
            return self._part_unlocked("local")._whole_graph()
        if name == "global":
            from kgrag.search.global_search import GlobalSearch

            return GlobalSearch(reader, encoder)
        raise KeyError(name)

    def _part_unlocked(self, name: str) -> Any:
        if name not in self._parts:
            self._parts[name] = self._build(name)
        return self._parts[name]

    # -- the method ------------------------------------------------------------------------

    def run(self, raw: Any) -> dict[str, Any]:
        started = time.perf_counter()
        flags = self.r.flags()  # once, before any work: later feedback waits for the next call
        p = parse_graph_params(raw)
        k = min(p.k or DEFAULT_K[p.op], self.r.config.max_k)
        result: dict[str, Any] = getattr(self, f"_op_{p.op}")(p, k, raw)
        result["indexVersion"] = self.r.reader.index_version
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
        call = self._local(
            str(p.query), depth, records=k if "chunk" in units else 0, quotes=p.includeText
        )
        hits = self._local_hits(p, call, units, k)
        hits = self._dedup(p, hits)
        return {"hits": hits, "usage": {"candidates": len(self.r.sources["chunk"].ids)}}

    def _op_global(self, p: GraphParams, k: int, raw: Any) -> dict[str, Any]:
        g = self._part("global")
        res = g.search(str(p.query), k, p.level)
        plan = self._plan(p, k)
        source = self.r.sources["community"]
        ids = [c.id for c in res.communities]
        found = self.r.reader.rows("communities", ids)
        row_of = {i: int(r) for i, r in zip(ids, found.tolist(), strict=True) if r >= 0}
        qvec = self.r.encoder.encode_one(str(p.query))
        rows = np.array(list(row_of.values()), dtype=np.int64)
        scores = self.r.reader.similarity("communities", qvec, rows)
        dense = dict(zip(rows.tolist(), scores.tolist(), strict=True))  # the hits' rows only
        prefetch(source, rows.tolist())
        communities, hits = [], []
        for c in res.communities:
            communities.append(
                {
                    "id": c.id,
                    "level": c.level,
                    "title": c.title,
                    "summary": c.summary,
                    "score": round(c.score, 6),
                    "rating": c.rating,
                    "leaves": list(c.leaves),
                }
            )
            if c.id in row_of:
                row = row_of[c.id]
                hits.append(
                    self.r._hit(plan, source, row, c.score, dense, {"global": {row: c.score}})
                )
        return {
            "summary": res.summary,
            "communities": communities,
            "level": res.level,
            "hits": self._dedup(p, hits),
            "usage": {"candidates": len(source.ids)},
        }

    def _op_drift(self, p: GraphParams, k: int, raw: Any) -> dict[str, Any]:
        from kgrag.search.drift import drift

        if p.depth > MAX_DEPTH:
            raise InvalidParams(f"depth must be at most {MAX_DEPTH}", field="depth")
        local = self._part("local")
        results: dict[str, Any] = {}

        def run_local(text: str, n: int) -> list[tuple[str, float]]:
            results[text] = local.search(text, n)
            return list(results[text].passages)

        res = drift(
            str(p.query),
            global_search=self._part("global"),
            local=run_local,
            k=k,
            depth=p.depth,
            followups=p.followups,
            level=p.level,
        )
        paths = self._part("paths")
        plan = self._plan(p, k)
        source = self.r.sources["chunk"]
        row_of = self.row_of(source.unit)
        first = results[str(p.query)]
        hits = []
        for cid, score in res.passages:
            found = results[res.found_by[cid][0]]
            explained = paths.explain(path_sources(found), [cid], found.via, qvec=found.qvec)[cid]
            row = row_of[cid]
            hit = self.r._hit(plan, source, row, score, first.dense, {"drift": {row: score}})
            hit["provenance"] = explained.to_wire()
            hit["meta"]["foundBy"] = list(res.found_by[cid])
            hits.append(hit)
        return {
            "hits": self._dedup(p, hits),
            "followups": [f.text for f in res.followups],
            "primer": [
                {"id": c.id, "level": c.level, "score": round(c.score, 6)} for c in res.primer
            ],
            "usage": {"candidates": len(source.ids)},
        }

    def _op_communities(self, p: GraphParams, k: int, raw: Any) -> dict[str, Any]:
        g = self._part("global")
        key = state.request_key(raw)
        version = self.r.reader.index_version
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
        result: dict[str, Any] = neighbors(self._part("full"), p.seedIds, hops, limit=k)
        if hops < p.hops:
            result["usage"] = {"notes": [f"hops clamped to {MAX_HOPS}"]}
        return result

    # -- retrieve's graph units ------------------------------------------------------------

    def units(self, unit: str, query: str, k: int, include_text: bool) -> list[dict[str, Any]]:
        """Hits of unit ``path`` (one per explained passage) or ``subgraph`` (one)."""
        p = GraphParams(op="local", query=query, k=k, includeText=include_text)
        call = self._local(query, k * 2 if unit == "path" else k, quotes=include_text)
        if unit == "path":
            return self._path_hits(p, call, k)
        return [self._subgraph_hit(p, call)]

    # -- building hits -----------------------------------------------------------------------

    def _local(self, query: str, k: int, records: int = 0, quotes: bool = False) -> LocalCall:
        """Local search and the explanation of each passage; with ``records``, the hit
        records of the best that many passages are read meanwhile (from a server: the
        round trips overlap the explanation's); with ``quotes``, the explanation reads
        the passages the quotes will (:meth:`PathFinder.explain`)."""
        from kgrag.search.evidence import Reading
        from kgrag.search.local import soon

        found = self._part("local").search(query, k)
        seeds = path_sources(found)
        passages = [c for c, _ in found.passages]
        early = None
        if records and passages:
            early = soon(self.r.reader, self._chunk_records, passages[:records])
        reading = Reading(self.r.reader, found.qvec)
        explained = self._part("paths").explain(
            seeds, passages, found.via, qvec=found.qvec, reading=reading, quotes=quotes
        )
        return LocalCall(found, explained, seeds, reading, early)

    def _chunk_records(self, ids: list[str]) -> None:
        """Build the hit records of chunk ``ids`` (one batch)."""
        prefetch(self.r.sources["chunk"], self.r.reader.rows("chunks", ids).tolist())

    def _plan(self, p: GraphParams, k: int) -> Any:
        return self.r._plan(
            parse_params(
                {"query": p.query or "graph", "k": k, "mode": "dense", "includeText": p.includeText}
            )
        )

    def _units(self, p: GraphParams) -> tuple[str, ...]:
        asked = [p.unit] if isinstance(p.unit, str) else list(p.unit or LOCAL_UNITS)
        bad = [u for u in asked if u not in LOCAL_UNITS]
        if bad:
            message = f"local returns units {', '.join(LOCAL_UNITS)}, not {', '.join(bad)}"
            if p.strict:
                raise Unsupported(message, option="unit")
            asked = [u for u in asked if u in LOCAL_UNITS] or list(LOCAL_UNITS)
        return tuple(u for u in LOCAL_UNITS if u in asked)

    def _local_hits(
        self, p: GraphParams, call: LocalCall, units: tuple[str, ...], k: int
    ) -> list[dict[str, Any]]:
        plan = self._plan(p, k)
        found, explained = call.found, call.explained
        if p.includeText:  # every edge's quote, from one read of the passages
            from kgrag.search.evidence import quote_edges

            quote_edges(call.reading, [explained[c] for c, _ in found.passages])
        hits: list[dict[str, Any]] = []
        if "chunk" in units:
            call.records_read()
            source = self.r.sources["chunk"]
            best = found.passages[:k]
            ids = [c for c, _ in best]
            row_of = dict(zip(ids, self.r.reader.rows("chunks", ids).tolist(), strict=True))
            ranked = {row_of[c]: s for c, s in best}
            prefetch(source, list(ranked))
            for cid, score in best:
                hit = self.r._hit(plan, source, row_of[cid], score, found.dense, {"local": ranked})
                hit["provenance"] = explained[cid].to_wire()
                if cid in found.via:
                    hit["meta"]["bridgeFrom"] = found.via[cid]
                hits.append(hit)
        if "node" in units:
            hits.extend(self._node_hits(plan, call, k))
        if "triplet" in units:
            hits.extend(self._triplet_hits(plan, found, k))
        if "path" in units:
            hits.extend(self._path_hits(p, call, k))
        return hits

    def _node_hits(self, plan: Any, call: LocalCall, k: int) -> list[dict[str, Any]]:
        found = call.found
        local, paths = self._part("local"), self._part("paths")
        source = self.r.sources["node"]
        if not len(source.ids):
            return []
        reader = self.r.reader
        top, weighted = _specific_top(
            found.mass[: local.n_entities], partial(specificity, reader), k
        )
        mass = dict(zip(top.tolist(), weighted.tolist(), strict=True))
        order = top.tolist()
        ids = dict(zip(order, reader.ids("entities", order), strict=True))
        dist, pred = paths.distances(call.seeds, passages=[], entities=[ids[i] for i in order])
        dense = source.matrix[np.array(order, dtype=np.int64)] @ found.qvec if order else []
        qvec_dense = dict(zip(order, np.asarray(dense).tolist(), strict=True))
        prefetch(source, order)
        explained = paths.entity_paths([ids[i] for i in order], dist, pred)
        hits = []
        for row, ex in zip(order, explained, strict=True):
            eid = ids[row]
            hit = self.r._hit(
                plan, source, row, float(mass[row]), qvec_dense, {"ppr": {row: float(mass[row])}}
            )
            wire = ex.to_wire()
            wire["leaves"] = list(dict.fromkeys([*wire["leaves"], *hit["provenance"]["leaves"]]))
            hit["provenance"] = wire | {
                "nodes": wire["nodes"] or [eid],
                "path": wire["path"] or [eid],
            }
            hits.append(hit)
        return hits

    def _triplet_hits(self, plan: Any, found: Any, k: int) -> list[dict[str, Any]]:
        source = self.r.sources["triplet"]
        row_of = rows_of(source, [rid for rid, _ in found.facts[:k]])
        prefetch(source, list(row_of.values()))
        dense: dict[int, float] = {}
        hits = []
        for rid, sim in found.facts[:k]:
            if rid not in row_of:
                continue
            row = row_of[rid]
            dense[row] = sim
            hit = self.r._hit(plan, source, row, sim, dense, {"fact": {row: sim}})
            meta = source.items[row].meta
            edge = {
                "src": meta["src"],
                "dst": meta["dst"],
                "kind": "relation",
                "predicate": meta["predicate"],
                "relation": rid,
                "evidence": source.items[row].leaves[0],
            }
            hit["provenance"] = {
                "path": [meta["src"], meta["dst"]],
                "nodes": [meta["src"], meta["dst"]],
                "edges": [edge],
                "leaves": list(source.items[row].leaves),
            }
            hits.append(hit)
        return hits

    def _path_hits(self, p: GraphParams, call: LocalCall, k: int) -> list[dict[str, Any]]:
        """Path hits (their evidence texts from the search's reading of its passages)."""
        found, explained = call.found, call.explained
        hits: list[dict[str, Any]] = []
        seen: set[str] = set()
        names: dict[str, str] = {}
        if p.includeText:  # every path's names and quotes in one read each
            from kgrag.search.evidence import quote_edges

            kept = [explained[c] for c, _ in found.passages]
            quote_edges(call.reading, kept)
            names = self._names([e for ex in kept for e in ex.edges])
            text = call.reading.read(
                e["evidence"] for ex in kept for e in ex.edges if e.get("evidence")
            )
        general = self._general([x for c, _ in found.passages for x in explained[c].nodes()])
        shown = names | {x: f"{names.get(x, x)} (general term)" for x in general}
        for cid, score in found.passages:
            ex = explained[cid]
            if all(e["kind"] == "mention" for e in ex.edges):  # says only "X is named here"
                continue
            pid = content_id("path", *ex.path)
            if pid in seen:
                continue
            seen.add(pid)
            hit = {
                "id": pid,
                "score": round(float(score), 6),
                "unit": "path",
                "level": 0,
                "meta": {
                    "hops": len(ex.edges),
                    "target": cid,
                    "general": [x for x in ex.nodes() if x in general],
                },
                "scores": {"local": round(float(score), 6)},
                "provenance": ex.to_wire(),
            }
            if p.includeText:
                hit["text"] = render_quoted(ex.edges, shown)
                hit["meta"]["labels"] = {x: names.get(x, x) for x in ex.nodes()}
                hit["meta"]["passages"] = {  # each edge's evidence, to check it against
                    c: {"title": names.get(c, c), "text": text[c]}
                    for c in dict.fromkeys(e["evidence"] for e in ex.edges if e.get("evidence"))
                    if c in text
                }
            hits.append(hit)
            if len(hits) == k:
                break
        return hits

    def _general(self, nodes: list[str]) -> set[str]:
        """The general terms among ``nodes`` (entities so many passages mention that a
        path pays a toll to reach them): a path names them as such."""
        entities = sorted({x for x in nodes if x.startswith("e:")})
        rows = self.r.reader.rows("entities", entities)
        known = rows >= 0
        tolls = self._part("paths").toll(rows[known])
        kept = [e for e, k in zip(entities, known.tolist(), strict=True) if k]
        return {e for e, t in zip(kept, tolls.tolist(), strict=True) if t > 0}

    def _subgraph_hit(self, p: GraphParams, call: LocalCall) -> dict[str, Any]:
        found, explained = call.found, call.explained
        edges: dict[tuple[str, str, str], dict[str, Any]] = {}
        nodes: list[str] = [*sorted(found.seeds, key=lambda e: (-found.seeds[e], e))[:10]]
        leaves: list[str] = []
        for cid, _ in found.passages:
            ex = explained[cid]
            nodes.extend(ex.path)
            leaves.extend(ex.leaves)
            for e in ex.edges:
                edges.setdefault((e["src"], e["dst"], e["kind"]), e)
        nodes = list(dict.fromkeys(nodes))
        sid = content_id("subgraph", *nodes)
        score = found.passages[0][1] if found.passages else 0.0
        hit: dict[str, Any] = {
            "id": sid,
            "score": round(float(score), 6),
            "unit": "subgraph",
            "level": 0,
            "meta": {"nodes": len(nodes), "edges": len(edges)},
            "provenance": {
                "nodes": nodes,
                "edges": list(edges.values()),
                "leaves": list(dict.fromkeys(leaves)),
            },
        }
        if p.includeText:
            drawn = list(edges.values())
            hit["text"] = render_path(drawn, self._names(drawn), sep="\n")
        return hit

    def row_of(self, unit: str) -> Mapping[str, int]:
        """Row of each id in the source of ``unit``."""
        return self.r.sources[unit].row_of

    def _names(self, edges: list[dict[str, Any]]) -> dict[str, str]:
        """Display names of the ends and evidence of ``edges``: entity names, passage
        titles."""
        ends = sorted(
            {x for e in edges for x in (e["src"], e["dst"], e.get("evidence", ""))} - {""}
        )
        reader = self.r.reader
        names = reader.entity_names([x for x in ends if x.startswith("e:")])
        chunks = reader.chunks([x for x in ends if x.startswith("c:")])
        titles = {d.id: d.title for d in reader.documents(sorted({c.doc_id for c in chunks}))}
        return names | {c.id: titles.get(c.doc_id, c.id) for c in chunks}

    def _dedup(self, p: GraphParams, hits: list[dict[str, Any]]) -> list[dict[str, Any]]:
        if not p.sessionId:
            return hits
        seen = self.r.sessions.seen(p.sessionId)
        hits = [h for h in hits if h["id"] not in seen]
        self.r.sessions.add(p.sessionId, [h["id"] for h in hits])
        return hits


def tree_hits(retriever: Any, tree: Any, plan: Any) -> list[dict[str, Any]]:
    """Tree-node retrieval by a RAPTOR strategy: ``collapsed`` ranks chunks and
    summaries of every level together; ``traverse`` descends from the top layer
    keeping ``beam`` nodes per layer. Each hit's provenance path is its route."""
    qvec = retriever.encoder.encode_one(plan.query)
    if plan.strategy == "collapsed":
        levels = None if plan.level is None else {plan.level}
        found = tree.collapsed(qvec, plan.k, token_budget=plan.p.tokenBudget, levels=levels)
    else:
        found = tree.traverse(qvec, plan.k, beam=plan.p.beam)
    ops = retriever.graph_ops
    hits = []
    for th in found:
        unit = "chunk" if th.unit == "chunk" else "tree-node"
        source, row = retriever.sources[unit], ops.row_of(unit)[th.id]
        dense = np.zeros(len(source.ids))
        dense[row] = th.score
        hit = retriever._hit(plan, source, row, th.score, dense, {plan.strategy: {row: th.score}})
        hit["provenance"] |= {
            "path": list(th.path),
            "nodes": list(th.path),
            "edges": [
                {"src": a, "dst": b, "kind": "child"}
                for a, b in zip(th.path, th.path[1:], strict=False)
            ],
        }
        hits.append(hit)
    return hits


def path_sources(found: Any) -> list[str]:
    """Where a local search's provenance paths start: the entities the query names,
    best first, when it names any (a path from a concept the query's vector is merely
    near explains nothing); else every seed, heaviest first."""
    if found.named:
        return list(found.named)
    return sorted(found.seeds, key=lambda e: (-found.seeds[e], e))


def render_quoted(edges: list[dict[str, Any]], names: dict[str, str]) -> str:
    """Edges as :func:`render_path` draws them, one a line, each followed by its quote
    and the title of the passage it comes from."""
    lines = []
    for e in edges:
        lines.append(render_path([e], names))
        if e.get("quote"):
            lines.append(f"    “{e['quote']}” — {names.get(e['evidence'], e['evidence'])}")
    return "\n".join(lines)


def render_path(edges: list[dict[str, Any]], names: dict[str, str], sep: str = "; ") -> str:
    """Edges as text: ``A —predicate→ B`` for relations, ``[passage] —mentions→ A`` for
    mentions, ``A —named with→ B`` for co-occurrence (no statement joins them)."""
    parts = []
    for e in edges:
        src, dst = names.get(e["src"], e["src"]), names.get(e["dst"], e["dst"])
        label = {"names": "names", "cooccurrence": "named with"}.get(
            e["kind"], e.get("predicate", "")
        )
        if e["kind"] == "mention":
            src, dst = dst, src  # passage -> entity reads better the other way round
            label = "mentions"
        parts.append(f"{src} —{label}→ {dst}")
    return sep.join(parts)


def _specific_top(
    mass: np.ndarray, specificity: Any, k: int, first: int = 512
) -> tuple[np.ndarray, np.ndarray]:
    """The ``k`` entities of most PPR mass weighed by the root of their specificity
    (mass favours hubs), best first, ties by row; and their weighed mass. The weight is
    at most 1, so the entities are read by mass, best first, in growing blocks, until
    the k-th weighed mass so far beats every mass left: a search reads the
    specificity of a few hundred entities, not of the thousands its walk reached."""
    held = np.flatnonzero(mass > 0)
    if k <= 0 or not len(held):
        return held[:0], np.zeros(0)
    by_mass = held[np.lexsort((held, -mass[held]))]
    rows = by_mass[:0]
    weighted = np.zeros(0)
    block = first
    while True:
        new = by_mass[len(rows) : len(rows) + block]
        rows = np.concatenate([rows, new])
        weighted = np.concatenate([weighted, mass[new] * np.sqrt(specificity(new))])
        if len(rows) == len(by_mass):
            break
        if len(rows) >= k > 0 and np.sort(weighted)[-k] > mass[by_mass[len(rows)]]:
            break
        block *= 2
    order = np.lexsort((rows, -weighted))[:k]
    return rows[order], weighted[order]
