"""Name resolution, alias merging and the vectorised synonymy search."""

from __future__ import annotations

import numpy as np
import pytest

from ingest.extract import Extraction, RawMention, RawRelation, RawSentence
from ingest.relation_table import RelationTable, relation_columns
from ingest.resolve import normalise, resolve
from ingest.synonyms import synonym_pairs
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
    import ingest.synonyms as resolve_module

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
    import ingest.synonyms as resolve_module

    ids, vectors = _planted(5, 3000, 300, 32, 0.1)
    exact = {(s.src, s.dst) for s in synonym_pairs(ids, vectors, 0.9, 5)}
    monkeypatch.setattr(resolve_module, "_EXACT_MAX", 100)
    clustered = synonym_pairs(ids, vectors, 0.9, 5)
    assert len(exact) >= 300
    assert {(s.src, s.dst) for s in clustered} == exact
    assert synonym_pairs(ids, vectors, 0.9, 5) == clustered  # deterministic


def _grouped_by_dict(ex: Extraction, eid) -> list[tuple]:
    """What the relations should be, grouped the plain way (a dict per key)."""
    seen: dict[tuple[str, str, str, str], list] = {}
    for r in ex.relations:
        src, dst = eid(r.chunk_id, r.src), eid(r.chunk_id, r.dst)
        if src == dst or not src or not dst:
            continue
        if r.kind == "cooc" and dst < src:
            src, dst = dst, src
        entry = seen.setdefault((src, r.predicate, dst, r.kind), [0, set()])
        entry[0] += 1
        entry[1].add(r.chunk_id)
    return [
        (content_id("relation", s, p, d), s, p, d, float(w), k, tuple(sorted(ev)))
        for (s, p, d, k), (w, ev) in sorted(seen.items())
    ]


def test_relations_are_grouped_as_a_dict_would_group_them():
    """Many raw relations over a few names, predicates and chunks (repeats, both
    directions of a co-occurrence, self loops, unknown names): the sorted grouping
    gives what a dict of keys gives, relation by relation, in the same order."""
    rng = np.random.default_rng(7)
    names = [f"Name{i}" for i in range(12)]
    chunks = [f"c{i}" for i in range(9)]
    mentions = [RawMention(c, 0, n, "ORG") for c in chunks for n in names[:10]]
    relations = []
    for _ in range(2000):
        a, b = rng.choice(names, 2)  # Name10 and Name11 are never mentioned: dropped
        kind = "cooc" if rng.random() < 0.6 else "svo"
        pred = "co-occurs with" if kind == "cooc" else str(rng.choice(["be", "win", "own"]))
        relations.append(RawRelation(str(rng.choice(chunks)), a, pred, b, kind))
    ex = Extraction(mentions=mentions, relations=relations)
    docs = {c: "d1" for c in chunks}
    res = resolve(ex, docs, _fake_encode, synonym_threshold=0.99, synonym_k=3)
    ids = {e.name: e.id for e in res.entities}
    want = _grouped_by_dict(ex, lambda _c, n: ids.get(n, ""))
    got = [(r.id, r.src, r.predicate, r.dst, r.weight, r.kind, r.evidence) for r in res.relations]
    assert len(want) > 100 and any(len(w[-1]) > 1 for w in want)
    assert got == want


def test_relation_table_reads_as_the_relations_it_holds():
    """The resolved relations are held as columns: read by index, slice or in order
    they are the relation objects; the columns the graph stages read instead give the
    same ends, weights, kinds and ids as the objects; cleared, it holds none."""
    names = ["Acme", "Globex", "Initech", "Umbrella"]
    ex = Extraction(
        mentions=[RawMention(c, 0, n, "ORG") for c in ("c1", "c2", "c3") for n in names],
        relations=[
            RawRelation("c1", "Acme", "own", "Globex", "svo"),
            RawRelation("c3", "Acme", "own", "Globex", "svo"),
            RawRelation("c2", "Initech", "co-occurs with", "Acme", "cooc"),
            RawRelation("c2", "Umbrella", "sue", "Initech", "svo"),
            RawRelation("c1", "Umbrella", "sue", "Initech", "svo"),
            RawRelation("c1", "Umbrella", "sue", "Initech", "svo"),
        ],
    )
    res = resolve(
        ex, {"c1": "d1", "c2": "d1", "c3": "d2"}, _fake_encode, synonym_threshold=0.99, synonym_k=3
    )
    table = res.relations
    assert isinstance(table, RelationTable)
    rels = list(table)
    assert len(rels) == len(table) == 3
    assert [table[i] for i in range(3)] == rels == table[:] and table[-1] == rels[2]
    assert table[1:] == rels[1:] and table == rels and rels == table
    with pytest.raises(IndexError):
        table[3]
    by_pred = {r.predicate: r for r in rels}
    assert by_pred["own"].evidence == ("c1", "c3") and by_pred["own"].weight == 2.0
    assert by_pred["sue"].evidence == ("c1", "c2") and by_pred["sue"].weight == 3.0
    assert by_pred["co-occurs with"].kind == "cooc" and by_pred["own"].kind == "svo"
    pos = {e.id: i for i, e in enumerate(res.entities) if e.name != "Umbrella"}
    from_table = relation_columns(table, pos)
    from_objects = relation_columns(rels, pos, ids=True)
    for field in ("src", "dst", "weight", "stated", "ids"):
        assert np.array_equal(getattr(from_table, field), getattr(from_objects, field)), field
    assert (from_table.src == -1).sum() == 1  # Umbrella is not in pos
    table.clear()
    assert len(table) == 0 and list(table) == []
    assert all(getattr(table, c).base is None for c in ("ids", "src", "weight", "evidence"))


def test_release_empties_the_extraction_and_resolves_the_same():
    def extraction():
        return Extraction(
            mentions=[RawMention("c1", 0, n, "ORG") for n in ("Acme", "Globex")],
            relations=[RawRelation("c1", "Acme", "own", "Globex", "svo")],
            sentences=[RawSentence("c1", 0, 0, 9, ("Acme", "Globex"))],
        )

    kept, released = extraction(), extraction()
    a = resolve(kept, {"c1": "d1"}, _fake_encode, synonym_threshold=0.99, synonym_k=3)
    b = resolve(
        released, {"c1": "d1"}, _fake_encode, synonym_threshold=0.99, synonym_k=3, release=True
    )
    assert (a.entities, list(a.relations), a.mentions, a.sentences, a.synonyms) == (
        b.entities,
        list(b.relations),
        b.mentions,
        b.sentences,
        b.synonyms,
    )
    assert len(kept.relations) == 1 and len(kept.mentions) == 2
    assert released.mentions == released.relations == released.sentences == []


def test_synonym_table_reads_as_the_list_it_stands_for():
    """Ids in no order: each pair once, its ends and the pairs ordered by id, every
    pair of the brute-force search, read by index, slice and iteration alike."""
    ids, vectors = _planted(13, 50, 15, 8, 0.05)
    shuffled = [f"e:{(i * 37) % len(ids):05d}" for i in range(len(ids))]
    table = synonym_pairs(shuffled, vectors, 0.9, 4)
    pairs = list(table)
    assert len(pairs) >= 15
    assert all(s.src < s.dst for s in pairs)
    assert [(s.src, s.dst) for s in pairs] == sorted({(s.src, s.dst) for s in pairs})
    sims = vectors @ vectors.T
    at = {x: i for i, x in enumerate(shuffled)}
    n = len(ids)
    want = {
        tuple(sorted((shuffled[i], shuffled[j])))
        for i in range(n)
        for j in range(i + 1, n)
        if sims[i, j] >= 0.9
    }
    assert {(s.src, s.dst) for s in pairs} == want
    for s in pairs:
        assert abs(s.score - sims[at[s.src], at[s.dst]]) < 1e-5
        assert s.score == round(s.score, 6)
    assert table[0] == pairs[0] and table[-1] == pairs[-1] and table[2:5] == pairs[2:5]
    assert table == pairs and len(table) == len(pairs)
    with pytest.raises(IndexError):
        table[len(pairs)]
    table.clear()
    assert len(table) == 0 and list(table) == []
