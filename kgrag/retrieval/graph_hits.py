"""Hits drawn from the graph searches of one version, for ``retrieve`` (units path
and subgraph, tree nodes by a RAPTOR strategy), the ``graph`` method (ops local,
global and drift) and ``memory/recall``.

A passage, entity, fact, community or tree-node hit is a source row's hit
(:class:`~kgrag.retrieval.hits.HitBuilder`) whose provenance is replaced by the
route the search took to it; a path or subgraph hit is drawn here from the
explanations of a local search's passages (:mod:`kgrag.search.paths`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any

import numpy as np

from kgrag.encoders import Encoder
from kgrag.ids import content_id
from kgrag.search.stats import specificity
from kgrag.store import GraphReader

from .hits import HitBuilder, HitOptions
from .items import Source, prefetch, rows_of
from .searches import GraphSearches, LocalCall, local_call, path_sources

#: the provenance fields a path's quoted passages repeat from their chunks
_WHERE = ("source", "parent_path", "page", "pages", "chunk_type")

if TYPE_CHECKING:
    from kgrag.search.drift import DriftResult
    from kgrag.search.local import LocalResult

#: hit units a local search returns, in this order
LOCAL_UNITS = ("chunk", "node", "triplet", "path")


class GraphHits:
    """The hits of one version's graph searches."""

    def __init__(
        self,
        reader: GraphReader,
        encoder: Encoder,
        sources: Mapping[str, Source],
        hits: HitBuilder,
        searches: GraphSearches,
    ) -> None:
        self.reader, self.encoder, self.sources = reader, encoder, sources
        self.hits, self.searches = hits, searches

    # -- retrieve's graph units --------------------------------------------------------------

    def units(self, unit: str, query: str, k: int, include_text: bool) -> list[dict[str, Any]]:
        """Hits of unit ``path`` (one per explained passage) or ``subgraph`` (one)."""
        call = self.local(query, k * 2 if unit == "path" else k, quotes=include_text)
        if unit == "path":
            return self.path_hits(call, k, include_text)
        return [self.subgraph_hit(call, include_text)]

    def tree_hits(
        self,
        options: HitOptions,
        strategy: str,
        query: str,
        k: int,
        *,
        level: int | None,
        token_budget: int | None,
        beam: int,
    ) -> list[dict[str, Any]]:
        """Tree-node retrieval by a RAPTOR strategy: ``collapsed`` ranks chunks and
        summaries of every level together; ``traverse`` descends from the top layer
        keeping ``beam`` nodes per layer. Each hit's provenance path is its route."""
        tree = self.searches.tree()
        qvec = self.encoder.encode_one(query)
        if strategy == "collapsed":
            levels = None if level is None else {level}
            found = tree.collapsed(qvec, k, token_budget=token_budget, levels=levels)
        else:
            found = tree.traverse(qvec, k, beam=beam)
        hits = []
        for th in found:
            unit = "chunk" if th.unit == "chunk" else "tree-node"
            source = self.sources[unit]
            row = source.row_of[th.id]
            dense = np.zeros(len(source.ids))
            dense[row] = th.score
            hit = self.hits.hit(options, source, row, th.score, dense, {strategy: {row: th.score}})
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

    # -- local search ------------------------------------------------------------------------

    def local(self, query: str, k: int, records: int = 0, quotes: bool = False) -> LocalCall:
        """A local search (:func:`~kgrag.retrieval.searches.local_call`); with
        ``records``, the hit records of the best that many passages are read meanwhile."""
        return local_call(
            self.searches,
            query,
            k,
            records=records,
            read_records=self._chunk_records,
            quotes=quotes,
        )

    def _chunk_records(self, ids: list[str]) -> None:
        """Build the hit records of chunk ``ids`` (one batch)."""
        prefetch(self.sources["chunk"], self.reader.rows("chunks", ids).tolist())

    def local_hits(
        self, options: HitOptions, call: LocalCall, units: tuple[str, ...], k: int
    ) -> list[dict[str, Any]]:
        """The hits of one local search, unit by unit in :data:`LOCAL_UNITS` order."""
        found, explained = call.found, call.explained
        if options.include_text:  # every edge's quote, from one read of the passages
            from kgrag.search.evidence import quote_edges

            quote_edges(call.reading, [explained[c] for c, _ in found.passages])
        hits: list[dict[str, Any]] = []
        if "chunk" in units:
            hits.extend(self._passage_hits(options, call, k))
        if "node" in units:
            hits.extend(self._node_hits(options, call, k))
        if "triplet" in units:
            hits.extend(self._triplet_hits(options, found, k))
        if "path" in units:
            hits.extend(self.path_hits(call, k, options.include_text))
        return hits

    def _passage_hits(self, options: HitOptions, call: LocalCall, k: int) -> list[dict[str, Any]]:
        call.records_read()
        found, explained = call.found, call.explained
        source = self.sources["chunk"]
        best = found.passages[:k]
        ids = [c for c, _ in best]
        row_of = dict(zip(ids, self.reader.rows("chunks", ids).tolist(), strict=True))
        ranked = {row_of[c]: s for c, s in best}
        prefetch(source, list(ranked))
        hits = []
        for cid, score in best:
            hit = self.hits.hit(options, source, row_of[cid], score, found.dense, {"local": ranked})
            hit["provenance"] = explained[cid].to_wire()
            if cid in found.via:
                hit["meta"]["bridgeFrom"] = found.via[cid]
            hits.append(hit)
        return hits

    def _node_hits(self, options: HitOptions, call: LocalCall, k: int) -> list[dict[str, Any]]:
        found = call.found
        local, paths = self.searches.local(), self.searches.paths()
        source = self.sources["node"]
        if not len(source.ids):
            return []
        reader = self.reader
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
            hit = self.hits.hit(
                options, source, row, float(mass[row]), qvec_dense, {"ppr": {row: float(mass[row])}}
            )
            wire = ex.to_wire()
            wire["leaves"] = list(dict.fromkeys([*wire["leaves"], *hit["provenance"]["leaves"]]))
            hit["provenance"] = wire | {
                "nodes": wire["nodes"] or [eid],
                "path": wire["path"] or [eid],
            }
            hits.append(hit)
        return hits

    def _triplet_hits(
        self, options: HitOptions, found: LocalResult, k: int
    ) -> list[dict[str, Any]]:
        source = self.sources["triplet"]
        row_of = rows_of(source, [rid for rid, _ in found.facts[:k]])
        prefetch(source, list(row_of.values()))
        dense: dict[int, float] = {}
        hits = []
        for rid, sim in found.facts[:k]:
            if rid not in row_of:
                continue
            row = row_of[rid]
            dense[row] = sim
            hit = self.hits.hit(options, source, row, sim, dense, {"fact": {row: sim}})
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

    def path_hits(self, call: LocalCall, k: int, include_text: bool) -> list[dict[str, Any]]:
        """Path hits (their evidence texts from the search's reading of its passages)."""
        found, explained = call.found, call.explained
        hits: list[dict[str, Any]] = []
        seen: set[str] = set()
        names: dict[str, str] = {}
        if include_text:  # every path's names and quotes in one read each
            from kgrag.search.evidence import quote_edges

            kept = [explained[c] for c, _ in found.passages]
            quote_edges(call.reading, kept)
            names = self.display_names([e for ex in kept for e in ex.edges])
            text = call.reading.read(
                e["evidence"] for ex in kept for e in ex.edges if e.get("evidence")
            )
        general = self.general_terms([x for c, _ in found.passages for x in explained[c].nodes()])
        shown = names | {x: f"{names.get(x, x)} (general term)" for x in general}
        for cid, score in found.passages:
            ex = explained[cid]
            if all(e["kind"] == "mention" for e in ex.edges):  # says only "X is named here"
                continue
            pid = content_id("path", *ex.path)
            if pid in seen:
                continue
            seen.add(pid)
            hit: dict[str, Any] = {
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
            if include_text:
                hit["text"] = render_quoted(ex.edges, shown)
                hit["meta"]["labels"] = {x: names.get(x, x) for x in ex.nodes()}
                quoted = [
                    c
                    for c in dict.fromkeys(e["evidence"] for e in ex.edges if e.get("evidence"))
                    if c in text
                ]
                where = self._where(quoted)
                hit["meta"]["passages"] = {  # each edge's evidence, to check it against
                    c: {"title": names.get(c, c), "text": text[c]} | where.get(c, {})
                    for c in quoted
                }
            hits.append(hit)
            if len(hits) == k:
                break
        return hits

    def _where(self, chunk_ids: Sequence[str]) -> dict[str, dict[str, Any]]:
        """Where each chunk came from: file, section path, page(s), chunk type (the
        fields a chunk read from a document carries)."""
        source = self.sources["chunk"]
        rows = rows_of(source, list(chunk_ids))
        out: dict[str, dict[str, Any]] = {}
        for cid, row in rows.items():
            meta = source.items[row].meta
            out[cid] = {k: meta[k] for k in _WHERE if k in meta}
        return out

    def subgraph_hit(self, call: LocalCall, include_text: bool) -> dict[str, Any]:
        """One hit: the seeds and every path of the search, their edges and leaves."""
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
        if include_text:
            drawn = list(edges.values())
            hit["text"] = render_path(drawn, self.display_names(drawn), sep="\n")
        return hit

    def general_terms(self, nodes: list[str]) -> set[str]:
        """The general terms among ``nodes`` (entities so many passages mention that a
        path pays a toll to reach them): a path names them as such."""
        entities = sorted({x for x in nodes if x.startswith("e:")})
        rows = self.reader.rows("entities", entities)
        known = rows >= 0
        tolls = self.searches.paths().toll(rows[known])
        kept = [e for e, k in zip(entities, known.tolist(), strict=True) if k]
        return {e for e, t in zip(kept, tolls.tolist(), strict=True) if t > 0}

    def display_names(self, edges: list[dict[str, Any]]) -> dict[str, str]:
        """Display names of the ends and evidence of ``edges``: entity names, passage
        titles."""
        ends = sorted(
            {x for e in edges for x in (e["src"], e["dst"], e.get("evidence", ""))} - {""}
        )
        reader = self.reader
        names = reader.entity_names([x for x in ends if x.startswith("e:")])
        chunks = reader.chunks([x for x in ends if x.startswith("c:")])
        titles = {d.id: d.title for d in reader.documents(sorted({c.doc_id for c in chunks}))}
        return names | {c.id: titles.get(c.doc_id, c.id) for c in chunks}

    # -- global and drift --------------------------------------------------------------------

    def community_hits(
        self, options: HitOptions, query: str, ranked: Sequence[tuple[str, float]]
    ) -> list[dict[str, Any]]:
        """Hits of the communities ``ranked`` (id, score) that this version's source
        holds, their confidence from the query's cosine to their report."""
        source = self.sources["community"]
        ids = [cid for cid, _ in ranked]
        found = self.reader.rows("communities", ids)
        row_of = {i: int(r) for i, r in zip(ids, found.tolist(), strict=True) if r >= 0}
        qvec = self.encoder.encode_one(query)
        rows = np.array(list(row_of.values()), dtype=np.int64)
        scores = self.reader.similarity("communities", qvec, rows)
        dense = dict(zip(rows.tolist(), scores.tolist(), strict=True))  # the hits' rows only
        prefetch(source, rows.tolist())
        hits = []
        for cid, score in ranked:
            if cid in row_of:
                row = row_of[cid]
                hits.append(
                    self.hits.hit(options, source, row, score, dense, {"global": {row: score}})
                )
        return hits

    def drift_hits(
        self, options: HitOptions, query: str, res: DriftResult, results: Mapping[str, LocalResult]
    ) -> list[dict[str, Any]]:
        """Hits of a DRIFT search's passages, each explained from the local search that
        found it first (``results``: the local search of each query asked, the
        question's own among them)."""
        paths = self.searches.paths()
        source = self.sources["chunk"]
        row_of = source.row_of
        first = results[query]
        hits = []
        for cid, score in res.passages:
            found = results[res.found_by[cid][0]]
            explained = paths.explain(path_sources(found), [cid], found.via, qvec=found.qvec)[cid]
            row = row_of[cid]
            hit = self.hits.hit(options, source, row, score, first.dense, {"drift": {row: score}})
            hit["provenance"] = explained.to_wire()
            hit["meta"]["foundBy"] = list(res.found_by[cid])
            hits.append(hit)
        return hits


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
    mass: np.ndarray, specificity: Callable[[np.ndarray], np.ndarray], k: int, first: int = 512
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
