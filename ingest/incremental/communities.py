"""Repair a community hierarchy after an update instead of rebuilding it.

Leiden starts from the previous membership, new entities as singletons, at
the top and again inside every community that changed, and only the entities
the update touched (new ones, and those whose mentions or edges changed) may
move; the others stay in their previous community. A community is
matched to the previous one it overlaps most, its subgraph is split starting
from that one's children, and any piece whose members are exactly a previous
community's keeps that community's whole subtree. Ids hash level and
members, so regions the update did not touch keep their ids; reports are
recomputed everywhere (they are cheap and new relations may reach them).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Mapping, Sequence

import igraph as ig
import leidenalg
import numpy as np

from ingest.communities import (
    _build_index,
    _from_roots,
    _groups,
    _Node,
    _split,
    build_communities,
    entity_graph,
)
from kgrag.types import Community, Entity, Relation, Sentence, Synonym


def repair_communities(
    entities: Sequence[Entity],
    relations: Sequence[Relation],
    synonyms: Sequence[Synonym],
    sentences: Sequence[Sentence],
    chunk_texts: Mapping[str, str],
    previous: Sequence[Community],
    *,
    max_size: int,
    max_levels: int,
    seed: int,
    report_sentences: int,
    touched: Collection[str] | None = None,
) -> list[Community]:
    """The hierarchy of the updated graph, sorted by level then id (see the module doc).

    ``touched`` names the entities whose mentions or edges changed; the others keep
    their previous community at every level Leiden runs (None: every entity may move).
    """
    settings = dict(max_size=max_size, max_levels=max_levels, seed=seed)
    if not previous or not entities:
        return build_communities(
            entities,
            relations,
            synonyms,
            sentences,
            chunk_texts,
            report_sentences=report_sentences,
            **settings,
        )
    ents, pos, edges, graph = entity_graph(entities, relations, synonyms)
    top = max(c.level for c in previous)
    repair = _Repair(ents, pos, {c.id: c for c in previous}, max_size, max_levels - 1, seed)
    repair.touched = None if touched is None else frozenset(touched)
    tops = sorted((c for c in previous if c.level == top), key=lambda c: c.id)
    whole = np.arange(len(ents))
    roots = [
        repair.node(graph, whole, part, tops, 0) for part in repair.partition(graph, whole, tops)
    ]
    index = _build_index(ents, pos, edges, relations, sentences, chunk_texts)
    return _from_roots(roots, ents, index, report_sentences)


class _Repair:
    """The state one repair threads through its recursion."""

    def __init__(
        self,
        ents: Sequence[Entity],
        pos: Mapping[str, int],
        by_id: Mapping[str, Community],
        max_size: int,
        max_depth: int,
        seed: int,
    ) -> None:
        self.ents, self.pos, self.by_id = ents, pos, by_id
        self.max_size, self.max_depth, self.seed = max_size, max_depth, seed
        self._owners: dict[int, tuple[Sequence[Community], dict[str, int]]] = {}
        self.touched: frozenset[str] | None = None

    def partition(
        self, graph: ig.Graph, gids: np.ndarray, before: Sequence[Community]
    ) -> list[np.ndarray]:
        """Leiden on ``graph`` (vertex i is entity ``gids[i]``) from the ``before`` membership."""
        label = {m: i for i, c in enumerate(before) for m in c.members}
        ids = [self.ents[g].id for g in gids.tolist()]
        start = [label.get(e, len(before) + i) for i, e in enumerate(ids)]
        initial = np.unique(start, return_inverse=True)[1].ravel().tolist()
        partition = leidenalg.ModularityVertexPartition(
            graph, weights="weight", initial_membership=initial
        )
        fixed = None
        if self.touched is not None:  # untouched old members stay where they were
            fixed = [e in label and e not in self.touched for e in ids]
        optimiser = leidenalg.Optimiser()
        optimiser.set_rng_seed(self.seed)
        optimiser.optimise_partition(partition, n_iterations=2, is_membership_fixed=fixed)
        return _groups(list(partition.membership))

    def node(
        self,
        graph: ig.Graph,
        gids: np.ndarray,
        part: np.ndarray,
        before: Sequence[Community],
        depth: int,
    ) -> _Node:
        """The hierarchy node for ``part``: a previous subtree when its members are
        unchanged, else split again starting from the closest previous community."""
        members = gids[part]
        ids = [self.ents[i].id for i in members.tolist()]
        owner = self._owner(before)
        hits = Counter(owner[i] for i in ids if i in owner)
        best = min(hits, key=lambda o: (-hits[o], o)) if hits else -1
        match = before[best] if hits else None
        if match is not None and len(match.members) == len(ids) == hits[best]:
            return self.previous(match)
        node = _Node(members)
        if len(part) <= self.max_size or depth >= self.max_depth:
            return node
        sub = graph.induced_subgraph(part.tolist())
        kids = [self.by_id[k] for k in match.children] if match is not None else []
        kids = [k for k in kids if len(k.members) < len(match.members)] if match else []
        pieces = self.partition(sub, members, kids) if kids else []
        if len(pieces) < 2:
            pieces = _split(sub, self.seed)
        if len(pieces) < 2:
            return node
        node.children = [self.node(sub, members, p, kids, depth + 1) for p in pieces]
        return node

    def _owner(self, before: Sequence[Community]) -> dict[str, int]:
        """Entity id -> position in ``before`` (cached for the top level's long list)."""
        key = id(before)
        if self._owners.get(key, (None,))[0] is not before:
            self._owners[key] = (before, {m: i for i, c in enumerate(before) for m in c.members})
        return self._owners[key][1]

    def previous(self, community: Community) -> _Node:
        """A stored community's subtree as a node; carried-down copies are leaves."""
        node = _Node(np.array(sorted(self.pos[m] for m in community.members), dtype=np.int64))
        kids = [self.by_id[k] for k in community.children if k in self.by_id]
        if len(kids) >= 2:
            node.children = [self.previous(k) for k in kids]
        return node
