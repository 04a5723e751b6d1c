"""The Knowhere-compatible REST route on a real loopback server: every request field's
effect, the three routers, evidence grouping, validation and the OpenAPI document."""

from __future__ import annotations

import http.client
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kgrag.server import Access, Graphs, Running, create_app

PARTS = ["impeller", "gasket", "inlet valve", "outlet hose", "pressure switch", "motor mount"]
FILTER = ["mesh screen", "carbon cartridge", "sediment bowl", "drain plug", "o-ring", "bypass"]
QUESTION = "How do I tighten the impeller bolts on the pump housing?"


def _manual() -> str:
    """A two-section manual, each section long enough for several chunks."""
    pump = " ".join(
        f"Step {i}: fit the {p} onto the pump housing and tighten its {i + 2} bolts by hand, "
        f"then check that the {p} sits flush against the housing before you continue."
        for i, p in enumerate(PARTS * 3)
    )
    clean = " ".join(
        f"Step {i}: take out the {p} from the filter body, rinse the {p} under warm water, "
        f"and dry the {p} fully before it goes back into the filter body."
        for i, p in enumerate(FILTER * 3)
    )
    return (
        f"# Pump manual\n\n## Installing the pump\n\n{pump}\n\n## Cleaning the filter\n\n{clean}\n"
    )


@pytest.fixture(scope="module")
def rest_graphs(served_copy: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Graphs]:
    from ingest import ingest_paths
    from kgrag.config import load_config

    folder = tmp_path_factory.mktemp("manual")
    source = folder / "manual.md"
    source.write_text(_manual())
    root = folder / "graph"
    config = load_config(chunk={"max_tokens": 120, "overlap_tokens": 0}, extract={"n_process": 1})
    report = ingest_paths([source], root, config)
    assert report.changed and not report.errors
    graphs = Graphs.open([f"science={served_copy}", f"manual={root}"])
    yield graphs
    graphs.close()


@pytest.fixture(scope="module")
def url(rest_graphs: Graphs) -> Iterator[str]:
    with Running(create_app(rest_graphs)) as running:
        yield running.url


def ask(url: str, body: Any, version: int = 1, **headers: str) -> tuple[int, Any]:
    host, port = url.removeprefix("http://").rsplit(":", 1)
    conn = http.client.HTTPConnection(host, int(port), timeout=300)
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    conn.request(
        "POST",
        f"/v{version}/retrieval/query",
        data,
        {"Content-Type": "application/json"} | headers,
    )
    resp = conn.getresponse()
    out = resp.status, json.loads(resp.read())
    conn.close()
    return out


def ok(url: str, body: dict[str, Any], version: int = 1) -> dict[str, Any]:
    status, out = ask(url, body, version)
    assert status == 200, out
    return out


def doc_ids(out: dict[str, Any]) -> list[str]:
    return [r["document_id"] for r in out["results"]]


def test_namespaces_and_the_default(url: str):
    science = {"query": "Where was Marie Curie born?", "top_k": 3, "use_agentic": False}
    for namespace in (None, "", "  ", "default", "science"):
        out = ok(url, science | ({"namespace": namespace} if namespace is not None else {}))
        assert (
            out["namespace"] in ("default", "science") and "Warsaw" in out["results"][0]["content"]
        )
    manual = ok(url, {"query": QUESTION, "namespace": "manual", "top_k": 2, "use_agentic": False})
    assert manual["namespace"] == "manual" and "impeller" in manual["results"][0]["content"]
    status, out = ask(url, {"query": "x", "namespace": "nowhere"})
    assert status == 404 and "nowhere" in out["detail"]


def test_routers_and_the_decision_trace(url: str):
    body = {"query": "Which river flows through the city where Marie Curie was born?", "top_k": 3}
    classic = ok(url, body | {"use_agentic": False})
    assert classic["router_used"] == "classic_topk" and len(classic["results"]) == 3
    for flag in (None, True):
        agentic = ok(url, body | ({"use_agentic": flag} if flag is not None else {}))
        assert agentic["router_used"] == "agentic" and len(agentic["results"]) == 3
        trace = agentic["decision_trace"]
        assert len(trace) >= 2 and [t["step_index"] for t in trace] == list(range(len(trace)))
        assert all(
            set(t) == {"step_index", "observation", "decision", "result", "latency_ms"}
            for t in trace
        )
        assert "local graph search" in trace[1]["decision"]
        assert agentic["stop_reason"] in (
            "no_new_evidence",
            "frontier_exhausted",
            "step_budget",
            "latency_budget",
        )
        assert agentic["failure_reason"] == ""
    scores = [r["score"] for r in agentic["results"]]
    assert scores == sorted(scores, reverse=True)
    assert agentic["evidence_text"] == "" and agentic["answer_text"] == ""


def test_small_corpus_returns_every_scoped_chunk_grouped_by_section(url: str, rest_graphs):
    total = len(rest_graphs.get("manual").chunks())
    out = ok(url, {"query": QUESTION, "namespace": "manual", "top_k": total + 2})
    assert out["router_used"] == "small_corpus_all" and out["stop_reason"] == "small_corpus"
    assert len(out["results"]) == total
    sections = {r["source"]["section_path"] for r in out["results"]}
    assert sections == {
        "Pump manual",
        "Pump manual / Installing the pump",
        "Pump manual / Cleaning the filter",
    }
    assert [g["parent_path"] for g in out["evidence"]].count("Pump manual") == 1
    assert len(out["evidence"]) == 3  # one group per document and section
    for n, group in enumerate(out["evidence"], start=1):
        assert group["label"] == f"E{n}"
        assert group["header"] == f"[E{n}] [§ manual.md / {group['parent_path']}]"
        indexes = [p["chunk_index"] for p in group["parts"]]
        assert indexes == sorted(indexes)
        assert len(indexes) >= (1 if group["parent_path"] == "Pump manual" else 2)
        assert group["text"] == "\n\n".join(p["text"] for p in group["parts"])
    parts = [(p["chunk_id"], p["document_id"]) for g in out["evidence"] for p in g["parts"]]
    assert sorted(parts) == sorted((r["chunk_id"], r["document_id"]) for r in out["results"])
    first = out["evidence"][0]
    assert "Installing the pump" in first["parent_path"]  # the best chunk's group comes first
    refs = out["referenced_chunks"]
    assert [r["chunk_id"] for r in refs] == [r["chunk_id"] for r in out["results"]]
    assert all(r["file_path"].endswith("manual.md") and r["chunk_type"] == "text" for r in refs)


def test_document_scope_include_exclude(url: str):
    base = {"query": "Which scientists were born in Paris or Warsaw?", "use_agentic": False}
    wide = ok(url, base | {"top_k": 5})
    a, b = doc_ids(wide)[:2]
    assert ok(url, base | {"top_k": 5, "include_document_ids": []})["results"] == []
    only = ok(url, base | {"top_k": 5, "include_document_ids": [a, b], "exclude_document_ids": [b]})
    assert set(doc_ids(only)) == {a}  # exclusions win
    assert only["router_used"] == "small_corpus_all"
    bare = ok(url, base | {"top_k": 5, "include_document_ids": [a.removeprefix("d:")]})
    assert set(doc_ids(bare)) == {a}
    without = ok(url, base | {"top_k": 5, "exclude_document_ids": [a]})
    assert a not in doc_ids(without) and len(without["results"]) == 5
    agentic = ok(url, {"query": base["query"], "top_k": 5, "exclude_document_ids": [a, b]})
    assert agentic["router_used"] == "agentic" and not {a, b} & set(doc_ids(agentic))


def test_chunk_types_and_the_data_type_codes(url: str):
    """The Knowhere codes: 1=all, 2=text, 3=image, 4=table, 5=text+image, 6=text+table,
    7=page, 8=text+image+table; chunk_types overrides data_type (the graph holds text)."""
    base = {"query": "capital of Poland", "top_k": 3, "use_agentic": False}
    assert ok(url, base | {"chunk_types": ["table"]})["results"] == []
    assert len(ok(url, base | {"chunk_types": ["text", "image"]})["results"]) == 3
    for code, has_text in {1: 1, 2: 1, 3: 0, 4: 0, 5: 1, 6: 1, 7: 0, 8: 1}.items():
        found = ok(url, base | {"data_type": code})["results"]
        assert len(found) == 3 * has_text, code
    assert len(ok(url, base | {"data_type": 3, "chunk_types": ["text"]})["results"]) == 3
    assert len(ok(url, base | {"chunk_types": []})["results"]) == 3  # empty: every type


def test_the_classic_router_is_bm25_fused_by_rrf(url: str, rest_graphs: Graphs):
    body = {"query": "Which physicist was born in Paris?", "top_k": 4, "use_agentic": False}
    out = ok(url, body)
    sparse = rest_graphs.get("science").retrieve({"query": body["query"], "k": 4, "mode": "sparse"})
    found = [r["chunk_id"] for r in out["results"]]
    assert len(found) == 4 and found == [h["id"] for h in sparse["hits"]]
    # one channel fused by RRF (k 60): rank r scores 1 / (60 + r)
    assert [r["score"] for r in out["results"]] == [round(1 / (61 + i), 6) for i in range(4)]
    assert "BM25" in out["decision_trace"][0]["decision"]


def test_signal_paths_keep_and_delete(url: str):
    base = {"query": QUESTION, "namespace": "manual", "top_k": 3, "use_agentic": False}
    kept = ok(url, base | {"signal_paths": ["CLEANING the"], "filter_mode": "Keep"})
    assert kept["results"] and all(
        "cleaning the" in r["source"]["section_path"].lower() for r in kept["results"]
    )
    dropped = ok(url, base | {"signal_paths": ["installing"], "filter_mode": "DELETE"})
    assert dropped["results"] and all(
        "installing" not in r["source"]["section_path"].lower() for r in dropped["results"]
    )
    default = ok(url, base | {"signal_paths": ["installing"]})  # filter_mode defaults to delete
    assert [r["chunk_id"] for r in default["results"]] == [
        r["chunk_id"] for r in dropped["results"]
    ]


def test_rerank_threshold_and_recall_k(url: str):
    base = {"query": "Who founded an institute in Copenhagen?", "top_k": 3, "use_agentic": False}
    plain = ok(url, base)
    assert len(plain["results"]) == 2  # BM25: two passages hold the query's terms
    reranked = ok(url, base | {"rerank": True, "internal_recall_k": 8})
    assert "RRF then rerank" in reranked["decision_trace"][0]["decision"]
    assert "internal_recall_k 8" in reranked["decision_trace"][0]["result"]
    assert [r["score"] for r in reranked["results"]] != [r["score"] for r in plain["results"]]
    assert "Bohr" in reranked["results"][0]["content"]
    cut = plain["results"][0]["score"]  # an RRF score
    high = ok(url, base | {"threshold": cut})
    assert [r["chunk_id"] for r in high["results"]] == [plain["results"][0]["chunk_id"]]
    assert ok(url, base | {"threshold": 1e9})["results"] == []
    # the threshold is on the fusion's RRF score, also when a rerank follows it
    both = ok(url, base | {"threshold": cut, "rerank": True})
    assert [r["chunk_id"] for r in both["results"]] == [plain["results"][0]["chunk_id"]]


def test_tracing_fields_and_the_v2_llm_config(url: str):
    body = {
        "query": "Where was Einstein born?",
        "top_k": 2,
        "agent_explore_model": "gpt-explorer",
        "conversation_id": "conv-42",
    }
    out = ok(url, body)
    assert out["conversation_id"] == "conv-42"
    assert any("gpt-explorer" in note for note in out["notes"])
    v2 = ok(url, body | {"llm_config": {"model": "any", "api_key": "k"}}, version=2)
    assert any("LLM configuration" in note and "ignored" in note for note in v2["notes"])
    v1 = ok(url, body | {"llm_config": {"model": "any"}})
    assert not any("LLM" in note for note in v1["notes"])


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"top_k": 3}, "query"),
        ({"query": "x", "top_k": "ten"}, "top_k"),
        ({"query": "x", "top_k": 0}, "top_k"),
        ({"query": "x", "filter_mode": "maybe"}, "filter_mode"),
        ({"query": "x", "data_type": 9}, "data_type"),
        ({"query": "x", "chunk_types": ["video"]}, "chunk_types"),
        ({"query": "x", "use_agentic": "yes"}, "use_agentic"),
        ({"query": "x", "include_document_ids": "d:1"}, "include_document_ids"),
    ],
)
def test_invalid_bodies_are_422_naming_the_field(url: str, body: dict[str, Any], field: str):
    status, out = ask(url, body)
    assert status == 422 and out["detail"][0]["loc"][:2] == ["body", field]


def test_a_body_that_is_not_json_is_422(url: str):
    status, out = ask(url, b"{nope")
    assert status == 422 and out["detail"][0]["type"] == "json_invalid"


def test_openapi_describes_both_versions(url: str):
    host, port = url.removeprefix("http://").rsplit(":", 1)
    conn = http.client.HTTPConnection(host, int(port))
    conn.request("GET", "/openapi.json")
    doc = json.loads(conn.getresponse().read())
    conn.close()
    assert set(doc["paths"]) == {"/v1/retrieval/query", "/v2/retrieval/query"}
    schemas = doc["components"]["schemas"]
    assert {"query", "top_k", "signal_paths", "use_agentic"} <= set(
        schemas["QueryBody"]["properties"]
    )
    assert "llm_config" in schemas["QueryBodyV2"]["properties"]
    assert "decision_trace" in schemas["QueryResponse"]["properties"]


def test_the_route_honours_the_bearer_token(rest_graphs: Graphs):
    with Running(create_app(rest_graphs, access=Access(token="s3cret"))) as running:
        status, out = ask(running.url, {"query": "x"})
        assert status == 401
        status, out = ask(
            running.url, {"query": "Paris", "top_k": 1}, Authorization="Bearer s3cret"
        )
        assert status == 200 and len(out["results"]) == 1
