"""Quotes: a long sentence is cut to the part that names an edge's ends."""

from __future__ import annotations

from kgrag.search.evidence import excerpt

LONG = (
    "Karl von Habsburg (born 11 January 1961), also known as Karl of Austria and referred "
    "to by his ancestral titles as Archduke of Austria, Royal Prince of Hungary, Bohemia "
    "and Croatia, is an Austrian politician, the current head of the House of "
    "Habsburg-Lorraine, and the eldest son of Otto von Habsburg."
)


def _pieces(quote: str) -> list[str]:
    return [p.strip() for p in quote.split("…") if p.strip()]


def test_a_short_sentence_is_quoted_whole():
    assert excerpt("She was born in Warsaw in 1867.", ("Warsaw",)) == (
        "She was born in Warsaw in 1867."
    )


def test_a_long_sentence_keeps_the_window_naming_both_ends():
    quote = excerpt(LONG, ("Croatia", "Otto von Habsburg (politician)"), limit=120)
    assert "Croatia" in quote and "Otto von Habsburg" in quote and len(quote) <= 124
    assert quote.startswith("… ") and all(p in LONG for p in _pieces(quote))


def test_ends_too_far_apart_keep_both_surroundings():
    quote = excerpt(LONG, ("Karl von Habsburg", "Otto von Habsburg"), limit=100)
    assert quote.startswith("Karl von Habsburg") and "Otto von Habsburg" in quote
    assert " … " in quote and all(p in LONG for p in _pieces(quote))


def test_no_name_found_keeps_the_start():
    quote = excerpt(LONG, ("Vienna",), limit=60)
    assert quote.startswith("Karl von Habsburg") and quote.endswith(" …")
    assert len(quote) <= 62 and quote[:-2] in LONG
