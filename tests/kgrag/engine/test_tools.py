"""The RCP/1 tool methods (embed, rerank, query/transform, memory) over the science
graph, with the real MiniLM, spaCy and ColBERT; a cross-encoder trained here too."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
import rcp

import kgrag
from kgrag.config import load_config
from kgrag.engine import tools
from kgrag.errors import InvalidParams, KgragError, NotFound, Unsupported
from kgrag.text.tokens import count_tokens

QUERY = "Where was the husband of Marie Curie born?"
PASSAGES = [
    "The Danube flows into the Black Sea.",
    "Marie Curie married Pierre Curie in 1895.",
    "Copenhagen lies on the island of Zealand.",
    "The Louvre is located in Paris.",
]
RELEVANT = 1


@pytest.fixture(scope="module")
def engine(science_graph: Path):
    with kgrag.open(science_graph) as engine:
        yield engine


@pytest.fixture(scope="module")
def retriever(engine):
    return engine.retriever()


def _error(exc_type: type[KgragError], call, *args) -> KgragError:
    with pytest.raises(exc_type) as err:
        call(*args)
    return err.value


@pytest.mark.parametrize(
    "call",
    [tools.embed, tools.rerank, tools.transform_query, tools.memory_build, tools.memory_recall],
)
def test_params_must_be_an_object(retriever, call):
    err = _error(InvalidParams, call, retriever, ["not", "an", "object"])
    assert err.code == -32602 and err.data["field"] == "params"


# -- embed ------------------------------------------------------------------------------


def test_embed_json_and_f32_base64_decode_to_the_encoder_vectors(retriever):
    texts = ["Marie Curie was a physicist.", "The Danube flows into the Black Sea."]
    expected = retriever.encoder.encode(texts)
    plain = tools.embed(retriever, {"inputs": texts, "_meta": {"progressToken": 1}})
    packed = tools.embed(retriever, {"inputs": texts, "encoding": "f32-base64"})
    assert plain.get("encoding", "json") == "json"
    assert packed["encoding"] == "f32-base64" and packed["dimension"] == retriever.encoder.dim
    assert all(isinstance(v, str) for v in packed["vectors"])
    as_json = np.array(rcp.decode_vectors(plain["vectors"]))
    as_f32 = np.array(
        rcp.decode_vectors(packed["vectors"], packed["encoding"], packed["dimension"])
    )
    assert as_f32.shape == (2, retriever.encoder.dim)
    np.testing.assert_array_equal(as_f32.astype(np.float32), expected)
    np.testing.assert_allclose(as_json, expected, atol=1e-6)
    np.testing.assert_allclose(np.linalg.norm(as_json, axis=1), 1.0, atol=1e-5)


def test_embed_texts_synonym_and_text_blocks_equal_bare_strings(retriever):
    texts = ["Paris is the capital of France.", "Ulm lies on the Danube."]
    base = tools.embed(retriever, {"inputs": texts})["vectors"]
    assert tools.embed(retriever, {"texts": texts})["vectors"] == base
    blocks = [{"type": "text", "text": t} for t in texts]
    assert (
        tools.embed(retriever, {"inputs": [blocks[0], texts[1]], "kind": "query"})["vectors"]
        == base
    )
    assert base[0] != base[1]


def test_embed_empty_batch(retriever):
    assert tools.embed(retriever, {"inputs": []}) == {"vectors": []}
    packed = tools.embed(retriever, {"inputs": [], "encoding": "f32-base64"})
    assert packed["vectors"] == [] and packed["dimension"] == retriever.encoder.dim


def test_embed_refuses_other_modalities(retriever):
    image = {"type": "image", "data": "aGk=", "mimeType": "image/png"}
    err = _error(Unsupported, tools.embed, retriever, {"inputs": ["a", image]})
    assert err.code == -32005 and err.data["option"] == "modality"


def test_embed_batch_limit(retriever):
    ok = tools.embed(retriever, {"inputs": ["x"] * tools.EMBED_BATCH_LIMIT})
    assert len(ok["vectors"]) == tools.EMBED_BATCH_LIMIT
    over = {"inputs": ["x"] * (tools.EMBED_BATCH_LIMIT + 1)}
    err = _error(tools.TooLarge, tools.embed, retriever, over)
    assert err.code == -32013 and err.data["field"] == "inputs"


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"inputs": ["a", 3]}, "inputs.1"),
        ({"texts": ["a", None]}, "texts.1"),
        ({"inputs": [{"type": "text", "text": 5}]}, "inputs.0.text"),
        ({"inputs": [{"text": "no type"}]}, "inputs.0"),
        ({"inputs": "a bare string"}, "inputs"),
        ({}, "inputs"),
        ({"inputs": ["a"], "kind": "passage"}, "kind"),
    ],
)
def test_embed_invalid_params(retriever, params, field):
    err = _error(InvalidParams, tools.embed, retriever, params)
    assert err.code == -32602 and err.data["field"] == field


def test_embed_unknown_encoding(retriever):
    err = _error(Unsupported, tools.embed, retriever, {"inputs": ["a"], "encoding": "f16"})
    assert err.data["option"] == "encoding"


def test_embed_capability(retriever):
    cap = tools.embed_capability(retriever)
    vector = tools.embed(retriever, {"inputs": ["a"]})["vectors"][0]
    assert cap["dimension"] == len(vector) == 384
    assert cap["identity"] == retriever.reader.manifest["models"]["embedding"]
    assert cap["batchLimit"] == tools.EMBED_BATCH_LIMIT and cap["normalized"] is True
    assert "f32-base64" in cap["encodings"] and cap["modalities"] == ["text"]


# -- rerank -----------------------------------------------------------------------------


def test_rerank_ranks_the_relevant_passage_first(retriever):
    out = tools.rerank(retriever, {"query": "Who married Pierre Curie?", "passages": PASSAGES})
    assert len(out["scores"]) == len(PASSAGES)
    assert out["order"][0] == RELEVANT
    assert sorted(out["order"]) == list(range(len(PASSAGES)))
    ranked = [out["scores"][i] for i in out["order"]]
    assert ranked == sorted(ranked, reverse=True)
    assert out["results"] == [{"index": i, "score": out["scores"][i]} for i in out["order"]]


def test_rerank_scores_follow_their_passages(retriever):
    forward = tools.rerank(retriever, {"query": QUERY, "passages": PASSAGES})["scores"]
    backward = tools.rerank(retriever, {"query": QUERY, "passages": PASSAGES[::-1]})["scores"]
    assert backward == forward[::-1]
    assert len(set(forward)) == len(forward)


def test_rerank_top_n_cuts_order_and_results_not_scores(retriever):
    full = tools.rerank(retriever, {"query": QUERY, "passages": PASSAGES})
    top = tools.rerank(retriever, {"query": QUERY, "passages": PASSAGES, "topN": 2})
    assert top["scores"] == full["scores"]
    assert top["order"] == full["order"][:2]
    assert top["results"] == full["results"][:2]


def test_rerank_documents_synonym_and_text_blocks(retriever):
    base = tools.rerank(retriever, {"query": QUERY, "passages": PASSAGES})
    assert tools.rerank(retriever, {"query": QUERY, "documents": PASSAGES}) == base
    blocks = {
        "query": {"type": "text", "text": QUERY},
        "passages": [{"type": "text", "text": p} for p in PASSAGES],
        "method": "colbert",
    }
    assert tools.rerank(retriever, blocks) == base


def test_rerank_empty_passages(retriever):
    out = tools.rerank(retriever, {"query": QUERY, "passages": []})
    assert out == {"scores": [], "order": [], "results": []}


@pytest.mark.parametrize("method", ["llm", "cross-encoder", "bm25"])
def test_rerank_unknown_method(retriever, method):
    params = {"query": QUERY, "passages": PASSAGES, "method": method}
    err = _error(Unsupported, tools.rerank, retriever, params)
    assert err.code == -32005 and err.data["option"] == "method"


def test_rerank_too_many_passages(retriever):
    limit = retriever.config.max_candidates
    params = {"query": QUERY, "passages": ["x"] * (limit + 1)}
    err = _error(tools.TooLarge, tools.rerank, retriever, params)
    assert err.code == -32013 and err.data["field"] == "passages"
    assert tools.rerank_capability(retriever) == {"methods": ["colbert"], "maxCandidates": limit}


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"query": QUERY, "passages": PASSAGES, "topN": 0}, "topN"),
        ({"query": "  ", "passages": PASSAGES}, "query"),
        ({"passages": PASSAGES}, "query"),
        ({"query": QUERY}, "passages"),
        ({"query": QUERY, "documents": ["a", 7]}, "documents.1"),
    ],
)
def test_rerank_invalid_params(retriever, params, field):
    err = _error(InvalidParams, tools.rerank, retriever, params)
    assert err.data["field"] == field


def test_rerank_with_the_cross_encoder(science_graph, cross_encoder_dir):
    config = load_config(retrieval={"cross_encoder": str(cross_encoder_dir)})
    with kgrag.open(science_graph, config=config) as engine:
        retriever = engine.retriever()
        assert tools.rerank_capability(retriever)["methods"] == ["colbert", "cross-encoder"]
        params = {"query": "who married Pierre Curie", "passages": PASSAGES}
        out = tools.rerank(retriever, params | {"method": "cross-encoder", "topN": 1})
        assert out["order"] == [RELEVANT] and len(out["scores"]) == len(PASSAGES)
        assert "cross-encoder" in retriever.rerankers  # shared with retrieve's rerank stage


# -- query/transform ----------------------------------------------------------------------


@pytest.mark.parametrize("method", ["rewrite", "hyde", "multi-query", "decompose", "step-back"])
def test_transform_methods(retriever, method):
    out = tools.transform_query(retriever, {"query": QUERY, "method": method})
    assert 1 <= len(out["queries"]) <= 3
    assert all(isinstance(q, str) and q.strip() for q in out["queries"])
    assert any("Curie" in q or "husband" in q for q in out["queries"])
    assert ("hypothetical" in out) == (method == "hyde")
    if method == "hyde":  # written from the graph's facts about Marie Curie
        assert "Marie Curie" in out["hypothetical"] and "1867" in out["hypothetical"]


def test_transform_decompose_splits_the_multi_hop_question(retriever):
    out = tools.transform_query(retriever, {"query": QUERY, "method": "decompose"})
    assert len(out["queries"]) == 2
    assert "Marie Curie" in out["queries"][0]


def test_transform_clamps_n(retriever):
    query = (
        "Compare Marie Curie, Pierre Curie, Albert Einstein, Niels Bohr, Irène Joliot-Curie, "
        "Wilhelm Röntgen, Frédéric Joliot, Warsaw, Paris, Ulm, Copenhagen and Gdańsk."
    )
    many = tools.transform_query(retriever, {"query": query, "method": "multi-query", "n": 50})
    ten = tools.transform_query(retriever, {"query": query, "method": "multi-query", "n": 10})
    assert len(many["queries"]) == tools.TRANSFORM_MAX_N == 10
    assert many == ten


@pytest.mark.parametrize(
    ("params", "error", "key", "value"),
    [
        ({"query": QUERY, "method": "llm-rewrite"}, Unsupported, "option", "method"),
        ({"query": QUERY}, InvalidParams, "field", "method"),
        ({"query": QUERY, "method": "rewrite", "n": 0}, InvalidParams, "field", "n"),
        ({"query": "", "method": "rewrite"}, InvalidParams, "field", "query"),
        ({"query": {"type": "audio"}, "method": "rewrite"}, Unsupported, "option", "modality"),
    ],
)
def test_transform_errors(retriever, params, error, key, value):
    err = _error(error, tools.transform_query, retriever, params)
    assert err.data[key] == value


def test_transform_capability(retriever):
    methods = tools.transform_capability(retriever)["methods"]
    assert set(methods) == {"rewrite", "hyde", "multi-query", "decompose", "step-back"}


# -- memory -------------------------------------------------------------------------------


def test_memory_build_names_the_live_index(retriever):
    memory_id = f"mem:{retriever.reader.index_version}"
    out = tools.memory_build(retriever, {})
    tokens = sum(count_tokens(c.text) for c in retriever.reader.chunks())
    assert out == {"memoryId": memory_id, "tokens": tokens} and tokens > 0
    again = tools.memory_build(retriever, {"memoryId": memory_id, "scope": "global"})
    assert again == out


@pytest.mark.parametrize(
    ("params", "option"),
    [
        ({"scope": "session"}, "scope"),
        ({"documents": [{"text": "Lise Meitner was a physicist."}]}, "documents"),
    ],
)
def test_memory_build_refusals(retriever, params, option):
    err = _error(Unsupported, tools.memory_build, retriever, params)
    assert err.code == -32005 and err.data["option"] == option
    if option == "documents":
        assert "index/add" in err.message


@pytest.mark.parametrize("call", [tools.memory_build, tools.memory_recall])
def test_memory_of_another_version_is_not_found(retriever, call):
    err = _error(NotFound, call, retriever, {"query": QUERY, "memoryId": "mem:v999999"})
    assert err.code == -32015


def test_memory_recall_clues_seed_the_graph(engine, retriever):
    out = tools.memory_recall(retriever, {"query": QUERY, "n": 6})
    clues = out["clues"]
    assert 1 <= len(clues) <= 6
    weights = [c["weight"] for c in clues]
    assert all(0 < w <= 1 for w in weights) and weights[0] == 1.0
    assert weights == sorted(weights, reverse=True)
    entities = {e.id: e.name for e in retriever.reader.entities()}
    assert any(c["query"] == "Marie Curie" for c in clues)
    for clue in clues:
        assert clue["seedIds"] and all(
            s.startswith("e:") and s in entities for s in clue["seedIds"]
        )
        around = engine.graph({"op": "neighbors", "seedIds": clue["seedIds"]})
        assert set(clue["seedIds"]) <= {n["id"] for n in around["nodes"]}
    facts = [c for c in clues if len(c["seedIds"]) == 2]
    assert facts  # a fact's text names both of its entities
    assert all(entities[s] in c["query"] for c in facts for s in c["seedIds"])


def test_memory_recall_hits_are_the_local_search_chunks(engine, retriever):
    out = tools.memory_recall(retriever, {"query": QUERY, "n": 4, "memoryId": None})
    local = engine.graph({"op": "local", "query": QUERY, "k": 4, "unit": "chunk"})["hits"]
    assert [h["id"] for h in out["hits"]] == [h["id"] for h in local]
    assert len(out["hits"]) == 4 and all(h["unit"] == "chunk" for h in out["hits"])
    assert any("Pierre Curie" in h["text"] for h in out["hits"])


def test_memory_recall_session_sees_each_hit_once(retriever):
    params = {"query": QUERY, "n": 3, "sessionId": "tools-test"}
    first = {h["id"] for h in tools.memory_recall(retriever, params)["hits"]}
    second = {h["id"] for h in tools.memory_recall(retriever, params)["hits"]}
    assert len(first) == 3 and not first & second


def test_memory_recall_invalid_params(retriever):
    assert _error(InvalidParams, tools.memory_recall, retriever, {}).data["field"] == "query"
    err = _error(InvalidParams, tools.memory_recall, retriever, {"query": QUERY, "n": 0})
    assert err.data["field"] == "n"
    assert tools.memory_capability() == {"scopes": ["global"], "clues": True}


# -- threads ------------------------------------------------------------------------------


def test_concurrent_calls_agree_with_serial_ones(science_graph):
    with kgrag.open(science_graph) as engine:
        retriever = engine.retriever()  # fresh: every lazy cache is built under contention
        calls = [
            (tools.rerank, {"query": QUERY, "passages": PASSAGES}),
            (tools.memory_build, {}),
            (tools.memory_recall, {"query": QUERY, "n": 3}),
            (tools.transform_query, {"query": QUERY, "method": "hyde"}),
            (tools.embed, {"inputs": PASSAGES}),
        ] * 3
        with ThreadPoolExecutor(max_workers=8) as pool:
            results = list(pool.map(lambda c: c[0](retriever, c[1]), calls))
        serial = [call(retriever, params) for call, params in calls[:5]]
    for i, result in enumerate(results):
        expected = serial[i % 5]
        if "hits" in expected:  # latency and such aside, the same clues and passages
            assert result["clues"] == expected["clues"]
            assert [h["id"] for h in result["hits"]] == [h["id"] for h in expected["hits"]]
        else:
            assert result == expected
