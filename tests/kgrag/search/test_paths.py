"""Provenance distances: the one- and two-edge shortcuts agree with the whole search,
and the search reads only the part of the graph it reaches."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from kgrag.search.paths import PathFinder


@pytest.fixture(scope="module", params=["default", "tolls"])
def finder(science_reader, request):
    """The finder as configured, and one for which an entity of two or more passages
    is a general term (paths pay a toll to reach it): the shortcuts stay exact."""
    found = PathFinder(science_reader)
    if request.param == "tolls":
        found.limits = replace(found.limits, generic=1)
        rows = np.arange(science_reader.size("entities"))
        assert 0 < (found.toll(rows) > 0).sum() < len(rows)
    return found


@pytest.fixture(scope="module")
def chunks(science_reader) -> list[str]:
    return sorted(science_reader.ids("chunks", range(science_reader.size("chunks"))))


def _nearest(finder: PathFinder, dist: dict[int, float], passages: list[str]) -> list[float]:
    mentioned = finder._mentioned(passages)
    return [min((dist.get(int(r), np.inf) for r in mentioned[c]), default=np.inf) for c in passages]


def _seeds(science_reader) -> list[str]:
    by_name = {e.name: e.id for e in science_reader.entities()}
    return [by_name["Marie Curie"], by_name["Warsaw"]]


def test_passages_one_edge_away_take_the_shortcut_with_the_same_lengths(
    finder, science_reader, chunks
):
    seeds = _seeds(science_reader)
    full, _ = finder.distances(seeds)
    near = [c for c, d in zip(chunks, _nearest(finder, full, chunks), strict=True) if d <= 1.5]
    far = [c for c, d in zip(chunks, _nearest(finder, full, chunks), strict=True) if d > 1.5]
    assert near and far
    dist, pred = finder.distances(seeds, passages=near)
    assert _nearest(finder, dist, near) == _nearest(finder, full, near)
    assert len(dist) < len(full)  # the rest of the graph stayed unvisited
    for cid, ex in finder.explain(seeds, near, {}).items():
        assert ex.path[0] in seeds and ex.path[-1] == cid
        # the last edge: what the passage states about the end entity, or its mention
        assert ex.edges[-1]["kind"] in ("relation", "mention")
        assert ex.edges[-1]["evidence"] == cid
        assert len(ex.edges) <= 2  # after at most one relation


def test_passages_two_edges_away_get_the_same_lengths(finder, science_reader, chunks):
    seeds = _seeds(science_reader)
    full, _ = finder.distances(seeds)
    nearest = dict(zip(chunks, _nearest(finder, full, chunks), strict=True))
    two = [c for c in chunks if 1.5 < nearest[c] <= 3.0]
    assert two
    dist, pred = finder.distances(seeds, passages=two)
    assert _nearest(finder, dist, two) == [nearest[c] for c in two]
    assert len(dist) < len(full)  # still off the rest of the graph
    for cid, ex in finder.explain(seeds, two, {}).items():
        assert ex.path[0] in seeds and ex.path[-1] == cid
        kinds = [e["kind"] for e in ex.edges]
        # two edges, or one to a general term (its toll makes it as long as two)
        assert len(kinds) == (3 if finder.limits.generic > 1 else len(kinds)) and len(kinds) in (
            2,
            3,
        )
        assert set(kinds[:-1]) <= {"relation", "cooccurrence"}
        assert kinds[-1] in ("relation", "mention") and ex.edges[-1]["evidence"] == cid
        assert all(ex.path[i] in (e["src"], e["dst"]) for i, e in enumerate(ex.edges))


def test_a_passage_further_away_gets_its_shortest_length(finder, science_reader, chunks):
    entity_ids = science_reader.ids("entities", range(science_reader.size("entities")))
    for seed in entity_ids:  # a seed with a passage beyond two hops
        full, _ = finder.distances([seed])
        far = [
            c for c, d in zip(chunks, _nearest(finder, full, chunks), strict=True) if 3 < d < np.inf
        ]
        if far:
            break
    assert far
    dist, pred = finder.distances([seed], passages=far)
    assert _nearest(finder, dist, far) == _nearest(finder, full, far)
    for row, d in dist.items():  # every length it settled is the whole search's
        if pred[row] != -9999 and d <= min(_nearest(finder, dist, far)):
            assert full[row] == d
    for cid, ex in finder.explain([seed], far, {}).items():
        assert ex.path[0] == seed and ex.path[-1] == cid and len(ex.edges) >= 3


def test_equally_short_paths_start_at_the_better_seed(finder, science_reader):
    """Two seeds at the same distance from an entity: its path starts at the first."""
    entity_ids = science_reader.ids("entities", range(science_reader.size("entities")))
    for a in entity_ids:
        da, _ = finder.distances([a])
        for b in entity_ids:
            if b == a:
                continue
            db, _ = finder.distances([b])
            tied = [r for r in da if r in db and da[r] == db[r] > 0]
            if tied:
                dist, pred = finder.distances([a, b])
                target = science_reader.ids("entities", [tied[0]])[0]
                assert finder.entity_path(target, dist, pred).path[0] == a
                dist, pred = finder.distances([b, a])
                assert finder.entity_path(target, dist, pred).path[0] == b
                return
    pytest.fail("no entity equally far from two seeds in the science graph")


def test_entities_asked_for_are_reached(finder, science_reader):
    seeds = _seeds(science_reader)
    full, _ = finder.distances(seeds)
    one_edge = [r for r, d in sorted(full.items()) if 0 < d <= 1.5][:3]
    wanted = science_reader.ids("entities", one_edge)
    dist, pred = finder.distances(seeds, passages=[], entities=wanted)
    for eid, row in zip(wanted, one_edge, strict=True):
        assert dist[row] == full[row]
        assert science_reader.ids("entities", [pred[row]])[0] in seeds
        assert finder.entity_path(eid, dist, pred).path[-1] == eid


def test_a_passage_outside_the_seeds_component_is_not_searched_for(
    science_graph, tmp_path, monkeypatch
):
    """Two renamed copies of the science graph (benchmarks/replicate_graph.py): the
    copies share no entity, so each is its own component. Passages of the second copy
    have no path from the first copy's seeds: the search does not go on looking for one
    (it reads less), and the passages it can reach get the same lengths."""
    import subprocess
    import sys

    from kgrag.store import open_store

    script = Path(__file__).resolve().parents[3] / "benchmarks" / "replicate_graph.py"
    out = tmp_path / "two"
    subprocess.run(
        [
            sys.executable,
            str(script),
            "--graph",
            str(science_graph),
            "--copies",
            "2",
            "--out",
            str(out),
        ],
        check=True,
        capture_output=True,
    )
    reader = open_store(out).reader()
    finder = PathFinder(reader)
    chunks = sorted(reader.ids("chunks", range(reader.size("chunks"))))
    seeds = _seeds(reader)
    component = reader.attribute("entities", "component")
    seed_rows = reader.rows("entities", seeds)
    assert len(set(component.tolist())) >= 2
    full, _ = finder.distances(seeds)
    mentioned = finder._mentioned(chunks)
    cut_off = [c for c in chunks if c.endswith("~1") and len(mentioned[c])]
    reached = [c for c, d in zip(chunks, _nearest(finder, full, chunks), strict=True) if d < np.inf]
    assert cut_off and reached
    assert not set(component[np.concatenate([mentioned[c] for c in cut_off])]) & set(
        component[seed_rows]
    )
    asked = reached[:2] + cut_off[:3]
    dist, _ = finder.distances(seeds, passages=asked)
    assert _nearest(finder, dist, asked) == _nearest(finder, full, asked)
    assert _nearest(finder, dist, cut_off[:3]) == [np.inf] * 3
    monkeypatch.setattr(PathFinder, "_connected", lambda self, seeds, groups: groups)
    unfiltered, _ = finder.distances(seeds, passages=asked)
    assert len(dist) < len(unfiltered)  # without the components it searched on
    monkeypatch.undo()
    for cid, ex in finder.explain(seeds, cut_off[:3], {}).items():
        assert ex.path == [cid]  # the passage alone: nothing leads to it
    reader.close()
