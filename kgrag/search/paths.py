"""Provenance paths: how a local-search hit connects to the query's seed entities.

One multi-source shortest-path search per query (hop lengths, SVO relations
preferred to co-occurrence ones) runs from the seed entities over the relation
edges, reading the adjacency of the vertices it reaches, unless every hit is
one or two edges from a seed;
a passage's path ends at the entity it mentions that lies closest to a seed, and
then with what the passage states about that entity (:mod:`kgrag.search.evidence`).
A bridge hit (reached through a title link) extends the path of the passage
that named it. Every edge carries the chunk that evidences it, and every
evidence chunk is among the leaves:

- ``relation``: entity -> entity, a relation a sentence states (subject, verb,
  object); evidence is a chunk stating it (so it mentions both ends);
- ``cooccurrence``: entity -> entity, the two are named in one sentence and no
  statement joins them; evidence is a chunk holding that sentence;
- ``mention``: entity -> passage; evidence is the passage itself;
- ``names``: passage -> entity, the passage names the entity's title;
  evidence is that passage.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from kgrag.ids import content_id
from kgrag.search.evidence import Reading, state_endings, state_links
from kgrag.search.explanation import STATED, Explanation
from kgrag.search.stats import title_entity
from kgrag.store import GraphReader, PathLimits
from kgrag.store.kernels import tolls
from kgrag.types import Relation

_MAX_HOPS = 3
#: the search for a far passage stops after settling this many entities (a passage
#: not reached by then lies beyond hubs that would explain nothing)
_MAX_REACHED = 5_000
_MAX_OFFERS = 5_000  # edges that search follows
#: an entity with more relations than this is a hub: paths end there, not go through
_HUB_DEGREE = 500
_COOC_LENGTH = 1.5  # a co-occurrence hop counts as 1.5 so stated relations win ties
_GENERIC_TOLL = 1.0  # the extra length of reaching a general term (a multiple of 0.5)
_GENERIC_MIN, _GENERIC_SHARE = 20, 0.005  # a general term: in more passages than both


class PathFinder:
    """Shortest seed-to-hit paths over one graph version's relations, read from the
    store's relation adjacency as far as the paths reach."""

    def __init__(self, reader: GraphReader) -> None:
        self.reader = reader
        #: how far a path search goes; an entity more passages mention than
        #: ``limits.generic`` is a general term (a concept such as "film"): a path pays
        #: :data:`_GENERIC_TOLL` to reach it, so it goes through specific entities
        #: wherever they connect
        self.limits = PathLimits(
            limit=_MAX_HOPS * _COOC_LENGTH,
            hub_degree=_HUB_DEGREE,
            max_reached=_MAX_REACHED,
            max_offers=_MAX_OFFERS,
            generic=max(_GENERIC_MIN, reader.size("chunks") * _GENERIC_SHARE),
            toll=_GENERIC_TOLL,
        )

    def toll(self, rows: np.ndarray) -> np.ndarray:
        """The extra length of reaching each entity row (general terms cost more)."""
        return tolls(self.reader, rows, self.limits)

    def explain(
        self,
        seeds: Sequence[str],
        passages: Sequence[str],
        via: dict[str, str],
        distances: tuple[dict[int, float], dict[int, int]] | None = None,
        qvec: np.ndarray | None = None,
        reading: Any = None,
        quotes: bool = False,
    ) -> dict[str, Explanation]:
        """The explanation of each passage (seeds best first; ``distances`` as
        :meth:`distances` returns them for these seeds and passages, computed when None).
        A path ends with what its passage states about the path's last entity, the
        statement closest to the query ``qvec`` (:func:`kgrag.search.evidence.state_endings`);
        ``reading``: the search's :class:`kgrag.search.evidence.Reading` of its passages
        (a new one for ``qvec`` when None), which quoting reads on from. With
        ``quotes`` (the caller quotes every edge next), the endings' read of passages
        takes in every edge's evidence passage too: one read instead of two."""
        if reading is None:
            reading = Reading(self.reader, qvec)
        if distances is None:
            distances = self.distances(seeds, passages=passages, via=via)
        dist, pred = distances
        rank = self._seed_rank(seeds)
        ends = list(dict.fromkeys([via.get(c, c) for c in passages] + list(passages)))
        mentioned = self._mentioned(ends)
        named = {cid: via.get(cid, cid) for cid in passages}
        end = {cid: self._end(mentioned[named[cid]], dist, pred, rank) for cid in passages}
        chains = self._chains([e for e in end.values() if e is not None], pred)
        out: dict[str, Explanation] = {}
        for cid in passages:
            out[cid] = self._passage(named[cid], end[cid], pred, chains)
            if cid in via:
                self._bridge(out[cid], via[cid], cid)
        state_links(self.reader, out)
        also = (
            {e["evidence"] for ex in out.values() for e in ex.edges if e.get("evidence")}
            if quotes
            else set()
        )
        state_endings(reading, out, mentioned, also=also)
        return out

    def entity_path(self, entity: str, dist: dict[int, float], pred: dict[int, int]) -> Explanation:
        """The path from the nearest seed to ``entity`` (empty when unreachable)."""
        return self.entity_paths([entity], dist, pred)[0]

    def entity_paths(
        self, entities: Sequence[str], dist: dict[int, float], pred: dict[int, int]
    ) -> list[Explanation]:
        """The path from the nearest seed to each of ``entities`` (empty when
        unreachable), read together."""
        rows = [int(x) for x in self.reader.rows("entities", list(entities)).tolist()]
        chains = self._chains([r for r in rows if r >= 0 and r in dist], pred)
        out = []
        for row in rows:
            ex = Explanation()
            if row >= 0 and row in dist:
                self._walk(ex, row, pred, None, chains)
            out.append(ex)
        return out

    def distances(
        self,
        seeds: Sequence[str],
        passages: Sequence[str] | None = None,
        via: dict[str, str] | None = None,
        entities: Sequence[str] = (),
    ) -> tuple[dict[int, float], dict[int, int]]:
        """Path length from the nearest seed to the entities reached (by entity row),
        and each one's predecessor row (-9999 at a seed).

        With ``passages`` None, to every entity within the length limit. Otherwise the
        paths needed are those to the entities that ``passages`` mention (a bridge
        passage's: those of the passage that named it, by ``via``) and to ``entities``.
        When every such passage mentions a seed or a seed's neighbour at length <= 2,
        and every such entity is one, the direct edges from the seeds settle them: no
        path of two or more hops (length >= 2) is shorter, and the search stays off
        the rest of the graph. The passages left are tried over two edges the same way
        (a path of length <= 3 is not beaten by one of three or more edges, length >=
        3). Only when some are further still does the search go on, by rounds of equal
        length, until each of them is reached. A general term costs
        :data:`_GENERIC_TOLL` more to reach (:meth:`toll`)."""
        found = self.reader.rows("entities", list(seeds))
        rows = list(dict.fromkeys(int(x) for x in found.tolist() if x >= 0))
        if not rows:
            return {}, {}
        groups: list[set[int]] | None = None
        if passages is not None:
            ends = [(via or {}).get(c, c) for c in passages]
            mentioned = self._mentioned(list(dict.fromkeys(ends)))
            groups = [set(mentioned[c].tolist()) for c in ends]
            wanted = self.reader.rows("entities", list(entities))
            groups += [{int(x)} for x in wanted.tolist() if x >= 0]
            near, via_seed = self._one_edge(rows)
            dist, pred = dict(near), dict(via_seed)
            for row in rows:
                dist[row], pred[row] = 0.0, -9999
            # settled: a member as near as any path of more edges could bring one
            left = [g for g in groups if g and not _within(g, dist, 2.0)]
            if left:  # a passage none of whose entities shares a seed's component has no path
                left = self._connected(rows, left)
                groups = [g for g in groups if _within(g, dist, 2.0)] + left
            if left:
                self._two_edges(near, via_seed, sorted({x for g in left for x in g}), dist, pred)
            if all(_within(g, dist, 3.0) for g in left):
                return dist, pred
            groups = [g for g in groups if g]
        return self._rounds(rows, groups)

    def _connected(self, seeds: list[int], groups: list[set[int]]) -> list[set[int]]:
        """The groups with a member in a seed's connected component (the others have no
        path, and searching for one would read as far as the search's limits)."""
        members = sorted({x for g in groups for x in g})
        component = self.reader.attribute(
            "entities", "component", np.array(seeds + members, dtype=np.int64)
        ).tolist()
        reached = set(component[: len(seeds)])
        of = dict(zip(members, component[len(seeds) :], strict=True))
        return [g for g in groups if any(of[x] in reached for x in g)]

    def _mentioned(self, chunk_ids: Sequence[str]) -> dict[str, np.ndarray]:
        """The entity rows each chunk mentions (none for an id without a row)."""
        rows = self.reader.rows("chunks", list(chunk_ids))
        adj = self.reader.adjacency("mentions", np.maximum(rows, 0))
        empty = np.zeros(0, dtype=np.int64)
        return {c: (adj.of(i) if rows[i] >= 0 else empty) for i, c in enumerate(chunk_ids)}

    def _one_edge(self, seeds: list[int]) -> tuple[dict[int, float], dict[int, int]]:
        """The length of the shortest edge from ``seeds`` to each of their neighbours and
        the seed it comes from (best seed first: it keeps ties); the seeds themselves
        left out. For a neighbour that is not a seed this is its distance: no path of
        two edges is shorter than one."""
        first = self.reader.adjacency("relations", np.array(seeds, dtype=np.int64))
        which = np.repeat(np.arange(len(seeds)), np.diff(first.indptr))
        cols = first.indices.astype(np.int64)
        lengths = first.data + self.toll(cols)
        order = np.lexsort((which, lengths, cols))  # per neighbour: shortest, then best seed
        cols, lengths, which = cols[order], lengths[order], which[order]
        keep = np.ones(len(cols), dtype=bool)
        keep[1:] = cols[1:] != cols[:-1]
        kept = cols[keep].tolist()
        near = dict(zip(kept, lengths[keep].tolist(), strict=True))
        by_seed = np.array(seeds, dtype=np.int64)[which[keep]].tolist()
        via_seed = dict(zip(kept, by_seed, strict=True))
        for seed in seeds:
            near.pop(seed, None)
            via_seed.pop(seed, None)
        return near, via_seed

    def _two_edges(
        self,
        near: dict[int, float],
        via_seed: dict[int, int],
        ends: list[int],
        dist: dict[int, float],
        pred: dict[int, int],
    ) -> None:
        """Reach ``ends`` over two edges, through a neighbour of a seed (``near`` and
        ``via_seed`` as :meth:`_one_edge` gives them), into ``dist`` and ``pred``; ties
        go to the lower middle row."""
        second = self.reader.adjacency("relations", np.array(ends, dtype=np.int64))
        tolls = self.toll(np.array(ends, dtype=np.int64)).tolist()
        keys = np.array(sorted(near), dtype=np.int64)
        values = np.array([near[x] for x in keys.tolist()] + [np.inf])
        for j, end in enumerate(ends):
            mids = second.indices[second.indptr[j] : second.indptr[j + 1]].astype(np.int64)
            if not len(mids):
                continue
            at = np.minimum(np.searchsorted(keys, mids), max(len(keys) - 1, 0))
            hit = keys[at] == mids if len(keys) else np.zeros(len(mids), dtype=bool)
            to_mid = np.where(hit, values[at], np.inf)
            total = to_mid + second.data[second.indptr[j] : second.indptr[j + 1]] + tolls[j]
            best = int(np.argmin(total))
            # no path of three or more edges (each >= 1, and the end's toll) is shorter
            settled = total[best] <= 3 + tolls[j]
            if settled and total[best] < dist.get(end, np.inf):
                mid = int(mids[best])
                dist[end], pred[end] = float(total[best]), mid
                dist[mid], pred[mid] = near[mid], via_seed[mid]

    def _rounds(
        self, seeds: list[int], groups: list[set[int]] | None
    ) -> tuple[dict[int, float], dict[int, int]]:
        """Shortest paths from ``seeds`` by the store
        (:func:`kgrag.store.kernels.path_rounds`, the search's limits)."""
        return self.reader.shortest_paths(seeds, groups, self.limits)

    def _end(
        self,
        mentioned: np.ndarray,
        dist: dict[int, float],
        pred: dict[int, int],
        rank: dict[int, int],
    ) -> int | None:
        """The entity a passage's path ends at: of those it mentions, the nearest to a
        seed (then the better seed, then the row); None when none is reached."""
        reachable = [int(x) for x in mentioned.tolist() if int(x) in dist]
        if not reachable:
            return None
        return min(reachable, key=lambda x: (dist[x], rank.get(self._root(x, pred), len(rank)), x))

    def _passage(
        self, cid: str, end: int | None, pred: dict[int, int], chains: Chains
    ) -> Explanation:
        ex = Explanation()
        if end is not None:
            self._walk(ex, end, pred, cid, chains)
            ex.path.append(cid)
            ex.edges.append(_edge(chains.ids[end], cid, "mention", cid))
        else:
            ex.path.append(cid)
        ex.leaves.append(cid)
        return ex

    def _seed_rank(self, seeds: Sequence[str]) -> dict[int, int]:
        """Seed row -> its rank (0 = best seed), to break ties between equally near ends."""
        ranks: dict[int, int] = {}
        for i, row in enumerate(self.reader.rows("entities", list(seeds)).tolist()):
            if row >= 0:
                ranks.setdefault(int(row), i)
        return ranks

    def _root(self, row: int, pred: dict[int, int]) -> int:
        while pred.get(row, -9999) >= 0:
            row = pred[row]
        return row

    def _bridge(self, ex: Explanation, named_by: str, cid: str) -> None:
        row = self.reader.rows("chunks", [cid])
        target_row = int(title_entity(self.reader, row)[0]) if row[0] >= 0 else -1
        if target_row < 0:
            ex.edges.append(_edge(named_by, cid, "names", named_by))
        else:
            target = self.reader.ids("entities", [target_row])[0]
            ex.path.append(target)
            ex.edges.append(_edge(named_by, target, "names", named_by))
            ex.edges.append(_edge(target, cid, "mention", cid))
        ex.path.append(cid)
        ex.leaves.append(cid)

    def _walk(
        self, ex: Explanation, end: int, pred: dict[int, int], prefer: str | None, chains: Chains
    ) -> None:
        """Append the seed ... ``end`` entity chain and its relation edges to ``ex``."""
        chain = _chain(end, pred)
        ex.path.extend(chains.ids[x] for x in chain)
        for a, b in itertools.pairwise(chain):
            rel = chains.relations[(a, b)]
            evidence = prefer if prefer in rel.evidence else rel.evidence[0]
            kind = "relation" if rel.kind == STATED else "cooccurrence"
            ex.edges.append(_edge(rel.src, rel.dst, kind, evidence, rel.predicate, rel.id))
            ex.leaves.append(evidence)

    def _chains(self, ends: Sequence[int], pred: dict[int, int]) -> Chains:
        """The ids and relations of the seed ... end chains of ``ends``, in one read of
        each (rather than a read per path)."""
        chains = [_chain(end, pred) for end in ends]
        rows = sorted({x for chain in chains for x in chain})
        ids = dict(zip(rows, self.reader.ids("entities", rows), strict=True))
        pairs = sorted({p for chain in chains for p in itertools.pairwise(chain)})
        if not pairs:
            return Chains(ids, {})
        heads = sorted({a for a, _ in pairs})
        at = {h: i for i, h in enumerate(heads)}
        adj = self.reader.adjacency("relations", np.array(heads, dtype=np.int64))
        edges = []
        for a, b in pairs:
            cols = adj.of(at[a])
            edges.append(int(adj.edge[adj.indptr[at[a]] + int(np.searchsorted(cols, b))]))  # type: ignore[index]
        rel_ids = self.reader.relation_ids(np.array(edges, dtype=np.int64))
        found = {x.id: x for x in self.reader.relations(list(dict.fromkeys(rel_ids)))}
        return Chains(ids, {p: found[r] for p, r in zip(pairs, rel_ids, strict=True)})


@dataclass(frozen=True, slots=True)
class Chains:
    """What the paths of one explanation read: entity ids by row, and the relation
    each consecutive pair of a chain stands for."""

    ids: dict[int, str]
    relations: dict[tuple[int, int], Relation]


def _within(group: set[int], dist: dict[int, float], length: float) -> bool:
    return any(dist.get(x, np.inf) <= length for x in group)


def _chain(end: int, pred: dict[int, int]) -> list[int]:
    """The rows from the seed to ``end`` by predecessor."""
    chain = [end]
    while pred.get(chain[-1], -9999) >= 0:
        chain.append(pred[chain[-1]])
    chain.reverse()
    return chain


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
