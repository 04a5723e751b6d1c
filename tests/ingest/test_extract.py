"""Extraction on a hand-checked passage set (tests/data/science.json)."""

from __future__ import annotations

import pytest

from ingest.chunk import chunk_documents
from ingest.extract import TITLE_LABEL, extract
from ingest.load import load_paths
from kgrag.text.keys import COOC
from kgrag.text.nlp import load_spacy
from tests.conftest import SCIENCE


@pytest.fixture(scope="module")
def extraction():
    docs = load_paths([SCIENCE]).documents
    chunks = chunk_documents(docs, max_tokens=200, overlap_tokens=40)
    ex = extract(
        chunks,
        {d.id: d.title for d in docs},
        load_spacy(),
        skip_labels=("CARDINAL", "ORDINAL", "PERCENT", "QUANTITY", "MONEY"),
        concepts=True,
        max_cooc_entities=12,
        n_process=1,
        batch_size=8,
    )
    return ex, {c.id: c for c in chunks}


def test_named_entities_found_with_their_labels(extraction):
    ex, _ = extraction
    labels = {(m.name, m.label) for m in ex.mentions}
    for expected in [
        ("Marie Curie", "PERSON"),
        ("Pierre Curie", "PERSON"),
        ("Warsaw", "GPE"),
        ("Poland", "GPE"),
        ("University of Paris", "ORG"),
        ("Royal Swedish Academy of Sciences", "ORG"),
        ("Baltic Sea", "LOC"),
    ]:
        assert expected in labels


def test_concepts_are_lemmatised_noun_chunks_without_numbers(extraction):
    ex, _ = extraction
    concepts = {m.name for m in ex.mentions if m.label == "CONCEPT"}
    assert {"physicist", "theoretical physicist", "capital"} <= concepts
    assert not any(ch.isdigit() for c in concepts for ch in c)


def test_svo_relations_use_the_verb_lemma(extraction):
    ex, _ = extraction
    triples = {(r.src, r.predicate, r.dst) for r in ex.relations if r.kind == "svo"}
    for expected in [
        ("Marie Curie", "bear in", "Warsaw"),  # pronoun subject "She" -> the title
        ("Marie Curie", "marry", "Pierre Curie"),
        ("Pierre Curie", "bear in", "Paris"),
        ("Albert Einstein", "bear in", "Ulm"),
        ("Irène Joliot-Curie", "be daughter of", "Marie Curie"),
        ("Warsaw", "be capital of", "Poland"),
        ("Danube", "flow into", "Black Sea"),
        ("Louvre", "locate in", "Paris"),
        ("Bohr", "found", "Niels Bohr Institute"),  # the alias is resolved later
        ("Nobel Prize in Physics", "award by", "Royal Swedish Academy of Sciences"),
        ("Copenhagen", "lie on island of", "Zealand"),
        ("Ulm", "situate on", "Danube"),  # "The city" stands for the title
    ]:
        assert expected in triples, expected


def test_every_relation_is_evidenced_by_a_chunk_mentioning_both_ends(extraction):
    ex, chunks = extraction
    named: dict[str, set[str]] = {}
    for m in ex.mentions:
        named.setdefault(m.chunk_id, set()).add(m.name)
    assert ex.relations and ex.cooc
    for r in ex.every_relation():
        assert r.chunk_id in chunks
        assert {r.src, r.dst} <= named[r.chunk_id], r


def test_title_is_mentioned_by_each_chunk_and_linked_by_cooccurrence(extraction):
    ex, chunks = extraction
    titled = {m.chunk_id for m in ex.mentions if m.label == TITLE_LABEL}
    assert titled == set(chunks)
    cooc = {(r.src, r.dst) for r in ex.every_relation() if r.predicate == COOC}
    assert ("Danube", "Black Sea") in cooc or ("Black Sea", "Danube") in cooc


def test_sentences_record_their_entities(extraction):
    ex, chunks = extraction
    for s in ex.sentences:
        text = chunks[s.chunk_id].text[s.start : s.end]
        assert text.strip()
        for name in s.names:
            if not name.islower():  # named entities appear verbatim; concepts are lemmatised
                assert name in text


def test_a_participle_describing_the_copulas_complement_has_the_subject_as_its_own():
    from ingest.load import Document

    docs = [
        Document(
            "d:film",
            "Battle in Seattle",
            "Battle in Seattle is a 2007 political thriller film written and directed by "
            "Stuart Townsend. Haiducii is a 1966 Romanian film directed by Dinu Cocea.",
        )
    ]
    chunks = chunk_documents(docs, max_tokens=200, overlap_tokens=40)
    ex = extract(
        chunks,
        {"d:film": "Battle in Seattle"},
        load_spacy(),
        skip_labels=("CARDINAL",),
        concepts=True,
        max_cooc_entities=12,
        n_process=1,
        batch_size=8,
    )
    triples = {(r.src, r.predicate, r.dst) for r in ex.relations if r.kind == "svo"}
    assert ("Battle in Seattle", "direct by", "Stuart Townsend") in triples
    assert ("Haiducii", "direct by", "Dinu Cocea") in triples
    assert not any(r.src.endswith("film") and r.predicate == "direct by" for r in ex.relations)
