"""Server-side fusion agrees exactly with the RCP SDK's reference fusion."""

from __future__ import annotations

import random

import rcp

from kgrag.retrieval.stages import fuse


def _sdk(lists: dict, rrf_k: int, weights: dict) -> list[tuple[int, float]]:
    engine = {n: [{"id": str(r), "score": s} for r, s in ranked] for n, ranked in lists.items()}
    fused = rcp.rrf_fuse(engine, rrf_k=rrf_k, weights=weights)
    return [(int(h["id"]), float(h["meta"]["fusedScore"])) for h in fused]


def test_rrf_equals_the_sdk_bit_for_bit():
    rng = random.Random(11)
    for _ in range(200):
        lists = {
            name: [(rng.randrange(40), rng.random()) for _ in range(rng.randrange(0, 30))]
            for name in ("dense", "sparse", "extra")[: rng.randrange(1, 4)]
        }
        weights = {n: rng.choice([0.0, 0.5, 1.0, 2.0]) for n in lists if rng.random() < 0.5}
        rrf_k = rng.choice([1, 60])
        assert fuse(lists, "rrf", rrf_k=rrf_k, weights=weights) == _sdk(lists, rrf_k, weights)


def test_rrf_ties_break_by_weight_then_id_as_text():
    lists = {"a": [(9, 1.0), (10, 0.5)], "b": [(10, 1.0), (9, 0.5)]}
    # equal fused scores and weights: "10" sorts before "9" as text, as in the SDK
    assert [r for r, _ in fuse(lists, "rrf", rrf_k=60, weights=None)] == [10, 9]
    assert fuse(lists, "rrf", rrf_k=60, weights=None) == _sdk(lists, 60, {})
