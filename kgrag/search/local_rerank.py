"""Learned reranking of local search's best passages.

Local search ranks passages by PageRank mass fused with the dense ranking, then
raises the passages its best passage names by title. Which of the top
candidates hold a question's evidence also shows in signals that ranking leaves
out or weighs by hand: BM25, whether the passage's title is named in the
question, how many of the query's seed entities the passage mentions, title
links from the best few passages, entities it shares with the best passage, its
rank in a second walk from the entities of the best passage and of the passages
the question names.
A logistic regression over :data:`FEATURES` puts them together; the score of a
candidate is the model's probability that it is evidence.

The model (:mod:`kgrag.search.local_rerank_model`) is fitted by
``benchmarks/fit_rerank.py`` on the local candidates of musique100 and
hotpotqa100, and confirmed on the 2Wiki questions it never saw. Candidates from
long documents (:func:`long_document`: most of them share a title, where the title
features say nothing) are reranked by a second model
(:mod:`kgrag.search.local_rerank_model_long`, fitted on GraphRAG-Bench medical) and their
top diversified within each document (:func:`diversified`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from kgrag.search.links import names


class _Links(Protocol):
    def targets(self, row: int) -> np.ndarray: ...


class _Entities(Protocol):
    def of(self, row: int) -> np.ndarray: ...


#: one column per feature, in this order (``benchmarks/fit_rerank.py`` fits them)
FEATURES = (
    "fused_rank",  # log(1 + position) in local search's own order
    "ppr_rank",  # log(1 + rank) by PageRank mass among all passages
    "dense_rank",  # log(1 + rank) by dense cosine among all passages
    "dense",  # dense cosine
    "bm25_rank",  # log(1 + rank) among the best BM25_DEPTH by BM25 (BM25_DEPTH if not there)
    "title_in_query",  # the passage's document title is named in the query
    "seeds_named",  # query seed entities the passage mentions
    "seed_weight",  # their reset weights x specificity, summed
    "linked_from_top1",  # the best passage names this one's title
    "linked_from_top3",  # one of the best three names it (and it is not one of them)
    "bridged",  # local search's bridge hop raised it
    "shares_top1",  # shares a specific entity (not a seed) with the best passage
    "ppr_share",  # PageRank mass / the largest passage mass
    "linked_from_named",  # candidates whose title the query names that name this one's title
    "title_subsumed",  # its title is named only as part of a longer candidate title named
    "hop_rank",  # log(1 + rank) by the second walk's mass (HOP_DEPTH if not among its best)
    "hop_share",  # the second walk's mass / its best passage's (0 if not among its best)
)
BM25_DEPTH = 200
HOP_DEPTH = 200
SPECIFIC = 0.2  # specificity (1 / passages mentioning) of an entity in at most 5 passages


@dataclass(frozen=True, slots=True)
class RerankModel:
    """A logistic regression over standardised :data:`FEATURES`."""

    features: tuple[str, ...]
    mean: tuple[float, ...]
    scale: tuple[float, ...]
    weights: tuple[float, ...]
    intercept: float

    def __post_init__(self) -> None:
        n = len(self.features)
        known = [f for f in FEATURES if f in self.features]
        if (
            not n
            or list(self.features) != known
            or not len(self.mean) == len(self.scale) == len(self.weights) == n
        ):
            raise ValueError(
                f"a rerank model weighs some of {FEATURES}, in that order, one weight each"
            )

    @property
    def columns(self) -> list[int]:
        """The columns of :data:`FEATURES` it weighs."""
        return [FEATURES.index(f) for f in self.features]

    def scores(self, x: np.ndarray) -> np.ndarray:
        """The probability that each row of ``x`` (a candidate's :data:`FEATURES`) is
        evidence."""
        x = np.asarray(x)[:, self.columns]
        z = (x - np.array(self.mean)) / np.array(self.scale)
        logit = z @ np.array(self.weights) + self.intercept
        return 0.5 * (1.0 + np.tanh(0.5 * logit))  # the logistic function, without overflow


@dataclass(frozen=True, slots=True)
class ChunkEntities:
    """The distinct entities each chunk row mentions (entity rows, CSR)."""

    indptr: np.ndarray
    indices: np.ndarray

    @classmethod
    def build(cls, pairs: Sequence[tuple[int, int]], n_chunks: int) -> ChunkEntities:
        """From (chunk row, entity row) pairs, duplicates allowed."""
        arr = np.unique(np.array(pairs, dtype=np.int64).reshape(-1, 2), axis=0)
        indptr = np.zeros(n_chunks + 1, dtype=np.int64)
        np.add.at(indptr, arr[:, 0] + 1, 1)
        return cls(np.cumsum(indptr), arr[:, 1].astype(np.int32))

    def of(self, row: int) -> np.ndarray:
        return self.indices[self.indptr[row] : self.indptr[row + 1]]


def features(
    rows: Sequence[int],
    *,
    ppr_rank: np.ndarray,
    dense_rank: np.ndarray,
    dense: np.ndarray,
    mass: np.ndarray,
    bm25_rank: Mapping[int, int],
    title_keys: Sequence[str] | Mapping[int, str],
    query_key: str,
    seeds: Mapping[int, float],
    specificity: np.ndarray | Mapping[int, float],
    entities: _Entities,
    links: _Links,
    bridged: set[int],
    hop_rank: Mapping[int, int] | None = None,
    hop_share: Mapping[int, float] | None = None,
) -> np.ndarray:
    """The (len(rows), len(FEATURES)) features of candidate chunk ``rows`` (best first).

    ``ppr_rank``, ``dense_rank``, ``dense`` and ``mass`` cover every chunk row,
    ``title_keys`` (a title's :func:`~kgrag.search.links.key_text`) at least the
    candidates; ``query_key`` is the query's; ``seeds`` maps entity rows to reset
    weights; ``specificity`` covers the entity rows the first candidate mentions and
    the seeds; ``entities`` gives the entity rows of a candidate, ``links`` the rows a
    chunk row names by title; ``hop_rank`` / ``hop_share`` the second walk's best
    passages (:class:`kgrag.search.local_walk.Hop`; none when None)."""
    n = len(rows)
    x = np.zeros((n, len(FEATURES)))
    if not n:
        return x
    candidates = np.asarray(rows, dtype=np.int64)
    top1, top3 = int(candidates[0]), {int(t) for t in candidates[:3]}
    from1 = set(links.targets(top1).tolist())
    from3 = set().union(*(links.targets(t).tolist() for t in top3))
    top_mass = float(mass.max()) if len(mass) else 0.0
    shared_with = _specific_unseeded(entities.of(top1), specificity, seeds)
    x[:, 0] = np.log1p(np.arange(n))
    x[:, 1] = np.log1p(ppr_rank[candidates])
    x[:, 2] = np.log1p(dense_rank[candidates])
    x[:, 3] = dense[candidates]
    x[:, 4] = np.log1p([bm25_rank.get(int(row), BM25_DEPTH) for row in candidates])
    _title_features(x, candidates, query_key, title_keys, links)
    for i, row in enumerate(candidates.tolist()):
        named = [int(e) for e in entities.of(row) if int(e) in seeds]
        x[i, 6] = len(named)
        x[i, 7] = sum(seeds[e] * specificity[e] for e in named)
        x[i, 8] = row in from1 and row != top1
        x[i, 9] = row in from3 and row not in top3
        x[i, 10] = row in bridged
        # shares one of the best candidate's specific unseeded entities
        x[i, 11] = row != top1 and not shared_with.isdisjoint(entities.of(row).tolist())
    x[:, 12] = mass[candidates] / top_mass if top_mass > 0 else 0.0
    rank, share = hop_rank or {}, hop_share or {}
    x[:, 15] = np.log1p([rank.get(int(row), HOP_DEPTH) for row in candidates.tolist()])
    x[:, 16] = [share.get(int(row), 0.0) for row in candidates.tolist()]
    return x


def _specific_unseeded(
    entities: np.ndarray, specificity: np.ndarray | Mapping[int, float], seeds: Mapping[int, float]
) -> set[int]:
    """The specific ``entities`` (in at most 5 passages) that are not seeds."""
    return {int(e) for e in entities if specificity[e] >= SPECIFIC and int(e) not in seeds}


def _title_features(
    x: np.ndarray,
    candidates: np.ndarray,
    query_key: str,
    title_keys: Sequence[str] | Mapping[int, str],
    links: _Links,
) -> None:
    """Fill the title columns of ``x`` for ``candidates`` (chunk rows): title_in_query,
    linked_from_named and title_subsumed."""
    x[:, 5] = [names(query_key, title_keys[row]) for row in candidates.tolist()]
    namers: dict[int, int] = {}  # row -> candidates the query names that name it
    for row in candidates[x[:, 5] > 0].tolist():
        for target in set(links.targets(row).tolist()) - {row}:
            namers[target] = namers.get(target, 0) + 1
    x[:, 13] = [namers.get(row, 0) for row in candidates.tolist()]
    named_keys = {title_keys[row] for row in candidates[x[:, 5] > 0].tolist()}
    x[:, 14] = [
        x[i, 5] > 0 and any(title_keys[row] in k and title_keys[row] != k for k in named_keys)
        for i, row in enumerate(candidates.tolist())
    ]


def long_document(titles: Sequence[str], share: float) -> bool:
    """Whether candidates come from long documents: at least ``share`` of them share
    their document title with another candidate (a page of titled passages, one
    passage a title, gives few such; the chunks of one long document give all)."""
    if not titles:
        return False
    seen: dict[str, int] = {}
    for t in titles:
        seen[t] = seen.get(t, 0) + 1
    return sum(seen[t] > 1 for t in titles) >= share * len(titles)


def diversified(
    scores: np.ndarray, vectors: np.ndarray, groups: Sequence[str], weight: float, k: int
) -> list[int]:
    """Candidate indices, best first: the first ``k`` picked one at a time by score less
    ``weight`` x the highest cosine to a picked candidate of the same group (document),
    so the overlapping chunks of one passage of a document do not fill the top; the
    rest follow by score. Ties go to the earlier candidate."""
    n = len(scores)
    by_score = sorted(range(n), key=lambda i: (-scores[i], i))
    if weight <= 0 or n < 2:
        return by_score
    v = np.asarray(vectors, dtype=np.float64)
    norms = np.linalg.norm(v, axis=1, keepdims=True)
    v = v / np.where(norms > 0, norms, 1.0)
    code: dict[str, int] = {}
    group = np.array([code.setdefault(g, len(code)) for g in groups])
    redundancy = np.zeros(n)
    picked: list[int] = []
    left = np.ones(n, dtype=bool)
    for _ in range(min(k, n)):
        gain = np.where(left, np.asarray(scores, dtype=np.float64) - weight * redundancy, -np.inf)
        best = int(np.argmax(gain))  # the first of equal gains: the earlier candidate
        picked.append(best)
        left[best] = False
        same = group == group[best]
        redundancy = np.where(same, np.maximum(redundancy, v @ v[best]), redundancy)
    chosen = set(picked)
    return picked + [i for i in by_score if i not in chosen]
