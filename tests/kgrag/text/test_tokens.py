"""The one tokenizer: what each pattern keeps whole, and that no module keeps its own."""

from __future__ import annotations

import re
from pathlib import Path

from kgrag.text.keys import WALK_WEIGHTS, name_key, title_key
from kgrag.text.tokens import JOINED_TOKEN, TOKEN, WORD, count_tokens

ROOT = Path(__file__).resolve().parents[3]
TEXT = "Jean-Luc O'Brien visited the U.S. in 1967, didn't he?"


def test_each_pattern_splits_as_its_name_says():
    assert WORD.findall(TEXT)[:4] == ["Jean", "Luc", "O", "Brien"]
    assert TOKEN.findall(TEXT)[:5] == ["Jean", "-", "Luc", "O", "'"]
    assert JOINED_TOKEN.findall(TEXT) == [
        "Jean-Luc", "O'Brien", "visited", "the", "U.S", ".", "in", "1967", ",", "didn't",
        "he", "?",
    ]  # fmt: skip
    assert count_tokens(TEXT) == len(TOKEN.findall(TEXT))


def test_titles_keep_joined_words_and_names_split_them():
    assert title_key("Jean-Luc Godard (director)") == ("jean-luc", "godard")
    assert name_key("Jean-Luc Godard") == "jean - luc godard"


def test_no_module_compiles_a_tokenizer_of_its_own():
    patterns = {p.pattern for p in (WORD, TOKEN, JOINED_TOKEN)}
    own = re.compile(r"re\.compile\(r?\"([^\"]*)\"")
    found = [
        (str(path.relative_to(ROOT)), pattern)
        for package in ("kgrag", "ingest")
        for path in sorted((ROOT / package).rglob("*.py"))
        if path.name != "tokens.py"
        for pattern in own.findall(path.read_text(encoding="utf-8"))
        if pattern in patterns
    ]
    assert found == []


def test_the_stored_walk_has_local_search_default_weights():
    from kgrag.config import LocalSearchConfig

    local = LocalSearchConfig()
    assert {
        "relation": local.relation_weight,
        "cooc": local.cooc_weight,
        "mention": local.mention_weight,
        "synonym": local.synonym_weight,
    } == WALK_WEIGHTS
