"""The LlamaIndex retriever, run by the real llama-index-core, with no network."""

from __future__ import annotations

import asyncio

import pytest
from llama_index.core.schema import MetadataMode, NodeWithScore, QueryBundle, TextNode

import kgrag
from kgrag.adapters.llamaindex import KgragRetriever

pytestmark = pytest.mark.usefixtures("offline")
QUESTION = "Where was Marie Curie born?"


def test_retrieve_returns_the_passage_with_its_metadata(science_engine: kgrag.Engine):
    found = KgragRetriever(science_engine, k=3).retrieve(QUESTION)
    assert len(found) == 3 and all(isinstance(f, NodeWithScore) for f in found)
    best = found[0]
    assert isinstance(best.node, TextNode) and "born in Warsaw" in best.node.get_content()
    meta = best.node.metadata
    assert meta["title"] == "Marie Curie" and meta["citation"]["title"] == "Marie Curie"
    assert best.node.node_id == meta["id"] and meta["provenance"]["leaves"] == [meta["id"]]
    assert meta["unit"] == "chunk" and meta["level"] == 0 and 0 < meta["confidence"] <= 1
    assert best.score == meta["score"] >= (found[1].score or 0.0)
    # a prompt sees the passage, its title and citation; not scores or provenance
    prompt = best.node.get_content(metadata_mode=MetadataMode.LLM)
    assert "title: Marie Curie" in prompt and "provenance" not in prompt and "Warsaw" in prompt


def test_aretrieve_matches_retrieve(science_engine: kgrag.Engine):
    retriever = KgragRetriever(science_engine, k=2)
    sync = retriever.retrieve(QueryBundle(QUESTION))
    found = asyncio.run(retriever.aretrieve(QUESTION))
    assert [f.node.node_id for f in found] == [f.node.node_id for f in sync]
    assert [f.score for f in found] == [f.score for f in sync]


def test_local_search_nodes_carry_the_relation_that_answers(science_engine: kgrag.Engine):
    found = KgragRetriever(science_engine, op="local", k=2).retrieve(QUESTION)
    assert [f.node.metadata["unit"] for f in found] == ["chunk", "chunk"]
    quotes = [e.get("quote") for e in found[0].node.metadata["provenance"]["edges"]]
    assert "She was born in Warsaw in 1867." in quotes
    einstein = KgragRetriever(science_engine, op="drift", k=1).retrieve(
        "Where was Albert Einstein born?"
    )
    assert einstein[0].node.metadata["title"] == "Albert Einstein"


def test_a_bad_op_or_k_is_a_clear_error(science_engine: kgrag.Engine):
    with pytest.raises(kgrag.InvalidParams, match="op must be one of retrieve, local"):
        KgragRetriever(science_engine, op="bogus")
    with pytest.raises(kgrag.InvalidParams, match="k must be a positive integer"):
        KgragRetriever(science_engine, k=0)
