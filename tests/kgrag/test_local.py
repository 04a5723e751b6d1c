"""Graph op ``local``: PPR + bridge hop, hits of four units, audited provenance."""

from __future__ import annotations

from pathlib import Path

import pytest

import kgrag
from kgrag.errors import InvalidParams, Unsupported
from kgrag.graph.links import title_key
from kgrag.wire import GraphResult

BRIDGE_Q = "Which river flows through the city where Marie Curie was born?"


@pytest.fixture(scope="module")
def engine(science_graph: Path):
    with kgrag.open(science_graph) as e:
        yield e


@pytest.fixture(scope="module")
def store_facts(engine):
    r = engine.reader
    return {
        "chunks": {c.id: c for c in r.chunks()},
        "docs": {d.id: d for d in r.documents()},
        "entities": {e.id: e for e in r.entities()},
        "relations": {x.id: x for x in r.relations()},
        "mentions": {(m.entity_id, m.chunk_id) for m in r.mentions()},
    }


def audit(hit: dict, facts: dict) -> None:
    """Every leaf exists; every edge joins consecutive path members and is evidenced by a
    leaf passage that mentions both of its ends (or, for a title link, names it)."""
    prov = hit["provenance"]
    leaves, path = prov["leaves"], prov.get("path", [])
    assert leaves and set(leaves) <= set(facts["chunks"])
    assert set(prov.get("nodes", [])) >= set(path)
    for i, e in enumerate(prov.get("edges", [])):
        if hit["unit"] in ("chunk", "path"):
            assert {e["src"], e["dst"]} == {path[i], path[i + 1]}, (i, e, path)
        ev = e["evidence"]
        assert ev in leaves
        if e["kind"] == "relation":
            rel = facts["relations"][e["relation"]]
            assert (rel.src, rel.dst, rel.predicate) == (e["src"], e["dst"], e["predicate"])
            assert ev in rel.evidence
            assert (e["src"], ev) in facts["mentions"] and (e["dst"], ev) in facts["mentions"]
        elif e["kind"] == "mention":
            assert ev == e["dst"] and (e["src"], e["dst"]) in facts["mentions"]
        else:
            assert e["kind"] == "names" and ev == e["src"]
            named = e["dst"]
            title = (
                facts["entities"][named].name
                if named in facts["entities"]
                else facts["docs"][facts["chunks"][named].doc_id].title
            )
            text = title_key(facts["chunks"][ev].text)
            key = title_key(title)
            assert any(text[j : j + len(key)] == key for j in range(len(text)))


def test_local_returns_four_units_with_audited_provenance(engine, store_facts):
    result = engine.graph({"op": "local", "query": BRIDGE_Q, "k": 4})
    GraphResult.model_validate(result)
    hits = result["hits"]
    units = [h["unit"] for h in hits]
    assert units == sorted(units, key=["chunk", "node", "triplet", "path"].index)
    assert {"chunk", "node", "triplet"} <= set(units)
    assert units.count("chunk") == 4
    for h in hits:
        audit(h, store_facts)
        assert h["level"] == 0


def test_bridge_hop_reaches_the_named_city(engine, store_facts):
    hits = engine.graph({"op": "local", "query": BRIDGE_Q, "k": 3, "unit": "chunk"})["hits"]
    titles = [h["citation"]["title"] for h in hits]
    assert titles[:1] == ["Marie Curie"] and "Warsaw" in titles
    warsaw = next(h for h in hits if h["citation"]["title"] == "Warsaw")
    assert warsaw["meta"]["bridgeFrom"] == hits[0]["id"]  # reached through the title link
    assert [e["kind"] for e in warsaw["provenance"]["edges"]][-2:] == ["names", "mention"]
    audit(warsaw, store_facts)


def test_path_hits_draw_relations_with_evidence(engine, store_facts):
    result = engine.retrieve(
        {"query": "Where was the husband of Marie Curie born?", "unit": "path"}
    )
    hits = result["hits"]
    assert hits and all(h["unit"] == "path" and h["id"].startswith("p:") for h in hits)
    for h in hits:
        audit(h, store_facts)
        assert len(h["provenance"]["edges"]) >= 2 and "—" in h["text"]


def test_local_finds_the_linked_passages(engine):
    result = engine.graph({"op": "local", "query": "Where was Marie Curie born?", "k": 3})
    hits = [h for h in result["hits"] if h["unit"] == "chunk"]
    assert hits[0]["citation"]["title"] == "Marie Curie"
    first_node = hits[0]["provenance"]["path"][0]
    assert store_name(engine, first_node) == "Marie Curie"  # the query's name was the seed
    assert all("local" in h["scores"] for h in hits)


def store_name(engine, entity_id: str) -> str:
    return engine.reader.entities([entity_id])[0].name


def test_local_reaches_the_second_hop(engine):
    hits = engine.graph(
        {"op": "local", "query": "Which river flows through the capital of Poland?", "k": 4}
    )["hits"]
    titles = [h["citation"]["title"] for h in hits if h["unit"] == "chunk"]
    assert "Warsaw" in titles and ("Vistula" in titles or "Poland" in titles)


def test_local_is_deterministic(engine):
    params = {"op": "local", "query": "physicist born in Copenhagen", "k": 5}
    a, b = engine.graph(params), engine.graph(params)
    for r in (a, b):
        r["usage"].pop("latencyMs")
    assert a == b


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
    with pytest.raises(Unsupported) as err:
        engine.graph({"op": "local", "query": "x", "unit": "page"})
    assert err.value.data["option"] == "unit"
    with pytest.raises(InvalidParams) as err:
        engine.graph({"query": "x"})
    assert err.value.data["field"] == "op"
    notes = engine.graph({"op": "local", "query": "x", "unit": ["chunk", "page"], "strict": False})
    assert {h["unit"] for h in notes["hits"]} == {"chunk"}
