"""Query transformations from the spaCy parse and graph facts, on real multi-hop questions."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from kgrag.errors import InvalidParams, Unsupported
from kgrag.retrieval.transform import HYDE_FACTS, METHODS, Transformed, transform
from kgrag.text.nlp import load_spacy

BRAND = "What country was the author of Brand a citizen of?"
FAWELL = "In what county is the city where Harris W. Fawell was born?"
ASCHENBRODEL = "Who was in charge of the country where the composer of Aschenbrodel was a citizen?"

GRAPH_FACTS = {
    "Brand": ["Brand (play) write by Henrik Ibsen", "Brand be play"],
    "Henrik Ibsen": ["Henrik Ibsen be Norwegian playwright"],
    "Fawell": [f"Fawell fact {i}" for i in range(8)],
}


class Facts:
    """A FactLookup over a small dict, remembering the names it was asked about."""

    def __init__(self, table: dict[str, list[str]]) -> None:
        self.table = table
        self.asked: list[list[str]] = []

    def __call__(self, names: Sequence[str]) -> list[str]:
        self.asked.append(list(names))
        found: list[str] = []
        for name in names:
            for key, facts in self.table.items():
                if key in name:
                    found += facts
        return found


@pytest.fixture(scope="module")
def nlp():
    return load_spacy()


def run(nlp, query: str, method: str, n: int = 3, table=None) -> Transformed:
    return transform(query, method, nlp=nlp, facts=Facts(table or GRAPH_FACTS), n=n)


# --- rewrite ---------------------------------------------------------------------------


def test_rewrite_keeps_entities_and_content_words_only(nlp):
    assert run(nlp, BRAND, "rewrite").queries == ("country author Brand citizen",)
    (fawell,) = run(nlp, FAWELL, "rewrite").queries
    assert "Harris W. Fawell" in fawell
    assert {"county", "city"} <= set(fawell.split())
    assert not {"what", "is", "the", "where", "was", "In", "?"} & set(fawell.split())


def test_rewrite_lemmatises_verbs_and_keeps_numbers(nlp):
    q = "What is the native language of the person who broke the salt law in Belgium in 1930?"
    (words,) = run(nlp, q, "rewrite").queries
    assert "break" in words.split() and "1930" in words.split() and "Belgium" in words
    assert "broke" not in words.split()


def test_rewrite_never_returns_an_empty_query(nlp):
    assert run(nlp, "What is it?", "rewrite").queries == ("What is it?",)


# --- decompose -------------------------------------------------------------------------


def test_decompose_relative_clause_where(nlp):
    parts = run(nlp, FAWELL, "decompose").queries
    assert parts == ("Where was Harris W. Fawell born?", "In what county is the city?")


def test_decompose_of_phrase(nlp):
    parts = run(nlp, BRAND, "decompose").queries
    assert parts == ("Who is the author of Brand?", "What country was the author a citizen of?")


def test_decompose_three_hops_innermost_first(nlp):
    parts = run(nlp, ASCHENBRODEL, "decompose", n=5).queries
    assert parts == (
        "Who is the composer of Aschenbrodel?",
        "Where was the composer a citizen?",
        "Who was in charge of the country?",
    )


def test_decompose_respects_n_and_keeps_the_rest_in_the_last_part(nlp):
    parts = run(nlp, ASCHENBRODEL, "decompose", n=2).queries
    assert parts[0] == "Who is the composer of Aschenbrodel?"
    assert len(parts) == 2 and "where the composer was a citizen" in parts[1]
    assert run(nlp, ASCHENBRODEL, "decompose", n=1).queries == (ASCHENBRODEL,)


@pytest.mark.parametrize(
    ("question", "first"),
    [
        (
            "Who was the first president of the association which published "
            "Journal of Psychotherapy Integration?",
            "Which association published Journal of Psychotherapy Integration?",
        ),
        (
            "What county shares a border with the county in which Johnnycake, "
            "West Virginia is located?",
            "In which county is Johnnycake, West Virginia located?",
        ),
        ("When did Lothair Ii's mother die?", "Who is Lothair Ii's mother?"),
        ("Who is the spouse of Big Eye's main director?", "Who is Big Eye's main director?"),
        (
            "When did the country containing Nugegoda leave the British Empire?",
            "Which country contains Nugegoda?",
        ),
        (
            "What currency predated the Euro in the country Signmark is from?",
            "Which country is Signmark from?",
        ),
        (
            "When did the state whose official sport is jousting make anglicanism its "
            "established religion?",
            "Which state's official sport is jousting?",
        ),
        (
            "What is the continental limit of the continent with the lowest average temperature?",
            "Which continent has the lowest average temperature?",
        ),
    ],
)
def test_decompose_classic_shapes(nlp, question, first):
    parts = run(nlp, question, "decompose").queries
    assert len(parts) >= 2
    assert parts[0] == first
    assert all(p.endswith("?") and p[0].isupper() for p in parts)


@pytest.mark.parametrize(
    ("question", "options"),
    [
        (
            "Who was born first, Sid Haig or Vic Darchinyan?",
            ("When was Sid Haig born?", "When was Vic Darchinyan born?"),
        ),
        (
            "Which film was released first, Aas Ka Panchhi or Phoolwari?",
            ("When was Aas Ka Panchhi released?", "When was Phoolwari released?"),
        ),
        (
            "Which plant is larger, the Pterocarya or the Cotula?",
            ("How large is the Pterocarya?", "How large is the Cotula?"),
        ),
        (
            "Which singer is American, Mark King or Nick Hexum?",
            ("Is Mark King American?", "Is Nick Hexum American?"),
        ),
        (
            "Who performed in both Welcome to the Show and the band f(x)?",
            ("Who performed in Welcome to the Show?", "Who performed in the band f(x)?"),
        ),
    ],
)
def test_decompose_one_question_per_option(nlp, question, options):
    assert run(nlp, question, "decompose").queries == options


def test_decompose_coordinated_yes_no_question(nlp):
    q = "Are Christopher Nolan and Sathish Kalathil both film directors?"
    first, second = run(nlp, q, "decompose").queries
    assert first.startswith("Is Christopher Nolan") and "Kalathil" not in first
    assert second.startswith("Is Sathish Kalathil") and "Nolan" not in second


def test_decompose_leaves_single_hop_questions_whole(nlp):
    q = "Who is the wife of Kim Jong-chul?"
    assert run(nlp, q, "decompose").queries == (q,)


def test_decompose_asks_an_inner_wh_clause_last(nlp):
    q = "Drew Fuller stared in a series that originally broadcast on what station?"
    parts = run(nlp, q, "decompose").queries
    assert parts[-1] == "Which series originally broadcast on what station?"
    assert parts[0].startswith("Drew Fuller")


# --- multi-query, step-back, hyde --------------------------------------------------------


def test_multi_query_original_rewrite_then_entity_variants(nlp):
    queries = run(nlp, BRAND, "multi-query", n=3).queries
    assert queries == (BRAND, "country author Brand citizen", "Brand author country")
    assert len(run(nlp, BRAND, "multi-query", n=1).queries) == 1


def test_multi_query_is_distinct_and_bounded(nlp):
    q = "Who was born first, Sid Haig or Vic Darchinyan?"
    queries = run(nlp, q, "multi-query", n=6).queries
    assert 3 <= len(queries) <= 6
    assert len({x.casefold() for x in queries}) == len(queries)
    assert any(x.startswith("Sid Haig") for x in queries)
    assert any(x.startswith("Vic Darchinyan") for x in queries)


def test_step_back_asks_about_the_entity_in_general(nlp):
    queries = run(nlp, BRAND, "step-back").queries
    assert queries[0] == "What is known about Brand?"
    assert "Brand" not in queries[1] and queries[1].startswith("What country was the author of")
    assert all(q != BRAND for q in queries)


def test_step_back_without_entities_still_differs(nlp):
    for q in ("What is it?", "Which of the two tornado outbreaks killed the most people?"):
        queries = run(nlp, q, "step-back").queries
        assert queries and all(x and x != q for x in queries)


def test_hyde_assembles_graph_facts_about_the_query_entities(nlp):
    facts = Facts(GRAPH_FACTS)
    out = transform(BRAND, "hyde", nlp=nlp, facts=facts)
    assert facts.asked == [["Brand"]]
    assert out.queries == ("country author Brand citizen",)
    assert out.hypothetical == "Brand. Brand (play) write by Henrik Ibsen. Brand be play."


def test_hyde_caps_the_number_of_facts(nlp):
    out = run(nlp, FAWELL, "hyde")
    assert out.hypothetical is not None
    assert out.hypothetical.count("Fawell fact") == HYDE_FACTS


def test_hyde_without_facts_falls_back_to_keywords_and_names(nlp):
    q = "Who was born first, Sid Haig or Vic Darchinyan?"
    out = run(nlp, q, "hyde", table={})
    assert out.hypothetical == "Born Sid Haig Vic Darchinyan. Sid Haig, Vic Darchinyan."


# --- contract ----------------------------------------------------------------------------


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("question", [BRAND, FAWELL, "Who is the wife of Kim Jong-chul?"])
def test_every_method_is_deterministic_and_non_empty(nlp, method, question):
    first = run(nlp, question, method)
    assert first == run(nlp, question, method)
    assert 1 <= len(first.queries) <= 3 and all(q.strip() for q in first.queries)
    assert (first.hypothetical is not None) == (method == "hyde")


def test_methods_in_spec_order():
    assert METHODS == ("rewrite", "hyde", "multi-query", "decompose", "step-back")


def test_unknown_method_is_unsupported(nlp):
    with pytest.raises(Unsupported) as err:
        run(nlp, BRAND, "paraphrase")
    assert err.value.data == {"option": "rewrite"}
    assert "paraphrase" in err.value.message


@pytest.mark.parametrize("query", ["", "   \n"])
def test_blank_query_is_invalid(nlp, query):
    with pytest.raises(InvalidParams) as err:
        run(nlp, query, "rewrite")
    assert err.value.data == {"field": "query"}


def test_n_below_one_is_invalid(nlp):
    with pytest.raises(InvalidParams) as err:
        run(nlp, BRAND, "multi-query", n=0)
    assert err.value.data == {"field": "n"}
