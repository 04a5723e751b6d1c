"""Graph op ``global``: rank the community reports of one level for a query and
assemble an extractive, cited summary from the best of them.

Ranking fuses the dense cosine of each report vector with BM25 over the report
texts by reciprocal-rank fusion, then scales by the report rating (0..10):
``score = rrf * (1 - rating_weight + rating_weight * rating / 10)``. Ties break
on the community id. Every level partitions the entities, so one level holds
no duplicates; across levels (``all_levels``) a community carried down a level
unchanged (same text and leaves) is kept once, at its finest level.

The summary is extractive, a query-focused map-reduce over the sentences of the top
communities' leaf passages (:mod:`kgrag.search.global_summary`): each picked sentence
is followed by the id of the community it came from, e.g. ``"... [m:1ce9...]"``, and
:attr:`GlobalResult.quotes` names the passage it is quoted from. With
``summary_from="reports"`` it is drawn from the top reports instead, as it first was:
report sentences and the non-co-occurrence key relations, picked by MMR against the
query up to a sentence and token budget (a report sentence's vector is the one the
ingest stored for it; relations are encoded per query, and cached).

Default level: the coarsest level whose communities average at most
``default_members`` member entities (16: twice the 8 key entities a report
names), level 0 when none does. Like GraphRAG's middle level, it is as broad as
a report can still speak for. An extractive report of a few sentences cannot
summarise a community of hundreds of entities: the top reports of the levels of
small communities cover summary questions' evidence equally well, those of the
coarse levels clearly worse (benchmarks/global_bench.py), so "the finest level
with at most a few tens of communities" would pick too coarse a level.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Literal

import numpy as np

from kgrag.encoders import Encoder
from kgrag.errors import InvalidParams
from kgrag.search.global_summary import Quote, SummarySettings, map_candidates, reduce_quotes
from kgrag.store import GraphReader
from kgrag.text.keys import COOC
from kgrag.types import Community

RRF_K = 60
LISTED = 32  # member and leaf ids a hierarchy entry lists (size and leafCount count them all)
_RELATION = re.compile(r"^(.+?) -(.+)-> (.+)$")


@dataclass(frozen=True, slots=True)
class GlobalSettings:
    rating_weight: float = 0.05  # share of the score that follows the report rating (a tie-break)
    default_members: float = 16.0  # default level: coarsest with this mean size or less
    summary_reports: int = 5  # top reports the summary draws from
    #: "passages": the query-focused map-reduce over the top communities' leaf sentences
    #: (:mod:`kgrag.search.global_summary`, settings in ``passages``); "reports": MMR over
    #: the report sentences (the settings below, down to ``stored_sentences``; the cache
    #: serves both)
    summary_from: Literal["passages", "reports"] = "passages"
    passages: SummarySettings = SummarySettings()
    summary_sentences: int = 8
    summary_tokens: int = 250  # whitespace tokens, citation markers excluded
    mmr_lambda: float = 0.7  # relevance vs. novelty when picking summary sentences
    summary_relations: int = 3  # SVO key relations per report offered to the summary
    relation_discount: float = 0.8  # a key relation is worth less than a sentence
    cache_size: int = 10_000  # summary candidate vectors kept between calls
    min_relevance: float = 0.5  # summary candidates below this share of the best are dropped
    redundancy: float = 0.8  # a candidate this close (cosine) to a picked one is dropped
    #: report sentences take the vectors the ingest stored (read off their chunks' token
    #: vectors); False encodes each on its own per query, as before (slower on fresh
    #: questions)
    stored_sentences: bool = True


@dataclass(frozen=True, slots=True)
class CommunityScore:
    """One ranked community report."""

    id: str
    level: int
    score: float
    title: str
    summary: str  # the full report text
    rating: float
    leaves: tuple[str, ...]  # chunk ids
    #: the report for this question: the sentences of its leaf passages that the
    #: map-reduce took for it, in reading order (the communities the summary reads; ""
    #: for the others and without a summary)
    excerpt: str = ""


@dataclass(frozen=True, slots=True)
class GlobalResult:
    level: int | None  # None when ranked across all levels
    communities: list[CommunityScore]  # best first
    summary: str
    citations: tuple[tuple[str, str], ...]  # (summary sentence, community id), in order
    #: the summary's sentences with the passage each is quoted from (summary_from
    #: "passages"; empty for a summary of report sentences)
    quotes: tuple[Quote, ...] = ()


class GlobalSearch:
    """Global search over one graph version; built once, read-only afterwards. It
    reads the community attributes it ranks by from the store (a level's rows, their
    ratings) and the records of the reports it returns."""

    def __init__(
        self, reader: GraphReader, encoder: Encoder, settings: GlobalSettings | None = None
    ) -> None:
        self.reader, self.encoder = reader, encoder
        self.settings = settings or GlobalSettings()
        self._n = reader.size("communities")
        levels = reader.attribute("communities", "level")  # one scan: the rows of each level
        self._level_rows = {int(lv): np.flatnonzero(levels == lv) for lv in np.unique(levels)}
        sizes = reader.attribute("communities", "size")
        self._mean_size = {
            lv: float(np.asarray(sizes[rows]).mean()) for lv, rows in self._level_rows.items()
        }
        self._canonical = np.flatnonzero(reader.attribute("communities", "canonical"))
        self._cache: dict[str, np.ndarray] = {}
        self._lock = threading.Lock()
        self._stored = self.settings.stored_sentences and reader.size("sentences") > 0

    def levels(self) -> list[int]:
        """The community levels, finest (0) first."""
        return sorted(self._level_rows)

    def default_level(self) -> int:
        """The coarsest level whose communities average at most ``default_members``
        members; 0 when none does (or the graph has no communities)."""
        fitting = [
            lv for lv, size in self._mean_size.items() if size <= self.settings.default_members
        ]
        return max(fitting, default=0)

    def community(self, cid: str) -> Community:
        """The stored community ``cid``."""
        found = self.reader.communities(ids=[cid])
        if not found:
            raise KeyError(cid)
        return found[0]

    def search(
        self,
        query: str,
        k: int,
        level: int | None = None,
        *,
        all_levels: bool = False,
        summary: bool = True,
    ) -> GlobalResult:
        """The ``k`` best reports at ``level`` (the default level when None; every
        level, copies removed, with ``all_levels``) and, unless ``summary`` is
        False, a summary citing them."""
        if not query.strip():
            raise InvalidParams("query must be a non-empty string", field="query")
        if k < 1:
            raise InvalidParams("k must be at least 1", field="k")
        if level is not None and level not in self._level_rows:
            raise InvalidParams(
                f"no community level {level}; levels: {self.levels()}", field="level"
            )
        chosen = None if all_levels else self.default_level() if level is None else level
        rows = (
            self._canonical
            if chosen is None
            else self._level_rows.get(chosen, np.zeros(0, dtype=np.int64))
        )
        qvec = self.encoder.encode_one(query)
        ranked = self._rank(query, qvec, rows, k)
        ids = self.reader.ids("communities", [row for row, _ in ranked])
        by_id = {c.id: c for c in self.reader.communities(ids=ids)}
        scored = [_scored(by_id[cid], score) for cid, (_, score) in zip(ids, ranked, strict=True)]
        best = scored[0].score if scored else 1.0
        top = [(by_id[s.id], s.score / best) for s in scored]
        quotes: tuple[Quote, ...] = ()
        if not summary:
            citations: tuple[tuple[str, str], ...] = ()
        elif self.settings.summary_from == "passages":
            quotes, excerpts = self._quotes(query, qvec, [c for c, _ in top])
            citations = tuple((q.text, q.community) for q in quotes)
            scored = [replace(s, excerpt=excerpts.get(s.id, "")) for s in scored]
        else:
            citations = self._summary(qvec, top)
        text = " ".join(f"{sentence} [{cid}]" for sentence, cid in citations)
        return GlobalResult(chosen, scored, text, citations, quotes)

    def _quotes(
        self, query: str, qvec: np.ndarray, top: Sequence[Community]
    ) -> tuple[tuple[Quote, ...], dict[str, str]]:
        """The map-reduce summary's quotes (:mod:`kgrag.search.global_summary`), and each
        community's excerpt: the same reduce over the same sentences with
        ``excerpt_words`` a community, its picks grouped by community."""
        settings = self.settings.passages
        read = top[: self.settings.summary_reports]
        found, relevance = map_candidates(self.reader, qvec, read, settings, self._encode)
        quotes = tuple(reduce_quotes(found, relevance, settings, query))
        wide = replace(settings, words=settings.excerpt_words * len(read))
        excerpts: dict[str, list[str]] = {}
        for q in reduce_quotes(found, relevance, wide, query):
            excerpts.setdefault(q.community, []).append(q.text)
        return quotes, {cid: " ".join(texts) for cid, texts in excerpts.items()}

    def hierarchy(
        self, level: int | None = None, offset: int = 0, limit: int = 50
    ) -> tuple[list[dict[str, object]], int | None]:
        """One page of the hierarchy, coarsest level first, then by id; and the next
        offset (None on the last page). Each entry lists its first :data:`LISTED` member
        and leaf ids (by id); ``size`` and ``leafCount`` count them all."""
        if level is not None and level not in self._level_rows:
            raise InvalidParams(
                f"no community level {level}; levels: {self.levels()}", field="level"
            )
        if offset < 0:
            raise InvalidParams("offset must be at least 0", field="offset")
        if limit < 1:
            raise InvalidParams("limit must be at least 1", field="limit")
        order = self.reader.attribute("communities", "hierarchy")
        if level is not None:  # a level's rows are one run of the hierarchy order
            start = sum(len(r) for lv, r in self._level_rows.items() if lv > level)
            order = order[start : start + len(self._level_rows[level])]
        page = np.asarray(order[offset : offset + limit])
        ids = self.reader.ids("communities", page)
        by_id = {c.id: c for c in self.reader.communities(ids=ids)}
        after = offset + limit
        return [_describe(by_id[i]) for i in ids], (after if after < len(order) else None)

    def _rank(
        self, query: str, qvec: np.ndarray, rows: np.ndarray, k: int
    ) -> list[tuple[int, float]]:
        """The best ``k`` (row, score) of ``rows``, best first."""
        if not len(rows):
            return []
        dense = self.reader.similarity("communities", qvec, rows)
        id_rank = np.zeros(self._n, dtype=np.int64)
        id_rank[rows] = self.reader.attribute("communities", "id_rank", rows)
        order = rows[np.lexsort((id_rank[rows], -dense))]
        fused = np.zeros(self._n)
        fused[order] = 1.0 / (RRF_K + np.arange(1, len(order) + 1))
        member = np.zeros(self._n, dtype=bool)
        member[rows] = True
        sparse = self.reader.search_sparse(query, self._n, "communities")
        found = self.reader.rows("communities", [cid for cid, _ in sparse])
        found = found[found >= 0]
        found = found[member[found]]
        fused[found] += 1.0 / (RRF_K + np.arange(1, len(found) + 1))
        w = self.settings.rating_weight
        rating = self.reader.attribute("communities", "rating", rows)
        fused[rows] *= 1.0 - w + w * rating / 10.0
        best = rows[np.lexsort((id_rank[rows], -fused[rows]))][:k]
        return [(int(row), float(fused[row])) for row in best]

    def _encode(self, texts: list[str]) -> np.ndarray:
        """Vectors of ``texts``: the stored sentence vector where there is one, else
        encoded unless cached (the cache keeps the ``cache_size`` most recently added)."""
        row_of = self.reader.lookup("sentences", texts) if self._stored else {}
        matrix = self.reader.matrix("sentences")
        known = {t: np.asarray(matrix[row], dtype=np.float32) for t, row in row_of.items()}
        with self._lock:
            known.update({t: self._cache[t] for t in texts if t in self._cache and t not in known})
        missing = [t for t in dict.fromkeys(texts) if t not in known]
        if missing:
            fresh = dict(zip(missing, self.encoder.encode(missing), strict=True))
            known.update(fresh)
            with self._lock:
                self._cache.update(fresh)
                while len(self._cache) > self.settings.cache_size:
                    self._cache.pop(next(iter(self._cache)))
        return np.stack([known[t] for t in texts])

    def _summary(
        self, qvec: np.ndarray, top: Sequence[tuple[Community, float]]
    ) -> tuple[tuple[str, str], ...]:
        """MMR-picked report sentences and relations, each with its community id; a
        candidate's relevance is its cosine scaled by its report's share of the top score."""
        settings = self.settings
        texts, owners, priors, embed = _candidates(
            top[: settings.summary_reports], settings.summary_relations, settings.relation_discount
        )
        if not texts:
            return ()
        vecs = self._encode(embed)
        relevance = (vecs @ qvec) * np.array(priors)
        picked: list[int] = []
        tokens = 0
        floor = settings.min_relevance * float(relevance.max())
        left = [i for i in range(len(texts)) if relevance[i] >= floor]
        while left and len(picked) < settings.summary_sentences:
            novelty = (vecs[left] @ vecs[picked].T).max(axis=1) if picked else np.zeros(len(left))
            mmr = settings.mmr_lambda * relevance[left] - (1 - settings.mmr_lambda) * novelty
            i = int(np.argmax(mmr))  # argmax takes the first: candidate order breaks ties
            best = left.pop(i)
            size = len(texts[best].split())
            too_long = tokens + size > settings.summary_tokens
            if picked and (too_long or novelty[i] > settings.redundancy):
                continue
            picked.append(best)
            tokens += size
        return tuple((texts[i], owners[i]) for i in picked)


def _candidates(
    top: Sequence[tuple[Community, float]], relations: int, relation_discount: float
) -> tuple[list[str], list[str], list[float], list[str]]:
    """Summary candidates of ``top`` in rank order, each text once: display texts,
    owning community ids, relevance priors and the texts to embed. Takes every
    report sentence and the first ``relations`` SVO key relations of each report."""
    texts: list[str] = []
    owners: list[str] = []
    priors: list[float] = []
    embed: list[str] = []
    seen: set[str] = set()

    def add(text: str, owner: str, prior: float, as_embedded: str) -> None:
        key = " ".join(text.lower().split())
        if key and key not in seen:
            seen.add(key)
            texts.append(text.strip())
            owners.append(owner)
            priors.append(prior)
            embed.append(as_embedded)

    for c, weight in top:
        for sentence in c.report.sentences:
            add(sentence, c.id, weight, sentence)
        svo = [(r, p) for r in c.report.key_relations if (p := split_relation(r)) and p[1] != COOC]
        for rendered, parts in svo[:relations]:
            add(rendered, c.id, weight * relation_discount, " ".join(parts))
    return texts, owners, priors, embed


def split_relation(rendered: str) -> tuple[str, str, str] | None:
    """(source, predicate, target) of a report's ``"A -predicate-> B"``; None if malformed."""
    match = _RELATION.match(rendered)
    return (match.group(1), match.group(2), match.group(3)) if match else None


def _scored(c: Community, score: float) -> CommunityScore:
    return CommunityScore(c.id, c.level, score, c.report.title, c.report.text(), c.rating, c.leaves)


def _describe(c: Community) -> dict[str, object]:
    return {
        "id": c.id,
        "level": c.level,
        "title": c.report.title,
        "summary": c.report.text(),
        "parent": c.parent,
        "children": list(c.children),
        "size": len(c.members),
        "leafCount": len(c.leaves),
        "members": list(c.members[:LISTED]),
        "leaves": list(c.leaves[:LISTED]),
        "rating": c.rating,
    }
