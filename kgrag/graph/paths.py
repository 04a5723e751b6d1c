"""Provenance paths: how a local-search hit connects to the query's seed entities.

One multi-source shortest-path search per query (scipy Dijkstra, hop
lengths, SVO relations preferred to co-occurrence ones) runs from the seed
entities over the relation edges, unless every hit is one edge from a seed;
a passage's path ends at the entity it mentions that lies closest to a seed.
A bridge hit (reached through a title link) extends the path of the passage
that named it. Every edge carries the chunk that evidences it, and every
evidence chunk is among the leaves:

- ``relation``: entity -> entity, a stored relation; evidence is a chunk
  stating it (so it mentions both ends);
- ``mention``: entity -> passage; evidence is the passage itself;
- ``names``: passage -> entity, the passage names the entity's title;
  evidence is that passage.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import dijkstra

from ..ids import content_id
from ..types import Chunk, Document, Entity, Mention, Relation
from .links import title_key

_MAX_HOPS = 3
_COOC_LENGTH = 1.5  # a co-occurrence hop counts as 1.5 so stated relations win ties


@dataclass(slots=True)
class Explanation:
    """The lineage of one hit."""

    path: list[str] = field(default_factory=list)  # seed entity ... hit
    edges: list[dict[str, Any]] = field(default_factory=list)
    leaves: list[str] = field(default_factory=list)

    def nodes(self) -> list[str]:
        return list(dict.fromkeys(self.path))

    def relations(self) -> int:
        return sum(1 for e in self.edges if e["kind"] == "relation")

    def to_wire(self) -> dict[str, Any]:
        return {
            "path": list(self.path),
            "nodes": self.nodes(),
            "edges": [dict(e) for e in self.edges],
            "leaves": list(dict.fromkeys(self.leaves)),
        }


class PathFinder:
    """Shortest seed-to-hit paths over one graph version's relations."""

    def __init__(
        self,
        entities: Sequence[Entity],
        relations: Sequence[Relation],
        mentions: Sequence[Mention],
        chunks: Sequence[Chunk],
        docs: dict[str, Document],
    ) -> None:
        self.entity_ids = sorted(e.id for e in entities)
        self.row = {e: i for i, e in enumerate(self.entity_ids)}
        self.relation = {r.id: r for r in relations}
        self._pair: dict[tuple[int, int], Relation] = {}
        for r in sorted(relations, key=lambda r: (r.kind != "svo", -r.weight, r.id)):
            if r.src in self.row and r.dst in self.row and r.evidence and r.src != r.dst:
                a, b = self.row[r.src], self.row[r.dst]
                self._pair.setdefault((min(a, b), max(a, b)), r)
        n = len(self.entity_ids)
        pairs = list(self._pair.items())
        lengths = [1.0 if r.kind == "svo" else _COOC_LENGTH for _, r in pairs]
        ends = np.array([p for p, _ in pairs], dtype=np.int64).reshape(-1, 2)
        upper = sp.csr_matrix((lengths, (ends[:, 0], ends[:, 1])), shape=(n, n))
        self._adj = (upper + upper.T).tocsr()  # both directions: Dijkstra needs no copy
        self._mentioned: dict[str, list[int]] = {}
        for m in mentions:
            if m.entity_id in self.row:
                self._mentioned.setdefault(m.chunk_id, []).append(self.row[m.entity_id])
        names = {e.id: title_key(e.name) for e in entities}
        self.title_entity: dict[str, str] = {}  # chunk id -> the entity its title names
        for c in chunks:
            key = title_key(docs[c.doc_id].title)
            for row in sorted(self._mentioned.get(c.id, ())):
                if key and names[self.entity_ids[row]] == key:
                    self.title_entity[c.id] = self.entity_ids[row]
                    break

    def explain(
        self,
        seeds: Sequence[str],
        passages: Sequence[str],
        via: dict[str, str],
        distances: tuple[np.ndarray, np.ndarray] | None = None,
    ) -> dict[str, Explanation]:
        """The explanation of each passage (seeds best first; ``distances`` as
        :meth:`distances` returns them for these seeds and passages, computed when None)."""
        if distances is None:
            distances = self.distances(seeds, passages=passages, via=via)
        dist, pred = distances
        rank = self._seed_rank(seeds)
        out: dict[str, Explanation] = {}
        for cid in passages:
            out[cid] = self._passage(via.get(cid, cid), dist, pred, rank)
            if cid in via:
                self._bridge(out[cid], via[cid], cid)
        return out

    def entity_path(self, entity: str, dist: np.ndarray, pred: np.ndarray) -> Explanation:
        """The path from the nearest seed to ``entity`` (empty when unreachable)."""
        ex = Explanation()
        row = self.row.get(entity)
        if row is not None and np.isfinite(dist[row]):
            self._walk(ex, row, pred, prefer=None)
        return ex

    def distances(
        self,
        seeds: Sequence[str],
        passages: Sequence[str] | None = None,
        via: dict[str, str] | None = None,
        entities: Sequence[str] = (),
    ) -> tuple[np.ndarray, np.ndarray]:
        """Path length from the nearest seed to each entity, and the predecessor rows.

        With ``passages`` None, to every entity (one Dijkstra over the graph). Otherwise
        the paths needed are those to the entities that ``passages`` mention (a bridge
        passage's: those of the passage that named it, by ``via``) and to ``entities``.
        When every such passage mentions a seed or a seed's neighbour, and every such
        entity is one, the direct edges from the seeds settle them: no path of two or
        more hops (length >= 2) beats one edge (length <= 1.5), and the search stays off
        the rest of the graph (2Wiki: 37 of 40 questions; ~15 ms per question for the
        whole graph). The passages left are tried over two edges the same way (a path
        of two hops, length <= 3, is not beaten by one of three, length >= 3). Only
        when some are further still is the whole graph searched."""
        n = len(self.entity_ids)
        rows = list(dict.fromkeys(self.row[s] for s in seeds if s in self.row))
        if not rows:
            return np.full(n, np.inf), np.full(n, -9999)
        if passages is not None:
            groups = [self._mentioned.get((via or {}).get(c, c), []) for c in passages]
            groups += [[self.row[e]] for e in entities if e in self.row]
            near, via_seed = self._one_edge(rows)
            dist, pred = near.copy(), via_seed.copy()
            dist[rows], pred[rows] = 0.0, -9999
            left = [g for g in groups if g and not np.isfinite(dist[g]).any()]
            if left:
                self._two_edges(near, via_seed, sorted({r for g in left for r in g}), dist, pred)
            if all(np.isfinite(dist[g]).any() for g in left):
                return dist, pred
        dist, pred, _ = dijkstra(
            self._adj,
            directed=True,
            indices=rows,
            min_only=True,
            return_predecessors=True,
            limit=_MAX_HOPS * _COOC_LENGTH,
        )
        return dist, pred

    def _one_edge(self, seeds: list[int]) -> tuple[np.ndarray, np.ndarray]:
        """The length of the shortest edge from ``seeds`` to each of their neighbours and
        the seed it comes from (best seed first: it keeps ties); inf / -9999 elsewhere
        and at the seeds themselves. For a neighbour that is not a seed this is its
        distance: no path of two edges is shorter than one."""
        first = self._adj[seeds]
        near, via_seed = np.full(len(self.entity_ids), np.inf), np.full(len(self.entity_ids), -9999)
        for i, seed in enumerate(seeds):
            cols = first.indices[first.indptr[i] : first.indptr[i + 1]]
            lengths = first.data[first.indptr[i] : first.indptr[i + 1]]
            better = lengths < near[cols]
            near[cols[better]], via_seed[cols[better]] = lengths[better], seed
        near[seeds], via_seed[seeds] = np.inf, -9999
        return near, via_seed

    def _two_edges(
        self,
        near: np.ndarray,
        via_seed: np.ndarray,
        ends: list[int],
        dist: np.ndarray,
        pred: np.ndarray,
    ) -> None:
        """Reach ``ends`` over two edges, through a neighbour of a seed (``near`` and
        ``via_seed`` as :meth:`_one_edge` gives them), into ``dist`` and ``pred``; ties
        go to the lower middle row."""
        second = self._adj[ends]
        for j, end in enumerate(ends):
            mids = second.indices[second.indptr[j] : second.indptr[j + 1]]
            total = near[mids] + second.data[second.indptr[j] : second.indptr[j + 1]]
            if not len(total):
                continue
            best = int(np.argmin(total))
            if np.isfinite(total[best]) and total[best] < dist[end]:
                mid = int(mids[best])
                dist[end], pred[end] = total[best], mid
                dist[mid], pred[mid] = near[mid], via_seed[mid]

    def _passage(
        self, cid: str, dist: np.ndarray, pred: np.ndarray, rank: dict[int, int]
    ) -> Explanation:
        ex = Explanation()
        mentioned = self._mentioned.get(cid, [])
        reachable = [r for r in mentioned if np.isfinite(dist[r])]
        if reachable:
            end = min(
                reachable, key=lambda r: (dist[r], rank.get(self._root(r, pred), len(rank)), r)
            )
            self._walk(ex, end, pred, prefer=cid)
            ex.path.append(cid)
            ex.edges.append(_edge(self.entity_ids[end], cid, "mention", cid))
        else:
            ex.path.append(cid)
        ex.leaves.append(cid)
        return ex

    def _seed_rank(self, seeds: Sequence[str]) -> dict[int, int]:
        """Seed row -> its rank (0 = best seed), to break ties between equally near ends."""
        ranks: dict[int, int] = {}
        for i, s in enumerate(seeds):
            if s in self.row:
                ranks.setdefault(self.row[s], i)
        return ranks

    def _root(self, row: int, pred: np.ndarray) -> int:
        while pred[row] >= 0:
            row = int(pred[row])
        return row

    def _bridge(self, ex: Explanation, named_by: str, cid: str) -> None:
        target = self.title_entity.get(cid)
        if target is None:
            ex.edges.append(_edge(named_by, cid, "names", named_by))
        else:
            ex.path.append(target)
            ex.edges.append(_edge(named_by, target, "names", named_by))
            ex.edges.append(_edge(target, cid, "mention", cid))
        ex.path.append(cid)
        ex.leaves.append(cid)

    def _walk(self, ex: Explanation, end: int, pred: np.ndarray, prefer: str | None) -> None:
        """Append the seed ... ``end`` entity chain and its relation edges to ``ex``."""
        chain = [end]
        while pred[chain[-1]] >= 0:
            chain.append(int(pred[chain[-1]]))
        chain.reverse()
        ex.path.extend(self.entity_ids[r] for r in chain)
        for a, b in zip(chain, chain[1:], strict=False):
            rel = self._pair[(min(a, b), max(a, b))]
            evidence = prefer if prefer in rel.evidence else rel.evidence[0]
            ex.edges.append(_edge(rel.src, rel.dst, "relation", evidence, rel.predicate, rel.id))
            ex.leaves.append(evidence)


def _edge(
    src: str, dst: str, kind: str, evidence: str, predicate: str = "", relation: str = ""
) -> dict[str, Any]:
    edge: dict[str, Any] = {"src": src, "dst": dst, "kind": kind, "evidence": evidence}
    if predicate:
        edge["predicate"] = predicate
    if relation:
        edge["relation"] = relation
    return edge


def path_id(ex: Explanation) -> str:
    """A content id for a path hit."""
    return content_id("path", *ex.path)
