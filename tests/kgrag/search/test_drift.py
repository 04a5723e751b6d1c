"""Graph op ``drift``: a primer over community reports, follow-up queries from
what they hold, a local search per follow-up, merged passages with provenance."""

from __future__ import annotations

import numpy as np
import pytest

from kgrag.encoders import load_encoder
from kgrag.errors import InvalidParams
from kgrag.search.drift import drift
from kgrag.search.global_search import GlobalSearch
from kgrag.search.local import LocalSearch

QUERY = "Which river flows through the capital of Poland?"


@pytest.fixture(scope="module")
def search(science_reader) -> GlobalSearch:
    encoder = load_encoder(science_reader.manifest["models"]["embedding"])
    return GlobalSearch(science_reader, encoder)


@pytest.fixture(scope="module")
def dense(science_reader, search):
    """A plain dense chunk search over the stored chunk vectors."""
    ids, matrix = science_reader.vectors("chunks")

    def local(text: str, n: int) -> list[tuple[str, float]]:
        scores = matrix @ search.encoder.encode_one(text)
        order = np.lexsort((np.arange(len(ids)), -scores))[:n]
        return [(ids[i], float(scores[i])) for i in order]

    return local


def _titles(reader, chunk_ids) -> list[str]:
    context = {c.id: c.context for c in reader.chunks(list(chunk_ids))}
    return [context[c] for c in chunk_ids]


def test_drift_issues_distinct_followups_from_the_primer(search, dense):
    result = drift(QUERY, global_search=search, local=dense, k=5, followups=3, primer_k=3)
    assert 0 < len(result.followups) <= 3 and 0 < len(result.primer) <= 3
    texts = [f.text for f in result.followups]
    assert len(set(texts)) == len(texts)
    primer_ids = {c.id for c in result.primer}
    for f in result.followups:
        assert f.step == 1 and f.origin in primer_ids
        assert f.text.startswith(QUERY) and f.facet and f.text != QUERY
    assert any("Vistula" in f.facet for f in result.followups)


def test_drift_passages_are_fused_and_attributed(search, dense, science_reader):
    result = drift(QUERY, global_search=search, local=dense, k=4)
    ids = [cid for cid, _ in result.passages]
    scores = [s for _, s in result.passages]
    assert 0 < len(ids) <= 4 and len(set(ids)) == len(ids)
    assert scores == sorted(scores, reverse=True)
    assert {"Vistula", "Warsaw"} <= set(_titles(science_reader, ids[:3]))
    asked = [QUERY] + [f.text for f in result.followups]
    assert set(result.found_by) == set(ids)
    for cid in ids:
        found = result.found_by[cid]
        assert found and set(found) <= set(asked)
        assert list(found) == [q for q in asked if q in found]  # in the order issued


def test_drift_is_deterministic(search, dense):
    a = drift(QUERY, global_search=search, local=dense, k=5, depth=2)
    b = drift(QUERY, global_search=search, local=dense, k=5, depth=2)
    assert a == b


def test_deeper_drift_follows_relations_of_found_passages(search, dense, science_reader):
    result = drift(QUERY, global_search=search, local=dense, k=5, depth=2, followups=2)
    steps = [f.step for f in result.followups]
    assert steps == sorted(steps) and set(steps) == {1, 2}
    assert all(steps.count(s) <= 2 for s in (1, 2))
    later = [f for f in result.followups if f.step == 2]
    relations = {r.id: r for r in science_reader.relations([f.origin for f in later])}
    assert set(relations) == {f.origin for f in later}
    facets = [f.facet.lower() for f in result.followups]
    assert len(set(facets)) == len(facets)


def test_drift_with_the_ppr_local_search(search, science_reader):
    ppr = LocalSearch(science_reader, search.encoder)
    result = drift(
        QUERY,
        global_search=search,
        local=lambda text, n: ppr.search(text, n).passages,
        k=3,
    )
    assert result.followups
    assert "Vistula" in _titles(science_reader, [cid for cid, _ in result.passages])


def test_no_followups_asked(search, dense):
    result = drift(QUERY, global_search=search, local=dense, k=3, followups=0)
    assert result.followups == []
    assert [c for c, _ in result.passages] == [c for c, _ in dense(QUERY, 3)]
    assert all(found == (QUERY,) for found in result.found_by.values())


def test_bad_params(search, dense):
    for kwargs, field in (
        ({"k": 0}, "k"),
        ({"k": 3, "depth": 0}, "depth"),
        ({"k": 3, "followups": -1}, "followups"),
        ({"k": 3, "primer_k": 0}, "primer_k"),
        ({"k": 3, "level": 99}, "level"),
    ):
        with pytest.raises(InvalidParams) as err:
            drift(QUERY, global_search=search, local=dense, **kwargs)
        assert err.value.data["field"] == field
