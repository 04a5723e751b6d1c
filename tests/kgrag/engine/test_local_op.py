"""Graph op ``local``: PPR + bridge hop, hits of four units, audited provenance."""

from __future__ import annotations

from pathlib import Path

import pytest

import kgrag
from kgrag.errors import InvalidParams, Unsupported
from kgrag.rcp.wire import GraphResult
from kgrag.search.links import title_key

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
        if e["kind"] in ("relation", "cooccurrence"):
            rel = facts["relations"][e["relation"]]
            assert (rel.kind == "svo") == (e["kind"] == "relation")
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
    # Marie Curie's passage names Warsaw, and states how: the path says that, not "names"
    edges = warsaw["provenance"]["edges"]
    names = {e.id: e.name for e in store_facts["entities"].values()}
    born = [e for e in edges if names.get(e["dst"]) == "Warsaw" and e["kind"] == "relation"]
    assert born and born[0]["evidence"] == hits[0]["id"] and born[0]["predicate"] == "bear in"
    assert "names" not in [e["kind"] for e in edges]
    assert edges[-1]["evidence"] == warsaw["id"]  # and what Warsaw's passage says about it
    audit(warsaw, store_facts)


def test_path_hits_draw_relations_with_evidence(engine, store_facts):
    result = engine.retrieve(
        {"query": "Where was the husband of Marie Curie born?", "unit": "path"}
    )
    hits = result["hits"]
    assert hits and all(h["unit"] == "path" and h["id"].startswith("p:") for h in hits)
    for h in hits:
        audit(h, store_facts)
        edges = h["provenance"]["edges"]
        assert any(e["kind"] != "mention" for e in edges) and "—" in h["text"]
        for e in edges:  # every edge quotes the sentence of its evidence that states it
            text = " ".join(store_facts["chunks"][e["evidence"]].text.split())
            pieces = [p.strip() for p in e["quote"].split("…") if p.strip()]
            assert pieces and all(p in text for p in pieces) and f"“{e['quote']}”" in h["text"]
        assert h["meta"]["labels"].keys() == set(h["provenance"]["nodes"])
        for x in h["meta"]["general"]:  # a general term is named as one
            assert len(store_facts["entities"][x].chunk_ids) > 1
            assert f"{h['meta']['labels'][x]} (general term)" in h["text"]
        passages = h["meta"]["passages"]  # the evidence itself, to check each edge against
        assert passages.keys() == {e["evidence"] for e in edges}
        for cid, p in passages.items():
            assert p["text"] == store_facts["chunks"][cid].text
            doc = store_facts["docs"][store_facts["chunks"][cid].doc_id]
            assert p["title"] == doc.title


def test_a_path_quotes_the_sentence_that_states_each_edge(engine, store_facts):
    hits = engine.graph({"op": "local", "query": BRIDGE_Q, "k": 3, "unit": "path"})["hits"]
    names = {e.id: e.name for e in store_facts["entities"].values()}
    quoted = {
        (names[e["src"]], e["predicate"], names[e["dst"]]): e["quote"]
        for h in hits
        for e in h["provenance"]["edges"]
        if e["kind"] == "relation"
    }
    # "She" is the passage's title: the sentence that says it is quoted, not another
    assert quoted[("Marie Curie", "bear in", "Warsaw")] == "She was born in Warsaw in 1867."
    assert quoted[("Warsaw", "lie on", "Vistula River")] == "The city lies on the Vistula River."


def test_a_path_ends_with_what_its_passage_states(engine, store_facts):
    """The last edge of a passage's path is a statement of that passage about the
    path's last entity (where one is about the query about as much as the passage's
    best sentence on it), else the mention."""
    hits = engine.graph({"op": "local", "query": BRIDGE_Q, "k": 6, "unit": "chunk"})["hits"]
    stated = {
        (r.src, r.dst, c)
        for r in store_facts["relations"].values()
        if r.kind == "svo"
        for c in r.evidence
    }
    ends = []
    for h in hits:
        last = h["provenance"]["edges"][-1] if h["provenance"]["edges"] else None
        if last is None:
            continue
        assert last["evidence"] == h["id"]
        ends.append(last["kind"])
        if last["kind"] == "relation":  # a statement of this very passage
            assert (last["src"], last["dst"], h["id"]) in stated
    assert "relation" in ends


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


def test_asking_for_paths_too_leaves_the_passages_as_they_are(engine):
    alone = engine.graph({"op": "local", "query": BRIDGE_Q, "k": 3, "unit": "chunk"})["hits"]
    both = engine.graph({"op": "local", "query": BRIDGE_Q, "k": 3, "unit": ["chunk", "path"]})
    chunks = [h for h in both["hits"] if h["unit"] == "chunk"]
    assert [(h["id"], h["score"]) for h in chunks] == [(h["id"], h["score"]) for h in alone]
    assert 0 < sum(h["unit"] == "path" for h in both["hits"]) <= 3
