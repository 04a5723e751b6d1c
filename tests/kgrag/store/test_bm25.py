"""In-memory BM25 returns exactly what SQLite's FTS5 ``bm25()`` returns."""

from __future__ import annotations

import random
import re

import pytest

from kgrag.store import open_store


@pytest.fixture(scope="module")
def reader(science_graph):
    with open_store(science_graph).reader() as r:
        yield r


def _words(reader, query: str) -> list[str]:
    terms = [t for t in re.findall(r"\w+", query.lower()) if t not in reader._stop]
    return list(dict.fromkeys(terms))


def _queries(reader) -> list[str]:
    rng = random.Random(5)
    words = " ".join(c.text for c in reader.chunks()).split()
    return [" ".join(rng.choice(words) for _ in range(rng.randrange(1, 7))) for _ in range(150)] + [
        "Which river flows through Warsaw?",
        "physics physicist physicists Physics",  # one stem, four phrases
        "Curie Curie",
    ]


@pytest.mark.parametrize("kind", ["chunks", "communities", "tree_nodes"])
def test_scores_and_order_equal_sqlite_to_the_bit(reader, kind):
    compared = 0
    for q in _queries(reader):
        words = _words(reader, q)
        if not words:
            continue
        for k in (1, 3, 50):
            assert reader.search_sparse(q, k, kind) == reader._fts_search(words, k, kind), (q, k)
            compared += 1
    assert compared > 300


def test_ties_at_the_cut_go_by_id(reader):
    # a common word scores many short rows alike: the cut must fall by id, as in SQLite
    found = reader.search_sparse("the Nobel Prize", 2)
    assert found == reader._fts_search(["nobel", "prize"], 2, "chunks")
    everything = reader.search_sparse("the Nobel Prize", 1000)
    assert found == everything[:2]


def test_a_word_that_is_a_phrase_is_left_to_sqlite(reader):
    # "marie_curie" is one \w+ word but two index tokens: a phrase
    q = "marie_curie radium"
    assert reader.search_sparse(q, 5) == reader._fts_search(["marie_curie", "radium"], 5, "chunks")
    assert reader.search_sparse(q, 5)  # the phrase matched


def test_no_words_and_unknown_words(reader):
    assert reader.search_sparse("the of and", 5) == []
    assert reader.search_sparse("zzzqqxj", 5) == []
