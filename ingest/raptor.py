"""RAPTOR summary tree with extractive summaries.

Chunks (level 0) are clustered RAPTOR style: the vectors are reduced with
PCA, a Gaussian mixture whose size is chosen by BIC gives global clusters, and
a second mixture inside each global cluster gives the local ones. Assignment
is soft: a node joins every cluster whose posterior reaches ``threshold`` and
always its most likely one, so a passage between two topics is summarised in
both. Each cluster becomes a :class:`~kgrag.types.TreeNode` whose summary is
the children's sentences closest to the cluster's TF-IDF centroid, no LLM.
Levels are built until one is small enough, stops shrinking, or the cap.
"""

from __future__ import annotations

import math
import re
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
from sklearn.cluster import KMeans
from sklearn.decomposition import PCA
from sklearn.exceptions import ConvergenceWarning
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.mixture import GaussianMixture
from threadpoolctl import threadpool_limits

from kgrag.config import Config
from kgrag.ids import content_id
from kgrag.types import Chunk, TreeNode

if TYPE_CHECKING:
    from scipy import sparse

MAX_GLOBAL = 50  # most global clusters, as in RAPTOR
MAX_CANDIDATES = 8  # sizes tried by BIC
BIC_SAMPLE = 1000  # points the BIC choice is made on
FULL_COVARIANCE_DIMS = 16  # above this, diagonal covariances
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


@dataclass(frozen=True)
class _Level:
    """The nodes of one level, in reading order (first leaf's chunk position)."""

    ids: list[str]
    vectors: np.ndarray
    texts: list[str]
    leaves: list[tuple[str, ...]]
    position: list[int]


@dataclass(frozen=True)
class _Settings:
    """The clustering knobs, passed down as one value."""

    reduced_dim: int
    threshold: float
    max_cluster: int
    seed: int


def build_tree(
    chunk_ids: Sequence[str],
    chunk_texts: Sequence[str],
    embeddings: np.ndarray,
    *,
    reduced_dim: int,
    threshold: float,
    top_size: int,
    max_levels: int,
    max_cluster: int,
    summary_sentences: int,
    seed: int,
) -> list[TreeNode]:
    """Build the summary levels above the chunks, sorted by (level, id).

    ``embeddings`` row i is the L2-normalised vector of chunk i. Every chunk
    is a leaf of some top-level node; the same input and seed give the same
    tree.
    """
    if len(chunk_ids) == 0:
        return []
    settings = _Settings(reduced_dim, threshold, max_cluster, seed)
    vectorizer = fit_tfidf(chunk_texts)
    current = _Level(
        ids=list(chunk_ids),
        vectors=np.asarray(embeddings, dtype=np.float64),
        texts=list(chunk_texts),
        leaves=[(c,) for c in chunk_ids],
        position=list(range(len(chunk_ids))),
    )
    out: list[TreeNode] = []
    for level in range(1, max_levels + 1):
        size = len(current.ids)
        clusters = _cluster(current.vectors, settings) if size > top_size else []
        if not clusters or len(clusters) >= size:  # small enough, or not shrinking
            if level > 1:
                break
            clusters = [np.arange(size)]  # a tree always has a root
        nodes, current = _make_level(level, clusters, current, vectorizer, summary_sentences)
        out.extend(nodes)
    return sorted(out, key=lambda t: (t.level, t.id))


def _cluster(vectors: np.ndarray, settings: _Settings) -> list[np.ndarray]:
    """Soft two-stage clusters of one level: global mixture, then local ones.

    BLAS runs single-threaded here: the matrices are tiny, and threads that
    spin against each other made mixture fits many times slower.
    """
    with threadpool_limits(limits=1):
        return _two_stage(vectors, settings)


def _two_stage(vectors: np.ndarray, settings: _Settings) -> list[np.ndarray]:
    """Global clusters split into local ones; equal member sets are one cluster."""
    n = len(vectors)
    if n <= settings.max_cluster:
        return [np.arange(n)]
    k_hi = min(MAX_GLOBAL, math.ceil(n / settings.max_cluster))
    found: dict[tuple[int, ...], np.ndarray] = {}
    for outer in _mixture_clusters(vectors, 1, k_hi, settings):
        for inner in _local_clusters(vectors[outer], settings):
            members = outer[inner]
            found.setdefault(tuple(members.tolist()), members)
    return [found[key] for key in sorted(found)]


def _local_clusters(vectors: np.ndarray, settings: _Settings) -> list[np.ndarray]:
    """Clusters inside one global cluster, each near ``max_cluster`` members at most."""
    n = len(vectors)
    if n <= settings.max_cluster:
        return [np.arange(n)]
    k_lo = math.ceil(n / settings.max_cluster)
    parts = _mixture_clusters(vectors, k_lo, min(2 * k_lo, n - 1), settings)
    out: list[np.ndarray] = []
    for part in parts:
        if len(part) > 2 * settings.max_cluster:
            out.extend(part[piece] for piece in _kmeans_split(vectors[part], settings))
        else:
            out.append(part)
    return out


def _reduce(vectors: np.ndarray, settings: _Settings) -> np.ndarray:
    """PCA to at most ``reduced_dim`` dimensions (fewer for a handful of points)."""
    dims = max(1, min(settings.reduced_dim, len(vectors) - 2, vectors.shape[1]))
    if np.ptp(vectors, axis=0).max(initial=0.0) <= 1e-12:
        return np.zeros((len(vectors), dims))
    return PCA(n_components=dims, random_state=settings.seed).fit_transform(vectors)


def _mixture_clusters(
    vectors: np.ndarray, k_lo: int, k_hi: int, settings: _Settings
) -> list[np.ndarray]:
    """Soft clusters from a Gaussian mixture whose size BIC picks in [k_lo, k_hi]."""
    n = len(vectors)
    x = _reduce(vectors, settings)
    k = _choose_k(x, k_lo, max(k_lo, k_hi), settings.seed)
    if k <= 1:
        return [np.arange(n)]
    covariance = _covariance(n, x.shape[1], k)
    proba = _fit_mixture(x, k, covariance, settings.seed).predict_proba(x)
    joined = proba >= settings.threshold
    joined[np.arange(n), proba.argmax(axis=1)] = True
    clusters = [np.flatnonzero(joined[:, j]) for j in range(k)]
    return [c for c in clusters if len(c)]


def _choose_k(x: np.ndarray, k_lo: int, k_hi: int, seed: int) -> int:
    """The mixture size with the lowest BIC among a few candidates, on a sample."""
    if len(x) > BIC_SAMPLE:
        rng = np.random.default_rng(seed)
        x = x[np.sort(rng.choice(len(x), size=BIC_SAMPLE, replace=False))]
    k_hi = min(k_hi, len(x) - 1)
    if k_hi <= k_lo:
        return max(1, min(k_lo, len(x)))
    grid = np.unique(np.geomspace(k_lo, k_hi, num=MAX_CANDIDATES).round().astype(int))
    covariance = _covariance(len(x), x.shape[1], k_hi)
    scores = [_fit_mixture(x, int(k), covariance, seed).bic(x) for k in grid]
    return int(grid[int(np.argmin(scores))])


def _covariance(n: int, dims: int, k: int) -> str:
    """Full covariances when each component has points enough to estimate one, else diagonal.

    The diagonal model is also much cheaper: sklearn loops over components
    for full covariances.
    """
    full = dims <= FULL_COVARIANCE_DIMS and n >= k * dims * (dims + 1) // 2
    return "full" if full else "diag"


def _fit_mixture(x: np.ndarray, k: int, covariance: str, seed: int) -> GaussianMixture:
    """A seeded Gaussian mixture; a fit that stops at max_iter is still usable."""
    model = GaussianMixture(
        n_components=k, covariance_type=covariance, init_params="k-means++", random_state=seed
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return model.fit(x)


def _kmeans_split(vectors: np.ndarray, settings: _Settings) -> list[np.ndarray]:
    """Hard split of an oversized local cluster into ``max_cluster``-sized pieces."""
    k = math.ceil(len(vectors) / settings.max_cluster)
    x = _reduce(vectors, settings)
    model = KMeans(n_clusters=k, n_init=3, random_state=settings.seed)
    with warnings.catch_warnings():
        # identical points can leave fewer distinct clusters than asked for
        warnings.simplefilter("ignore", ConvergenceWarning)
        labels = model.fit_predict(x)
    pieces = [np.flatnonzero(labels == j) for j in range(k)]
    return [p for p in pieces if len(p)]


def _make_level(
    level: int,
    clusters: Sequence[np.ndarray],
    below: _Level,
    vectorizer: TfidfVectorizer | None,
    summary_sentences: int,
) -> tuple[list[TreeNode], _Level]:
    """Tree nodes for ``clusters`` of ``below`` and the level they form."""
    summaries = extractive_summaries(clusters, below.texts, vectorizer, summary_sentences)
    nodes: list[TreeNode] = []
    vectors = np.zeros((len(clusters), below.vectors.shape[1]))
    leaves: list[tuple[str, ...]] = []
    for i, members in enumerate(clusters):
        children = tuple(sorted(below.ids[m] for m in members))
        leaf = tuple(sorted({c for m in members for c in below.leaves[m]}))
        mean = below.vectors[members].mean(axis=0)
        vectors[i] = mean / max(float(np.linalg.norm(mean)), 1e-12)
        node_id = content_id("tree", str(level), *children)
        nodes.append(TreeNode(node_id, level, children, summaries[i], leaf))
        leaves.append(leaf)
    position = [min(below.position[m] for m in members) for members in clusters]
    order = sorted(range(len(nodes)), key=lambda i: (position[i], nodes[i].id))
    nxt = _Level(
        ids=[nodes[i].id for i in order],
        vectors=vectors[order],
        texts=[summaries[i] for i in order],
        leaves=[leaves[i] for i in order],
        position=[position[i] for i in order],
    )
    return nodes, nxt


def fit_tfidf(texts: Sequence[str]) -> TfidfVectorizer | None:
    """One TF-IDF model over all chunk texts; None when they have no content words."""
    vectorizer = TfidfVectorizer(stop_words="english")
    try:
        vectorizer.fit(texts)
    except ValueError:  # empty vocabulary
        return None
    return vectorizer


def _split_sentences(text: str) -> list[str]:
    """Sentences of ``text``: split after . ! or ? followed by whitespace."""
    return [s.strip() for s in _SENTENCE_END.split(text.strip()) if s.strip()]


def extractive_summaries(
    clusters: Sequence[np.ndarray],
    texts: Sequence[str],
    vectorizer: TfidfVectorizer | None,
    k: int,
) -> list[str]:
    """Per cluster, its children's ``k`` sentences nearest the TF-IDF centroid."""
    per_node = [_split_sentences(t) for t in texts]
    starts = np.cumsum([0] + [len(s) for s in per_node])
    flat = [s for sents in per_node for s in sents]
    if vectorizer is None:
        node_tfidf = sent_tfidf = None
    else:
        node_tfidf = vectorizer.transform(texts)
        sent_tfidf = vectorizer.transform(flat) if flat else None
    out = []
    for members in clusters:
        rows = np.concatenate([np.arange(starts[m], starts[m + 1]) for m in np.sort(members)])
        scores = np.zeros(len(rows))
        if node_tfidf is not None and sent_tfidf is not None and len(rows):
            scores = _centroid_scores(node_tfidf[np.sort(members)], sent_tfidf[rows])
        out.append(_pick(flat, rows, scores, k))
    return out


def _centroid_scores(children: sparse.csr_matrix, sentences: sparse.csr_matrix) -> np.ndarray:
    """Cosine of each sentence's TF-IDF row to the mean of the children's rows."""
    centroid = np.asarray(children.mean(axis=0)).ravel()
    norm = float(np.linalg.norm(centroid))
    if norm == 0.0:
        return np.zeros(sentences.shape[0])
    return np.asarray(sentences @ (centroid / norm)).ravel()


def _pick(flat: Sequence[str], rows: np.ndarray, scores: np.ndarray, k: int) -> str:
    """The top ``k`` distinct sentences by score, joined in their original order."""
    first: dict[str, int] = {}
    for i, row in enumerate(rows.tolist()):
        first.setdefault(flat[row], i)  # equal texts have equal scores
    ranked = sorted(first, key=lambda t: (-scores[first[t]], first[t]))[:k]
    return " ".join(sorted(ranked, key=first.__getitem__))


def run_tree(chunks: Sequence[Chunk], vectors: np.ndarray, c: Config) -> list[TreeNode]:
    """The RAPTOR stage with its settings unpacked from ``c``."""
    raptor = c.raptor
    return build_tree(
        [ch.id for ch in chunks],
        [ch.text for ch in chunks],
        vectors,
        reduced_dim=raptor.reduced_dim,
        threshold=raptor.threshold,
        top_size=raptor.top_size,
        max_levels=raptor.max_levels,
        max_cluster=raptor.max_cluster,
        summary_sentences=raptor.summary_sentences,
        seed=raptor.seed,
    )
