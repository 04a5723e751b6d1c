"""``Engine.retrieve`` end to end over real graphs: every RCP parameter."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import rcp

import kgrag
from ingest import ingest_paths
from kgrag.config import load_config
from kgrag.errors import InvalidParams, Unsupported, VersionGone
from kgrag.rcp.wire import RetrieveResult
from kgrag.text.tokens import count_tokens
from tests.conftest import DATA, small_config

NEWS = DATA / "news.jsonl"


@pytest.fixture(scope="module")
def science(science_graph: Path):
    with kgrag.open(science_graph) as engine:
        yield engine


@pytest.fixture(scope="module")
def news(tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("graphs") / "news"
    assert ingest_paths([NEWS], root, small_config()).changed
    with kgrag.open(root) as engine:
        yield engine


def _titles(result) -> list[str]:
    return [h["citation"]["title"] for h in result["hits"]]


@pytest.mark.parametrize("mode", ["dense", "sparse", "hybrid"])
def test_each_mode_finds_the_passage(science, mode):
    result = science.retrieve({"query": "Where was Marie Curie born?", "k": 3, "mode": mode})
    assert _titles(result)[0] == "Marie Curie"
    assert len(result["hits"]) == 3 and result["indexVersion"] == science.index_version
    hit = result["hits"][0]
    assert set(hit) >= {
        "id",
        "score",
        "confidence",
        "text",
        "unit",
        "level",
        "scores",
        "citation",
        "provenance",
        "trust",
        "chunk",
    }
    assert (
        hit["unit"] == "chunk" and hit["level"] == 0 and hit["provenance"]["leaves"] == [hit["id"]]
    )
    assert set(hit["chunk"]) == {"docId", "index", "context"}
    assert "dense" in hit["scores"] and (mode == "dense" or "sparse" in hit["scores"])
    assert result["usage"]["candidates"] >= 3 and result["usage"]["latencyMs"] >= 0
    RetrieveResult.model_validate(result)  # the full RCP Hit shape, nothing extra


def test_hybrid_fusion_is_the_reference_rrf(science):
    q = "Which river flows into the Black Sea?"
    dense = science.retrieve({"query": q, "k": 12, "mode": "dense"})["hits"]
    sparse = science.retrieve({"query": q, "k": 12, "mode": "sparse"})["hits"]
    want = rcp.rrf_fuse({"dense": dense, "sparse": sparse}, rrf_k=60)
    got = science.retrieve(
        {"query": q, "k": 5, "mode": "hybrid", "fusion": {"method": "rrf", "rrfK": 60}}
    )
    assert [h["id"] for h in got["hits"]] == [h["id"] for h in want[:5]]
    weighted = science.retrieve(
        {
            "query": q,
            "k": 5,
            "fusion": {"method": "weighted", "weights": {"dense": 1.0, "sparse": 0.0}},
        }
    )
    assert [h["id"] for h in weighted["hits"]][:3] == [h["id"] for h in dense[:3]]


def test_funnel_violations_name_the_field(science):
    with pytest.raises(InvalidParams) as err:
        science.retrieve({"query": "x", "k": 10, "candidateK": 5})
    assert err.value.data["field"] == "candidateK" and err.value.code == -32602
    with pytest.raises(InvalidParams) as err:
        science.retrieve(
            {"query": "x", "k": 3, "candidateK": 20, "rerank": {"method": "colbert", "topN": 30}}
        )
    assert err.value.data["field"] == "rerank.topN"
    with pytest.raises(InvalidParams) as err:
        science.retrieve({"query": "x", "k": 5, "rerank": {"method": "colbert", "topN": 2}})
    assert err.value.data["field"] == "rerank.topN"


def test_k_is_clamped_never_rejected(science):
    result = science.retrieve({"query": "physicist", "k": 10_000})
    assert len(result["hits"]) == 12  # the whole corpus, no error


@pytest.mark.parametrize(
    ("params", "option"),
    [
        ({"mode": "semantic"}, "mode"),
        ({"unit": "passage"}, "unit"),
        ({"fusion": {"method": "convex"}}, "fusion.method"),
        ({"rerank": {"method": "llm"}}, "rerank.method"),
        ({"rewrite": "telepathy"}, "rewrite"),
        ({"query": [{"type": "image", "mimeType": "image/png", "data": "AA=="}]}, "modality"),
        ({"unit": "community", "filter": {"field": "title", "op": "eq", "value": "x"}}, "filter"),
        ({"unit": "tree-node", "recency": {"field": "published", "halfLifeDays": 9}}, "recency"),
        ({"level": 2}, "level"),
    ],
)
def test_unsupported_options_are_32005_or_degrade(science, params, option):
    base = {"query": "Where was Marie Curie born?", "k": 2} | params
    with pytest.raises(Unsupported) as err:
        science.retrieve(base)
    assert err.value.code == -32005 and err.value.data["option"] == option
    if option != "modality":
        relaxed = science.retrieve(base | {"strict": False})
        assert relaxed["usage"]["notes"] and len(relaxed["hits"]) == 2


def test_filters_and_minscore(news):
    result = news.retrieve(
        {
            "query": "harbour bridge",
            "k": 10,
            "filter": {
                "and": [
                    {"field": "lang", "op": "eq", "value": "en"},
                    {"field": "tags", "op": "contains", "value": "transport"},
                ]
            },
        }
    )
    assert set(_titles(result)) == {"Harbour bridge opens", "Old ferry retired", "Bridge review"}
    result = news.retrieve(
        {
            "query": "harbour",
            "k": 10,
            "filter": {"not": {"field": "year", "op": "lt", "value": 2024}},
        }
    )
    assert set(_titles(result)) == {"Harbour bridge opens", "Brücke eröffnet", "Bridge review"}
    with pytest.raises(InvalidParams) as err:
        news.retrieve({"query": "x", "filter": {"field": "colour", "op": "eq", "value": "red"}})
    assert "colour" in err.value.data["field"]
    floor = news.retrieve({"query": "harbour bridge", "k": 10, "mode": "dense"})["hits"][2]["score"]
    above = news.retrieve({"query": "harbour bridge", "k": 10, "mode": "dense", "minScore": floor})[
        "hits"
    ]
    assert len(above) == 3 and all(h["score"] >= floor for h in above)


def test_recency_prefers_newer_passages(news):
    plain = news.retrieve({"query": "ferry crossing the harbour", "k": 3, "mode": "dense"})
    recent = news.retrieve(
        {
            "query": "ferry crossing the harbour",
            "k": 3,
            "mode": "dense",
            "recency": {"field": "published", "halfLifeDays": 30},
        }
    )
    assert _titles(plain)[0] == "Old ferry retired"
    assert "Old ferry retired" not in _titles(recent)[:1]
    assert all("recency" in h["scores"] for h in recent["hits"])
    with pytest.raises(InvalidParams) as err:
        news.retrieve({"query": "x", "recency": {"field": "lang", "halfLifeDays": 3}})
    assert err.value.data["field"] == "recency.field"


def test_injection_is_flagged_in_trust(news):
    hits = news.retrieve({"query": "bridge inspection cracks", "k": 1})["hits"]
    assert hits[0]["citation"]["title"] == "Bridge review"
    assert (
        hits[0]["trust"]["injectionSuspected"] is True and hits[0]["trust"]["level"] == "untrusted"
    )
    clean = news.retrieve({"query": "library opening hours", "k": 1})["hits"][0]
    assert clean["trust"]["injectionSuspected"] is False


def test_token_budget_packs_whole_hits(science):
    full = science.retrieve({"query": "capital cities", "k": 8})
    tokens = [count_tokens(h["text"]) for h in full["hits"]]
    budget = tokens[0] + tokens[1] + tokens[2] // 2
    packed = science.retrieve({"query": "capital cities", "k": 8, "tokenBudget": budget})
    assert [h["id"] for h in packed["hits"]] == [h["id"] for h in full["hits"][:2]]
    assert packed["usage"]["tokens"] == tokens[0] + tokens[1] <= budget


def test_sessions_do_not_repeat_hits(science):
    first = science.retrieve({"query": "physicist", "k": 3, "sessionId": "trail-1"})
    second = science.retrieve({"query": "physicist", "k": 3, "session": "trail-1"})  # alias
    assert not {h["id"] for h in first["hits"]} & {h["id"] for h in second["hits"]}
    other = science.retrieve({"query": "physicist", "k": 3, "sessionId": "trail-2"})
    assert [h["id"] for h in other["hits"]] == [h["id"] for h in first["hits"]]


def test_cursor_pages_through_the_ranking(science):
    whole = science.retrieve({"query": "river", "k": 6})["hits"]
    page1 = science.retrieve({"query": "river", "k": 3})
    page2 = science.retrieve({"query": "river", "k": 3, "cursor": page1["nextCursor"]})
    assert [h["id"] for h in page1["hits"] + page2["hits"]] == [h["id"] for h in whole]
    with pytest.raises(InvalidParams) as err:
        science.retrieve({"query": "lake", "k": 3, "cursor": page1["nextCursor"]})
    assert err.value.data["field"] == "cursor"


def test_text_and_vectors_are_optional(science):
    hit = science.retrieve(
        {"query": "Danube", "k": 1, "includeText": False, "includeVector": True}
    )["hits"][0]
    assert "text" not in hit and len(hit["vector"]) == 384


def test_units_and_levels(science):
    doc = science.retrieve({"query": "Niels Bohr institute", "k": 2, "unit": "document"})["hits"][0]
    assert doc["unit"] == "document" and doc["citation"]["title"] == "Niels Bohr"
    levels = {c.level for c in science.reader.communities()}
    for level in sorted(levels):
        hits = science.retrieve(
            {"query": "physicists", "k": 3, "unit": "community", "level": level}
        )["hits"]
        assert hits and all(h["unit"] == "community" and h["level"] == level for h in hits)
    for unit in ("document", "community", "tree-node"):
        RetrieveResult.model_validate(science.retrieve({"query": "rivers", "k": 3, "unit": unit}))
    tree = science.retrieve({"query": "rivers", "k": 2, "unit": "tree-node", "level": 1})["hits"]
    assert tree and all(h["level"] == 1 and h["provenance"]["leaves"] for h in tree)


def test_confidence_is_calibrated_not_min_max(science):
    good = science.retrieve({"query": "Where was Albert Einstein born?", "k": 3})["hits"]
    bad = science.retrieve({"query": "recipe for sourdough bread", "k": 3})["hits"]
    assert all(0 <= h["confidence"] <= 1 for h in good + bad)
    assert good[0]["confidence"] > 0.5 > bad[0]["confidence"]  # min-max would give both tops 1.0


@pytest.mark.parametrize("method", ["colbert"])
def test_rerank_inside_retrieve(science, method):
    result = science.retrieve(
        {
            "query": "Who married Pierre Curie?",
            "k": 3,
            "candidateK": 12,
            "rerank": {"method": method, "topN": 6},
        }
    )
    assert result["usage"]["reranked"] == 6
    assert all("rerank" in h["scores"] for h in result["hits"])
    assert [h["score"] for h in result["hits"]] == sorted(
        (h["score"] for h in result["hits"]), reverse=True
    )


def _mean_pairwise(hits) -> float:
    v = np.array([h["vector"] for h in hits])
    sims = v @ v.T
    return float(sims[np.triu_indices(len(v), 1)].mean())


def test_rerank_false_and_mmr_diversifies(science):
    base = {"query": "capital of a country", "k": 4, "mode": "dense", "includeVectors": True}
    plain = science.retrieve(base | {"rerank": False})["hits"]
    diverse = science.retrieve(base | {"mmr": {"lambda": 0.3}})["hits"]
    assert diverse[0]["id"] == plain[0]["id"]
    assert _mean_pairwise(diverse) < _mean_pairwise(plain)


@pytest.mark.parametrize("method", ["rewrite", "hyde", "multi-query", "decompose", "step-back"])
def test_rewrite_methods_report_the_rewritten_query(science, method):
    result = science.retrieve(
        {
            "query": "In which country was the husband of Marie Curie born?",
            "k": 3,
            "transform": method,
        }
    )
    assert result["rewrittenQuery"] and result["hits"]


def test_same_request_same_bytes(science, science_graph):
    params = {
        "query": "Which physicist was born in Copenhagen?",
        "k": 5,
        "seed": 7,
        "mmr": {"lambda": 0.6},
        "indexVersion": science.index_version,
    }
    a = science.retrieve(params)
    with kgrag.open(science_graph) as again:
        b = again.retrieve(params)
    for r in (a, b):
        r["usage"].pop("latencyMs")
    assert json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


def test_a_pinned_version_that_is_gone(science):
    with pytest.raises(VersionGone) as err:
        science.retrieve({"query": "x", "indexVersion": "v000999"})
    assert err.value.code == -32010


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"query": "x", "k": "3"}, "k"),
        ({"query": "x", "k": 0}, "k"),
        ({"k": 3}, "query"),
        ({"query": "x", "mmr": {"lambda": 3}}, "mmr.lambda"),
        ({"query": "x", "includeText": "yes"}, "includeText"),
    ],
)
def test_malformed_params(science, params, field):
    with pytest.raises(InvalidParams) as err:
        science.retrieve(params)
    assert err.value.data["field"] == field


def test_cross_encoder_rerank_when_configured(science_graph, cross_encoder_dir):
    config = load_config(retrieval={"cross_encoder": str(cross_encoder_dir)})
    with kgrag.open(science_graph, config=config) as engine:
        assert "cross-encoder" in engine.retriever().rerank_methods()
        result = engine.retrieve(
            {
                "query": "Who married Pierre Curie?",
                "k": 2,
                "rerank": {"method": "cross-encoder", "topN": 5},
            }
        )
        assert result["usage"]["reranked"] == 5
        assert all("rerank" in h["scores"] for h in result["hits"])
    with kgrag.open(science_graph) as engine, pytest.raises(Unsupported):
        engine.retrieve({"query": "x", "rerank": {"method": "cross-encoder"}})
