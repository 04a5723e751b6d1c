"""Graph op ``global``: community reports ranked at a level, a cited extractive
summary, and the browsable hierarchy."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace

import numpy as np
import pytest

from kgrag.encoders import load_encoder
from kgrag.encoders.base import Encoder
from kgrag.errors import InvalidParams
from kgrag.search.global_search import LISTED, GlobalSearch, GlobalSettings
from kgrag.search.global_summary import SummarySettings, content_words
from kgrag.store.bm25 import stop_words

MARKER = re.compile(r"\[(m:[0-9a-f]+)\]")
#: the summary drawn from report sentences (before the map-reduce over passages)
REPORTS = GlobalSettings(summary_from="reports")


@pytest.fixture(scope="module")
def search(science_reader) -> GlobalSearch:
    encoder = load_encoder(science_reader.manifest["models"]["embedding"])
    return GlobalSearch(science_reader, encoder)


def _titles(reader, chunk_ids) -> set[str]:
    return {c.context for c in reader.chunks(list(chunk_ids))}


def test_levels_match_the_store(search, science_reader):
    stored = {c.level for c in science_reader.communities()}
    assert search.levels() == sorted(stored) and len(stored) > 1
    assert search.default_level() in stored


def test_default_level_is_the_coarsest_with_small_communities(science_reader, search):
    mean = {}
    for lv in search.levels():
        sizes = [len(c.members) for c in science_reader.communities(lv)]
        mean[lv] = sum(sizes) / len(sizes)
    assert mean[max(mean)] > mean[min(mean)]
    for cap in (0.5, min(mean.values()), max(mean.values())):
        gs = GlobalSearch(science_reader, search.encoder, GlobalSettings(default_members=cap))
        fitting = [lv for lv in search.levels() if mean[lv] <= cap]
        assert gs.default_level() == max(fitting, default=0)


@pytest.mark.parametrize(
    ("query", "title"),
    [
        ("Who founded an institute at the University of Copenhagen?", "Niels Bohr"),
        ("Which rivers flow into the Black Sea or the Baltic Sea?", "Vistula"),
    ],
)
def test_the_topic_community_ranks_first(search, science_reader, query, title):
    for level in search.levels():
        result = search.search(query, 3, level)
        assert result.level == level
        assert title in _titles(science_reader, result.communities[0].leaves), level


def test_ranking_shape(search, science_reader):
    chunk_ids = {c.id for c in science_reader.chunks()}
    result = search.search("physicists and the Nobel Prize", 4, None)
    assert result.level == search.default_level()
    ranked = result.communities
    assert 0 < len(ranked) <= 4
    assert len({c.id for c in ranked}) == len(ranked)
    assert [c.score for c in ranked] == sorted((c.score for c in ranked), reverse=True)
    for c in ranked:
        stored = search.community(c.id)
        assert c.level == result.level and c.summary == stored.report.text()
        assert c.leaves and set(c.leaves) <= chunk_ids


def test_summary_quotes_leaf_passages_of_the_communities_it_cites(search, science_reader):
    result = search.search("Where did Marie Curie's family live and work?", 3, None)
    returned = {c.id: c for c in result.communities}
    cited = MARKER.findall(result.summary)
    assert result.summary.strip() and cited and set(cited) <= set(returned)
    assert [cid for _, cid in result.citations] == cited
    assert [(q.text, q.community) for q in result.quotes] == list(result.citations)
    texts = {c.id: " ".join(c.text.split()) for c in science_reader.chunks()}
    for quote in result.quotes:
        assert quote.passage in returned[quote.community].leaves  # a leaf of what it cites
        assert quote.text in texts[quote.passage]  # quoted word for word
        assert f"{quote.text} [{quote.community}]" in result.summary
    ranks = [list(returned).index(q.community) for q in result.quotes]
    assert ranks == sorted(ranks)  # read community by community, best first


def test_evidence_in_two_communities_reaches_the_summary(search, science_reader):
    """Bohr's and Einstein's passages lie under different communities of the finest
    level: a question about both, with room for a few sentences only, gets a quote from
    each passage, each cited to a community that holds it."""
    level = search.levels()[0]
    passage = {c.context: c.id for c in science_reader.chunks()}
    under = {
        title: {c.id for c in science_reader.communities(level) if passage[title] in c.leaves}
        for title in ("Niels Bohr", "Albert Einstein")
    }
    assert under["Niels Bohr"] and under["Albert Einstein"]
    assert not under["Niels Bohr"] & under["Albert Einstein"]
    tight = GlobalSearch(
        science_reader, search.encoder, GlobalSettings(passages=SummarySettings(words=25))
    )
    result = tight.search("Where were Niels Bohr and Albert Einstein born?", 5, level)
    for title in ("Niels Bohr", "Albert Einstein"):
        quotes = [q for q in result.quotes if q.passage == passage[title]]
        assert quotes and all(q.community in under[title] for q in quotes), title
    assert sum(len(q.text.split()) for q in result.quotes) <= 25


def test_each_read_community_gets_its_report_for_the_question(search, science_reader):
    """The excerpt of a community: sentences of its own leaf passages only, within
    ``excerpt_words`` a community; a community the summary did not read has none (nor
    one whose sentences the reduce found said better by the others)."""
    settings = GlobalSettings(summary_reports=3, passages=SummarySettings(excerpt_words=20))
    gs = GlobalSearch(science_reader, search.encoder, settings)
    result = gs.search("physicists, their prizes and where they were born", 5, None)
    read, rest = result.communities[:3], result.communities[3:]
    assert sum(bool(c.excerpt) for c in read) >= 2 and not any(c.excerpt for c in rest)
    assert sum(len(c.excerpt.split()) for c in read) <= 20 * 3
    for c in read:
        passages = science_reader.passage_texts(list(c.leaves))
        left = c.excerpt
        for p in passages.values():
            for sentence in p.sentences:
                said = " ".join(p.text[sentence.start : sentence.end].split())
                left = left.replace(said, "")
        assert not left.strip(), c.id  # nothing but its leaves' sentences
    bare = gs.search("physicists, their prizes and where they were born", 5, None, summary=False)
    assert not any(c.excerpt for c in bare.communities)


@pytest.mark.parametrize("words", [12, 25, 150])
def test_the_word_budget_holds_and_nothing_is_said_twice(science_reader, search, words):
    settings = GlobalSettings(passages=SummarySettings(words=words))
    gs = GlobalSearch(science_reader, search.encoder, settings)
    result = gs.search("physicists, their prizes and where they were born", 5, None)
    assert result.quotes  # a budget of 12 still fits one sentence of the corpus
    assert sum(len(q.text.split()) for q in result.quotes) <= words
    assert len({q.text for q in result.quotes}) == len(result.quotes)
    stop = stop_words()
    said: set[str] = set()  # in the order the reduce picked them, each adds a content word
    for step, quote in enumerate(sorted(result.quotes, key=lambda q: q.picked)):
        assert quote.picked == step and content_words(quote.text, stop) - said, step
        said |= content_words(quote.text, stop)


def test_the_same_question_gives_the_same_bytes(science_reader, search):
    query = "Which cities lie on rivers, and which seas do the rivers reach?"
    first = search.search(query, 5, None)
    again = GlobalSearch(science_reader, search.encoder).search(query, 5, None)
    assert first.summary.encode() == again.summary.encode() and first.quotes == again.quotes


def test_summary_can_be_skipped(search):
    full = search.search("Marie Curie and radioactivity", 3, None)
    bare = search.search("Marie Curie and radioactivity", 3, None, summary=False)
    assert full.summary and bare.summary == "" and bare.citations == ()
    assert bare.communities == [replace(c, excerpt="") for c in full.communities]


def test_search_is_deterministic(search):
    a = search.search("capital cities and rivers", 5, 1)
    b = search.search("capital cities and rivers", 5, 1)
    assert a == b


def test_all_levels_keeps_the_finest_copy(search, science_reader):
    stored = science_reader.communities()
    by_key: dict = {}
    for c in stored:
        by_key.setdefault((c.report.text(), c.leaves), []).append(c)
    copies = [sorted(cs, key=lambda c: c.level) for cs in by_key.values() if len(cs) > 1]
    assert copies, "the fixture graph should carry a community down a level"
    result = search.search("France and Paris", len(stored), all_levels=True)
    ids = {c.id for c in result.communities}
    assert result.level is None and len(ids) == len(by_key)
    for same in copies:
        assert same[0].id in ids and not ids & {c.id for c in same[1:]}


def test_bad_params(search):
    missing = max(search.levels()) + 1
    for call in (
        lambda: search.search("rivers", 3, missing),
        lambda: search.search("rivers", 3, -1),
        lambda: search.hierarchy(missing, 0, 10),
    ):
        with pytest.raises(InvalidParams) as err:
            call()
        assert err.value.data["field"] == "level"
    for call, field in (
        (lambda: search.search("rivers", 0, None), "k"),
        (lambda: search.search("  ", 3, None), "query"),
        (lambda: search.hierarchy(None, -1, 10), "offset"),
        (lambda: search.hierarchy(None, 0, 0), "limit"),
    ):
        with pytest.raises(InvalidParams) as err:
            call()
        assert err.value.data["field"] == field


def test_hierarchy_pages_cover_every_community_once(search, science_reader):
    stored = {c.id: c for c in science_reader.communities()}
    seen: list[dict] = []
    offset: int | None = 0
    while offset is not None:
        page, offset = search.hierarchy(None, offset, 4)
        assert 0 < len(page) <= 4
        seen.extend(page)
    assert sorted(d["id"] for d in seen) == sorted(stored)
    assert [(-d["level"], d["id"]) for d in seen] == sorted((-d["level"], d["id"]) for d in seen)
    for d in seen:
        c = stored[d["id"]]
        assert (d["level"], d["parent"], d["children"]) == (c.level, c.parent, list(c.children))
        assert d["size"] == len(c.members) and d["leafCount"] == len(c.leaves)
        assert d["members"] == list(c.members[:LISTED]) and d["leaves"] == list(c.leaves[:LISTED])
        if d["parent"] is not None:
            assert stored[d["parent"]].level == c.level + 1 and c.id in stored[d["parent"]].children


def test_hierarchy_of_one_level(search, science_reader):
    level = search.levels()[0]
    page, after = search.hierarchy(level, 0, 1000)
    assert after is None
    assert sorted(d["id"] for d in page) == sorted(c.id for c in science_reader.communities(level))


class _Counting(Encoder):
    """The real model, remembering every text it was asked to encode."""

    def __init__(self, inner: Encoder) -> None:
        self.inner, self.model_id, self.dim = inner, inner.model_id, inner.dim
        self.seen: list[str] = []

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        self.seen.extend(texts)
        return self.inner.encode(texts)


def test_summary_quotes_stored_sentence_vectors(search, science_reader):
    """Report sentences take the vectors the ingest stored: a query encodes itself and
    the relations it quotes, never a report sentence (``stored_sentences=False``
    encodes them too), and mostly picks what encoding each sentence alone picks."""
    counting = _Counting(search.encoder)
    stored = GlobalSearch(science_reader, counting, REPORTS)
    query = "Where did Marie Curie's family live and work?"
    result = stored.search(query, 3, None)
    sentences = {s for c in result.communities for s in search.community(c.id).report.sentences}
    assert sentences and not sentences & set(counting.seen)
    assert counting.seen[0] == query
    quoted = [text for text, _ in result.citations]
    assert set(quoted) & sentences  # the summary does quote sentences
    encode_each = GlobalSettings(summary_from="reports", stored_sentences=False)
    apart = GlobalSearch(science_reader, search.encoder, encode_each)
    assert not counting.seen[1:] or set(counting.seen[1:]) < set(_encoded(apart, query))
    encoded = [text for text, _ in apart.search(query, 3, None).citations]
    assert len(set(quoted) & set(encoded)) >= 0.75 * len(encoded)


def _encoded(gs: GlobalSearch, query: str) -> list[str]:
    """The texts ``gs`` encodes for ``query``."""
    counting = _Counting(gs.encoder)
    GlobalSearch(gs.reader, counting, gs.settings).search(query, 3, None)
    return counting.seen


def _reference_rank(reader, encoder, query: str, level: int) -> list[tuple[str, float]]:
    """The ranking of one level as first written, one community at a time in Python."""
    ids, matrix = reader.vectors("communities")
    at_level = {c.id: c for c in reader.communities(level)}
    rows = [i for i, cid in enumerate(ids) if cid in at_level]
    dense = np.asarray(matrix)[rows] @ encoder.encode_one(query)
    order = sorted(range(len(rows)), key=lambda i: (-float(dense[i]), ids[rows[i]]))
    fused = {ids[rows[i]]: 1.0 / (60 + rank) for rank, i in enumerate(order, start=1)}
    rank = 0
    for cid, _ in reader.search_sparse(query, len(ids), "communities"):
        if cid in fused:
            rank += 1
            fused[cid] += 1.0 / (60 + rank)
    for cid in fused:
        fused[cid] *= 1.0 - 0.05 + 0.05 * at_level[cid].rating / 10.0
    return sorted(fused.items(), key=lambda cs: (-cs[1], cs[0]))


@pytest.mark.parametrize(
    "query", ["Marie Curie and radioactivity", "rivers of Poland", "Nobel Prize in Physics"]
)
def test_ranking_equals_the_one_community_at_a_time_reference(search, science_reader, query):
    """Same ids, same order, same scores to the bit, at every level."""
    assert GlobalSettings().rating_weight == 0.05
    for level in search.levels():
        want = _reference_rank(science_reader, search.encoder, query, level)
        got = search.search(query, len(want), level, summary=False).communities
        assert [(c.id, c.score) for c in got] == want
        top = search.search(query, 3, level, summary=False).communities
        assert [(c.id, c.score) for c in top] == want[:3]
