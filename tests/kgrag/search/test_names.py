"""Query spans without a model: known names by lookup, capitalised runs otherwise."""

from __future__ import annotations

from kgrag.search.names import NameIndex

NAMES = [
    (0, "Marie Curie", "PERSON"),
    (1, "Warsaw", "GPE"),
    (2, "University of Paris", "ORG"),
    (3, "University", "ORG"),
    (4, "sky", "CONCEPT"),
    (5, "1903", "DATE"),
    (6, "two", "CARDINAL"),
    (7, "Who", "ORG"),
    (8, "warsaw", "GPE"),  # the same key as row 1: the lower row keeps it
]


def _texts(query: str) -> tuple[list[tuple[int, str]], list[str]]:
    found = NameIndex(NAMES).spans(query)
    return [(row, query[a:b]) for row, a, b in found.known], [query[a:b] for a, b in found.unknown]


def test_longest_known_name_wins_and_case_folds():
    known, unknown = _texts("Did Marie Curie teach at the university of Paris in WARSAW?")
    assert known == [(0, "Marie Curie"), (2, "university of Paris"), (1, "WARSAW")]
    assert unknown == []


def test_a_name_needs_a_capital_or_a_digit_and_amounts_never_link():
    known, _ = _texts("Under which sky did she win a prize in 1903 and two more?")
    assert known == [(5, "1903")]  # "sky" is lower case; "two" is an amount


def test_a_lone_stop_word_is_not_a_name():
    known, unknown = _texts("Who founded Warsaw?")
    assert known == [(1, "Warsaw")] and unknown == []


def test_capitalised_runs_outside_known_names_are_unknown_spans():
    known, unknown = _texts("Which composer wrote Aschenbrodel for the Bank of England in Warsaw?")
    assert known == [(1, "Warsaw")]
    assert unknown == ["Aschenbrodel", "Bank of England"]


def test_a_connector_joins_only_capitalised_words():
    _, unknown = _texts("Is Hotel Ritz of the city the best?")
    assert unknown == ["Hotel Ritz"]


def test_no_names():
    assert len(NameIndex([])) == 0
    known, unknown = _texts("what is a warrant?")
    assert known == [] and unknown == []
