"""Graph op ``local``: PPR over the entity + passage graph, with provenance."""

from __future__ import annotations

from pathlib import Path

import pytest

import kgrag
from kgrag.errors import InvalidParams, Unsupported
from kgrag.wire import RetrieveResult


@pytest.fixture(scope="module")
def engine(science_graph: Path):
    with kgrag.open(science_graph) as e:
        yield e


def test_local_finds_the_linked_passages(engine):
    result = engine.graph({"op": "local", "query": "Where was Marie Curie born?", "k": 3})
    RetrieveResult.model_validate(result | {"usage": result["usage"]})
    hits = result["hits"]
    assert hits[0]["citation"]["title"] == "Marie Curie"
    entities = {e.id: e.name for e in engine.reader.entities()}
    seeds = hits[0]["provenance"]["nodes"]
    assert seeds and set(seeds) <= set(entities)
    assert "Marie Curie" in {entities[s] for s in seeds}  # the query's name was linked
    chunk_ids = {c.id for c in engine.reader.chunks()}
    for h in hits:
        assert (
            h["unit"] == "chunk" and h["provenance"]["leaves"] == [h["id"]] and h["id"] in chunk_ids
        )
        assert "local" in h["scores"]


def test_local_reaches_the_second_hop(engine):
    hits = engine.graph(
        {"op": "local", "query": "Which river flows through the capital of Poland?", "k": 4}
    )["hits"]
    titles = [h["citation"]["title"] for h in hits]
    assert "Warsaw" in titles and ("Vistula" in titles or "Poland" in titles)


def test_local_is_deterministic(engine):
    params = {"op": "local", "query": "physicist born in Copenhagen", "k": 5}
    a, b = engine.graph(params), engine.graph(params)
    assert [(h["id"], h["score"]) for h in a["hits"]] == [(h["id"], h["score"]) for h in b["hits"]]


def test_graph_errors(engine):
    with pytest.raises(Unsupported) as err:
        engine.graph({"op": "telepathy", "query": "x"})
    assert err.value.data["option"] == "op" and err.value.code == -32005
    with pytest.raises(InvalidParams) as err:
        engine.graph({"op": "local", "query": " "})
    assert err.value.data["field"] == "query"
    with pytest.raises(InvalidParams) as err:
        engine.graph({"op": "local", "query": "x", "k": 0})
    assert err.value.data["field"] == "k"
