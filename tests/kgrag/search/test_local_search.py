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


def test_descending_is_a_stable_argsort_of_the_negated_values():
    from kgrag.search.local import descending

    rng = np.random.default_rng(9)
    for n in (0, 1, 7, 1000):
        x = rng.standard_normal(n).astype(np.float32)
        x[::5] = 0.0
        x[1::7] = -0.0
        x[2::9] = x[:1] if n else x[2::9]  # ties with the first value
        if n > 3:
            x[3] = np.inf
            x[4] = -np.inf
        assert np.array_equal(descending(x), np.argsort(-x, kind="stable"))
    y = rng.random(50)  # float64 takes numpy's own stable sort
    assert np.array_equal(descending(y), np.argsort(-y, kind="stable"))


def test_ranks_of_mostly_zero_mass_are_those_of_a_full_sort():
    from kgrag.search.local import _ranks

    rng = np.random.default_rng(4)
    for n, share in ((0, 0.0), (1, 0.0), (1, 1.0), (500, 0.1), (500, 0.6), (500, 1.0)):
        x = (rng.random(n) * (rng.random(n) < share)).astype(np.float32)
        x[1::11] = -0.0 if n else x[1::11]
        x[2::13] = x[2] if n > 2 else x[2::13]  # ties
        want = np.empty(n)
        want[np.argsort(-x, kind="stable")] = np.arange(n)
        assert np.array_equal(_ranks(x), want)
    signed = rng.standard_normal(300).astype(np.float32) * (rng.random(300) < 0.2)
    want = np.empty(300)
    want[np.argsort(-signed, kind="stable")] = np.arange(300)
    assert np.array_equal(_ranks(signed), want)  # negatives: the full sort


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
