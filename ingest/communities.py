"""Hierarchical Leiden communities with extractive reports.

The entity graph (relations plus synonymy edges) is partitioned top-down:
Leiden on the whole graph gives the coarsest level, and every community
larger than ``max_size`` is split again by Leiden on its own subgraph. Levels
are numbered so that 0 is the finest; each level partitions all entities, a
community that stops splitting early being carried down unchanged.

Reports are extractive, no LLM: the best-connected members, the strongest
internal relations and the sentences that mention the best-connected members.
Per-level statistics are computed with numpy over edge and mention arrays, not
per community in Python.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import igraph as ig
import leidenalg
import numpy as np

from kgrag.ids import content_id
from kgrag.types import Community, CommunityReport, Entity, Relation, Sentence, Synonym

from .relation_table import RelationTable, relation_columns

KEY_ENTITIES = 8
KEY_RELATIONS = 8
TITLE_ENTITIES = 3
_RESOLUTIONS = (2.0, 4.0, 8.0)


@dataclass
class _Node:
    """A community of the hierarchy before levels are numbered."""

    members: np.ndarray  # vertex indexes, ascending
    children: list[_Node] = field(default_factory=list)

    def height(self) -> int:
        return 1 + max(c.height() for c in self.children) if self.children else 0


@dataclass(frozen=True)
class _Slot:
    """A placed community: its level, links and members, before its report."""

    id: str
    level: int
    parent: str | None
    children: tuple[str, ...]
    members: np.ndarray


@dataclass(frozen=True)
class _Index:
    """Arrays over vertexes, edges, relations, sentences and mentions."""

    ids: list[str]
    names: list[str]
    name_rank: np.ndarray  # rank of each vertex by (name, id)
    eu: np.ndarray  # merged graph edges, eu < ev
    ev: np.ndarray
    ew: np.ndarray
    ru: np.ndarray  # relations in report preference order
    rv: np.ndarray
    rel_text: Sequence[str]
    sent_text: list[str]  # sentences in tie-break order (length, chunk, index)
    inc_s: np.ndarray  # distinct (sentence, vertex) mentions
    inc_v: np.ndarray
    chunk_ids: list[str]  # sorted
    men_v: np.ndarray  # distinct (vertex, chunk) mentions
    men_c: np.ndarray


def build_communities(
    entities: Sequence[Entity],
    relations: Sequence[Relation],
    synonyms: Sequence[Synonym],
    sentences: Sequence[Sentence],
    chunk_texts: Mapping[str, str],
    *,
    max_size: int,
    max_levels: int,
    seed: int,
    report_sentences: int,
) -> list[Community]:
    """Partition the entity graph into a community hierarchy with reports.

    Sorted by level (0 = finest) then id. The same input and seed give the
    same output.
    """
    if not entities:
        return []
    ents, pos, edges, graph = entity_graph(entities, relations, synonyms)
    roots = _hierarchy(graph, max_size=max_size, max_levels=max_levels, seed=seed)
    index = _build_index(ents, pos, edges, relations, sentences, chunk_texts)
    return _from_roots(roots, ents, index, report_sentences)


def entity_graph(
    entities: Sequence[Entity], relations: Sequence[Relation], synonyms: Sequence[Synonym]
) -> tuple[list[Entity], dict[str, int], tuple[np.ndarray, np.ndarray, np.ndarray], ig.Graph]:
    """Entities sorted by id, their positions, the merged edges and the weighted graph."""
    ents = sorted(entities, key=lambda e: e.id)
    pos = {e.id: i for i, e in enumerate(ents)}
    eu, ev, ew = _graph_edges(pos, relations, synonyms)
    graph = ig.Graph(n=len(ents), edges=np.column_stack([eu, ev]).tolist())
    graph.es["weight"] = ew.tolist()
    return ents, pos, (eu, ev, ew), graph


def _from_roots(
    roots: Sequence[_Node], ents: Sequence[Entity], index: _Index, report_sentences: int
) -> list[Community]:
    """Number the hierarchy under ``roots`` into levels and write every report."""
    n_levels = 1 + max(r.height() for r in roots)
    slots: list[_Slot] = []
    for root in roots:
        _place(root, n_levels - 1, None, ents, slots)
    out: list[Community] = []
    for level in range(n_levels):
        level_slots = [s for s in slots if s.level == level]
        out.extend(_level_communities(index, level_slots, report_sentences))
    out.sort(key=lambda c: (c.level, c.id))
    return out


def _graph_edges(
    pos: Mapping[str, int], relations: Sequence[Relation], synonyms: Sequence[Synonym]
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Undirected weighted edges, parallel edges summed, self loops and unknowns dropped."""
    cols = relation_columns(relations, pos)
    known = (cols.src >= 0) & (cols.dst >= 0)
    syns = [s for s in synonyms if s.src in pos and s.dst in pos]
    if not known.any() and not syns:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty, np.zeros(0)
    a = np.concatenate([cols.src[known], np.fromiter((pos[s.src] for s in syns), np.int64)])
    b = np.concatenate([cols.dst[known], np.fromiter((pos[s.dst] for s in syns), np.int64)])
    stated = np.where(cols.stated[known], 2.0, 1.0)
    w = np.concatenate([cols.weight[known] * stated, [s.score for s in syns]])
    del cols, syns
    keep = (a != b) & (w > 0)
    lo, hi, w = np.minimum(a, b)[keep], np.maximum(a, b)[keep], w[keep]
    n = len(pos)
    keys, inverse = np.unique(lo * n + hi, return_inverse=True)
    weights = np.bincount(inverse.ravel(), weights=w, minlength=len(keys))
    return keys // n, keys % n, weights


def _hierarchy(graph: ig.Graph, *, max_size: int, max_levels: int, seed: int) -> list[_Node]:
    """Leiden on the whole graph, then recursive splits of oversized communities."""
    parts = _groups(_leiden(graph, seed))
    max_depth = max_levels - 1
    whole = np.arange(graph.vcount())
    return [_refine(graph, whole, part, 0, max_depth, max_size, seed) for part in parts]


def _refine(
    graph: ig.Graph,
    gids: np.ndarray,
    part: np.ndarray,
    depth: int,
    max_depth: int,
    max_size: int,
    seed: int,
) -> _Node:
    """The node for ``part`` (vertexes of ``graph``, which maps to ``gids``), split if too big."""
    node = _Node(gids[part])
    if len(part) <= max_size or depth >= max_depth:
        return node
    sub = graph.induced_subgraph(part.tolist())
    pieces = _split(sub, seed)
    if len(pieces) < 2:
        return node
    node.children = [
        _refine(sub, node.members, piece, depth + 1, max_depth, max_size, seed) for piece in pieces
    ]
    return node


def _leiden(graph: ig.Graph, seed: int) -> list[int]:
    partition = leidenalg.find_partition(
        graph, leidenalg.ModularityVertexPartition, weights="weight", seed=seed
    )
    return list(partition.membership)


def _split(graph: ig.Graph, seed: int) -> list[np.ndarray]:
    """Split a community's subgraph; finer resolutions when modularity keeps it whole."""
    pieces = _groups(_leiden(graph, seed))
    for resolution in _RESOLUTIONS:
        if len(pieces) > 1:
            break
        partition = leidenalg.find_partition(
            graph,
            leidenalg.RBConfigurationVertexPartition,
            weights="weight",
            resolution_parameter=resolution,
            seed=seed,
        )
        pieces = _groups(list(partition.membership))
    return pieces


def _groups(membership: Sequence[int]) -> list[np.ndarray]:
    """Vertex indexes per cluster, each ascending, clusters ordered by smallest vertex."""
    labels = np.asarray(membership, dtype=np.int64)
    order = np.argsort(labels, kind="stable")
    bounds = np.flatnonzero(np.diff(labels[order])) + 1
    groups = np.split(order, bounds)
    return sorted(groups, key=lambda g: int(g[0]))


def _place(
    node: _Node, level: int, parent: str | None, ents: Sequence[Entity], out: list[_Slot]
) -> str:
    """Number ``node`` at ``level`` and its subtree below; a leaf is carried down to 0."""
    cid = content_id("community", str(level), *(ents[i].id for i in node.members))
    kids: list[_Node] = (node.children or [_Node(node.members)]) if level > 0 else []
    child_ids = sorted(_place(kid, level - 1, cid, ents, out) for kid in kids)
    out.append(_Slot(cid, level, parent, tuple(child_ids), node.members))
    return cid


def _build_index(
    ents: Sequence[Entity],
    pos: Mapping[str, int],
    edges: tuple[np.ndarray, np.ndarray, np.ndarray],
    relations: Sequence[Relation],
    sentences: Sequence[Sentence],
    chunk_texts: Mapping[str, str],
) -> _Index:
    """Precompute the arrays every level's reports are computed from."""
    names = [e.name for e in ents]
    by_name = sorted(range(len(ents)), key=lambda i: (names[i], ents[i].id))
    name_rank = np.empty(len(ents), dtype=np.int64)
    name_rank[by_name] = np.arange(len(ents))
    ru, rv, rel_text = _relation_order(pos, names, relations)
    sent_text, inc_s, inc_v = _sentence_index(pos, sentences, chunk_texts)
    chunk_ids = sorted({c for e in ents for c in e.chunk_ids})
    chunk_pos = {c: i for i, c in enumerate(chunk_ids)}
    mentions = sorted({(i, chunk_pos[c]) for i, e in enumerate(ents) for c in e.chunk_ids})
    men = np.array(mentions, dtype=np.int64).reshape(-1, 2)
    return _Index(
        ids=[e.id for e in ents],
        names=names,
        name_rank=name_rank,
        eu=edges[0],
        ev=edges[1],
        ew=edges[2],
        ru=ru,
        rv=rv,
        rel_text=rel_text,
        sent_text=sent_text,
        inc_s=inc_s,
        inc_v=inc_v,
        chunk_ids=chunk_ids,
        men_v=men[:, 0],
        men_c=men[:, 1],
    )


def _relation_order(
    pos: Mapping[str, int], names: Sequence[str], relations: Sequence[Relation]
) -> tuple[np.ndarray, np.ndarray, Sequence[str]]:
    """The relations between two distinct vertexes in report preference order (stated
    first, then by weight, then by id): their ends, and their texts rendered when read
    (a report quotes a few; at 60k passages the text of all would take ~350 MB)."""
    cols = relation_columns(relations, pos, ids=True)
    assert cols.ids is not None  # asked for
    kept = np.flatnonzero((cols.src >= 0) & (cols.dst >= 0) & (cols.src != cols.dst))
    order = kept[np.lexsort((cols.ids[kept], -cols.weight[kept], ~cols.stated[kept]))]
    return (
        cols.src[order],
        cols.dst[order],
        _RelationTexts(relations, order, cols.src, cols.dst, names),
    )


class _RelationTexts(Sequence[str]):
    """``A -predicate-> B`` for the i-th relation of an order, made when asked for."""

    def __init__(
        self,
        relations: Sequence[Relation],
        order: np.ndarray,
        src: np.ndarray,
        dst: np.ndarray,
        names: Sequence[str],
    ) -> None:
        self.relations, self.order, self.src, self.dst = relations, order, src, dst
        self.names = names

    def __len__(self) -> int:
        return len(self.order)

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        at = int(self.order[i])
        rels = self.relations
        if isinstance(rels, RelationTable):  # its columns: no relation object made
            predicate = rels.predicates[rels.predicate[at]]
        else:
            predicate = rels[at].predicate
        return f"{self.names[self.src[at]]} -{predicate}-> {self.names[self.dst[at]]}"


def _sentence_index(
    pos: Mapping[str, int], sentences: Sequence[Sentence], chunk_texts: Mapping[str, str]
) -> tuple[list[str], np.ndarray, np.ndarray]:
    """Sentence texts in tie-break order and their distinct (sentence, entity) mentions."""
    found: list[tuple[int, str, int, str, tuple[int, ...]]] = []
    for s in sentences:
        text = chunk_texts.get(s.chunk_id)
        members = tuple(sorted({pos[e] for e in s.entity_ids if e in pos}))
        if text is None or not members:
            continue
        snippet = text[s.start : s.end].strip()
        if snippet:
            found.append((len(snippet), s.chunk_id, s.index, snippet, members))
    found.sort(key=lambda f: f[:3])
    pairs = [(i, v) for i, f in enumerate(found) for v in f[4]]
    inc = np.array(pairs, dtype=np.int64).reshape(-1, 2)
    return [f[3] for f in found], inc[:, 0], inc[:, 1]


def _level_communities(
    index: _Index, slots: Sequence[_Slot], report_sentences: int
) -> list[Community]:
    """Reports, ratings and leaves for the communities of one level."""
    n_comm = len(slots)
    comm = np.empty(len(index.ids), dtype=np.int64)
    for ci, slot in enumerate(slots):
        comm[slot.members] = ci
    inside = comm[index.eu] == comm[index.ev]
    eu, ev, ew = index.eu[inside], index.ev[inside], index.ew[inside]
    n = len(index.ids)
    degree = np.bincount(eu, ew, minlength=n) + np.bincount(ev, ew, minlength=n)
    internal = np.bincount(comm[eu], ew, minlength=n_comm)
    top = float(internal.max()) if n_comm else 0.0
    entities = _top_entities(index, comm, degree, n_comm)
    relations = _top_relations(index, comm, n_comm)
    texts = _top_sentences(index, comm, degree, n_comm, report_sentences)
    leaves = _leaves(index, comm, n_comm)
    out = []
    for ci, slot in enumerate(slots):
        names = entities[ci]
        report = CommunityReport(
            title=_title(names[:TITLE_ENTITIES]),
            key_entities=tuple(names),
            key_relations=tuple(relations[ci]),
            sentences=tuple(texts[ci]),
        )
        rating = 10.0 * math.log1p(internal[ci]) / math.log1p(top) if top > 0 else 0.0
        out.append(
            Community(
                id=slot.id,
                level=slot.level,
                parent=slot.parent,
                children=slot.children,
                members=tuple(index.ids[i] for i in slot.members),
                report=report,
                rating=min(10.0, max(0.0, rating)),
                leaves=leaves[ci],
            )
        )
    return out


def _segments(groups: np.ndarray, n_groups: int) -> list[tuple[int, int]]:
    """(start, end) of each group in an array sorted by group."""
    keys = np.arange(n_groups)
    starts = np.searchsorted(groups, keys, side="left")
    ends = np.searchsorted(groups, keys, side="right")
    return list(zip(starts.tolist(), ends.tolist(), strict=True))


def _take_distinct(
    items: Sequence[str], order: np.ndarray, start: int, end: int, k: int
) -> list[str]:
    """The first ``k`` distinct strings of ``items[order[start:end]]``."""
    seen: dict[str, None] = {}
    for i in order[start:end].tolist():
        seen.setdefault(items[i], None)
        if len(seen) == k:
            break
    return list(seen)


def _top_entities(
    index: _Index, comm: np.ndarray, degree: np.ndarray, n_comm: int
) -> list[list[str]]:
    """Names of the best-connected members of each community (ties by name)."""
    order = np.lexsort((index.name_rank, -degree, comm))
    spans = _segments(comm[order], n_comm)
    return [[index.names[i] for i in order[a : min(b, a + KEY_ENTITIES)]] for a, b in spans]


def _top_relations(index: _Index, comm: np.ndarray, n_comm: int) -> list[list[str]]:
    """Rendered internal relations of each community, svo first, then by weight."""
    rc = comm[index.ru]
    picked = np.flatnonzero(rc == comm[index.rv])
    picked = picked[np.argsort(rc[picked], kind="stable")]
    spans = _segments(rc[picked], n_comm)
    return [_take_distinct(index.rel_text, picked, a, b, KEY_RELATIONS) for a, b in spans]


def _top_sentences(
    index: _Index, comm: np.ndarray, degree: np.ndarray, n_comm: int, k: int
) -> list[list[str]]:
    """Each community's sentences scored by the degree of the members they mention."""
    n_sent = max(len(index.sent_text), 1)
    keys, inverse = np.unique(comm[index.inc_v] * n_sent + index.inc_s, return_inverse=True)
    scores = np.bincount(inverse.ravel(), degree[index.inc_v], minlength=len(keys))
    groups, sent = keys // n_sent, keys % n_sent
    order = np.lexsort((sent, -scores, groups))
    spans = _segments(groups[order], n_comm)
    ranked = sent[order]
    return [_take_distinct(index.sent_text, ranked, a, b, k) for a, b in spans]


def _leaves(index: _Index, comm: np.ndarray, n_comm: int) -> list[tuple[str, ...]]:
    """Sorted chunk ids that mention any member, per community."""
    n_chunks = max(len(index.chunk_ids), 1)
    keys = np.unique(comm[index.men_v] * n_chunks + index.men_c)
    groups, chunks = keys // n_chunks, keys % n_chunks
    spans = _segments(groups, n_comm)
    return [tuple(index.chunk_ids[c] for c in chunks[a:b].tolist()) for a, b in spans]


def _title(names: Sequence[str]) -> str:
    """Join up to three names as 'A, B and C'."""
    if len(names) <= 1:
        return "".join(names)
    return ", ".join(names[:-1]) + " and " + names[-1]
