"""Local graph search, HippoRAG 2 style: link the query to entities and facts,
seed a personalized PageRank over the entity + passage graph, rank passages,
then follow the title links of the best passage (the bridge hop).

Seeds: the entities of the facts closest to the query (a fact is an SVO
relation rendered as text), the entities closest to the whole query (only if
``top_entities`` > 0: names and facts link better alone), and for each named
span of the query its entity: a span that is an entity's name
(:mod:`kgrag.graph.names`, no model) links to it directly, another capitalised
run to its nearest entity by embedding. Each seed is weighted by similarity and
node specificity (1 / number of passages mentioning it, as in HippoRAG). The best
``seed_passages`` passage nodes are also seeded with their min-max dense score
times ``passage_weight``. PPR (:mod:`kgrag.graph.ppr`: thresholded pushes by
default, an exact solve on request) runs on the undirected graph with parallel
edges merged; the passage ranking is then fused by RRF with the dense ranking
(``fuse_dense``; 0 = PPR alone).
Bridge hop: the passages that the best ``bridge_from`` passages name by title
(:mod:`kgrag.graph.links`) gain ``bridge_weight`` x (1 + their dense score) on
the fused score scaled to a maximum of 1, capped just below the passage that
names them; the hit records which passage led to it.
Sentence co-occurrence edges are left out by default (``cooc_weight`` 0): on
MuSiQue they dilute the walk.
Rerank: the best ``rerank_depth`` candidates of that order are reranked by a
learned model (:mod:`kgrag.graph.rerank`); a passage's score is then the
model's probability that it is evidence.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import igraph as ig
import numpy as np

from ..encoders import Encoder
from ..store import GraphReader
from .build import build_graph
from .links import TitleLinks, build_links, key_text, text_key, title_key
from .names import NameIndex
from .ppr import personalized_pagerank, pushed_pagerank, transition, walk_matrix
from .rerank import BM25_DEPTH, ChunkEntities, RerankModel, features
from .rerank_model import MODEL
from .scan import HalfScan

COOC = "co-occurs with"  # the predicate of sentence co-occurrence relations
_RRF_K = 60
_STEP = 1e-6  # bridge targets sit this far apart below the passage that names them


@dataclass(frozen=True, slots=True)
class LocalSettings:
    damping: float = 0.5
    passage_weight: float = 0.2
    top_facts: int = 5
    top_entities: int = 0  # entities nearest the whole query (0: names and facts link)
    span_boost: float = 1.5  # seeds linked from a named span of the query weigh more
    relation_weight: float = 1.0
    cooc_weight: float = 0.0
    mention_weight: float = 1.0
    synonym_weight: float = 1.0
    fuse_dense: float = 0.5
    bridge_from: int = 1
    bridge_weight: float = 0.3
    link_max_in: int = 20  # titles named by more passages than this give no links
    #: passages seeded by their dense score: the best N (0: all). With push_eps the
    #: walk then stays near the seeds and the best passages (60k passages: PageRank
    #: 33 -> 5 ms; recall on musique100 / hotpotqa100 / 2Wiki within a point)
    seed_passages: int = 2000
    #: PageRank by thresholded pushes (:func:`kgrag.graph.ppr.pushed_pagerank`): mass
    #: under this share of the reset stops spreading; 0 solves exactly (conjugate
    #: gradients to ``ppr_tol``)
    push_eps: float = 1e-5
    #: relative residual at which PageRank's conjugate gradients stop (~7 rounds):
    #: passage ranks settle long before a full solve (2Wiki: the same top 10, in the
    #: same order, as at 1e-7 for 40 of 40 questions)
    ppr_tol: float = 1e-4
    #: candidates the learned model reranks (:mod:`kgrag.graph.rerank`; 0: none): at
    #: least ``k``. R@5 musique100 69.25 -> 73.42 (fitted on it; cross-validated 72.58),
    #: 2Wiki held-out 84.58 -> 94.17
    rerank_depth: int = 50


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
        self,
        reader: GraphReader,
        encoder: Encoder,
        settings: LocalSettings | None = None,
        model: RerankModel = MODEL,
    ) -> None:
        self.encoder, self.model = encoder, model
        entities = reader.entities()
        self.chunk_ids, self.chunk_matrix = reader.vectors("chunks")
        self.entity_ids, self.entity_matrix = reader.vectors("entities")
        self.fact_ids, self.fact_matrix = reader.vectors("facts")
        relations = reader.relations()
        self.relation = {r.id: r for r in relations}
        mentions = reader.mentions()
        self._full = build_graph(entities, self.chunk_ids, mentions, relations, reader.synonyms())
        self._sparse = reader.search_sparse
        self.entity_row = {eid: i for i, eid in enumerate(self.entity_ids)}
        chunk_row = {c: i for i, c in enumerate(self.chunk_ids)}
        self._chunk_entities = ChunkEntities.build(
            [
                (chunk_row[m.chunk_id], self.entity_row[m.entity_id])
                for m in mentions
                if m.chunk_id in chunk_row and m.entity_id in self.entity_row
            ],
            len(self.chunk_ids),
        )
        self.vertex = {v: i for i, v in enumerate(self._full.vs["id"])}
        self.passage_rows = np.array([self.vertex[c] for c in self.chunk_ids], dtype=np.int64)
        self.specificity = {e.id: 1.0 / max(1, len(e.chunk_ids)) for e in entities}
        self._entity_specificity = np.array(
            [self.specificity.get(eid, 1.0) for eid in self.entity_ids], dtype=np.float64
        )
        by_id = {e.id: e for e in entities}
        self.names = NameIndex(
            (row, by_id[eid].name, by_id[eid].type)
            for row, eid in enumerate(self.entity_ids)
            if eid in by_id
        )
        self._facts, self._entities = HalfScan(self.fact_matrix), HalfScan(self.entity_matrix)
        self.entity_vertices = [v for v in self._full.vs["id"] if v in self.specificity]
        self._chunks, self._docs = reader.chunks(), {d.id: d for d in reader.documents()}
        self.links: TitleLinks | None = None
        self.configure(settings or LocalSettings())

    def configure(self, settings: LocalSettings) -> None:
        """Use new settings (re-weighting the graph's edges)."""
        if self.links is None or settings.link_max_in != self.links.max_in:
            self.links = build_links(self.chunk_ids, self._chunks, self._docs, settings.link_max_in)
            self._title_keys = [key_text(title_key(t)) for t in self.links.titles]
        self.settings = settings
        self.graph = _weighted(self._full, settings)
        # float32: half the bytes per round; ranks settle long before float32 rounding
        # (~1e-7 relative) could matter
        if settings.push_eps > 0:
            self._walk: Any = walk_matrix(self.graph)
        else:
            import torch

            self._walk = transition(self.graph).astype(torch.float32)

    def search(self, query: str, k: int = 10) -> LocalResult:
        depth = self.settings.rerank_depth
        found, rows, x = self.candidates(query, max(k, depth) if depth > 0 else k)
        if depth <= 0 or not rows:
            return found
        prob = self.model.scores(x)
        order = sorted(range(len(rows)), key=lambda i: (-prob[i], i))[:k]
        passages = [(self.chunk_ids[rows[i]], float(prob[i])) for i in order]
        kept = {c for c, _ in passages}
        via = {c: v for c, v in found.via.items() if c in kept}
        return LocalResult(
            passages, found.seeds, found.facts, found.dense, found.mass, via, found.qvec
        )

    def candidates(self, query: str, n: int) -> tuple[LocalResult, list[int], np.ndarray]:
        """The best ``n`` passages before reranking (as a result), their chunk rows and
        their rerank features (:data:`kgrag.graph.rerank.FEATURES`)."""
        spans = self.names.spans(query) if len(self.entity_ids) else None
        known = [row for row, _, _ in spans.known] if spans else []
        unknown = spans.unknown if spans else []
        qvec, span_vecs = self.encoder.encode_with_spans(query, unknown)  # one model call
        seeds, facts = self._seeds(qvec, known, span_vecs)
        dense = self.chunk_matrix @ qvec if len(self.chunk_ids) else np.zeros(0)
        mass = self._ppr(seeds, dense)
        passage_mass = mass[self.passage_rows] if len(self.passage_rows) else np.zeros(0)
        ppr_rank, dense_rank = _ranks(passage_mass), _ranks(dense)
        score = passage_mass
        if self.settings.fuse_dense > 0 and len(score):
            score = 1.0 / (_RRF_K + ppr_rank) + self.settings.fuse_dense / (_RRF_K + dense_rank)
        score, via = self._bridge(score, dense)
        top = _top(score, n)
        found = LocalResult(
            [(self.chunk_ids[r], s) for r, s in top],
            seeds,
            [(self.fact_ids[r], s) for r, s in facts],
            dense,
            mass,
            via,
            qvec,
        )
        rows = [r for r, _ in top]
        if self.settings.rerank_depth <= 0 or not rows or self.links is None:
            return found, rows, np.zeros((len(rows), 0))
        chunk_row = {self.chunk_ids[r]: r for r in rows}
        x = features(
            rows,
            ppr_rank=ppr_rank,
            dense_rank=dense_rank,
            dense=dense,
            mass=passage_mass,
            bm25_rank={
                chunk_row.get(cid, -1): i
                for i, (cid, _) in enumerate(self._sparse(query, BM25_DEPTH))
            },
            title_keys=self._title_keys,
            query_key=text_key(query),
            seeds={self.entity_row[e]: w for e, w in seeds.items() if e in self.entity_row},
            specificity=self._entity_specificity,
            entities=self._chunk_entities,
            links=self.links,
            bridged={chunk_row[c] for c in via if c in chunk_row},
        )
        return found, rows, x

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

        facts = self._facts.top(qvec, s.top_facts)
        for row, sim in facts:
            rel = self.relation[self.fact_ids[row]]
            add(rel.src, sim)
            add(rel.dst, sim)
        if not len(self.entity_ids):
            return seeds, facts
        for row, sim in self._entities.top(qvec, s.top_entities):
            add(self.entity_ids[row], sim)
        for row in known:
            add(self.entity_ids[row], s.span_boost)
        for vec in span_vecs:
            for row, sim in self._entities.top(vec, 1):
                add(self.entity_ids[row], sim * s.span_boost)
        return seeds, facts

    def _ppr(self, seeds: dict[str, float], dense: np.ndarray) -> np.ndarray:
        s = self.settings
        reset = np.zeros(self.graph.vcount())
        for eid, weight in seeds.items():
            reset[self.vertex[eid]] = max(weight, 0.0) * self.specificity.get(eid, 1.0)
        if len(dense):
            scaled = _minmax(dense)
            if 0 < s.seed_passages < len(scaled):  # the best passages only: a local walk
                cut = np.partition(scaled, len(scaled) - s.seed_passages)[-s.seed_passages]
                scaled = np.where(scaled >= cut, scaled, 0.0)
            reset[self.passage_rows] += s.passage_weight * scaled
        if reset.sum() <= 0:
            return np.zeros(self.graph.vcount())
        if s.push_eps > 0:
            return pushed_pagerank(self._walk, reset, s.damping, s.push_eps)
        return personalized_pagerank(self._walk, reset, s.damping, s.ppr_tol)


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
    order = descending(x)
    ranks = np.empty(len(x))
    ranks[order] = np.arange(len(x))
    return ranks


def descending(x: np.ndarray) -> np.ndarray:
    """Indexes of ``x`` by value, largest first, ties by index: ``argsort(-x)`` as a
    stable sort would give it. For float32, one plain sort of 64-bit keys (the value's
    bits mapped to an order-preserving unsigned int, then the index): 1.1 ms instead of
    4.8 ms for 66k passages."""
    if x.dtype != np.float32 or len(x) >= 2**32:
        return np.argsort(-x, kind="stable")
    bits = (x + np.float32(0)).view(np.uint32)  # -0.0 + 0.0 is 0.0: equal zeros tie
    up = np.where(bits >> np.uint32(31), ~bits, bits | np.uint32(1 << 31))
    key = ((~up).astype(np.uint64) << np.uint64(32)) | np.arange(len(x), dtype=np.uint64)
    return (np.sort(key) & np.uint64(0xFFFFFFFF)).astype(np.int64)


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
