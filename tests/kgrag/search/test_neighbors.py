"""Graph op ``neighbors`` on the science graph's entity + passage graph."""

from __future__ import annotations

import igraph as ig
import pytest

from kgrag.errors import InvalidParams, NotFound
from kgrag.search import build_graph
from kgrag.search.neighbors import neighbors


@pytest.fixture(scope="module")
def graph(science_reader) -> ig.Graph:
    r = science_reader
    chunk_ids = [c.id for c in r.chunks()]
    return build_graph(r.entities(), chunk_ids, r.mentions(), r.relations(), r.synonyms())


@pytest.fixture(scope="module")
def entity(science_reader):
    names = {e.name: e.id for e in science_reader.entities()}
    return names.__getitem__


def _distances(graph: ig.Graph, seeds: list[str]) -> dict[str, float]:
    """Hop distance of every vertex to its nearest seed."""
    index = {v: i for i, v in enumerate(graph.vs["id"])}
    rows = graph.distances(source=[index[s] for s in seeds])
    return {v: min(row[i] for row in rows) for v, i in index.items()}


def test_nodes_lie_within_hops_and_edges_exist(graph, entity):
    seeds = [entity("Marie Curie"), entity("Danube")]
    result = neighbors(graph, seeds, 2, limit=1000)
    dist = _distances(graph, seeds)
    got = {n["id"]: n for n in result["nodes"]}
    assert {n for n, d in dist.items() if d <= 2} == set(got)  # everything in reach, no more
    assert [n["id"] for n in result["nodes"][:2]] == sorted(seeds)
    assert all(got[s]["score"] == 1.0 for s in seeds)
    assert all(0 <= n["score"] < 1.0 for n in result["nodes"][2:])
    vs = {v["id"]: v for v in graph.vs}
    for n in result["nodes"]:
        assert (n["kind"], n["label"]) == (vs[n["id"]]["kind"], vs[n["id"]]["label"])
    # the strongest neighbour halves the score per hop
    assert max(n["score"] for n in result["nodes"] if dist[n["id"]] == 1) == 0.5
    assert max(n["score"] for n in result["nodes"] if dist[n["id"]] == 2) <= 0.25

    stored = {}
    for e in graph.es:
        a, b = (graph.vs[i]["id"] for i in e.tuple)
        stored.setdefault((frozenset((a, b)), e["kind"]), []).append(e)
    for edge in result["edges"]:
        assert edge["src"] in got and edge["dst"] in got
        parallel = stored[(frozenset((edge["src"], edge["dst"])), edge["kind"])]
        assert edge["weight"] == pytest.approx(sum(e["weight"] for e in parallel))
        if edge["kind"] == "relation":
            assert edge["relations"] == sorted(e["rid"] for e in parallel)
            assert set(edge["predicates"]) == {e["predicate"] for e in parallel}
            assert edge["predicate"] == edge["predicates"][0]
    pairs = [(frozenset((e["src"], e["dst"])), e["kind"]) for e in result["edges"]]
    assert len(set(pairs)) == len(pairs)  # parallel edges merged
    # every stored edge between returned nodes is there
    inside = {k for k in stored if k[0] <= set(got) and len(k[0]) == 2}
    assert inside == set(pairs)


def test_one_hop_is_the_direct_neighbourhood(graph, entity):
    seed = entity("Warsaw")
    result = neighbors(graph, [seed], 1)
    v = graph.vs.find(id=seed).index
    direct = {graph.vs[u]["id"] for u in graph.neighbors(v)} | {seed}
    assert {n["id"] for n in result["nodes"]} == direct
    labels = {n["label"] for n in result["nodes"]}
    assert "Vistula" in labels or "Poland" in labels


def test_limit_keeps_the_best(graph, entity):
    seeds = [entity("Marie Curie")]
    full = neighbors(graph, seeds, 3, limit=1000)["nodes"]
    cut = neighbors(graph, seeds, 3, limit=5)
    assert len(full) > 5
    assert cut["nodes"] == full[:5]
    kept = {n["id"] for n in cut["nodes"]}
    assert all(e["src"] in kept and e["dst"] in kept for e in cut["edges"])
    scores = [n["score"] for n in full]
    assert scores == sorted(scores, reverse=True)


def test_same_call_same_answer(graph, entity):
    seeds = [entity("Niels Bohr"), entity("Albert Einstein")]
    assert neighbors(graph, seeds, 2, limit=20) == neighbors(
        graph, list(reversed(seeds)), 2, limit=20
    )


def test_bad_seeds_and_hops(graph, entity):
    with pytest.raises(NotFound) as err:
        neighbors(graph, [entity("Warsaw"), "e:nope", "c:missing"], 1)
    assert err.value.data == {"field": "seedIds", "ids": ["c:missing", "e:nope"]}
    assert err.value.code == -32015
    for kwargs, field in [
        ({"seed_ids": [], "hops": 1}, "seedIds"),
        ({"seed_ids": [entity("Warsaw")], "hops": 0}, "hops"),
        ({"seed_ids": [entity("Warsaw")], "hops": 1, "limit": 0}, "limit"),
    ]:
        with pytest.raises(InvalidParams) as bad:
            neighbors(graph, **kwargs)
        assert bad.value.data["field"] == field
