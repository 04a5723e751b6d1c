"""Local graph search, HippoRAG 2 style: link the query to entities and facts,
seed a personalized PageRank over the entity + passage graph, rank passages,
then follow the title links of the best passage (the bridge hop).

:class:`LocalSearch` runs the steps; each has its module:

Seeds (:mod:`kgrag.search.seeds`): the entities of the facts closest to the query
(a fact is an SVO relation rendered as text), the entities closest to the whole
query (only if ``top_entities`` > 0: names and facts link better alone), and for
each named span of the query its entity: a span that is an entity's name
(:mod:`kgrag.search.names`, no model) links to it directly, another capitalised
run to its nearest entity by embedding. Each seed is weighted by similarity and
node specificity (1 / number of passages mentioning it, as in HippoRAG). The best
``seed_passages`` passage nodes are also seeded with their min-max dense score
times ``passage_weight``.
Walk (:mod:`kgrag.search.local_walk`, :mod:`kgrag.search.pagerank`: thresholded
pushes by default, an exact solve on request): PPR runs on the undirected graph
with parallel edges merged; the passage ranking is then fused by RRF with the
dense ranking (``fuse_dense``; 0 = PPR alone).
Bridge hop (:mod:`kgrag.search.bridges`): the passages that the best
``bridge_from`` passages name by title (:mod:`kgrag.search.links`) gain
``bridge_weight`` x (1 + their dense score) on the fused score scaled to a maximum
of 1, capped just below the passage that names them; the hit records which passage
led to it. Named bridges: of the best ``bridge_named`` candidates, those whose
title the query names (and the best ``bridge_from``) bring the passages they name
by title into the reranked candidates whatever their own score (at most
``bridge_extra``): the director's page of a film the question names, for each
film it names.
Second walk (``hop``, :func:`kgrag.search.local_walk.second_walk`): the best
candidate and the first candidates whose title the query names are the first
hop's passages; the specific entities they mention that are not seeds (a film's
director, a town a person was born in) reset a second PageRank, whose best
passages join the candidates and whose rank and mass are rerank features: the
next hop's passage, named only inside a first hop's text.
Sentence co-occurrence edges are left out by default (``cooc_weight`` 0): they
dilute the walk.
Rerank: the best ``rerank_depth`` candidates of that order are reranked by a
learned model (:mod:`kgrag.search.local_rerank`); a passage's score is then the
model's probability that it is evidence.

The settings are :class:`kgrag.config.LocalSearchConfig` (``retrieval.local`` in a
config file).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial

import igraph as ig
import numpy as np

from kgrag.config import LocalSearchConfig
from kgrag.encoders import Encoder
from kgrag.search.bridges import bridge, named_bridges
from kgrag.search.links import StoreLinks, text_key, title_text
from kgrag.search.local_rerank import (
    BM25_DEPTH,
    RerankModel,
    diversified,
    features,
    long_document,
)
from kgrag.search.local_rerank_model import MODEL
from kgrag.search.local_rerank_model_long import LONG_MODEL
from kgrag.search.local_walk import Hop, LocalWalk, second_walk
from kgrag.search.names import NameIndex
from kgrag.search.ranking import minmax, ranks, top_k
from kgrag.search.seeds import Seeds, link, nearest_facts
from kgrag.search.stats import chunk_vertices, lookup_names, specificity
from kgrag.store import GraphReader
from kgrag.threads import read_beside
from kgrag.whole_graph import build_graph

_RRF_K = 60

#: the local search's settings under their old name (users and benchmarks/ import it)
LocalSettings = LocalSearchConfig


@dataclass(frozen=True, slots=True)
class LocalResult:
    passages: list[tuple[str, float]]  # chunk id, score; best first
    seeds: dict[str, float]  # entity id -> reset weight before specificity
    facts: list[tuple[str, float]]  # relation id, similarity to the query
    dense: np.ndarray  # query cosine of every chunk, in vector order
    mass: np.ndarray  # PPR mass of every vertex of the graph
    via: dict[str, str]  # bridge hits: chunk id -> the chunk whose title link led to it
    qvec: np.ndarray  # the query's vector
    named: tuple[str, ...] = ()  # the seeds the query names (its spans' entities), best first


@dataclass(frozen=True, slots=True)
class FirstWalk:
    """A query's seeds, its first walk and the passage ranking they give, before the
    bridge hop: ``mass`` over every vertex, ``passage_mass`` its passages' share (by
    chunk row), ``score`` the fused ranking's score of each passage."""

    qvec: np.ndarray
    seeds: Seeds
    dense: np.ndarray
    mass: np.ndarray
    passage_mass: np.ndarray
    ppr_rank: np.ndarray
    dense_rank: np.ndarray
    score: np.ndarray


class MentionedEntities:
    """The entity rows each of a set of chunk rows mentions (one adjacency read)."""

    def __init__(self, reader: GraphReader, rows: Sequence[int]) -> None:
        adj = reader.adjacency("mentions", np.asarray(rows, dtype=np.int64))
        self._of = {int(row): adj.of(i) for i, row in enumerate(rows)}

    def of(self, row: int) -> np.ndarray:
        return self._of[int(row)]


class LocalSearch:
    """PPR search over one graph version, written against the store's query side:
    opening it reads nothing; a query reads the rows it touches."""

    def __init__(
        self,
        reader: GraphReader,
        encoder: Encoder,
        settings: LocalSearchConfig | None = None,
        model: RerankModel = MODEL,
        long_model: RerankModel = LONG_MODEL,
    ) -> None:
        self.reader, self.encoder, self.model = reader, encoder, model
        self.long_model = long_model
        self.n_chunks, self.n_entities = reader.size("chunks"), reader.size("entities")
        self.n_vertices = self.n_entities + self.n_chunks
        self.names = NameIndex.from_lookup(partial(lookup_names, reader))
        self._sparse = reader.search_sparse
        self._chunk_vertex: np.ndarray | None = None
        self.configure(settings or LocalSearchConfig())

    @property
    def chunk_vertex(self) -> np.ndarray:
        """The vertex of each chunk row (read once: one int per passage)."""
        if self._chunk_vertex is None:
            self._chunk_vertex = np.asarray(chunk_vertices(self.reader), dtype=np.int64)
        return self._chunk_vertex

    def configure(self, settings: LocalSearchConfig) -> None:
        """Use new settings (the walk is made again: see :class:`LocalWalk`)."""
        self.settings = settings
        self.links = StoreLinks(self.reader, settings.link_max_in)
        weights = {
            "relation": settings.relation_weight,
            "cooc": settings.cooc_weight,
            "mention": settings.mention_weight,
            "synonym": settings.synonym_weight,
        }
        self.walk = LocalWalk(
            self.reader,
            self._whole_graph,
            weights=weights,
            damping=settings.damping,
            push_eps=settings.push_eps,
            ppr_tol=settings.ppr_tol,
        )

    def _whole_graph(self) -> ig.Graph:
        """Every entity, passage and edge as one igraph (reads every record)."""
        reader = self.reader
        chunk_ids = reader.ids("chunks", np.arange(self.n_chunks))
        return build_graph(
            reader.entities(), chunk_ids, reader.mentions(), reader.relations(), reader.synonyms()
        )

    def search(self, query: str, k: int = 10) -> LocalResult:
        """The best ``k`` passages for ``query``: the candidates of the walks and the
        bridge hop, reranked by the learned model when ``rerank_depth`` > 0."""
        depth = self.settings.rerank_depth
        found, rows, x, titles = self._candidates(query, max(k, depth) if depth > 0 else k)
        if depth <= 0 or not rows:
            return found
        if long_document(titles, self.settings.long_share):
            prob = self.long_model.scores(x)
            vectors = self.reader.matrix("chunks")[np.asarray(rows, dtype=np.int64)]
            order = diversified(prob, vectors, titles, self.settings.long_diversity, k)[:k]
        else:
            prob = self.model.scores(x)
            order = sorted(range(len(rows)), key=lambda i: (-prob[i], i))[:k]
        passages = [(found.passages[i][0], float(prob[i])) for i in order]
        kept = {c for c, _ in passages}
        via = {c: v for c, v in found.via.items() if c in kept}
        return LocalResult(
            passages,
            found.seeds,
            found.facts,
            found.dense,
            found.mass,
            via,
            found.qvec,
            found.named,
        )

    def candidates(self, query: str, n: int) -> tuple[LocalResult, list[int], np.ndarray]:
        """The best ``n`` passages before reranking (as a result), their chunk rows and
        their rerank features (:data:`kgrag.search.local_rerank.FEATURES`)."""
        found, rows, x, _ = self._candidates(query, n)
        return found, rows, x

    def _candidates(
        self, query: str, n: int
    ) -> tuple[LocalResult, list[int], np.ndarray, list[str]]:
        """:meth:`candidates` and the candidates' document titles (read for the
        features; empty when nothing is reranked)."""
        reader, settings = self.reader, self.settings
        reranked = settings.rerank_depth > 0
        sparse = read_beside(reader, self._sparse, query, BM25_DEPTH) if reranked else None
        walked = self._first_walk(query)
        score, via_rows = bridge(
            walked.score,
            walked.dense,
            self.links,
            bridge_from=settings.bridge_from,
            bridge_weight=settings.bridge_weight,
        )
        top = top_k(score, n)
        if settings.rerank_depth > 0 and settings.bridge_named > 0:
            top = named_bridges(
                reader,
                self._titles,
                query,
                score,
                top,
                via_rows,
                bridge_named=settings.bridge_named,
                bridge_from=settings.bridge_from,
                link_max_in=settings.link_max_in,
                bridge_extra=settings.bridge_extra,
            )
        rows = [row for row, _ in top]
        titles = self._titles(rows) if reranked and rows else []
        hop = Hop()
        if titles and settings.hop and not long_document(titles, settings.long_share):
            hop = self._hop(query, rows, titles, walked.seeds.by_row)
            have = set(rows)
            extra = [row for row in hop.rank if row not in have][: settings.hop_extra]
            top += [(row, float(score[row])) for row in extra]
            rows += extra
            titles += self._titles(extra) if extra else []
        id_of = dict(zip(rows, reader.ids("chunks", rows), strict=True))
        found = self._result(walked, top, id_of, via_rows)
        if not titles:
            return found, rows, np.zeros((len(rows), 0)), []
        assert sparse is not None
        x = self._features(query, rows, id_of, walked, via_rows, sparse.result(), titles, hop)
        return found, rows, x, titles

    def _first_walk(self, query: str) -> FirstWalk:
        """Link ``query`` to its seeds, walk from them and its best passages, and fuse
        the walk's passage ranking with the dense one (``fuse_dense``)."""
        reader = self.reader
        spans = self.names.spans(query) if self.n_entities else None
        known = [row for row, _, _ in spans.known] if spans else []
        unknown = spans.unknown if spans else []
        qvec, span_vecs = self.encoder.encode_with_spans(query, unknown)  # one model call
        scan = read_beside(reader, reader.similarity, "chunks", qvec) if self.n_chunks else None
        seeds = self._seeds(qvec, known, span_vecs)
        dense = scan.result() if scan else np.zeros(0)
        mass = self._ppr(seeds.by_row, dense)
        passage_mass = mass[self.chunk_vertex] if self.n_chunks else np.zeros(0)
        ppr_rank, dense_rank = ranks(passage_mass), ranks(dense)
        score = passage_mass
        if self.settings.fuse_dense > 0 and len(score):
            score = 1.0 / (_RRF_K + ppr_rank) + self.settings.fuse_dense / (_RRF_K + dense_rank)
        return FirstWalk(qvec, seeds, dense, mass, passage_mass, ppr_rank, dense_rank, score)

    def _result(
        self,
        walked: FirstWalk,
        top: list[tuple[int, float]],
        id_of: dict[int, str],
        via_rows: dict[int, int],
    ) -> LocalResult:
        """The candidates ``top`` (chunk row, score) as a result, by id."""
        reader = self.reader
        via_ids = reader.ids("chunks", sorted({*via_rows, *via_rows.values()}))
        via_id = dict(zip(sorted({*via_rows, *via_rows.values()}), via_ids, strict=True))
        facts = walked.seeds.facts
        return LocalResult(
            [(id_of[row], s) for row, s in top],
            walked.seeds.weights,
            list(
                zip(
                    reader.ids("facts", [row for row, _ in facts]),
                    [s for _, s in facts],
                    strict=True,
                )
            ),
            walked.dense,
            walked.mass,
            {via_id[t]: via_id[by] for t, by in via_rows.items()},
            walked.qvec,
            walked.seeds.named,
        )

    def _features(
        self,
        query: str,
        rows: list[int],
        id_of: dict[int, str],
        walked: FirstWalk,
        via_rows: dict[int, int],
        sparse: list[tuple[str, float]],
        titles: list[str],
        hop: Hop,
    ) -> np.ndarray:
        """The rerank features of candidate ``rows``, from the rows they touch (``sparse``:
        the query's best BM25 passages; ``titles``: the rows' document titles)."""
        reader = self.reader
        seed_rows = walked.seeds.by_row
        row_of = {cid: row for row, cid in id_of.items()}
        title_keys = {row: title_text(t) for row, t in zip(rows, titles, strict=True)}
        entities = MentionedEntities(reader, rows)
        # the features read the specificity of the best candidate's entities and the
        # seeds' only (a few dozen entities, where every candidate's are ~1,000)
        touched = sorted({int(e) for e in entities.of(rows[0])} | set(seed_rows))
        spec = dict(
            zip(
                touched,
                specificity(reader, np.array(touched, dtype=np.int64)).tolist(),
                strict=True,
            )
        )
        return features(
            rows,
            ppr_rank=walked.ppr_rank,
            dense_rank=walked.dense_rank,
            dense=walked.dense,
            mass=walked.passage_mass,
            bm25_rank={row_of.get(cid, -1): i for i, (cid, _) in enumerate(sparse)},
            title_keys=title_keys,
            query_key=text_key(query),
            seeds=seed_rows,
            specificity=spec,
            entities=entities,
            links=self.links,
            bridged={row for row in via_rows if row in id_of},
            hop_rank=hop.rank,
            hop_share=hop.share,
        )

    def _hop(self, query: str, rows: list[int], titles: list[str], seeds: dict[int, float]) -> Hop:
        """The second walk from candidates ``rows`` (:func:`second_walk`)."""
        settings = self.settings
        return second_walk(
            self.reader,
            self.walk,
            self.chunk_vertex,
            self.n_vertices,
            query,
            rows,
            titles,
            seeds,
            hop_from=settings.hop_from,
            hop_named=settings.hop_named,
            hop_specific=settings.hop_specific,
        )

    def _titles(self, rows: Sequence[int]) -> list[str]:
        """The document title of each chunk row."""
        found = self.reader.attribute("chunks", "title", np.asarray(rows, dtype=np.int64))
        return [t.decode() for t in found.tolist()]

    def _seeds(self, qvec: np.ndarray, known: list[int], span_vecs: np.ndarray) -> Seeds:
        """The query's seeds (:func:`kgrag.search.seeds.link`): ``known`` the entity rows
        of its spans that are known names, ``span_vecs`` the vectors of its other spans."""
        settings, reader = self.settings, self.reader
        # the three nearest-neighbour reads start together (overlapping on a server)
        fact_read = read_beside(reader, nearest_facts, reader, qvec, settings.top_facts)
        entities = self.n_entities > 0
        top_read = (
            read_beside(reader, reader.nearest, "entities", qvec, settings.top_entities)
            if entities and settings.top_entities > 0
            else None
        )
        span_read = (
            read_beside(reader, reader.nearest, "entities", np.asarray(span_vecs), 1)
            if entities and len(span_vecs)
            else None
        )
        return link(
            reader,
            fact_read,
            top_read,
            span_read,
            known,
            entities=entities,
            span_boost=settings.span_boost,
            named_similarity=settings.named_similarity,
        )

    def _ppr(self, seeds: dict[int, float], dense: np.ndarray) -> np.ndarray:
        """The first walk's mass over every vertex, reset by the seeds (entity row ->
        weight, times specificity) and the best passages' min-max ``dense`` score."""
        settings = self.settings
        reset = np.zeros(self.n_vertices)
        if seeds:
            rows = np.fromiter(seeds, dtype=np.int64, count=len(seeds))
            weights = np.maximum(np.fromiter(seeds.values(), dtype=np.float64), 0.0)
            reset[rows] = weights * specificity(self.reader, rows)
        if len(dense):
            scaled = minmax(dense)
            best = settings.seed_passages
            if 0 < best < len(scaled):  # the best passages only: a local walk
                cut = np.partition(scaled, len(scaled) - best)[-best]
                scaled = np.where(scaled >= cut, scaled, 0.0)
            reset[self.chunk_vertex] += settings.passage_weight * scaled
        if reset.sum() <= 0:
            return np.zeros(self.n_vertices)
        return self.walk.mass(reset)
