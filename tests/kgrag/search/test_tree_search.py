"""RAPTOR retrieval over the science graph's tree: collapsed tree and traversal."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from kgrag.config import load_config
from kgrag.encoders import load_encoder
from kgrag.errors import InvalidParams
from kgrag.search.tree import TreeHit, TreeSearch
from kgrag.store import open_store
from kgrag.text.tokens import count_tokens

RIVER = "Which river flows into the Black Sea?"
PRIZE = "Which physicists won the Nobel Prize in Physics?"


@pytest.fixture(scope="module")
def encode():
    encoder = load_encoder(load_config().models.embedding)
    return encoder.encode_one


@pytest.fixture(scope="module")
def search(science_reader) -> TreeSearch:
    return TreeSearch(science_reader)


@pytest.fixture(scope="module")
def store(science_reader):
    """Everything the tests check hits against, read straight from the store."""
    nodes = {t.id: t for t in science_reader.tree_nodes()}
    chunks = {c.id: c for c in science_reader.chunks()}
    return nodes, chunks


def _title(hit: TreeHit, science_reader) -> str:
    (doc,) = science_reader.documents([science_reader.chunks([hit.id])[0].doc_id])
    return doc.title


def _text(hit: TreeHit, store) -> str:
    nodes, chunks = store
    return chunks[hit.id].text if hit.unit == "chunk" else nodes[hit.id].summary


def _assert_stored_route(hit: TreeHit, store) -> None:
    """The path runs from a root down to the hit along stored parent -> child links."""
    nodes, chunks = store
    assert hit.path[-1] == hit.id
    root = hit.path[0]
    assert not any(root in t.children for t in nodes.values())
    for parent, child in zip(hit.path, hit.path[1:], strict=False):
        assert child in nodes[parent].children
    if hit.unit == "chunk":
        assert hit.level == 0 and hit.leaves == (hit.id,) and hit.id in chunks
    else:
        assert hit.level == nodes[hit.id].level >= 1 and hit.leaves == nodes[hit.id].leaves
    assert set(hit.leaves) <= set(chunks)


def test_collapsed_ranks_all_levels_in_one_pool(search, encode, store, science_reader):
    hits = search.collapsed(encode(PRIZE), 8)
    assert len(hits) == 8
    assert {h.level for h in hits} >= {0, 1}  # chunks and summaries compete
    scores = [h.score for h in hits]
    assert scores == sorted(scores, reverse=True)
    assert _title(next(h for h in hits if h.unit == "chunk"), science_reader) in {
        "Nobel Prize in Physics",
        "Albert Einstein",
        "Marie Curie",
    }
    for h in hits:
        _assert_stored_route(h, store)
    # no two hits say the same thing about the same passages
    keys = [(" ".join(_text(h, store).split()), h.leaves) for h in hits]
    assert len(set(keys)) == len(keys)


def test_collapsed_scores_are_query_cosines(search, encode, science_reader):
    q = encode(RIVER)
    node_ids, node_matrix = science_reader.vectors("tree_nodes")
    chunk_ids, chunk_matrix = science_reader.vectors("chunks")
    cosine = dict(zip(node_ids, node_matrix @ q, strict=True))
    cosine |= dict(zip(chunk_ids, chunk_matrix @ q, strict=True))
    for h in search.collapsed(q, 10):
        assert h.score == pytest.approx(float(cosine[h.id]), abs=1e-5)
    dense = sorted(chunk_ids, key=lambda c: (-cosine[c], c))[:4]
    assert [h.id for h in search.collapsed(q, 4, levels={0})] == dense


def test_collapsed_respects_k_levels_and_token_budget(search, encode, store):
    q = encode(PRIZE)
    assert len(search.collapsed(q, 3)) == 3
    summaries = search.collapsed(q, 20, levels={1, 2})
    assert summaries and {h.level for h in summaries} <= {1, 2}
    assert {h.unit for h in summaries} == {"tree-node"}
    assert search.collapsed(q, 5, levels={99}) == []

    full = search.collapsed(q, 10)
    budget = sum(count_tokens(_text(h, store)) for h in full[:3])
    packed = search.collapsed(q, 10, token_budget=budget)
    assert [h.id for h in packed] == [h.id for h in full[:3]]  # the best that fit, in order
    assert [h.id for h in search.collapsed(q, 10, token_budget=1)] == [full[0].id]


def test_traverse_follows_stored_links_down_to_the_leaves(search, encode, store):
    nodes, _ = store
    hits = search.traverse(encode(PRIZE), 20, beam=2)
    top = max(t.level for t in nodes.values())
    assert {h.unit for h in hits} == {"chunk", "tree-node"}
    for h in hits:
        _assert_stored_route(h, store)
        assert len(h.path) == nodes[h.path[0]].level - h.level + 1  # one step per layer
    chosen = [h for h in hits if h.unit == "tree-node"]
    for level in range(1, top + 1):
        assert len([h for h in chosen if h.level == level]) <= 2  # the beam
    tops = {h.path[0] for h in hits}
    under = set().union(*(nodes[t].leaves for t in tops))
    assert {h.id for h in hits if h.unit == "chunk"} <= under
    # every leaf reached hangs under a chosen level-1 node
    level_one = {h.path[-2] for h in hits if h.unit == "chunk"}
    assert all(nodes[n].level == 1 for n in level_one)
    scores = [h.score for h in hits]
    assert scores == sorted(scores, reverse=True)


def test_traverse_reaches_the_passage_on_the_topic(search, encode, science_reader):
    hits = search.traverse(encode(RIVER), 3, beam=1)
    chunks = [h for h in hits if h.unit == "chunk"]
    assert chunks and _title(chunks[0], science_reader) == "Danube"
    assert len(hits) <= 3


def test_narrow_beam_keeps_one_route(search, encode):
    hits = search.traverse(encode(RIVER), 50, beam=1)
    assert len({h.path[1] for h in hits if len(h.path) > 1}) == 1


def test_same_query_same_hits(search, encode, science_reader):
    q = encode("a physicist born in Copenhagen")
    again = TreeSearch(science_reader)
    assert search.collapsed(q, 6) == search.collapsed(q, 6) == again.collapsed(q, 6)
    assert search.traverse(q, 6) == search.traverse(q, 6) == again.traverse(q, 6)


def test_bad_parameters_name_the_field(search, encode):
    q = encode(RIVER)
    for call, field in [
        (lambda: search.collapsed(q, 0), "k"),
        (lambda: search.collapsed(q, 3, token_budget=0), "tokenBudget"),
        (lambda: search.collapsed(q, 3, levels={-1}), "levels"),
        (lambda: search.traverse(q, 0), "k"),
        (lambda: search.traverse(q, 3, beam=0), "beam"),
        (lambda: search.traverse(q[:10], 3), "query"),
    ]:
        with pytest.raises(InvalidParams) as err:
            call()
        assert err.value.data["field"] == field


def test_a_graph_without_a_tree_serves_chunks(science_reader, encode, tmp_path: Path):
    """A version with chunks but no summary tree: both strategies give chunk top-k."""
    with open_store(tmp_path / "flat").writer() as writer:
        writer.add("documents", science_reader.documents())
        writer.add("chunks", science_reader.chunks())
        writer.add_vectors("chunks", *science_reader.vectors("chunks"))
        writer.commit({"dim": 384})
    with open_store(tmp_path / "flat").reader() as flat:
        assert flat.tree_nodes() == []
        search = TreeSearch(flat)
        q = encode(RIVER)
        ids, matrix = flat.vectors("chunks")
        scores = np.asarray(matrix) @ q
        dense = [ids[i] for i in np.lexsort((np.array(ids), -scores))[:3]]
        collapsed = search.collapsed(q, 3)
        traversed = search.traverse(q, 3)
    assert [h.id for h in collapsed] == [h.id for h in traversed] == dense
    assert all(h.unit == "chunk" and h.path == (h.id,) for h in collapsed + traversed)
