"""RAPTOR summary tree: reachability, structure, summaries, soft clustering."""

from __future__ import annotations

import re
from collections import Counter

import numpy as np
import pytest

from ingest.raptor import build_tree
from kgrag.ids import content_id
from kgrag.types import TreeNode

SETTINGS = {
    "reduced_dim": 10,
    "threshold": 0.3,
    "top_size": 4,
    "max_levels": 5,
    "max_cluster": 8,
    "summary_sentences": 2,
    "seed": 42,
}
TOPICS = [
    "apple orchard harvest",
    "rocket launch orbit",
    "violin concert melody",
    "glacier ice melt",
]


def sentences(text: str) -> list[str]:
    return [s for s in re.split(r"(?<=[.!?])\s+", text.strip()) if s]


def corpus(per_topic: int, dim: int = 32, spread: float = 0.35, seed: int = 0):
    """Chunks around len(TOPICS) directions; each text speaks of its topic."""
    rng = np.random.default_rng(seed)
    centers = rng.normal(size=(len(TOPICS), dim))
    labels = np.repeat(np.arange(len(TOPICS)), per_topic)
    x = centers[labels] / np.sqrt(dim) + spread * rng.normal(size=(len(labels), dim)) / np.sqrt(dim)
    x = (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)
    ids = [content_id("chunk", str(i)) for i in range(len(labels))]
    texts = [
        f"The {TOPICS[t].split()[0]} story {i} begins. It is about {TOPICS[t]}! Is {i} the end?"
        for i, t in enumerate(labels)
    ]
    return ids, texts, x, labels


def levels_of(nodes: list[TreeNode]) -> dict[int, list[TreeNode]]:
    out: dict[int, list[TreeNode]] = {}
    for n in nodes:
        out.setdefault(n.level, []).append(n)
    return out


def assert_well_formed(
    nodes: list[TreeNode], chunk_ids: list[str], texts: list[str], k: int
) -> None:
    """Levels link up, leaves are unions, every chunk is reachable from the top."""
    assert nodes == sorted(nodes, key=lambda n: (n.level, n.id))
    levels = levels_of(nodes)
    assert sorted(levels) == list(range(1, len(levels) + 1))
    text_of = dict(zip(chunk_ids, texts, strict=True))
    leaves_of = {c: (c,) for c in chunk_ids}
    position = {c: i for i, c in enumerate(chunk_ids)}  # summaries keep reading order
    below = set(chunk_ids)
    for level in sorted(levels):
        for node in levels[level]:
            assert node.id == content_id("tree", str(level), *node.children)
            assert list(node.children) == sorted(set(node.children)) and node.children
            assert set(node.children) <= below
            union = sorted({leaf for child in node.children for leaf in leaves_of[child]})
            assert list(node.leaves) == union
            reading = sorted(
                node.children, key=lambda c: (min(position[x] for x in leaves_of[c]), c)
            )
            own = [s for child in reading for s in sentences(text_of[child])]
            picked = sentences(node.summary)
            assert 1 <= len(picked) <= k and set(picked) <= set(own)
            assert picked == [s for s in dict.fromkeys(own) if s in picked]  # original order
        parents = Counter(child for node in levels[level] for child in node.children)
        assert set(parents) == below  # every node below has a parent
        below = {node.id for node in levels[level]}
        text_of.update({node.id: node.summary for node in levels[level]})
        leaves_of.update({node.id: node.leaves for node in levels[level]})
    top = levels[max(levels)]
    reached, frontier = set(), [n.id for n in top]
    children = {n.id: n.children for n in nodes}
    while frontier:
        nid = frontier.pop()
        reached.add(nid)
        frontier.extend(children.get(nid, ()))
    assert set(chunk_ids) <= reached


def test_empty_input_has_no_tree() -> None:
    assert build_tree([], [], np.zeros((0, 8), dtype=np.float32), **SETTINGS) == []


@pytest.mark.parametrize("n", [1, 3, 4])
def test_tiny_input_gets_a_single_root(n: int) -> None:
    ids, texts, x, _ = corpus(1)
    nodes = build_tree(ids[:n], texts[:n], x[:n], **SETTINGS)
    assert len(nodes) == 1
    root = nodes[0]
    assert (
        root.level == 1 and root.children == tuple(sorted(ids[:n])) and root.leaves == root.children
    )
    assert_well_formed(nodes, ids[:n], texts[:n], SETTINGS["summary_sentences"])


def test_tree_structure_and_reachability() -> None:
    ids, texts, x, _ = corpus(40)
    nodes = build_tree(ids, texts, x, **SETTINGS)
    levels = levels_of(nodes)
    assert len(levels) >= 2
    assert len(levels[max(levels)]) <= SETTINGS["top_size"]
    assert all(len(n.children) <= 2 * SETTINGS["max_cluster"] for n in nodes)
    assert_well_formed(nodes, ids, texts, SETTINGS["summary_sentences"])


def test_level_one_clusters_follow_topics() -> None:
    ids, texts, x, labels = corpus(40, spread=0.2)
    topic = dict(zip(ids, labels.tolist(), strict=True))
    level1 = [n for n in build_tree(ids, texts, x, **SETTINGS) if n.level == 1]
    pure = sum(len({topic[c] for c in n.children}) == 1 for n in level1)
    assert pure >= 0.9 * len(level1)


def test_summary_keeps_the_sentences_nearest_the_centroid() -> None:
    texts = [
        "Apples grow in the orchard. Zebras yawn loudly.",
        "The orchard apples ripen in autumn. Quartz is hard.",
        "Apples from the orchard are sweet.",
    ]
    ids = [content_id("chunk", t) for t in texts]
    x = np.eye(3, 8, dtype=np.float32)
    (root,) = build_tree(ids, texts, x, **(SETTINGS | {"summary_sentences": 3}))
    assert root.summary == (
        "Apples grow in the orchard. The orchard apples ripen in autumn. "
        "Apples from the orchard are sweet."
    )


def test_duplicate_sentences_are_summarised_once() -> None:
    texts = ["Apples grow in the orchard. Pears too.", "Apples grow in the orchard. Plums too."]
    ids = [content_id("chunk", t) for t in texts]
    x = np.eye(2, 4, dtype=np.float32)
    (root,) = build_tree(ids, texts, x, **SETTINGS)
    assert sentences(root.summary).count("Apples grow in the orchard.") == 1
    assert len(sentences(root.summary)) == 2


def arc(seed: int, per: int = 100):
    """Two overlapping bumps of chunks along an arc; angle 0 lies between them."""
    rng = np.random.default_rng(seed)
    theta = np.concatenate([rng.normal(-0.3, 0.25, per), rng.normal(0.3, 0.25, per)])
    x = np.zeros((len(theta), 4), dtype=np.float32)
    x[:, 0], x[:, 1] = np.cos(theta), np.sin(theta)
    ids = [content_id("chunk", f"arc{i}") for i in range(len(theta))]
    texts = [f"Point {i} on the arc." for i in range(len(theta))]
    return ids, texts, x, theta


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_soft_assignment_shares_chunks_between_clusters(seed: int) -> None:
    ids, texts, x, theta = arc(seed)
    settings = SETTINGS | {"reduced_dim": 2, "max_cluster": 100, "max_levels": 1, "seed": seed}
    soft = build_tree(ids, texts, x, **settings)
    parents = Counter(c for n in soft for c in n.children)
    shared = [abs(theta[ids.index(c)]) for c, k in parents.items() if k > 1]
    assert set(parents) == set(ids)
    assert any(t < 0.2 for t in shared)  # a chunk between the bumps sits in both
    hard = build_tree(ids, texts, x, **(settings | {"threshold": 1.0}))
    assert set(Counter(c for n in hard for c in n.children).values()) == {1}


def test_same_seed_same_tree() -> None:
    ids, texts, x, _ = corpus(30)
    assert build_tree(ids, texts, x, **SETTINGS) == build_tree(ids, texts, x, **SETTINGS)


def test_max_levels_caps_the_tree() -> None:
    ids, texts, x, _ = corpus(40)
    nodes = build_tree(ids, texts, x, **(SETTINGS | {"max_levels": 1}))
    assert {n.level for n in nodes} == {1}
    assert {c for n in nodes for c in n.children} == set(ids)


def test_texts_without_content_words_still_summarise() -> None:
    ids, _, x, _ = corpus(5)
    texts = ["It is. The one." for _ in ids]
    nodes = build_tree(ids, texts, x, **SETTINGS)
    assert_well_formed(nodes, ids, texts, SETTINGS["summary_sentences"])


def test_identical_vectors_still_give_a_tree() -> None:
    ids, texts, _, _ = corpus(10)
    x = np.tile(np.eye(1, 16, dtype=np.float32), (len(ids), 1))
    nodes = build_tree(ids, texts, x, **SETTINGS)
    assert_well_formed(nodes, ids, texts, SETTINGS["summary_sentences"])


@pytest.mark.slow
def test_two_thousand_chunks() -> None:
    ids, texts, x, _ = corpus(500, dim=64, spread=0.6)
    settings = SETTINGS | {"max_cluster": 12, "top_size": 8, "summary_sentences": 3}
    nodes = build_tree(ids, texts, x, **settings)
    levels = levels_of(nodes)
    assert len(levels) >= 3
    assert len(levels[1]) < len(ids) / 5
    assert_well_formed(nodes, ids, texts, 3)
