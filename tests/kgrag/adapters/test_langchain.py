"""The LangChain retriever, run by the real langchain-core: invoke, ainvoke, batch."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from langchain_core.documents import Document
from pydantic import ValidationError

import kgrag
from kgrag.adapters.langchain import KgragRetriever

pytestmark = pytest.mark.usefixtures("offline")
QUESTION = "Where was Marie Curie born?"


def test_invoke_returns_the_passage_with_its_citation(science_engine: kgrag.Engine):
    docs = KgragRetriever(engine=science_engine, k=3).invoke(QUESTION)
    assert len(docs) == 3 and all(isinstance(d, Document) for d in docs)
    best = docs[0]
    assert "born in Warsaw" in best.page_content
    meta = best.metadata
    assert meta["title"] == "Marie Curie" and meta["citation"]["title"] == "Marie Curie"
    assert meta["unit"] == "chunk" and meta["level"] == 0
    assert best.id == meta["id"] and meta["provenance"]["leaves"] == [meta["id"]]
    assert 0 < meta["confidence"] <= 1 and meta["score"] >= docs[1].metadata["score"]
    assert meta["meta"]["title"] == "Marie Curie"


def test_local_search_documents_carry_the_relation_that_answers(science_engine: kgrag.Engine):
    docs = KgragRetriever(engine=science_engine, op="local", k=2).invoke(QUESTION)
    assert [d.metadata["unit"] for d in docs] == ["chunk", "chunk"]  # passages only by default
    assert docs[0].metadata["title"] == "Marie Curie"
    quotes = [e.get("quote") for e in docs[0].metadata["provenance"]["edges"]]
    assert "She was born in Warsaw in 1867." in quotes


def test_ainvoke_and_batch_answer_each_question(science_engine: kgrag.Engine):
    retriever = KgragRetriever(engine=science_engine, k=2)
    sync = retriever.invoke(QUESTION)
    docs = asyncio.run(retriever.ainvoke(QUESTION))
    assert [d.id for d in docs] == [d.id for d in sync]
    both = retriever.batch([QUESTION, "Where was Albert Einstein born?"])
    assert [found[0].metadata["title"] for found in both] == ["Marie Curie", "Albert Einstein"]
    assert "Ulm" in both[1][0].page_content


def test_ops_and_params_reach_the_engine(science_engine: kgrag.Engine):
    reports = KgragRetriever(engine=science_engine, op="global", k=2).invoke("Curie family")
    assert reports and {d.metadata["unit"] for d in reports} == {"community"}
    assert any("Marie Curie" in d.page_content for d in reports)
    documents = KgragRetriever(
        engine=science_engine, k=1, params={"unit": "document", "mode": "dense"}
    ).invoke(QUESTION)
    assert documents[0].metadata["unit"] == "document"
    assert documents[0].metadata["title"] == "Marie Curie"


def test_a_bad_op_or_param_is_a_clear_error(science_engine: kgrag.Engine):
    with pytest.raises(ValidationError, match="'retrieve', 'local', 'global' or 'drift'"):
        KgragRetriever(engine=science_engine, op="bogus")
    with pytest.raises(ValidationError, match="greater than or equal to 1"):
        KgragRetriever(engine=science_engine, k=0)
    retriever = KgragRetriever(engine=science_engine, params={"mode": "fuzzy"})
    with pytest.raises(kgrag.KgragError, match="fuzzy"):
        retriever.invoke(QUESTION)


def test_from_graph_opens_and_closes_its_engine(science_graph: Path):
    retriever = KgragRetriever.from_graph(science_graph, k=1)
    try:
        assert retriever.invoke(QUESTION)[0].metadata["title"] == "Marie Curie"
    finally:
        retriever.close()
