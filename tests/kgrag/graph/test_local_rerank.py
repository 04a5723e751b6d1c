"""The learned rerank of local search: its features, its model, and its place in
LocalSearch on the science graph."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
import scipy.sparse as sp

from kgrag.encoders import load_encoder
from kgrag.graph.links import TitleLinks, key_text, text_key, title_key
from kgrag.graph.local import LocalSearch
from kgrag.graph.rerank import BM25_DEPTH, FEATURES, ChunkEntities, RerankModel, features
from kgrag.graph.rerank_model import MODEL

QUERY = "Which river flows through the city where Marie Curie was born?"
N = len(FEATURES)


def _links(n: int, pairs: list[tuple[int, int]]) -> TitleLinks:
    src, dst = zip(*pairs, strict=True) if pairs else ((), ())
    m = sp.csr_matrix((np.ones(len(pairs), np.float32), (src, dst)), shape=(n, n))
    m.sort_indices()
    return TitleLinks(m, [f"T{i}" for i in range(n)], 20)


def test_features_of_a_hand_made_case():
    """Five chunks, candidates in the order 2, 0, 1, 4: every feature as defined."""
    rows = [2, 0, 1, 4]
    # chunk 2 (best) names chunks 0 and 3 by title; chunk 1 names chunk 4
    links = _links(5, [(2, 0), (2, 3), (1, 4)])
    # entity 0 a seed; entity 1 specific, shared by chunks 2 and 4; entity 2 common
    ents = ChunkEntities.build([(2, 0), (2, 1), (2, 1), (4, 1), (0, 0), (0, 2), (1, 2)], 5)
    specificity = np.array([0.5, 0.5, 0.1])
    titles = [key_text(title_key(t)) for t in ["Curie", "Warsaw (city)", "Vistula", "", "Paris"]]
    x = features(
        rows,
        ppr_rank=np.array([1, 0, 3, 2, 4]),
        dense_rank=np.array([4, 3, 2, 1, 0]),
        dense=np.array([0.1, 0.2, 0.3, 0.4, 0.5]),
        mass=np.array([0.2, 0.4, 0.1, 0.0, 0.3]),
        bm25_rank={0: 0, 4: 7},
        title_keys=titles,
        query_key=text_key("Was Warsaw on the Vistula?"),
        seeds={0: 1.5},
        specificity=specificity,
        entities=ents,
        links=links,
        bridged={0},
    )
    col = {name: x[:, i] for i, name in enumerate(FEATURES)}
    assert x.shape == (4, N)
    assert np.allclose(col["fused_rank"], np.log1p([0, 1, 2, 3]))
    assert np.allclose(col["ppr_rank"], np.log1p([3, 1, 0, 4]))
    assert np.allclose(col["dense_rank"], np.log1p([2, 4, 3, 0]))
    assert np.allclose(col["dense"], [0.3, 0.1, 0.2, 0.5])
    assert np.allclose(col["bm25_rank"], np.log1p([BM25_DEPTH, 0, BM25_DEPTH, 7]))
    assert col["title_in_query"].tolist() == [1, 0, 1, 0]  # "Vistula", "Warsaw (city)"
    assert col["seeds_named"].tolist() == [1, 1, 0, 0]
    assert np.allclose(col["seed_weight"], [0.75, 0.75, 0, 0])
    assert col["linked_from_top1"].tolist() == [0, 1, 0, 0]
    assert col["linked_from_top3"].tolist() == [0, 0, 0, 1]  # chunk 1 names chunk 4
    assert col["bridged"].tolist() == [0, 1, 0, 0]
    assert col["shares_top1"].tolist() == [0, 0, 0, 1]  # entity 1, not a seed
    assert np.allclose(col["ppr_share"], [0.25, 0.5, 1.0, 0.75])
    assert features([], **_empty()).shape == (0, N)


def _empty() -> dict[str, object]:
    return {
        "ppr_rank": np.zeros(0),
        "dense_rank": np.zeros(0),
        "dense": np.zeros(0),
        "mass": np.zeros(0),
        "bm25_rank": {},
        "title_keys": [],
        "query_key": "",
        "seeds": {},
        "specificity": np.zeros(0),
        "entities": ChunkEntities.build([], 0),
        "links": _links(0, []),
        "bridged": set(),
    }


def test_a_model_must_weigh_the_features_in_order():
    with pytest.raises(ValueError, match="exactly"):
        RerankModel(FEATURES[::-1], (0.0,) * N, (1.0,) * N, (0.0,) * N, 0.0)
    with pytest.raises(ValueError, match="exactly"):
        RerankModel(FEATURES, (0.0,) * N, (1.0,) * N, (0.0,) * (N - 1), 0.0)
    model = RerankModel(FEATURES, (0.0,) * N, (2.0,) * N, (1.0,) + (0.0,) * (N - 1), -1.0)
    x = np.zeros((2, N))
    x[1, 0] = 2.0
    assert np.allclose(model.scores(x), [1 / (1 + np.e), 0.5])
    x[0, 0] = -4000.0  # a logit of -2001: no overflow, just ~0
    assert model.scores(x)[0] == 0.0 and model.scores(-x)[0] == 1.0


@pytest.fixture(scope="module")
def local(science_reader) -> LocalSearch:
    return LocalSearch(science_reader, load_encoder(science_reader.manifest["models"]["embedding"]))


def test_search_ranks_candidates_by_the_model(local):
    """Passages come best first with the model's probabilities; they are the best of
    the unreranked candidates by that probability; repeated runs agree."""
    found, rows, x = local.candidates(QUERY, 50)
    assert x.shape == (len(rows), N) and len(rows) == len(found.passages) > 5
    prob = MODEL.scores(x)
    want = [found.passages[i][0] for i in sorted(range(len(rows)), key=lambda i: (-prob[i], i))]
    result = local.search(QUERY, 5)
    assert [c for c, _ in result.passages] == want[:5]
    scores = [s for _, s in result.passages]
    assert scores == sorted(scores, reverse=True) and all(0 < s < 1 for s in scores)
    assert local.search(QUERY, 5).passages == result.passages
    assert set(result.via) <= {c for c, _ in result.passages}


def test_rerank_depth_zero_keeps_local_order(local):
    found, _, _ = local.candidates(QUERY, 5)
    before = local.settings
    try:
        local.configure(replace(before, rerank_depth=0))
        assert local.search(QUERY, 5).passages == found.passages
    finally:
        local.configure(before)


def test_a_model_that_follows_the_local_order_changes_nothing(science_reader, local):
    follow = RerankModel(FEATURES, (0.0,) * N, (1.0,) * N, (-1.0,) + (0.0,) * (N - 1), 0.0)
    same = LocalSearch(science_reader, local.encoder, model=follow)
    found, _, _ = same.candidates(QUERY, 8)
    assert [c for c, _ in same.search(QUERY, 8).passages] == [c for c, _ in found.passages]


def test_chunk_entities_are_distinct_and_sorted():
    ents = ChunkEntities.build([(1, 5), (1, 2), (1, 5), (3, 0)], 4)
    assert [ents.of(r).tolist() for r in range(4)] == [[], [2, 5], [], [0]]
