"""The engine facade over a built graph: dense hits with unit, level, provenance."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

import kgrag
from ingest import build
from ingest.load import load_paths
from kgrag.config import Config, load_config
from kgrag.errors import InvalidParams, ModelError, Unsupported, VersionGone
from tests.conftest import SCIENCE


@pytest.fixture(scope="module")
def engine(science_graph: Path):
    with kgrag.open(science_graph) as e:
        yield e


def test_chunk_hits_find_the_passage_and_cite_it(engine):
    hits = engine.query("In which city was Albert Einstein born?", k=3)
    assert len(hits) == 3
    top = hits[0]
    assert top["chunk"]["context"] in {"Albert Einstein", "Ulm"}
    assert (top["unit"], top["level"]) == ("chunk", 0)
    assert top["provenance"]["leaves"] == [top["id"]]
    assert top["citation"]["title"] == top["chunk"]["context"]
    assert [h["score"] for h in hits] == sorted((h["score"] for h in hits), reverse=True)


def test_community_and_tree_hits_carry_level_and_leaves(engine):
    chunk_ids = {c.id for c in engine.reader.chunks()}
    for unit in ("community", "tree-node"):
        hits = engine.query("rivers flowing into seas", k=2, unit=unit)
        assert hits and all(h["unit"] == unit for h in hits)
        for h in hits:
            assert h["level"] >= (0 if unit == "community" else 1)
            assert h["provenance"]["leaves"] and set(h["provenance"]["leaves"]) <= chunk_ids
            assert h["text"]


def test_bad_parameters_name_the_field_or_option(engine):
    with pytest.raises(Unsupported) as err:
        engine.query("x", unit="paragraph")
    assert err.value.data["option"] == "unit" and err.value.code == -32005
    with pytest.raises(InvalidParams) as err:
        engine.query("x", k=0)
    assert err.value.data["field"] == "k"


def test_a_gone_version_is_refused(science_graph: Path):
    with pytest.raises(VersionGone):
        kgrag.open(science_graph, index_version="v999999")


def test_an_unknown_model_fails_before_anything_is_written(tmp_path: Path):
    config = load_config(models={"embedding": "no-such-model-package"})
    with pytest.raises(ModelError, match="never downloads"):
        build(load_paths([SCIENCE]).documents, tmp_path / "g", config)
    assert not (tmp_path / "g" / "manifest.json").exists()


def test_community_copies_carried_down_a_level_are_returned_once(engine):
    hits = engine.query("physicists born in European capitals", k=5, unit="community")
    texts = [h["text"] for h in hits]
    assert len(texts) == len(set(texts))
    by_text = {}
    for c in engine.reader.communities():
        by_text.setdefault(c.report.text(), []).append(c.level)
    for h in hits:
        assert h["level"] == min(by_text[h["text"]])  # the finest copy


def test_an_older_version_no_call_asks_for_is_let_go(
    science_graph: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    from kgrag.engine import facade

    folder = tmp_path / "science"
    shutil.copytree(science_graph, folder)
    with kgrag.open(folder) as engine:
        first = engine.index_version
        engine.add([{"id": "idle-1", "text": "The Vela probe met the comet Tempel in 1998."}])
        pinned = engine.retrieve({"query": "comet", "k": 1, "indexVersion": first})
        assert pinned["indexVersion"] == first and first in engine._retrievers
        engine.retrieve({"query": "comet", "k": 1})  # within the minute: kept
        assert first in engine._retrievers
        monkeypatch.setattr(facade, "_PINNED_IDLE", 0.0)
        latest = engine.retrieve({"query": "comet", "k": 1})
        assert first not in engine._retrievers and latest["indexVersion"] != first
        again = engine.retrieve({"query": "comet", "k": 1, "indexVersion": first})
        assert again["hits"] == pinned["hits"]  # opened again on request


def test_a_pinned_call_holds_its_version_through_writes_until_the_lease_runs_out(
    science_graph: Path, tmp_path: Path
):
    folder = tmp_path / "science"
    shutil.copytree(science_graph, folder)
    config = Config(store={"retain_seconds": 0, "lease_seconds": 600})
    with kgrag.open(folder, config=config) as engine:
        first = engine.index_version
        params = {"query": "comet", "k": 2, "indexVersion": first}
        pinned = engine.retrieve(params)
        for i in range(3):
            engine.add([{"id": f"lease-{i}", "text": f"The Vela probe {i} met the comet Tempel."}])
            assert engine.retrieve(params)["hits"] == pinned["hits"]
        assert engine.store.versions() == [first, engine.index_version]  # the others went
        lease = folder / "leases" / first
        lease.write_text(repr(float(lease.read_text()) - 601))  # as if 600 s had passed
        engine.add([{"id": "lease-last", "text": "The Vela probe met the comet Halley."}])
        assert first not in engine.store.versions()
        with pytest.raises(VersionGone) as err:
            engine.retrieve(params)
        assert err.value.code == -32010
        with pytest.raises(VersionGone):
            engine.graph({"op": "local", "query": "comet", "indexVersion": first})
