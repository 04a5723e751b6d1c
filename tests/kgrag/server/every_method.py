"""One pass of the rcp-protocol client over every method kgrag advertises; run over
each transport by the server tests."""

from __future__ import annotations

import uuid

import rcp


def exercise_every_method(c: rcp.Client) -> None:
    """Call each advertised method through the SDK client and check what comes back."""
    caps = c.capabilities
    offered = {"retrieve", "graph", "embed", "rerank", "transform", "index", "feedback", "memory"}
    assert offered <= set(caps) and "streaming" in caps
    assert c.ping(42) == {"nonce": 42}
    assert c.info()["capabilities"] == caps
    hits = c.retrieve("Where was Pierre Curie born?", 3, {"mode": "hybrid"})
    assert 1 <= len(hits) <= 3 and all(h["unit"] == "chunk" for h in hits)
    assert "Paris" in hits[0]["text"]
    local = c.graph("local", {"query": "Which river flows through the capital of Poland?", "k": 2})
    assert local["hits"] and local["hits"][0]["provenance"]["leaves"]
    assert set(c.graph("global", {"query": "physicists"})) >= {"summary", "communities"}
    assert "followups" in c.graph("drift", {"query": "physicists and rivers", "k": 2})
    communities = c.graph("communities", {})["communities"]
    assert communities and {"id", "level", "summary"} <= set(communities[0])
    node = c.retrieve("Marie Curie", 1, {"unit": "node"})[0]
    near = c.graph("neighbors", {"seedIds": [node["id"]], "hops": 1})
    assert any(n["id"] == node["id"] for n in near["nodes"])
    vectors = c.embed(["rivers", "physics"])
    assert len(vectors) == 2 and len(vectors[0]) == caps["embed"]["dimension"]
    packed = c.call("embed", {"inputs": ["rivers"], "encoding": "f32-base64"})
    decoded = rcp.decode_vectors(packed["vectors"], packed["encoding"], packed["dimension"])
    assert max(abs(a - b) for a, b in zip(decoded[0], vectors[0], strict=True)) < 1e-5
    scores = c.rerank(
        "Where was Einstein born?", ["Cars have wheels.", "Einstein was born in Ulm."]
    )
    assert scores[1] > scores[0]
    queries = c.transform("Who discovered radium and where was she born?", "decompose")["queries"]
    assert queries and all(isinstance(q, str) for q in queries)
    memory = c.memory_build()
    recall = c.memory_recall("Where was Pierre Curie born?", memory_id=memory["memoryId"], n=3)
    assert recall["clues"] and all(clue.get("seedIds") for clue in recall["clues"])
    assert c.feedback([{"hitId": hits[0]["id"], "used": True}]) == {"accepted": 1}
    doc_id = f"every-{uuid.uuid4().hex[:8]}"
    text = "The quokka is a small marsupial that lives on Rottnest Island."
    added = c.index_add({"documents": [{"id": doc_id, "text": text}]})
    assert added["ids"] == [f"d:{doc_id}"]
    found = c.retrieve("quokka marsupial Rottnest Island", 3)
    assert found[0]["chunk"]["docId"] == f"d:{doc_id}"
    assert c.index_delete({"ids": [doc_id]})["deleted"] == 1
    c.shutdown()
