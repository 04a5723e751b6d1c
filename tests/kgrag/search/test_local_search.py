"""LocalSearch settings: the pushed and the exact PageRank agree on the science graph."""

from __future__ import annotations

import numpy as np

from kgrag.encoders import load_encoder
from kgrag.search.local import LocalSearch, LocalSettings

QUERY = "Which river flows through the city where Marie Curie was born?"


def test_pushed_and_exact_pagerank_rank_the_same_passages(science_reader):
    encoder = load_encoder(science_reader.manifest["models"]["embedding"])
    local = LocalSearch(science_reader, encoder)
    pushed = local.search(QUERY, 5)
    local.configure(LocalSettings(push_eps=0.0, seed_passages=0))
    exact = local.search(QUERY, 5)
    assert [c for c, _ in pushed.passages][:3] == [c for c, _ in exact.passages][:3]
    assert abs(float(exact.mass.sum()) - 1.0) < 1e-4  # the exact solve is a distribution
    top = np.argsort(-exact.mass)[:10]
    assert len(set(top.tolist()) & set(np.argsort(-pushed.mass)[:10].tolist())) >= 8


def test_the_user_config_reaches_the_engine_local_search(science_graph):
    import kgrag
    from kgrag.config import load_config

    config = load_config(retrieval={"local": {"rerank_depth": 0, "bridge_from": 0}})
    assert config.retrieval.local == LocalSettings(rerank_depth=0, bridge_from=0)
    with kgrag.open(science_graph, config=config) as engine:
        hits = engine.graph({"op": "local", "query": QUERY, "k": 5, "unit": "chunk"})["hits"]
        alone = LocalSearch(engine.reader, engine.encoder, config.retrieval.local).search(QUERY, 5)
        default = LocalSearch(engine.reader, engine.encoder).search(QUERY, 5)
    assert [h["id"] for h in hits] == [c for c, _ in alone.passages]
    assert [s for _, s in alone.passages] != [s for _, s in default.passages]


def test_the_second_walk_resets_from_the_entities_the_rerank_calls_specific():
    from kgrag.search.local_rerank import SPECIFIC

    assert LocalSettings().hop_specific == SPECIFIC
