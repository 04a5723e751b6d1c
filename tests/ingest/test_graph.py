"""The graph stage's statistics are those of the igraph the records make."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from ingest.graph import check_whole, graph_stats
from kgrag.errors import KgragError
from kgrag.types import Chunk, Entity, Mention, Relation, Synonym
from kgrag.whole_graph import build_graph


def igraph_stats(entities, chunks, mentions, relations, synonyms) -> dict[str, int]:
    """What the stage counted before: the igraph of the records, counted."""
    g = build_graph(entities, [c.id for c in chunks], mentions, relations, synonyms)
    stats = {"vertices": g.vcount(), "components": len(g.connected_components())}
    for kind, n in sorted(Counter(g.es["kind"] if g.ecount() else []).items()):
        stats[f"{kind}_edges"] = n
    return stats


def records(seed: int, n_entities: int, n_chunks: int, n_edges: int):
    """A random graph of entities and passages in several components, with parallel
    edges, loops and isolated vertices."""
    rng = np.random.default_rng(seed)
    entities = [Entity(f"e:{i:03d}", f"E{i}", "CONCEPT") for i in range(n_entities)]
    chunks = [Chunk(f"c:{i:03d}", "d:0", i, "", "", 0, 0, 0) for i in range(n_chunks)]

    def pick(n: int) -> np.ndarray:  # ends among the first third: a few components
        return rng.integers(0, max(n // 3, 1), n_edges)

    relations = [
        Relation(f"r:{i:03d}", entities[a].id, "p", entities[b].id, 1.0, "svo", ())
        for i, (a, b) in enumerate(zip(pick(n_entities), pick(n_entities), strict=True))
    ] if n_entities else []  # fmt: skip
    mentions = [
        Mention(entities[a].id, chunks[b].id, 1)
        for a, b in zip(pick(n_entities), pick(n_chunks), strict=True)
    ] if n_entities and n_chunks else []  # fmt: skip
    synonyms = [
        Synonym(entities[a].id, entities[b].id, 0.9)
        for a, b in zip(pick(n_entities)[:3], pick(n_entities)[:3], strict=True)
    ] if n_entities else []  # fmt: skip
    return entities, chunks, mentions, relations, synonyms


@pytest.mark.parametrize(
    "seed, n_entities, n_chunks, n_edges",
    [(0, 0, 0, 0), (1, 0, 4, 0), (2, 5, 0, 3), (3, 30, 12, 10), (4, 200, 50, 120)],
)
def test_stats_equal_the_igraph_count(seed, n_entities, n_chunks, n_edges):
    graph = records(seed, n_entities, n_chunks, n_edges)
    assert graph_stats(*graph) == igraph_stats(*graph)
    assert list(graph_stats(*graph)) == list(igraph_stats(*graph))  # the same key order


def test_the_science_graph_counts_as_its_igraph(science_reader):
    r = science_reader
    graph = (r.entities(), r.chunks(), r.mentions(), r.relations(), r.synonyms())
    stats = graph_stats(*graph)
    assert stats == igraph_stats(*graph)
    assert stats["vertices"] == len(graph[0]) + len(graph[1])


def test_an_edge_to_an_unknown_node_stops_the_build():
    entities, chunks, mentions, relations, synonyms = records(5, 10, 4, 5)
    lost = Mention("e:999", chunks[0].id, 1)
    with pytest.raises(KgragError, match="1 edges to unknown nodes, e.g. e:999@c:000"):
        check_whole(entities, chunks, [*mentions, lost], relations, synonyms)
    with pytest.raises(KgragError):
        graph_stats(entities, chunks, mentions, relations, [Synonym("e:001", "x", 1.0)])
