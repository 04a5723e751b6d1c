"""The global summary: a query-focused extractive map-reduce over the top communities.

A community report is written once, for no question; a corpus-wide question wants the
facts of several communities that bear on it. So the summary is not drawn from the
reports but from the passages under them:

- **Map.** Each of the top communities offers the sentences of its best leaf passages
  (the ``map_leaves`` leaves closest to the query) that are closest to the query, at
  most ``map_sentences`` of them: stored sentence vectors, read with the passages in one
  call (:meth:`~kgrag.store.GraphReader.passage_texts`). A sentence under several of the
  communities is offered once, by the best ranked.
- **Reduce.** A budgeted greedy selection that maximises a monotone submodular
  objective: the weighted coverage of the distinct content words of the picked
  sentences, plus their relevance. A word's weight is the squared relevance of the
  offered sentences that hold it, summed over the communities that offer it and
  counting each community once (its best sentence), so the words the question's
  communities share count most and a word one passage repeats counts once; a word of
  the question itself weighs more than any other (``query_bonus``), so the summary
  first says what was asked about. Each step picks the sentence of the best gain per
  square root of its length in words that still fits the word budget (the cost-scaled
  greedy of Lin and Bilmes; a power of 1 would favour short fragments); a sentence that
  adds no uncovered word is never picked, so the summary does not say a thing twice.

Every picked sentence keeps the community that offered it and the passage it is
quoted from, and the summary lists them in the order of the communities' ranks, then
of the passages' closeness to the question, then of the sentences in the passage, so
that it reads community by community, each from its closest passage on.
Words are the full-text index's: lower-cased runs of letters and digits, stop words
(scikit-learn's English list) and one-letter words left out.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import numpy as np

from kgrag.store import GraphReader
from kgrag.store.base import PassageText
from kgrag.store.bm25 import stop_words
from kgrag.text.tokens import WORD
from kgrag.types import Community


@dataclass(frozen=True, slots=True)
class SummarySettings:
    words: int = 150  # the word budget (whitespace words of the quoted sentences)
    #: the budget of each community's excerpt (its report for the question), a community
    excerpt_words: int = 150
    map_leaves: int = 20  # leaf passages of each top community read for the map
    map_sentences: int = 20  # sentences each community offers
    min_words: int = 5  # shorter sentences (headings, fragments) are not offered
    max_words: int = 60  # nor longer ones (tables flattened into one "sentence")
    relevance_weight: float = 0.5  # the relevance term's share against the coverage term
    cost_power: float = 0.5  # gain per (words ** cost_power): 1 would favour short ones
    relevance_power: float = 2.0  # a word's weight sums relevance ** relevance_power
    #: a word of the question offered by a sentence weighs this many times the heaviest
    #: other word, so the summary first says what the question names
    query_bonus: float = 5.0


@dataclass(frozen=True, slots=True)
class Quote:
    """One summary sentence: its text, the community that offered it, its passage."""

    text: str
    community: str
    passage: str
    rank: int  # the community's rank among the top (0 best)
    leaf: int  # its passage's rank among the community's leaves read (0 closest)
    sentence: int  # its index in the passage
    picked: int = -1  # the reduce step that picked it (0 first: the most telling)


def content_words(text: str, stop: frozenset[str]) -> frozenset[str]:
    """The distinct content words of ``text`` (see the module's last paragraph)."""
    return frozenset(w for w in WORD.findall(text.lower()) if len(w) > 1 and w not in stop)


def map_candidates(
    reader: GraphReader,
    qvec: np.ndarray,
    top: Sequence[Community],
    settings: SummarySettings,
    encode: Callable[[list[str]], np.ndarray] | None = None,
) -> tuple[list[Quote], np.ndarray]:
    """The map step: each top community's offered sentences, best ranked community
    first; and each one's cosine to the query. A sentence without a stored vector (a
    graph built without them) is encoded by ``encode``, or not offered without it."""
    leaves_of: list[list[str]] = []
    for c in top:
        leaves = list(c.leaves)
        rows = reader.rows("chunks", leaves)
        known = [(cid, int(r)) for cid, r in zip(leaves, rows.tolist(), strict=True) if r >= 0]
        if not known:
            leaves_of.append([])
            continue
        sims = reader.similarity("chunks", qvec, np.array([r for _, r in known], dtype=np.int64))
        order = sorted(range(len(known)), key=lambda i: (-float(sims[i]), known[i][0]))
        leaves_of.append([known[i][0] for i in order[: settings.map_leaves]])
    texts = reader.passage_texts([cid for ls in leaves_of for cid in ls], qvec)
    if encode is not None:
        _encode_missing(texts, qvec, encode)
    seen: set[tuple[str, int]] = set()
    quotes: list[Quote] = []
    relevance: list[float] = []
    for rank, (c, leaves) in enumerate(zip(top, leaves_of, strict=True)):
        offered: list[tuple[float, Quote]] = []
        for leaf, cid in enumerate(leaves):
            passage = texts.get(cid)
            if passage is None:
                continue
            for s in passage.sentences:
                sim = passage.similarity.get(s.index)
                if sim is None or (cid, s.index) in seen:
                    continue
                text = " ".join(passage.text[s.start : s.end].split())
                if not settings.min_words <= len(text.split()) <= settings.max_words:
                    continue
                offered.append((sim, Quote(text, c.id, cid, rank, leaf, s.index)))
        offered.sort(key=lambda sq: (-sq[0], sq[1].passage, sq[1].sentence))
        for sim, quote in offered[: settings.map_sentences]:
            seen.add((quote.passage, quote.sentence))
            quotes.append(quote)
            relevance.append(sim)
    return quotes, np.array(relevance, dtype=np.float64)


def _encode_missing(
    texts: dict[str, PassageText], qvec: np.ndarray, encode: Callable[[list[str]], np.ndarray]
) -> None:
    """Fill in the cosine of every sentence of ``texts`` that has no stored vector."""
    missing = [
        (cid, s.index, p.text[s.start : s.end])
        for cid, p in texts.items()
        for s in p.sentences
        if s.index not in p.similarity
    ]
    if missing:
        sims = encode([text for _, _, text in missing]) @ qvec
        for (cid, index, _), sim in zip(missing, sims.tolist(), strict=True):
            texts[cid].similarity[index] = float(sim)


def reduce_quotes(
    quotes: Sequence[Quote], relevance: np.ndarray, settings: SummarySettings, query: str = ""
) -> list[Quote]:
    """The reduce step for ``query``: the picked quotes, in reading order (see the
    module)."""
    if not quotes:
        return []
    stop = stop_words()
    words = [content_words(q.text, stop) for q in quotes]
    rel = np.clip(relevance, 0.0, None) ** settings.relevance_power
    by_community: dict[tuple[str, str], float] = {}
    for q, ws, r in zip(quotes, words, rel.tolist(), strict=True):
        for w in ws:  # a community counts once for a word: its best sentence holding it
            key = (q.community, w)
            by_community[key] = max(by_community.get(key, 0.0), r)
    weight: dict[str, float] = {}
    for (_, w), r in by_community.items():
        weight[w] = weight.get(w, 0.0) + r
    heaviest = max(weight.values(), default=0.0)
    for w in content_words(query, stop) & set(weight):
        weight[w] += settings.query_bonus * heaviest
    scale = sum(weight.values()) / max(1.0, float(rel.sum()))  # the two terms comparable
    lengths = [len(q.text.split()) for q in quotes]
    covered: set[str] = set()
    picked: list[int] = []
    used = 0
    left = set(range(len(quotes)))
    while left:
        best, best_ratio = -1, 0.0
        for i in sorted(left):
            if used + lengths[i] > settings.words:
                continue
            cover = sum(weight[w] for w in words[i] - covered)
            if cover <= 0.0:
                continue
            gain = cover + settings.relevance_weight * scale * float(rel[i])
            ratio = gain / lengths[i] ** settings.cost_power
            if ratio > best_ratio:
                best, best_ratio = i, ratio
        if best < 0:
            break
        left.discard(best)
        picked.append(best)
        covered |= words[best]
        used += lengths[best]
    chosen = [replace(quotes[i], picked=step) for step, i in enumerate(picked)]
    return sorted(chosen, key=lambda q: (q.rank, q.leaf, q.sentence))
