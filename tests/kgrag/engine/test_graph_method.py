"""The ``graph`` method's ops and ``retrieve``'s graph units, end to end on a real graph."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

import kgrag
from kgrag.errors import InvalidParams, NotFound, Unsupported
from kgrag.rcp.wire import GraphResult, RetrieveResult

BRIDGE_Q = "Which river flows through the city where Marie Curie was born?"


@pytest.fixture(scope="module")
def engine(science_graph: Path):
    with kgrag.open(science_graph) as e:
        yield e


def _strip(result: dict) -> dict:
    result["usage"].pop("latencyMs", None)
    return result


def test_global_shape_summary_and_levels(engine):
    communities = {c.id: c for c in engine.reader.communities()}
    result = engine.graph({"op": "global", "query": "rivers of Europe and the seas they reach"})
    GraphResult.model_validate(result)
    assert result["summary"] and result["communities"]
    listed = {c["id"] for c in result["communities"]}
    cited = set(re.findall(r"\[(m:[0-9a-f]+)\]", result["summary"]))
    assert cited and cited <= listed
    leaves = {c["id"]: c["leaves"] for c in result["communities"]}
    texts = {c.id: " ".join(c.text.split()) for c in engine.reader.chunks()}
    assert {c["community"] for c in result["citations"]} == cited
    for c in result["citations"]:  # each sentence: where it is quoted from, and what it cites
        assert f"{c['text']} [{c['community']}]" in result["summary"]
        assert c["passage"] in leaves[c["community"]] and c["text"] in texts[c["passage"]]
    scores = [c["score"] for c in result["communities"]]
    assert scores == sorted(scores, reverse=True)
    for c in result["communities"]:
        stored = communities[c["id"]]
        assert c["level"] == stored.level == result["level"]
        assert c["leaves"] == list(stored.leaves)
    for h in result["hits"]:
        assert h["unit"] == "community" and h["level"] == communities[h["id"]].level
    top_leaves = set(result["communities"][0]["leaves"])
    rivers = {c.id for c in engine.reader.chunks() if "Danube" in c.text or "Vistula" in c.text}
    assert top_leaves & rivers


def test_global_at_every_level_and_a_missing_one(engine):
    levels = sorted({c.level for c in engine.reader.communities()})
    for level in levels:
        result = engine.graph({"op": "global", "query": "physicists", "level": level, "k": 2})
        assert {c["level"] for c in result["communities"]} == {level}
    with pytest.raises(InvalidParams) as err:
        engine.graph({"op": "global", "query": "physicists", "level": max(levels) + 5})
    assert err.value.data["field"] == "level"


def test_drift_shape_followups_and_determinism(engine):
    params = {"op": "drift", "query": "Which physicists won the Nobel Prize?", "k": 6}
    a, b = _strip(engine.graph(params)), _strip(engine.graph(params))
    assert a == b
    GraphResult.model_validate(a)
    assert a["followups"] and len(set(a["followups"])) == len(a["followups"])
    ids = [h["id"] for h in a["hits"]]
    assert len(ids) == len(set(ids)) <= 6
    chunks = {c.id for c in engine.reader.chunks()}
    for h in a["hits"]:
        assert h["unit"] == "chunk" and set(h["provenance"]["leaves"]) <= chunks
        assert h["meta"]["foundBy"]
    deeper = engine.graph(params | {"depth": 2})
    assert len(deeper["followups"]) >= len(a["followups"])
    with pytest.raises(InvalidParams) as err:
        engine.graph(params | {"depth": 9})
    assert err.value.data["field"] == "depth"


def test_communities_pages_cover_the_hierarchy_once(engine):
    stored = {c.id: c for c in engine.reader.communities()}
    seen: list[str] = []
    params: dict = {"op": "communities", "k": 4}
    while True:
        page = engine.graph(params)
        GraphResult.model_validate(page)
        for c in page["communities"]:
            s = stored[c["id"]]
            assert (c["level"], c["parent"], c["children"]) == (s.level, s.parent, list(s.children))
        seen += [c["id"] for c in page["communities"]]
        if "nextCursor" not in page:
            break
        params = {"op": "communities", "k": 4, "cursor": page["nextCursor"]}
    assert sorted(seen) == sorted(stored) and len(seen) == len(set(seen))
    with pytest.raises(InvalidParams) as err:
        engine.graph({"op": "communities", "k": 5, "cursor": params.get("cursor", "bogus")})
    assert err.value.data["field"] == "cursor"


def test_neighbors_of_an_entity(engine):
    curie = next(e.id for e in engine.reader.entities() if e.name == "Marie Curie")
    result = engine.graph({"op": "neighbors", "seedIds": [curie], "hops": 1})
    GraphResult.model_validate(result)
    ids = {n["id"] for n in result["nodes"]}
    assert curie in ids
    names = {e.id: e.name for e in engine.reader.entities()}
    assert {"Warsaw", "Pierre Curie"} <= {names.get(i) for i in ids}
    assert all(e["src"] in ids and e["dst"] in ids for e in result["edges"])
    clamped = engine.graph({"op": "neighbors", "seedIds": [curie], "hops": 50})
    assert clamped["usage"]["notes"]
    with pytest.raises(NotFound):
        engine.graph({"op": "neighbors", "seedIds": ["e:nope"]})
    with pytest.raises(InvalidParams) as err:
        engine.graph({"op": "neighbors"})
    assert err.value.data["field"] == "seedIds"


@pytest.mark.parametrize("unit", ["node", "triplet", "path", "subgraph"])
def test_graph_units_through_retrieve(engine, unit):
    result = engine.retrieve({"query": "Where was the husband of Marie Curie born?", "unit": unit})
    RetrieveResult.model_validate(result)
    hits = result["hits"]
    assert hits and all(h["unit"] == unit and h["level"] == 0 for h in hits)
    chunks = {c.id for c in engine.reader.chunks()}
    for h in hits:
        assert h["provenance"]["leaves"] and set(h["provenance"]["leaves"]) <= chunks
    if unit == "node":
        assert "Pierre Curie" in [h["text"] for h in hits[:5]]
    if unit == "triplet":
        rels = {r.id for r in engine.reader.relations()}
        assert all(h["id"] in rels for h in hits)
    if unit == "subgraph":
        assert len(hits) == 1 and hits[0]["provenance"]["edges"]


def test_graph_units_refuse_what_does_not_apply(engine):
    with pytest.raises(Unsupported) as err:
        engine.retrieve({"query": "Curie", "unit": "path", "mmr": {"lambda": 0.5}})
    assert err.value.data["option"] == "mmr"
    loose = engine.retrieve(
        {"query": "Curie", "unit": "path", "mmr": {"lambda": 0.5}, "strict": False}
    )
    assert loose["usage"]["notes"]


@pytest.mark.parametrize("strategy", ["collapsed", "traverse"])
def test_raptor_strategies(engine, strategy):
    nodes = {t.id: t for t in engine.reader.tree_nodes()}
    result = engine.retrieve(
        {
            "query": "Which river flows into the Black Sea?",
            "unit": "tree-node",
            "k": 6,
            "strategy": strategy,
        }
    )
    RetrieveResult.model_validate(result)
    hits = result["hits"]
    assert hits and {h["unit"] for h in hits} <= {"chunk", "tree-node"}
    assert any("Danube" in h["text"] for h in hits)
    for h in hits:
        path = h["provenance"]["path"]
        assert path[-1] == h["id"]
        for parent, child in zip(path, path[1:], strict=False):
            assert child in nodes[parent].children
        if h["unit"] == "tree-node":
            assert h["level"] == nodes[h["id"]].level
    with pytest.raises(Unsupported) as err:
        engine.retrieve({"query": "x", "unit": "tree-node", "strategy": "zigzag"})
    assert err.value.data["option"] == "strategy"


def _cli(graph: Path, *args: str) -> str:
    command = [sys.executable, "-m", "kgrag.cli", "query", "--graph", str(graph), *args]
    return subprocess.run(command, capture_output=True, text=True, check=True).stdout


def test_cli_query_op_draws_paths(science_graph):
    out = _cli(science_graph, "--op", "local", "-k", "3", BRIDGE_Q)
    assert "Marie Curie —bear in→ Warsaw" in out and "[chunk L0]" in out and "[triplet L0]" in out
    assert "“She was born in Warsaw in 1867.” [Marie Curie]" in out  # the sentence saying it
    out = _cli(science_graph, "--op", "global", "Where were Niels Bohr and Albert Einstein born?")
    said = re.findall(r"^  - (.+?) — (.+?) \[(m:[0-9a-f]+)\]$", out, re.M)  # one a line
    assert ("He was born in Ulm in 1879.", "Albert Einstein") in {(t, p) for t, p, _ in said}
