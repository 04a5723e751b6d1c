"""Local graph search, HippoRAG 2 style: link the query to entities and facts,
seed a personalized PageRank over the entity + passage graph, rank passages,
then follow the title links of the best passage (the bridge hop).

Seeds: the entities of the facts closest to the query (a fact is an SVO
relation rendered as text), the entities closest to the whole query, and for
each named span of the query (spaCy NER, proper-noun chunks) its nearest
entity; each seed is weighted by similarity and node specificity (1 / number
of passages mentioning it, as in HippoRAG). Every passage node is also seeded
with its min-max dense score times ``passage_weight``. PPR (igraph prpack)
runs on the undirected graph with parallel edges merged; the passage ranking
is then fused by RRF with the dense ranking (``fuse_dense``; 0 = PPR alone).
Bridge hop: the passages that the best ``bridge_from`` passages name by title
(:mod:`kgrag.graph.links`) gain ``bridge_weight`` x (1 + their dense score) on
the fused score scaled to a maximum of 1, capped just below the passage that
names them; the hit records which passage led to it.
Sentence co-occurrence edges are left out by default (``cooc_weight`` 0): on
MuSiQue they dilute the walk.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import igraph as ig
import numpy as np
import scipy.sparse as sp

from ..encoders import Encoder
from ..store import GraphReader
from .build import build_graph
from .links import TitleLinks, build_links

COOC = "co-occurs with"  # the predicate of sentence co-occurrence relations
_RRF_K = 60
_PPR_ROUNDS, _PPR_TOL = 100, 1e-10
_STEP = 1e-6  # bridge targets sit this far apart below the passage that names them
_SKIP_SPANS = frozenset({"CARDINAL", "ORDINAL", "PERCENT", "QUANTITY", "MONEY"})


@dataclass(frozen=True, slots=True)
class LocalSettings:
    damping: float = 0.5
    passage_weight: float = 0.2
    top_facts: int = 5
    top_entities: int = 5
    span_boost: float = 1.5  # seeds linked from a named span of the query weigh more
    relation_weight: float = 1.0
    cooc_weight: float = 0.0
    mention_weight: float = 1.0
    synonym_weight: float = 1.0
    fuse_dense: float = 0.5
    bridge_from: int = 1
    bridge_weight: float = 0.3
    link_max_in: int = 20  # titles named by more passages than this give no links
    #: L1 change at which the walk stops (~14 rounds at damping 0.5): passage ranks
    #: settle long before a full solve (2Wiki: the same top 10, in the same order, as
    #: at 1e-8 for 40 of 40 questions; musique100 and hotpotqa100 recall unchanged)
    ppr_tol: float = 1e-4


@dataclass(frozen=True, slots=True)
class LocalResult:
    passages: list[tuple[str, float]]  # chunk id, score; best first
    seeds: dict[str, float]  # entity id -> reset weight before specificity
    facts: list[tuple[str, float]]  # relation id, similarity to the query
    dense: np.ndarray  # query cosine of every chunk, in vector order
    mass: np.ndarray  # PPR mass of every vertex of the graph
    via: dict[str, str]  # bridge hits: chunk id -> the chunk whose title link led to it
    qvec: np.ndarray  # the query's vector


class LocalSearch:
    """PPR search over one graph version; built once, queried many times."""

    def __init__(
        self, reader: GraphReader, encoder: Encoder, nlp: Any, settings: LocalSettings | None = None
    ) -> None:
        self.encoder, self.nlp = encoder, nlp
        entities = reader.entities()
        self.chunk_ids, self.chunk_matrix = reader.vectors("chunks")
        self.entity_ids, self.entity_matrix = reader.vectors("entities")
        self.fact_ids, self.fact_matrix = reader.vectors("facts")
        relations = reader.relations()
        self.relation = {r.id: r for r in relations}
        self._full = build_graph(
            entities, self.chunk_ids, reader.mentions(), relations, reader.synonyms()
        )
        self.vertex = {v: i for i, v in enumerate(self._full.vs["id"])}
        self.passage_rows = np.array([self.vertex[c] for c in self.chunk_ids], dtype=np.int64)
        self.specificity = {e.id: 1.0 / max(1, len(e.chunk_ids)) for e in entities}
        name_of = {e.id: e.name for e in entities}
        #: an entity name -> its first vector row: a span that is exactly a known name
        #: takes that entity's stored vector instead of a model call
        self._name_row: dict[str, int] = {}
        for row, eid in enumerate(self.entity_ids):
            self._name_row.setdefault(name_of.get(eid, ""), row)
        self.entity_vertices = [v for v in self._full.vs["id"] if v in self.specificity]
        self._chunks, self._docs = reader.chunks(), {d.id: d for d in reader.documents()}
        self.links: TitleLinks | None = None
        self.configure(settings or LocalSettings())

    def configure(self, settings: LocalSettings) -> None:
        """Use new settings (re-weighting the graph's edges)."""
        if self.links is None or settings.link_max_in != self.links.max_in:
            self.links = build_links(self.chunk_ids, self._chunks, self._docs, settings.link_max_in)
        self.settings = settings
        self.graph = _weighted(self._full, settings)
        matrix, dangling = transition(self.graph)
        # float32: half the bytes per round; ranks settle long before float32 rounding
        # (~1e-7 in L1 over the whole vector) could matter at ppr_tol
        self._walk = (matrix.astype(np.float32), dangling)

    def search(self, query: str, k: int = 10) -> LocalResult:
        spans = self._spans(query) if len(self.entity_ids) else []
        known = [self._name_row[t] for t, _, _ in spans if t in self._name_row]
        unknown = [(a, b) for t, a, b in spans if t not in self._name_row]
        qvec, span_vecs = self.encoder.encode_with_spans(query, unknown)  # one model call
        seeds, facts = self._seeds(qvec, known, span_vecs)
        dense = self.chunk_matrix @ qvec if len(self.chunk_ids) else np.zeros(0)
        mass = self._ppr(seeds, dense)
        score = mass[self.passage_rows] if len(self.passage_rows) else np.zeros(0)
        if self.settings.fuse_dense > 0 and len(score):
            score = 1.0 / (_RRF_K + _ranks(score)) + self.settings.fuse_dense / (
                _RRF_K + _ranks(dense)
            )
        score, via = self._bridge(score, dense)
        passages = [(self.chunk_ids[r], s) for r, s in _top(score, k)]
        return LocalResult(
            passages, seeds, [(self.fact_ids[r], s) for r, s in facts], dense, mass, via, qvec
        )

    def _bridge(self, score: np.ndarray, dense: np.ndarray) -> tuple[np.ndarray, dict[str, str]]:
        """Raise the passages the best passages name by title to just below the passage
        that names them (in their own order); remember who named them."""
        s = self.settings
        if not len(score) or s.bridge_from <= 0 or s.bridge_weight <= 0 or self.links is None:
            return score, {}
        top = float(score.max())
        score = score / top if top > 0 else score
        out, via = score.copy(), {}
        for row, named_score in _top(score, s.bridge_from):
            targets = self.links.targets(row)
            raised = score[targets] + s.bridge_weight * (1.0 + dense[targets])
            order = np.lexsort((targets, -raised))
            ceiling = named_score - _STEP * (1 + np.arange(len(targets)))
            capped = np.empty(len(targets))
            capped[order] = np.minimum(raised[order], ceiling)
            better = capped > out[targets]
            out[targets[better]] = capped[better]
            via.update({self.chunk_ids[t]: self.chunk_ids[row] for t in targets[better]})
        return out, via

    def _spans(self, query: str) -> list[tuple[str, int, int]]:
        """The query's named spans (NER, proper-noun chunks), each text once, with
        their character offsets."""
        doc = self.nlp(query)
        found = [e for e in doc.ents if e.label_ not in _SKIP_SPANS]
        found += [c for c in doc.noun_chunks if c.root.pos_ == "PROPN"]
        spans: dict[str, tuple[str, int, int]] = {}
        for span in found:
            spans.setdefault(span.text, (span.text, span.start_char, span.end_char))
        return list(spans.values())

    def _seeds(
        self, qvec: np.ndarray, known: list[int], span_vecs: np.ndarray
    ) -> tuple[dict[str, float], list[tuple[int, float]]]:
        """Seed weights from the closest facts and entities to the query, and from the
        query's spans: a span that is a known name (entity row in ``known``) links to
        that entity with similarity 1; another (``span_vecs``) to its nearest entity."""
        s = self.settings
        seeds: dict[str, float] = {}

        def add(eid: str, weight: float) -> None:
            seeds[eid] = max(seeds.get(eid, 0.0), weight)

        facts = _top(self.fact_matrix @ qvec, s.top_facts) if len(self.fact_ids) else []
        for row, sim in facts:
            rel = self.relation[self.fact_ids[row]]
            add(rel.src, sim)
            add(rel.dst, sim)
        if not len(self.entity_ids):
            return seeds, facts
        for row, sim in _top(self.entity_matrix @ qvec, s.top_entities):
            add(self.entity_ids[row], sim)
        for row in known:
            add(self.entity_ids[row], s.span_boost)
        for vec in span_vecs:  # one matrix-vector product each: faster than one skinny gemm
            sims = self.entity_matrix @ vec
            row = int(np.argmax(sims))
            add(self.entity_ids[row], float(sims[row]) * s.span_boost)
        return seeds, facts

    def _ppr(self, seeds: dict[str, float], dense: np.ndarray) -> np.ndarray:
        reset = np.zeros(self.graph.vcount())
        for eid, weight in seeds.items():
            reset[self.vertex[eid]] = max(weight, 0.0) * self.specificity.get(eid, 1.0)
        if len(dense):
            reset[self.passage_rows] += self.settings.passage_weight * _minmax(dense)
        if reset.sum() <= 0:
            return np.zeros(self.graph.vcount())
        return personalized_pagerank(
            self._walk, reset, self.settings.damping, self.settings.ppr_tol
        )


def transition(g: ig.Graph) -> tuple[sp.csr_matrix, np.ndarray]:
    """The column-stochastic walk matrix of an undirected weighted graph, and a mask of
    the vertices without edges (their mass jumps back to the reset distribution)."""
    n = g.vcount()
    ends = np.array(g.get_edgelist(), dtype=np.int64).reshape(-1, 2)
    w = np.asarray(g.es["weight"] if g.ecount() else [], dtype=np.float64)
    rows = np.concatenate([ends[:, 0], ends[:, 1]])
    cols = np.concatenate([ends[:, 1], ends[:, 0]])
    adj = sp.csr_matrix((np.concatenate([w, w]), (rows, cols)), shape=(n, n))
    strength = np.asarray(adj.sum(axis=0)).ravel()
    dangling = strength <= 0
    inv = np.where(dangling, 0.0, 1.0 / np.where(dangling, 1.0, strength))
    return (adj @ sp.diags(inv)).tocsr(), dangling


def personalized_pagerank(
    walk: tuple[sp.csr_matrix, np.ndarray],
    reset: np.ndarray,
    damping: float,
    tol: float = _PPR_TOL,
) -> np.ndarray:
    """PPR by power iteration (until the L1 change is below ``tol``, at most 100 rounds):
    the same fixed point igraph's prpack solves, at a fraction of its per-call set-up cost.
    Computed in the matrix's dtype."""
    matrix, dangling = walk
    r = (reset / reset.sum()).astype(matrix.dtype)
    p = r.copy()
    for _ in range(_PPR_ROUNDS):
        nxt = damping * (matrix @ p + p[dangling].sum() * r) + (1.0 - damping) * r
        done = float(np.abs(nxt - p).sum()) < tol
        p = nxt
        if done:
            break
    return p


def _weighted(g: ig.Graph, s: LocalSettings) -> ig.Graph:
    """A simple undirected graph whose edge weights sum the parallel edges, scaled by kind."""
    scale = {
        "relation": s.relation_weight,
        "mention": s.mention_weight,
        "synonym": s.synonym_weight,
    }
    out = g.copy()
    if out.ecount():
        kinds, preds = out.es["kind"], out.es["predicate"]
        out.es["weight"] = [
            w * (s.cooc_weight if pred == COOC else scale[kind])
            for w, kind, pred in zip(out.es["weight"], kinds, preds, strict=True)
        ]
        out.delete_edges([e.index for e in out.es if e["weight"] <= 0])
    out.simplify(multiple=True, loops=True, combine_edges={"weight": "sum"})
    return out


def _ranks(x: np.ndarray) -> np.ndarray:
    """0-based rank of each entry, best (largest) first; ties by position."""
    order = np.lexsort((np.arange(len(x)), -x))
    ranks = np.empty(len(x))
    ranks[order] = np.arange(len(x))
    return ranks


def _top(scores: np.ndarray, k: int) -> list[tuple[int, float]]:
    if len(scores) == 0 or k <= 0:
        return []
    k = min(k, len(scores))
    part = np.argpartition(-scores, k - 1)[:k]
    order = sorted(part, key=lambda i: (-scores[i], i))
    return [(int(i), float(scores[i])) for i in order]


def _minmax(x: np.ndarray) -> np.ndarray:
    lo, hi = float(x.min()), float(x.max())
    return (x - lo) / (hi - lo) if hi > lo else np.ones_like(x)
