"""Local graph search, HippoRAG 2 style: link the query to entities and facts,
seed a personalized PageRank over the entity + passage graph, rank passages,
then follow the title links of the best passage (the bridge hop).

Seeds: the entities of the facts closest to the query (a fact is an SVO
relation rendered as text), the entities closest to the whole query (only if
``top_entities`` > 0: names and facts link better alone), and for each named
span of the query its entity: a span that is an entity's name
(:mod:`kgrag.search.names`, no model) links to it directly, another capitalised
run to its nearest entity by embedding. Each seed is weighted by similarity and
node specificity (1 / number of passages mentioning it, as in HippoRAG). The best
``seed_passages`` passage nodes are also seeded with their min-max dense score
times ``passage_weight``. PPR (:mod:`kgrag.search.pagerank`: thresholded pushes by
default, an exact solve on request) runs on the undirected graph with parallel
edges merged; the passage ranking is then fused by RRF with the dense ranking
(``fuse_dense``; 0 = PPR alone).
Bridge hop: the passages that the best ``bridge_from`` passages name by title
(:mod:`kgrag.search.links`) gain ``bridge_weight`` x (1 + their dense score) on
the fused score scaled to a maximum of 1, capped just below the passage that
names them; the hit records which passage led to it. Named bridges: of the best
``bridge_named`` candidates, those whose title the query names (and the best
``bridge_from``) bring the passages they name by title into the reranked
candidates whatever their own score (at most ``bridge_extra``): the director's
page of a film the question names, for each film it names.
Second walk (``hop``): the best candidate and the first candidates whose title the
query names are the first hop's passages; the specific entities they mention that
are not seeds (a film's director, a town a person was born in) reset a second
PageRank, whose best passages join the candidates and whose rank and mass are
rerank features: the next hop's passage, named only inside a first hop's text.
Sentence co-occurrence edges are left out by default (``cooc_weight`` 0): on
MuSiQue they dilute the walk.
Rerank: the best ``rerank_depth`` candidates of that order are reranked by a
learned model (:mod:`kgrag.search.local_rerank`); a passage's score is then the
model's probability that it is evidence.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import igraph as ig
import numpy as np

from kgrag.encoders import Encoder
from kgrag.search.links import names, text_key, title_text
from kgrag.search.local_rerank import (
    BM25_DEPTH,
    HOP_DEPTH,
    SPECIFIC,
    RerankModel,
    diversified,
    features,
    long_document,
)
from kgrag.search.local_rerank_model import MODEL
from kgrag.search.local_rerank_model_long import LONG_MODEL
from kgrag.search.names import NameIndex
from kgrag.search.pagerank import personalized_pagerank, pushed_pagerank, transition, walk_matrix
from kgrag.search.stats import chunk_vertices, lookup_names, specificity
from kgrag.store import GraphReader
from kgrag.text.keys import COOC, WALK_WEIGHTS
from kgrag.whole_graph import build_graph

_RRF_K = 60
_STEP = 1e-6  # bridge targets sit this far apart below the passage that names them


@dataclass(frozen=True, slots=True)
class LocalSettings:
    damping: float = 0.5
    passage_weight: float = 0.2
    top_facts: int = 5
    top_entities: int = 0  # entities nearest the whole query (0: names and facts link)
    span_boost: float = 1.5  # seeds linked from a named span of the query weigh more
    #: a span's nearest entity at least this close counts as named by the query
    named_similarity: float = 0.8
    relation_weight: float = 1.0
    cooc_weight: float = 0.0
    mention_weight: float = 1.0
    synonym_weight: float = 1.0
    fuse_dense: float = 0.5
    bridge_from: int = 1
    bridge_weight: float = 0.3
    #: of the best N candidates, the passages whose title the query names (and the best
    #: ``bridge_from``) bring every passage they name by title into the reranked
    #: candidates, however low its own score (0: only what the bridge hop raised)
    bridge_named: int = 10
    bridge_extra: int = 10  # at most this many such candidates
    link_max_in: int = 20  # titles named by more passages than this give no links
    #: passages seeded by their dense score: the best N (0: all). With push_eps the
    #: walk then stays near the seeds and the best passages (60k passages: PageRank
    #: 33 -> 5 ms; recall on musique100 / hotpotqa100 / 2Wiki within a point)
    seed_passages: int = 2000
    #: PageRank by thresholded pushes (:func:`kgrag.search.pagerank.pushed_pagerank`): mass
    #: under this share of the reset stops spreading; 0 solves exactly (conjugate
    #: gradients to ``ppr_tol``)
    push_eps: float = 1e-5
    #: relative residual at which PageRank's conjugate gradients stop (~7 rounds):
    #: passage ranks settle long before a full solve (2Wiki: the same top 10, in the
    #: same order, as at 1e-7 for 40 of 40 questions)
    ppr_tol: float = 1e-4
    #: candidates the learned model reranks (:mod:`kgrag.search.local_rerank`; 0: none): at
    #: least ``k``. R@5 musique100 69.25 -> 73.42 (fitted on it; cross-validated 72.58),
    #: 2Wiki held-out 84.58 -> 94.17
    rerank_depth: int = 50
    #: a query whose candidates come from long documents (at least this share of them
    #: share their document title with another) is reranked by the long-document model
    #: (:data:`kgrag.search.local_rerank_model_long.LONG_MODEL`; above 1: never)
    long_share: float = 0.75
    #: there, a candidate's score less this x its highest cosine to a better candidate
    #: of the same document orders the top ``k`` (0: by score alone). GraphRAG-Bench
    #: medical, evidence in the top 5: Fact Retrieval 82.51 -> 84.0, Complex Reasoning
    #: 69.89 -> 71.18 (the model cross-validated)
    long_diversity: float = 0.4
    #: the second walk (:meth:`LocalSearch._hop`): PageRank reset by the specific
    #: entities (at least ``hop_specific``: in at most 5 passages) that are not seeds
    #: of the best ``hop_from`` candidates and of the first ``hop_named`` candidates
    #: whose title the query names: the names a first hop's passage gives the next
    #: hop. Its rank and mass are rerank features; its best ``hop_extra`` passages
    #: join the candidates. Not for long documents. musique100 R@5 72.83 -> 74.17
    #: (5-fold CV 71.33 -> 73.83), hotpotqa100 94.0 -> 94.5 (93.0 -> 94.5)
    hop: bool = True
    hop_from: int = 1
    hop_named: int = 2
    hop_specific: float = SPECIFIC
    hop_extra: int = 5


@dataclass(frozen=True, slots=True)
class Hop:
    """The second walk's best passages (at most :data:`HOP_DEPTH`): chunk row -> rank
    (0 best, in that order) and -> mass over the best passage's."""

    rank: dict[int, int] = field(default_factory=dict)
    share: dict[int, float] = field(default_factory=dict)


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


class StoreLinks:
    """A store's title links seen as :class:`~kgrag.search.links.TitleLinks`: the
    targets of a chunk row named by at most ``max_in`` passages."""

    def __init__(self, reader: GraphReader, max_in: int) -> None:
        self.reader, self.max_in = reader, max_in

    def targets(self, row: int) -> np.ndarray:
        adj = self.reader.adjacency("links", np.array([row]))
        return adj.indices[adj.data <= self.max_in]


class MentionedEntities:
    """The entity rows each of a set of chunk rows mentions (one adjacency read)."""

    def __init__(self, reader: GraphReader, rows: Sequence[int]) -> None:
        adj = reader.adjacency("mentions", np.asarray(rows, dtype=np.int64))
        self._of = {int(r): adj.of(i) for i, r in enumerate(rows)}

    def of(self, row: int) -> np.ndarray:
        return self._of[int(row)]


class LocalSearch:
    """PPR search over one graph version, written against the store's query side:
    opening it reads nothing; a query reads the rows it touches."""

    def __init__(
        self,
        reader: GraphReader,
        encoder: Encoder,
        settings: LocalSettings | None = None,
        model: RerankModel = MODEL,
        long_model: RerankModel = LONG_MODEL,
    ) -> None:
        self.reader, self.encoder, self.model = reader, encoder, model
        self.long_model = long_model
        self.n_chunks, self.n_entities = reader.size("chunks"), reader.size("entities")
        self.n_vertices = self.n_entities + self.n_chunks
        self.names = NameIndex.from_lookup(lambda keys: lookup_names(reader, keys))
        self._sparse = reader.search_sparse
        self._chunk_vertex: np.ndarray | None = None
        self.configure(settings or LocalSettings())

    @property
    def chunk_vertex(self) -> np.ndarray:
        """The vertex of each chunk row (read once: one int per passage)."""
        if self._chunk_vertex is None:
            self._chunk_vertex = np.asarray(chunk_vertices(self.reader), dtype=np.int64)
        return self._chunk_vertex

    def configure(self, settings: LocalSettings) -> None:
        """Use new settings. With the store's walk weights and pushes the store's walk
        serves; other weights, or the exact solve, build the walk from every edge."""
        self.settings = settings
        self.links = StoreLinks(self.reader, settings.link_max_in)
        weights = {
            "relation": settings.relation_weight,
            "cooc": settings.cooc_weight,
            "mention": settings.mention_weight,
            "synonym": settings.synonym_weight,
        }
        if settings.push_eps > 0 and weights == WALK_WEIGHTS:
            self._walk: Any = None  # the store's walk: the reader pushes
            return
        graph = _weighted(self._whole_graph(), settings)
        # float32: half the bytes per round; ranks settle long before float32 rounding
        # (~1e-7 relative) could matter
        if settings.push_eps > 0:
            self._walk = walk_matrix(graph)
        else:
            import torch

            self._walk = transition(graph).astype(torch.float32)

    def _whole_graph(self) -> ig.Graph:
        """Every entity, passage and edge as one igraph (reads every record)."""
        r = self.reader
        chunk_ids = r.ids("chunks", np.arange(self.n_chunks))
        return build_graph(r.entities(), chunk_ids, r.mentions(), r.relations(), r.synonyms())

    def search(self, query: str, k: int = 10) -> LocalResult:
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
        r = self.reader
        reranked = self.settings.rerank_depth > 0
        sparse = soon(r, self._sparse, query, BM25_DEPTH) if reranked else None
        spans = self.names.spans(query) if self.n_entities else None
        known = [row for row, _, _ in spans.known] if spans else []
        unknown = spans.unknown if spans else []
        qvec, span_vecs = self.encoder.encode_with_spans(query, unknown)  # one model call
        scan = soon(r, r.similarity, "chunks", qvec) if self.n_chunks else None
        seeds, seed_rows, facts, named = self._seeds(qvec, known, span_vecs)
        dense = scan.result() if scan else np.zeros(0)
        mass = self._ppr(seed_rows, dense)
        passage_mass = mass[self.chunk_vertex] if self.n_chunks else np.zeros(0)
        ppr_rank, dense_rank = _ranks(passage_mass), _ranks(dense)
        score = passage_mass
        if self.settings.fuse_dense > 0 and len(score):
            score = 1.0 / (_RRF_K + ppr_rank) + self.settings.fuse_dense / (_RRF_K + dense_rank)
        score, via_rows = self._bridge(score, dense)
        top = _top(score, n)
        if self.settings.rerank_depth > 0 and self.settings.bridge_named > 0:
            top = self._named_bridges(query, score, top, via_rows)
        rows = [row for row, _ in top]
        titles = self._titles(rows) if reranked and rows else []
        hop = Hop()
        if titles and self.settings.hop and not long_document(titles, self.settings.long_share):
            hop = self._hop(query, rows, titles, seed_rows)
            have = set(rows)
            extra = [row for row in hop.rank if row not in have][: self.settings.hop_extra]
            top += [(row, float(score[row])) for row in extra]
            rows += extra
            titles += self._titles(extra) if extra else []
        id_of = dict(zip(rows, r.ids("chunks", rows), strict=True))
        via_ids = r.ids("chunks", sorted({*via_rows, *via_rows.values()}))
        via_id = dict(zip(sorted({*via_rows, *via_rows.values()}), via_ids, strict=True))
        found = LocalResult(
            [(id_of[row], s) for row, s in top],
            seeds,
            list(
                zip(r.ids("facts", [row for row, _ in facts]), [s for _, s in facts], strict=True)
            ),
            dense,
            mass,
            {via_id[t]: via_id[by] for t, by in via_rows.items()},
            qvec,
            named,
        )
        if not titles:
            return found, rows, np.zeros((len(rows), 0)), []
        assert sparse is not None
        x = self._features(
            query,
            rows,
            id_of,
            seed_rows,
            ppr_rank,
            dense_rank,
            dense,
            passage_mass,
            via_rows,
            sparse.result(),
            titles,
            hop,
        )
        return found, rows, x, titles

    def _features(
        self,
        query: str,
        rows: list[int],
        id_of: dict[int, str],
        seed_rows: dict[int, float],
        ppr_rank: np.ndarray,
        dense_rank: np.ndarray,
        dense: np.ndarray,
        mass: np.ndarray,
        via_rows: dict[int, int],
        sparse: list[tuple[str, float]],
        titles: list[str],
        hop: Hop,
    ) -> np.ndarray:
        """The rerank features of candidate ``rows``, from the rows they touch (``sparse``:
        the query's best BM25 passages; ``titles``: the rows' document titles)."""
        r = self.reader
        row_of = {cid: row for row, cid in id_of.items()}
        title_keys = {row: title_text(t) for row, t in zip(rows, titles, strict=True)}
        entities = MentionedEntities(r, rows)
        # the features read the specificity of the best candidate's entities and the
        # seeds' only (a few dozen entities, where every candidate's are ~1,000)
        touched = sorted({int(e) for e in entities.of(rows[0])} | set(seed_rows))
        spec = dict(
            zip(touched, specificity(r, np.array(touched, dtype=np.int64)).tolist(), strict=True)
        )
        return features(
            rows,
            ppr_rank=ppr_rank,
            dense_rank=dense_rank,
            dense=dense,
            mass=mass,
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
        """The second walk from candidates ``rows`` (best first; ``titles`` their
        document titles): the best ``hop_from`` and the first ``hop_named`` whose title
        the query names. Their specific entities that are not seeds reset it, each by
        its specificity."""
        s, r = self.settings, self.reader
        query_key = text_key(query)
        named = [
            row
            for row, title in zip(rows, titles, strict=True)
            if names(query_key, title_text(title))
        ]
        start = list(dict.fromkeys(rows[: s.hop_from] + named[: s.hop_named]))
        if not start:
            return Hop()
        ents = np.unique(r.adjacency("mentions", np.array(start, dtype=np.int64)).indices)
        ents = ents[~np.isin(ents, np.fromiter(seeds, dtype=np.int64, count=len(seeds)))]
        spec = specificity(r, ents.astype(np.int64)) if len(ents) else np.zeros(0)
        keep = spec >= s.hop_specific
        if not keep.any():
            return Hop()
        reset = np.zeros(self.n_vertices)
        reset[ents[keep]] = spec[keep]
        mass = self._walk_from(reset)[self.chunk_vertex]
        best = [(row, m) for row, m in _top(mass, HOP_DEPTH) if m > 0]
        if not best:
            return Hop()
        top = best[0][1]
        return Hop({row: n for n, (row, _) in enumerate(best)}, {row: m / top for row, m in best})

    def _bridge(self, score: np.ndarray, dense: np.ndarray) -> tuple[np.ndarray, dict[int, int]]:
        """Raise the passages the best passages name by title to just below the passage
        that names them (in their own order); remember who named them (rows)."""
        s = self.settings
        if not len(score) or s.bridge_from <= 0 or s.bridge_weight <= 0:
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
            via.update({int(t): row for t in targets[better]})
        return out, via

    def _titles(self, rows: Sequence[int]) -> list[str]:
        """The document title of each chunk row."""
        found = self.reader.attribute("chunks", "title", np.asarray(rows, dtype=np.int64))
        return [t.decode() for t in found.tolist()]

    def _named_bridges(
        self, query: str, score: np.ndarray, top: list[tuple[int, float]], via: dict[int, int]
    ) -> list[tuple[int, float]]:
        """``top`` and after it the passages named by title from the best candidates
        that the query names by title (and from the best ``bridge_from``), best namer
        first; each one's namer goes into ``via``."""
        s, r = self.settings, self.reader
        look = [row for row, _ in top[: s.bridge_named]]
        if not look:
            return top
        query_key = text_key(query)
        namers = [
            row
            for i, (row, title) in enumerate(zip(look, self._titles(look), strict=True))
            if i < s.bridge_from or names(query_key, title_text(title))
        ]
        links = r.adjacency("links", np.array(namers, dtype=np.int64))
        have = {row for row, _ in top}
        extra: list[tuple[int, float]] = []
        for i, row in enumerate(namers):
            targets = links.indices[links.indptr[i] : links.indptr[i + 1]]
            in_degree = links.data[links.indptr[i] : links.indptr[i + 1]]
            for target in targets[in_degree <= s.link_max_in].tolist():
                if target not in have and len(extra) < s.bridge_extra:
                    have.add(target)
                    extra.append((target, float(score[target])))
                    via.setdefault(target, row)
        return top + extra

    def _seeds(
        self, qvec: np.ndarray, known: list[int], span_vecs: np.ndarray
    ) -> tuple[dict[str, float], dict[int, float], list[tuple[int, float]], tuple[str, ...]]:
        """Seed weights (by entity id and by entity row) from the closest facts and
        entities to the query, and from the query's spans: a span that is a known name
        (entity row in ``known``) links to that entity with similarity 1; another
        (``span_vecs``) to its nearest entity. Also the facts (row, similarity) and the
        entities the spans name (known names, and nearest entities at least
        ``named_similarity`` close), best first."""
        s, r = self.settings, self.reader
        seeds: dict[str, float] = {}
        named: list[str] = []

        def add(eid: str, weight: float) -> None:
            seeds[eid] = max(seeds.get(eid, 0.0), weight)

        def nearest_facts() -> tuple[list[tuple[int, float]], list[str], dict[str, Any]]:
            facts = r.nearest("facts", qvec, s.top_facts)[0] if s.top_facts > 0 else []
            fids = r.ids("facts", [row for row, _ in facts])
            return facts, fids, {x.id: x for x in r.relations(fids)}

        # the three nearest-neighbour reads start together (overlapping on a server)
        fact_read = soon(r, nearest_facts)
        entities = self.n_entities > 0
        top_read = (
            soon(r, r.nearest, "entities", qvec, s.top_entities)
            if entities and s.top_entities > 0
            else None
        )
        span_read = (
            soon(r, r.nearest, "entities", np.asarray(span_vecs), 1)
            if entities and len(span_vecs)
            else None
        )
        facts, fids, relations = fact_read.result()
        for fid, (_, sim) in zip(fids, facts, strict=True):
            rel = relations[fid]
            add(rel.src, sim)
            add(rel.dst, sim)
        if entities:
            linked: list[tuple[int, float]] = []
            if top_read is not None:
                linked += top_read.result()[0]
            linked += [(row, s.span_boost) for row in known]
            named_rows = list(known)
            if span_read is not None:
                for found in span_read.result():
                    linked += [(row, sim * s.span_boost) for row, sim in found]
                    named_rows += [row for row, sim in found if sim >= s.named_similarity]
            linked_ids = r.ids("entities", [row for row, _ in linked])
            for eid, (_, weight) in zip(linked_ids, linked, strict=True):
                add(eid, weight)
            of_row = {row: eid for eid, (row, _) in zip(linked_ids, linked, strict=True)}
            named = [of_row[row] for row in dict.fromkeys(named_rows)]
        rows = r.rows("entities", list(seeds))
        by_row = {
            int(row): seeds[e] for e, row in zip(seeds, rows.tolist(), strict=True) if row >= 0
        }
        named.sort(key=lambda e: (-seeds[e], e))
        return seeds, by_row, facts, tuple(named)

    def _ppr(self, seeds: dict[int, float], dense: np.ndarray) -> np.ndarray:
        s = self.settings
        reset = np.zeros(self.n_vertices)
        if seeds:
            rows = np.fromiter(seeds, dtype=np.int64, count=len(seeds))
            weights = np.maximum(np.fromiter(seeds.values(), dtype=np.float64), 0.0)
            reset[rows] = weights * specificity(self.reader, rows)
        if len(dense):
            scaled = _minmax(dense)
            if 0 < s.seed_passages < len(scaled):  # the best passages only: a local walk
                cut = np.partition(scaled, len(scaled) - s.seed_passages)[-s.seed_passages]
                scaled = np.where(scaled >= cut, scaled, 0.0)
            reset[self.chunk_vertex] += s.passage_weight * scaled
        if reset.sum() <= 0:
            return np.zeros(self.n_vertices)
        return self._walk_from(reset)

    def _walk_from(self, reset: np.ndarray) -> np.ndarray:
        """Personalized PageRank mass of every vertex from ``reset``."""
        s = self.settings
        if s.push_eps > 0 and self._walk is None:
            return self.reader.pushed_pagerank(reset, s.damping, s.push_eps)
        if s.push_eps > 0:
            return pushed_pagerank(self._walk, reset, s.damping, s.push_eps)
        return personalized_pagerank(self._walk, reset, s.damping, s.ppr_tol)


_READS = ThreadPoolExecutor(max_workers=4, thread_name_prefix="kgrag-read")


class _Later:
    """A read done when its result is asked for (a reader in this process)."""

    def __init__(self, fn: Callable[..., Any], args: tuple[Any, ...]) -> None:
        self.fn, self.args = fn, args

    def result(self) -> Any:
        return self.fn(*self.args)


def soon(reader: GraphReader, fn: Callable[..., Any], *args: Any) -> Any:
    """``fn(*args)`` started now, beside the search's other reads, where the reader
    reads from a server (:attr:`GraphReader.concurrent_reads`: the server works on
    both at once and the round trips overlap); otherwise done when asked for."""
    if reader.concurrent_reads:
        return _READS.submit(fn, *args)
    return _Later(fn, args)


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
    """0-based rank of each entry, best (largest) first; ties by position. Where no
    entry is negative and some are zero (PageRank mass: passages the walk did not
    reach), only the others are sorted; the zeros follow them in position order, as a
    sort of every entry puts them."""
    ranks = np.empty(len(x))
    zero = x == 0
    some = np.flatnonzero(~zero)
    if 10 * len(some) < 9 * len(x) and float(x.min()) >= 0:
        ranks[some[descending(x[some])]] = np.arange(len(some))
        ranks[zero] = len(some) + np.arange(len(x) - len(some))
        return ranks
    ranks[descending(x)] = np.arange(len(x))
    return ranks


def descending(x: np.ndarray) -> np.ndarray:
    """Indexes of ``x`` by value, largest first, ties by index: ``argsort(-x)`` as a
    stable sort would give it. For float32, the value's bits are mapped to an
    order-preserving unsigned int and sorted by two stable passes over its 16-bit
    halves, low then high (numpy sorts 16-bit keys by radix): 23 ms instead of 49 for
    699k passages (a sort of 64-bit value-and-index keys; a stable argsort: 52)."""
    if x.dtype != np.float32:
        return np.argsort(-x, kind="stable")
    bits = (x + np.float32(0)).view(np.uint32)  # -0.0 + 0.0 is 0.0: equal zeros tie
    up = np.where(bits >> np.uint32(31), ~bits, bits | np.uint32(1 << 31))
    key = ~up  # ascending key, descending value
    low = np.argsort((key & np.uint32(0xFFFF)).astype(np.uint16), kind="stable")
    high = np.argsort((key[low] >> np.uint32(16)).astype(np.uint16), kind="stable")
    return low[high]


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
