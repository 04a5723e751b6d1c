"""Provenance distances: the one-edge shortcut agrees with the whole-graph search."""

from __future__ import annotations

import numpy as np
import pytest

from kgrag.graph.paths import PathFinder


@pytest.fixture(scope="module")
def finder(science_reader):
    r = science_reader
    docs = {d.id: d for d in r.documents()}
    return PathFinder(r.entities(), r.relations(), r.mentions(), r.chunks(), docs)


def _nearest(finder: PathFinder, dist: np.ndarray, passages: list[str]) -> list[float]:
    return [min((dist[r] for r in finder._mentioned.get(c, [])), default=np.inf) for c in passages]


def _seeds(finder: PathFinder, science_reader) -> list[str]:
    by_name = {e.name: e.id for e in science_reader.entities()}
    return [by_name["Marie Curie"], by_name["Warsaw"]]


def test_passages_one_edge_away_take_the_shortcut_with_the_same_lengths(finder, science_reader):
    seeds = _seeds(finder, science_reader)
    full, _ = finder.distances(seeds)
    chunks = sorted(finder._mentioned)
    near = [c for c, d in zip(chunks, _nearest(finder, full, chunks), strict=True) if d <= 1.5]
    far = [c for c, d in zip(chunks, _nearest(finder, full, chunks), strict=True) if d > 1.5]
    assert near and far
    dist, pred = finder.distances(seeds, passages=near)
    assert _nearest(finder, dist, near) == _nearest(finder, full, near)
    assert np.isinf(dist).sum() > np.isinf(full).sum()  # the rest of the graph stayed unvisited
    for cid, ex in finder.explain(seeds, near, {}).items():
        assert ex.path[0] in seeds and ex.path[-1] == cid
        assert ex.edges[-1]["kind"] == "mention" and ex.edges[-1]["evidence"] == cid
        assert len(ex.edges) <= 2  # a mention, after at most one relation


def test_passages_two_edges_away_get_the_same_lengths(finder, science_reader):
    seeds = _seeds(finder, science_reader)
    full, _ = finder.distances(seeds)
    chunks = sorted(finder._mentioned)
    nearest = dict(zip(chunks, _nearest(finder, full, chunks), strict=True))
    two = [c for c in chunks if 1.5 < nearest[c] <= 3.0]
    assert two
    dist, pred = finder.distances(seeds, passages=two)
    assert _nearest(finder, dist, two) == [nearest[c] for c in two]
    assert np.isinf(dist).sum() > np.isinf(full).sum()  # still off the rest of the graph
    for cid, ex in finder.explain(seeds, two, {}).items():
        assert ex.path[0] in seeds and ex.path[-1] == cid
        assert [e["kind"] for e in ex.edges] == ["relation", "relation", "mention"]
        assert all(ex.path[i] in (e["src"], e["dst"]) for i, e in enumerate(ex.edges))


def test_a_passage_further_away_searches_the_whole_graph(finder):
    chunks = sorted(finder._mentioned)
    for seed in finder.entity_ids:  # a seed with a passage beyond two hops
        full, full_pred = finder.distances([seed])
        far = [c for c, d in zip(chunks, _nearest(finder, full, chunks), strict=True) if d > 3]
        if far:
            break
    assert far
    dist, pred = finder.distances([seed], passages=far)
    assert np.array_equal(dist, full) and np.array_equal(pred, full_pred)


def test_entities_asked_for_are_reached(finder, science_reader):
    seeds = _seeds(finder, science_reader)
    full, _ = finder.distances(seeds)
    one_edge = [finder.entity_ids[r] for r in np.flatnonzero((full > 0) & (full <= 1.5))][:3]
    dist, pred = finder.distances(seeds, passages=[], entities=one_edge)
    for eid in one_edge:
        row = finder.row[eid]
        assert dist[row] == full[row] and finder.entity_ids[pred[row]] in seeds
        assert finder.entity_path(eid, dist, pred).path[-1] == eid
