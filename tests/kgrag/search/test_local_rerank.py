"""The learned rerank of local search: its features, its model, and its place in
LocalSearch on the science graph."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from kgrag.encoders import load_encoder
from kgrag.search.links import TitleLinks, key_text, text_key, title_key
from kgrag.search.local import LocalSearch
from kgrag.search.local_rerank import (
    BM25_DEPTH,
    FEATURES,
    HOP_DEPTH,
    ChunkEntities,
    RerankModel,
    diversified,
    features,
    long_document,
)
from kgrag.search.local_rerank_model import MODEL
from kgrag.search.local_rerank_model_long import LONG_MODEL

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
        hop_rank={4: 0, 0: 3, 3: 1},
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
    # named by a candidate whose title the query names: chunk 0 (by 2), chunk 4 (by 1)
    assert col["linked_from_named"].tolist() == [0, 1, 0, 1]
    assert col["title_subsumed"].tolist() == [0, 0, 0, 0]
    assert np.allclose(col["hop_rank"], np.log1p([HOP_DEPTH, 3, HOP_DEPTH, 0]))
    assert features([], **_empty()).shape == (0, N)


def test_a_title_named_only_inside_a_longer_named_title_is_subsumed():
    """The title "Only You" occurs in the query only as part of "I Like Only You", which
    another candidate is titled; "Brother Rat" and "I Like Only You" are named in their
    own right."""
    names = ["Only You (2015 film)", "I Like Only You", "Brother Rat", "Brother Rat and a Baby"]
    empty = _empty()
    x = features(
        [0, 1, 2, 3],
        **{
            **empty,
            "ppr_rank": np.arange(4),
            "dense_rank": np.arange(4),
            "dense": np.zeros(4),
            "mass": np.ones(4),
            "title_keys": [key_text(title_key(t)) for t in names],
            "query_key": text_key("Which film came first, I Like Only You or Brother Rat?"),
            "entities": ChunkEntities.build([], 4),
            "links": _links(4, []),
        },
    )
    col = {name: x[:, i] for i, name in enumerate(FEATURES)}
    assert col["title_in_query"].tolist() == [1, 1, 1, 0]
    assert col["title_subsumed"].tolist() == [1, 0, 0, 0]


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
    with pytest.raises(ValueError, match="in that order"):
        RerankModel(FEATURES[::-1], (0.0,) * N, (1.0,) * N, (0.0,) * N, 0.0)
    with pytest.raises(ValueError, match="one weight each"):
        RerankModel(FEATURES, (0.0,) * N, (1.0,) * N, (0.0,) * (N - 1), 0.0)
    with pytest.raises(ValueError, match="some of"):
        RerankModel(("fused_rank", "no such feature"), (0.0,) * 2, (1.0,) * 2, (0.0,) * 2, 0.0)
    with pytest.raises(ValueError, match="some of"):
        RerankModel((), (), (), (), 0.0)
    model = RerankModel(FEATURES, (0.0,) * N, (2.0,) * N, (1.0,) + (0.0,) * (N - 1), -1.0)
    x = np.zeros((2, N))
    x[1, 0] = 2.0
    assert np.allclose(model.scores(x), [1 / (1 + np.e), 0.5])
    x[0, 0] = -4000.0  # a logit of -2001: no overflow, just ~0
    assert model.scores(x)[0] == 0.0 and model.scores(-x)[0] == 1.0


def test_a_model_of_some_features_reads_only_their_columns():
    """A model weighing two of the features (in FEATURES order) reads those two
    columns of the full feature matrix and no other."""
    two = ("dense", "hop_rank")
    model = RerankModel(two, (0.0, 0.0), (1.0, 1.0), (2.0, -1.0), 0.5)
    assert model.columns == [FEATURES.index("dense"), FEATURES.index("hop_rank")]
    x = np.random.default_rng(0).normal(size=(6, N))
    want = 1 / (1 + np.exp(-(2.0 * x[:, model.columns[0]] - x[:, model.columns[1]] + 0.5)))
    assert np.allclose(model.scores(x), want)
    x[:, [i for i in range(N) if i not in model.columns]] = 99.0
    assert np.allclose(model.scores(x), want)
    with pytest.raises(ValueError, match="in that order"):
        RerankModel(two[::-1], (0.0, 0.0), (1.0, 1.0), (2.0, -1.0), 0.5)


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
        local.configure(before.model_copy(update={"rerank_depth": 0}))
        # the first 5 (the second walk's passages join after them)
        assert local.search(QUERY, 5).passages == found.passages[:5]
    finally:
        local.configure(before)


def test_a_model_that_follows_the_local_order_changes_nothing(science_reader, local):
    follow = RerankModel(FEATURES, (0.0,) * N, (1.0,) * N, (-1.0,) + (0.0,) * (N - 1), 0.0)
    same = LocalSearch(science_reader, local.encoder, model=follow)
    found, _, _ = same.candidates(QUERY, 8)
    assert [c for c, _ in same.search(QUERY, 8).passages] == [c for c, _ in found.passages[:8]]


def _titles(local: LocalSearch, chunk_ids: list[str]) -> list[str]:
    r = local.reader
    doc_of = {c.id: c.doc_id for c in r.chunks(chunk_ids)}
    title = {d.id: d.title for d in r.documents(sorted(set(doc_of.values())))}
    return [title[doc_of[c]] for c in chunk_ids]


def test_what_a_passage_the_query_names_names_becomes_a_candidate(local):
    """With the bridge hop off and room for one candidate, the passages that the
    query's named passage ("Marie Curie") names by title still join the candidates,
    each remembered as bridged from it and weighed by the feature that says so (the
    second walk, which brings passages of its own, off)."""
    original = local.settings
    before = original.model_copy(update={"hop": False})
    try:
        local.configure(before.model_copy(update={"bridge_from": 0}))
        found, rows, x = local.candidates(QUERY, 1)
        ids = [c for c, _ in found.passages]
        titles = _titles(local, ids)
        assert titles[0] == "Marie Curie" and "Warsaw" in titles[1:]
        assert all(found.via[c] == ids[0] for c in ids[1:])
        assert len(ids) - 1 <= before.bridge_extra
        named = x[:, FEATURES.index("linked_from_named")]
        assert named[0] == 0 and (named[1:] == 1).all()
        local.configure(before.model_copy(update={"bridge_from": 0, "bridge_named": 0}))
        assert len(local.candidates(QUERY, 1)[0].passages) == 1
        local.configure(before.model_copy(update={"bridge_from": 0, "bridge_extra": 1}))
        assert len(local.candidates(QUERY, 1)[0].passages) == 2
    finally:
        local.configure(original)


def test_the_second_walk_brings_the_next_hops_passage(local):
    """The best candidate ("Marie Curie") names Warsaw, not a seed of the query; the
    walk from its specific unseeded entities reaches "Vistula", which the first walk
    left out of the best 5. Such passages join the candidates after the first ones,
    in the second walk's order (at most ``hop_extra``), and its rank and mass are
    features of every candidate; without the walk they say nothing."""
    before = local.settings
    rank, share = FEATURES.index("hop_rank"), FEATURES.index("hop_share")
    try:
        local.configure(before.model_copy(update={"hop": False}))
        _, base, off = local.candidates(QUERY, 5)
        assert "Vistula" not in _titles(local, local.reader.ids("chunks", base))
        assert (off[:, rank] == np.log1p(HOP_DEPTH)).all() and (off[:, share] == 0).all()
        local.configure(before.model_copy(update={"hop": True, "hop_extra": 3}))
        found, rows, x = local.candidates(QUERY, 5)
        assert rows[: len(base)] == base and 0 < len(rows) - len(base) <= 3
        titles = _titles(local, [c for c, _ in found.passages])
        assert titles[0] == "Marie Curie" and "Vistula" in titles[len(base) :]
        extra = x[len(base) :, rank]
        assert (np.diff(extra) > 0).all() and (extra < np.log1p(HOP_DEPTH)).all()
        assert (x[:, share] <= 1).all() and x[:, share].max() == 1.0
        # the named passage alone starts it too; with neither start there is no walk
        local.configure(before.model_copy(update={"hop_from": 0, "hop_extra": 3}))
        assert local.candidates(QUERY, 5)[1] == rows
        local.configure(before.model_copy(update={"hop_from": 0, "hop_named": 0}))
        _, none_rows, none_x = local.candidates(QUERY, 5)
        assert none_rows == base and (none_x[:, rank] == np.log1p(HOP_DEPTH)).all()
        # candidates from long documents take no second walk
        local.configure(before.model_copy(update={"hop_extra": 3, "long_share": 0.0}))
        _, long_rows, long_x = local.candidates(QUERY, 5)
        assert long_rows == base and (long_x[:, rank] == np.log1p(HOP_DEPTH)).all()
        # no passage joins at hop_extra 0; the features stay
        local.configure(before.model_copy(update={"hop_extra": 0}))
        _, kept, kx = local.candidates(QUERY, 5)
        assert kept == base and np.array_equal(kx[:, rank], x[: len(base), rank])
    finally:
        local.configure(before)


def test_the_second_walk_starts_from_specific_entities_that_are_not_seeds(local):
    """Its reset: the start passages' entities in at most 1 / hop_specific passages,
    minus the seeds; at a threshold above every entity's specificity it does not run."""
    before = local.settings
    try:
        local.configure(before.model_copy(update={"hop_specific": 1.01}))
        _, _, x = local.candidates(QUERY, 5)
        assert (x[:, FEATURES.index("hop_rank")] == np.log1p(HOP_DEPTH)).all()
    finally:
        local.configure(before)
    found, rows, _ = local.candidates(QUERY, 5)
    seeds = {int(r) for r in local.reader.rows("entities", list(found.seeds)) if r >= 0}
    hop = local._hop(QUERY, rows[:5], _titles(local, local.reader.ids("chunks", rows[:5])), {})
    with_seeds = local._hop(
        QUERY,
        rows[:5],
        _titles(local, local.reader.ids("chunks", rows[:5])),
        dict.fromkeys(seeds, 1.0),
    )
    assert hop.rank and with_seeds.rank and hop.rank != with_seeds.rank


def test_chunk_entities_are_distinct_and_sorted():
    ents = ChunkEntities.build([(1, 5), (1, 2), (1, 5), (3, 0)], 4)
    assert [ents.of(r).tolist() for r in range(4)] == [[], [2, 5], [], [0]]


def test_candidates_come_from_long_documents_when_most_share_a_title():
    assert long_document(["A", "A", "A", "B"], 0.75)  # three of four share "A"
    assert not long_document(["A", "A", "B", "C"], 0.75)  # two of four
    assert long_document(["A", "A", "B", "C"], 0.5)
    assert long_document(["A", "B", "C"], 0.0)  # share 0: always
    assert not long_document([], 0.0)
    assert not long_document(["A"] * 4, 1.5)  # above 1: never


def test_diversified_pushes_a_near_copy_from_the_same_document_down():
    """A and A2 are near copies in document "d", B another passage of "d", C a near
    copy of A in document "e": C is not held back (another document), A2 is."""
    a = np.array([1.0, 0.0, 0.0])
    vectors = np.stack([a, a + [0.0, 0.05, 0.0], [0.0, 0.0, 2.0], a + [0.0, 0.0, 0.05]])
    scores = np.array([0.9, 0.85, 0.5, 0.8])
    groups = ["d", "d", "d", "e"]
    assert diversified(scores, vectors, groups, 0.4, 4) == [0, 3, 2, 1]
    assert diversified(scores, vectors, groups, 0.0, 4) == [0, 1, 3, 2]  # by score
    # only the first k are picked for novelty; the rest follow by score
    assert diversified(scores, vectors, groups, 0.4, 2) == [0, 3, 1, 2]
    assert diversified(scores, vectors, ["d", "e", "f", "g"], 0.4, 4) == [0, 1, 3, 2]
    # equal gains go to the earlier candidate
    assert diversified(np.array([0.5, 0.5]), np.eye(2), ["d", "d"], 0.4, 2) == [0, 1]
    assert diversified(np.array([0.7]), a[None, :], ["d"], 0.4, 1) == [0]


def test_a_query_whose_candidates_share_titles_is_reranked_by_the_long_model(local):
    """Routed by ``long_share``: at 0 every query takes the long-document model and
    its diversified order (here a model that reverses local search's own order, to
    tell the two apart); above 1 none does, and the titled model ranks as before."""
    follow = RerankModel(FEATURES, (0.0,) * N, (1.0,) * N, (1.0,) + (0.0,) * (N - 1), 0.0)
    search = LocalSearch(local.reader, local.encoder, long_model=follow)
    found, rows, x = search.candidates(QUERY, 50)
    ids = [c for c, _ in found.passages]
    titles = _titles(search, ids)
    titled = [ids[i] for i in sorted(range(len(ids)), key=lambda i: (-MODEL.scores(x)[i], i))]
    vectors = np.asarray(search.reader.matrix("chunks")[np.asarray(rows)])
    long_order = diversified(follow.scores(x), vectors, titles, search.settings.long_diversity, 5)
    assert titled[:5] != [ids[i] for i in long_order[:5]]  # the two orders differ here
    assert not long_document(titles, search.settings.long_share)  # titled passages
    assert [c for c, _ in search.search(QUERY, 5).passages] == titled[:5]
    before = search.settings
    search.configure(before.model_copy(update={"long_share": 0.0}))
    result = search.search(QUERY, 5)
    assert [c for c, _ in result.passages] == [ids[i] for i in long_order[:5]]
    assert [s for _, s in result.passages] == [float(follow.scores(x)[i]) for i in long_order[:5]]
    search.configure(before.model_copy(update={"long_share": 1.5}))
    assert [c for c, _ in search.search(QUERY, 5).passages] == titled[:5]


def test_the_long_document_model_weighs_the_features_in_order():
    """It was fitted before the second walk's features (long documents take no second
    walk), so it weighs the ones before them."""
    assert LONG_MODEL.features == FEATURES[: FEATURES.index("hop_rank")]
    assert LONG_MODEL.scores(np.zeros((1, N))).shape == (1,)
