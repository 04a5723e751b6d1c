"""Repair a RAPTOR tree after documents are added or deleted, without re-clustering.

A new chunk joins the level-1 node whose centroid (the normalised mean of its
chunks' vectors) is closest by cosine; a deleted chunk leaves every node it
was under, and a node left without children goes too. Every node whose
children changed gets a new id (ids hash level and children) and a fresh
extractive summary, and so do its ancestors; the rest of the tree is kept.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from ingest.raptor import extractive_summaries, fit_tfidf
from kgrag.ids import content_id
from kgrag.types import TreeNode


def repair_tree(
    previous: Sequence[TreeNode],
    removed: set[str],
    added: Sequence[str],
    chunk_texts: Mapping[str, str],
    chunk_vector: Mapping[str, np.ndarray],
    *,
    summary_sentences: int,
) -> list[TreeNode]:
    """The tree after ``removed`` chunks leave and ``added`` chunks join, by (level, id).

    ``chunk_texts`` and ``chunk_vector`` cover every chunk of the new version.
    """
    levels: dict[int, list[TreeNode]] = {}
    for node in previous:
        levels.setdefault(node.level, []).append(node)
    if 1 not in levels:
        return []
    first = sorted(levels[1], key=lambda t: t.id)
    children = [[c for c in t.children if c not in removed] for t in first]
    for chunk_id, row in zip(added, _nearest(first, children, added, chunk_vector), strict=True):
        children[row].append(chunk_id)
    vectorizer = fit_tfidf([chunk_texts[c] for c in sorted(chunk_texts)])
    renamed: dict[str, str | None] = {}
    text_of = dict(chunk_texts)
    out: list[TreeNode] = []
    below = [(t, kids) for t, kids in zip(first, children, strict=True)]
    for level in sorted(levels):
        if level > 1:
            below = [(t, _renamed_children(t, renamed)) for t in levels[level]]
        for node, kids in below:
            if tuple(sorted(kids)) == node.children and node.id not in text_of:
                renamed[node.id] = node.id
                text_of[node.id] = node.summary
                out.append(node)
                continue
            if not kids:
                renamed[node.id] = None
                continue
            fresh = _rebuilt(node, kids, text_of, vectorizer, summary_sentences, out)
            renamed[node.id] = fresh.id
            if fresh.id not in text_of:  # two nodes left with the same children are one
                text_of[fresh.id] = fresh.summary
                out.append(fresh)
    return sorted(out, key=lambda t: (t.level, t.id))


def _renamed_children(node: TreeNode, renamed: Mapping[str, str | None]) -> list[str]:
    kids = [renamed.get(c, c) for c in node.children]
    return list(dict.fromkeys(k for k in kids if k))


def _nearest(
    nodes: Sequence[TreeNode],
    children: Sequence[list[str]],
    added: Sequence[str],
    chunk_vector: Mapping[str, np.ndarray],
) -> list[int]:
    """Row of the level-1 node each added chunk joins (nearest centroid by cosine)."""
    if not added:
        return []
    dim = len(next(iter(chunk_vector.values())))
    centroids = np.zeros((len(nodes), dim))
    for i, kids in enumerate(children):
        if kids:
            mean = np.mean([chunk_vector[c] for c in kids], axis=0)
            centroids[i] = mean / max(float(np.linalg.norm(mean)), 1e-12)
    vectors = np.array([chunk_vector[c] for c in added], dtype=np.float64)
    return (vectors @ centroids.T).argmax(axis=1).tolist()


def _rebuilt(
    node: TreeNode,
    kids: Sequence[str],
    text_of: Mapping[str, str],
    vectorizer: object,
    k: int,
    done: Sequence[TreeNode],
) -> TreeNode:
    """``node`` with new children: new id, leaves and extractive summary."""
    ordered = sorted(kids)
    texts = [text_of[c] for c in ordered]
    summary = extractive_summaries([np.arange(len(ordered))], texts, vectorizer, k)[0]  # type: ignore[arg-type]
    if node.level == 1:
        leaves = tuple(ordered)
    else:
        leaf_of = {t.id: t.leaves for t in done}
        leaves = tuple(sorted({leaf for c in ordered for leaf in leaf_of[c]}))
    node_id = content_id("tree", str(node.level), *ordered)
    return TreeNode(node_id, node.level, tuple(ordered), summary, leaves)
