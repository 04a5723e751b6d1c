"""Hierarchical Leiden communities: structure, reports, determinism."""

from __future__ import annotations

import math
import random
from collections import defaultdict

import numpy as np
import pytest

from ingest.communities import build_communities
from kgrag.ids import content_id
from kgrag.types import Community, Entity, Relation, Sentence, Synonym

SETTINGS = {"max_size": 10, "max_levels": 4, "seed": 7, "report_sentences": 3}


def chunk(name: str) -> str:
    return content_id("chunk", name)


def entity(name: str, chunks: tuple[str, ...] = ()) -> Entity:
    ids = tuple(sorted(chunk(c) for c in chunks))
    return Entity(content_id("entity", name), name, "CONCEPT", (), ids)


def relation(a: Entity, predicate: str, b: Entity, weight: float = 1.0, kind: str = "cooc"):
    rid = content_id("relation", a.id, predicate, b.id)
    return Relation(rid, a.id, predicate, b.id, weight, kind, ())


def sentences_of(chunk_name: str, text: str, mentions: list[tuple[Entity, ...]]) -> list[Sentence]:
    """Sentence records for ``text`` split on '. ', one mention tuple per sentence."""
    parts = [p if p.endswith(".") else p + "." for p in text.split(". ")]
    out, start = [], 0
    for index, (part, ents) in enumerate(zip(parts, mentions, strict=True)):
        start = text.index(part, start)
        ids = tuple(e.id for e in ents)
        out.append(Sentence(chunk(chunk_name), index, start, start + len(part), ids))
        start += len(part)
    return out


def by_level(communities: list[Community]) -> dict[int, list[Community]]:
    levels: dict[int, list[Community]] = defaultdict(list)
    for c in communities:
        levels[c.level].append(c)
    return dict(levels)


# --- a small graph with known reports -------------------------------------------------

ALPHA = entity("Alpha", ("c1", "c2", "c3", "c4"))
BETA = entity("Beta", ("c1", "c4"))
GAMMA = entity("Gamma", ("c1", "c2", "c3", "c4"))
DELTA = entity("Delta", ("c1",))
OMEGA = entity("Omega", ("c2",))
SIGMA = entity("Sigma", ("c2",))
TAU = entity("Tau")
ZETA = entity("Zeta", ("c5",))
ENTITIES = [ALPHA, BETA, GAMMA, DELTA, OMEGA, SIGMA, TAU, ZETA]
# internal weighted degrees in A: Alpha 2+3+2=7, Gamma 3+1+1=5, Beta 2+1=3, Delta 2+1=3
RELATIONS = [
    relation(ALPHA, "found", BETA, 1.0, "svo"),  # counts double in the graph
    relation(ALPHA, "co", GAMMA, 3.0),
    relation(ALPHA, "co", DELTA, 2.0),
    relation(BETA, "co", GAMMA, 1.0),
    relation(GAMMA, "co", DELTA, 1.0),
    relation(OMEGA, "co", SIGMA),
    relation(SIGMA, "co", TAU),
    relation(OMEGA, "co", TAU),
    relation(DELTA, "co", OMEGA, 0.1),  # weak bridge between the cliques
]
TEXTS = {
    chunk("c1"): "Alpha found Beta in the lab. Gamma met Delta. Weather was fine.",
    chunk("c2"): "Alpha met Gamma. Omega knew Sigma.",
    chunk("c3"): "Alpha met Gamma.",  # overlap: the same sentence again
    chunk("c4"): "Beta saw Gamma. Alpha and Alpha again.",
    chunk("c5"): "Zeta stood alone.",
}
SENTENCES = [
    *sentences_of("c1", TEXTS[chunk("c1")], [(ALPHA, BETA), (GAMMA, DELTA), ()]),
    *sentences_of("c2", TEXTS[chunk("c2")], [(ALPHA, GAMMA), (OMEGA, SIGMA)]),
    *sentences_of("c3", TEXTS[chunk("c3")], [(ALPHA, GAMMA)]),
    *sentences_of("c4", TEXTS[chunk("c4")], [(BETA, GAMMA), (ALPHA, ALPHA)]),
    *sentences_of("c5", TEXTS[chunk("c5")], [(ZETA,)]),
]


def small() -> list[Community]:
    return build_communities(ENTITIES, RELATIONS, [], SENTENCES, TEXTS, **SETTINGS)


def community_with(communities: list[Community], e: Entity, level: int = 0) -> Community:
    return next(c for c in communities if c.level == level and e.id in c.members)


def test_separate_cliques_are_separate_communities() -> None:
    out = small()
    a, b, z = (community_with(out, e) for e in (ALPHA, OMEGA, ZETA))
    assert set(a.members) == {e.id for e in (ALPHA, BETA, GAMMA, DELTA)}
    assert set(b.members) == {e.id for e in (OMEGA, SIGMA, TAU)}
    assert z.members == (ZETA.id,)  # an isolated entity is a singleton


def test_report_key_entities_and_title() -> None:
    report = community_with(small(), ALPHA).report
    # by internal weighted degree; Beta and Delta tie at 3 and go by name
    assert report.key_entities == ("Alpha", "Gamma", "Beta", "Delta")
    assert report.title == "Alpha, Gamma and Beta"
    assert community_with(small(), ZETA).report.title == "Zeta"


def test_report_key_relations_prefer_svo_then_weight() -> None:
    report = community_with(small(), ALPHA).report
    assert report.key_relations[:3] == (
        "Alpha -found-> Beta",
        "Alpha -co-> Gamma",
        "Alpha -co-> Delta",
    )
    assert set(report.key_relations[3:]) == {"Beta -co-> Gamma", "Gamma -co-> Delta"}
    # the bridge leaves both cliques, so neither report names it
    assert not any("Omega" in r for r in report.key_relations)


def test_report_sentences_scored_by_member_degree() -> None:
    report = community_with(small(), ALPHA).report
    # Alpha+Gamma 12 (stated twice, kept once), Alpha+Beta 10, then a tie at 8
    # between "Beta saw Gamma." and the longer "Gamma met Delta."
    assert report.sentences == (
        "Alpha met Gamma.",
        "Alpha found Beta in the lab.",
        "Beta saw Gamma.",
    )
    other = community_with(small(), OMEGA).report
    assert other.sentences == ("Omega knew Sigma.",)
    assert "Entities: Alpha, Gamma, Beta, Delta" in community_with(small(), ALPHA).report.text()


def test_report_counts_each_member_once_per_sentence() -> None:
    out = build_communities(
        ENTITIES, RELATIONS, [], SENTENCES, TEXTS, **(SETTINGS | {"report_sentences": 5})
    )
    sentences = community_with(out, ALPHA).report.sentences
    # "Alpha and Alpha again." scores 7, below the pair sentences at 8
    assert sentences[-1] == "Alpha and Alpha again."
    assert len(sentences) == 5


def test_leaves_are_chunks_mentioning_members() -> None:
    out = small()
    assert community_with(out, ALPHA).leaves == tuple(
        sorted(chunk(c) for c in ("c1", "c2", "c3", "c4"))
    )
    assert community_with(out, OMEGA).leaves == (chunk("c2"),)
    assert community_with(out, ZETA).leaves == (chunk("c5"),)


def test_ratings_follow_internal_weight() -> None:
    out = small()
    assert community_with(out, ALPHA).rating == pytest.approx(10.0)
    assert community_with(out, OMEGA).rating == pytest.approx(10 * math.log1p(3) / math.log1p(9))
    assert community_with(out, ZETA).rating == 0.0


def test_synonyms_self_loops_and_unknown_ids() -> None:
    stranger = entity("Stranger")
    extra = [relation(ALPHA, "is", ALPHA, 5.0, "svo"), relation(ALPHA, "knows", stranger, 9.0)]
    synonyms = [Synonym(ZETA.id, TAU.id, 0.95), Synonym(ZETA.id, stranger.id, 0.9)]
    out = build_communities(ENTITIES, RELATIONS + extra, synonyms, SENTENCES, TEXTS, **SETTINGS)
    assert ZETA.id in community_with(out, TAU).members  # the synonym edge links them
    report = community_with(out, ALPHA).report
    assert report.key_relations[0] == "Alpha -found-> Beta"  # the loop is no relation
    assert report.key_entities[0] == "Alpha"
    assert all(stranger.id not in c.members for c in out)


def test_empty_input() -> None:
    assert build_communities([], [], [], [], {}, **SETTINGS) == []


# --- a larger planted hierarchy -------------------------------------------------------


def planted(seed: int = 3) -> tuple[list[Entity], list[Relation], list[Entity]]:
    """3 super-groups x 3 groups x 8 entities, plus a separate pair."""
    rng = random.Random(seed)
    ents = [
        entity(f"n{s}-{g}-{i}", (f"doc{s}-{g}",))
        for s in range(3)
        for g in range(3)
        for i in range(8)
    ]
    rels = []
    for i, a in enumerate(ents):
        for b in ents[i + 1 :]:
            same_group, same_super = a.name[:-2] == b.name[:-2], a.name[1] == b.name[1]
            p = 0.8 if same_group else 0.15 if same_super else 0.01
            if rng.random() < p:
                rels.append(relation(a, "co", b, rng.choice([1.0, 2.0])))
    pair = [entity("pair-x", ("doc-pair",)), entity("pair-y", ("doc-pair",))]
    rels.append(relation(pair[0], "likes", pair[1], 1.0, "svo"))
    return ents + pair, rels, pair


def big(**overrides) -> list[Community]:
    ents, rels, _ = planted()
    settings = {"max_size": 5, "max_levels": 6, "seed": 11, "report_sentences": 2} | overrides
    return build_communities(ents, rels, [], [], {}, **settings)


def test_every_level_partitions_all_entities() -> None:
    ents, _, _ = planted()
    levels = by_level(big())
    assert sorted(levels) == list(range(len(levels)))
    assert len(levels) >= 2
    for communities in levels.values():
        members = [m for c in communities for m in c.members]
        assert len(members) == len(set(members))
        assert set(members) == {e.id for e in ents}
        assert all(list(c.members) == sorted(c.members) for c in communities)


def test_parent_and_children_links_are_consistent() -> None:
    out = big()
    ids = {c.id: c for c in out}
    top = max(c.level for c in out)
    for c in out:
        assert c.id == content_id("community", str(c.level), *c.members)
        if c.level == top:
            assert c.parent is None
        else:
            assert ids[c.parent].level == c.level + 1
            assert c.id in ids[c.parent].children
        if c.level == 0:
            assert c.children == ()
        else:
            kids = [ids[k] for k in c.children]
            assert kids and all(k.parent == c.id and k.level == c.level - 1 for k in kids)
            assert sorted(m for k in kids for m in k.members) == list(c.members)


def test_oversized_communities_are_split() -> None:
    out = big()
    assert max(len(c.members) for c in out if c.level == 0) <= 5
    assert max(len(c.members) for c in out) > 5  # coarser levels hold the groups


def test_max_levels_caps_the_depth() -> None:
    out = big(max_levels=1)
    assert {c.level for c in out} == {0}
    assert all(c.parent is None and c.children == () for c in out)
    assert max(len(c.members) for c in out) > 5  # could not be split further


def test_small_community_is_carried_down() -> None:
    _, _, pair = planted()
    out = big()
    pair_ids = tuple(sorted(e.id for e in pair))
    copies = [c for c in out if c.members == pair_ids]
    assert sorted(c.level for c in copies) == list(range(max(c.level for c in out) + 1))
    by_id = {c.id: c for c in copies}
    for c in copies:
        if c.level > 0:
            assert len(c.children) == 1 and by_id[c.children[0]].members == pair_ids
    assert copies[0].report.key_relations == ("pair-x -likes-> pair-y",)


def test_same_seed_same_output_whatever_the_input_order() -> None:
    ents, rels, _ = planted()
    settings = {"max_size": 5, "max_levels": 6, "seed": 11, "report_sentences": 2}
    first = build_communities(ents, rels, [], [], {}, **settings)
    rng = random.Random(0)
    ents2, rels2 = ents[:], rels[:]
    rng.shuffle(ents2)
    rng.shuffle(rels2)
    assert build_communities(ents2, rels2, [], [], {}, **settings) == first
    out = sorted(first, key=lambda c: (c.level, c.id))
    assert first == out


def test_ratings_in_range_per_level() -> None:
    for communities in by_level(big()).values():
        ratings = [c.rating for c in communities]
        assert all(0.0 <= r <= 10.0 for r in ratings)
        assert max(ratings) == pytest.approx(10.0)


@pytest.mark.slow
def test_larger_random_graph_keeps_structure() -> None:
    rng = np.random.default_rng(5)
    n = 3000
    ents = [entity(f"e{i}", (f"c{i % 500}",)) for i in range(n)]
    group = rng.integers(0, 100, size=n)
    order = np.argsort(group, kind="stable")
    rels = []
    for k in range(12000):
        a = int(rng.integers(n))
        near = order[(np.searchsorted(group[order], group[a]) + rng.integers(0, 30)) % n]
        b = int(near) if rng.random() < 0.85 else int(rng.integers(n))
        rels.append(relation(ents[a], f"p{k}", ents[b], float(rng.random()) + 0.1))
    out = build_communities(
        ents, rels, [], [], {}, max_size=20, max_levels=5, seed=1, report_sentences=2
    )
    for communities in by_level(out).values():
        assert sum(len(c.members) for c in communities) == n
    assert max(len(c.members) for c in out if c.level == 0) <= 20
