"""Name resolution, alias merging and the vectorised synonymy search."""

from __future__ import annotations

import numpy as np
import pytest

from ingest.extract import Extraction, RawMention, RawRelation, RawSentence
from ingest.resolve import normalise, resolve, synonym_pairs
from kgrag.ids import content_id


@pytest.mark.parametrize(
    ("name", "key"),
    [
        ("The Beatles", "beatles"),
        ("Ibsen's", "ibsen"),
        ("  Marie   Curie ", "marie curie"),
        ("ＷＡＲＳＡＷ", "warsaw"),  # full-width letters fold under NFKC
        ("“Brand”", "brand"),
    ],
)
def test_normalise(name, key):
    assert normalise(name) == key


def _fake_encode(texts):
    # one-hot per distinct lowercase first letter: deterministic and enough for the tests
    out = np.zeros((len(texts), 26), np.float32)
    for i, t in enumerate(texts):
        out[i, (ord(t[0].lower()) - 97) % 26] = 1.0
    return out


def test_aliases_merge_within_a_document_only():
    ex = Extraction(
        mentions=[
            RawMention("c1", 0, "Marie Curie", "PERSON"),
            RawMention("c1", 1, "Curie", "PERSON"),
            RawMention("c2", 0, "Curie", "PERSON"),  # another document: stays apart
            RawMention("c1", 0, "Warsaw", "GPE"),
        ],
        relations=[RawRelation("c1", "Curie", "bear in", "Warsaw", "svo")],
        sentences=[RawSentence("c1", 1, 0, 10, ("Curie", "Warsaw"))],
    )
    res = resolve(ex, {"c1": "d1", "c2": "d2"}, _fake_encode, synonym_threshold=0.99, synonym_k=3)
    by_name = {e.name: e for e in res.entities}
    assert set(by_name) == {"Marie Curie", "Curie", "Warsaw"}
    assert by_name["Marie Curie"].chunk_ids == ("c1",)
    assert by_name["Curie"].chunk_ids == ("c2",)
    [rel] = res.relations
    assert (rel.src, rel.dst) == (by_name["Marie Curie"].id, by_name["Warsaw"].id)
    assert rel.evidence == ("c1",)
    assert res.sentences[0].entity_ids == (by_name["Marie Curie"].id, by_name["Warsaw"].id)


def test_relations_merge_weights_and_evidence_and_drop_self_loops():
    ex = Extraction(
        mentions=[RawMention(c, 0, n, "ORG") for c in ("c1", "c2") for n in ("Acme", "Globex")],
        relations=[
            RawRelation("c1", "Globex", "co-occurs with", "Acme", "cooc"),
            RawRelation("c2", "Acme", "co-occurs with", "Globex", "cooc"),
            RawRelation("c2", "Acme", "be", "the Acme", "svo"),
        ],
    )
    res = resolve(ex, {"c1": "d1", "c2": "d2"}, _fake_encode, synonym_threshold=0.99, synonym_k=3)
    [rel] = res.relations
    assert rel.weight == 2.0 and rel.evidence == ("c1", "c2")
    assert rel.src < rel.dst  # co-occurrence is stored in one canonical direction
    assert rel.id == content_id("relation", rel.src, rel.predicate, rel.dst)


def test_entity_type_prefers_named_labels_over_title_and_concept():
    ex = Extraction(
        mentions=[
            RawMention("c1", -1, "Paris", "TITLE"),
            RawMention("c1", 0, "Paris", "GPE"),
            RawMention("c2", 0, "Paris", "CONCEPT"),
            RawMention("c2", -1, "Paris", "TITLE"),
        ]
    )
    res = resolve(ex, {"c1": "d1", "c2": "d2"}, _fake_encode, synonym_threshold=0.99, synonym_k=3)
    assert [(e.name, e.type) for e in res.entities] == [("Paris", "GPE")]


def _planted(seed: int, n: int, copies: int, dim: int, noise: float):
    """ids and unit vectors: n random ones, then noisy copies of the first ``copies``."""
    rng = np.random.default_rng(seed)
    base = rng.normal(size=(n, dim)).astype(np.float32)
    near = base[:copies] + noise * rng.normal(size=(copies, dim)).astype(np.float32)
    vectors = np.concatenate([base, near])
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    return [f"e:{i:05d}" for i in range(len(vectors))], vectors


def test_synonym_pairs_match_brute_force():
    ids, vectors = _planted(7, 40, 10, 16, 0.05)
    got = {(s.src, s.dst) for s in synonym_pairs(ids, vectors, 0.9, 5)}
    sims = vectors @ vectors.T
    want = {
        (ids[i], ids[j])
        for i in range(len(ids))
        for j in range(i + 1, len(ids))
        if sims[i, j] >= 0.9
    }
    assert got == want
    assert len(want) >= 10  # each noisy copy pairs with its original


def test_synonym_pairs_tiny_inputs():
    assert synonym_pairs([], np.zeros((0, 4), np.float32), 0.8, 5) == []
    assert synonym_pairs(["e:a"], np.ones((1, 4), np.float32) / 2, 0.8, 5) == []


def test_synonym_pairs_in_many_small_blocks_match_one_block(monkeypatch):
    import ingest.resolve as resolve_module

    ids, vectors = _planted(11, 60, 20, 8, 0.05)
    whole = synonym_pairs(ids, vectors, 0.9, 4)
    monkeypatch.setattr(resolve_module, "_BLOCK_CELLS", 16 * len(ids))  # blocks of 16 rows
    blocked = synonym_pairs(ids, vectors, 0.9, 4)
    assert [(s.src, s.dst) for s in blocked] == [(s.src, s.dst) for s in whole]
    assert np.allclose([s.score for s in blocked], [s.score for s in whole], atol=1e-5)
    assert len(whole) >= 20


def test_clustered_synonym_search_finds_the_exact_pairs(monkeypatch):
    """Above _EXACT_MAX the search compares within clusters only; on names with planted
    near-duplicates it finds the same pairs as the exact search."""
    import ingest.resolve as resolve_module

    ids, vectors = _planted(5, 3000, 300, 32, 0.1)
    exact = {(s.src, s.dst) for s in synonym_pairs(ids, vectors, 0.9, 5)}
    monkeypatch.setattr(resolve_module, "_EXACT_MAX", 100)
    clustered = synonym_pairs(ids, vectors, 0.9, 5)
    assert len(exact) >= 300
    assert {(s.src, s.dst) for s in clustered} == exact
    assert synonym_pairs(ids, vectors, 0.9, 5) == clustered  # deterministic
