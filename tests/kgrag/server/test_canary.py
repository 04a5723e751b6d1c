"""Deletion leaves no trace: canary documents, whose facts appear nowhere else, are
added, found, and removed (by ``index/delete``, by ``kgrag delete`` and by editing
their file and ingesting it again); then no answer of any op, over RCP (the explorer's
session routes), the REST route or MCP, carries a word, a document, a chunk or an
entity that came only from them."""

from __future__ import annotations

import http.client
import json
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import rcp

from kgrag.adapters.mcp import call_tool
from kgrag.cli.main import main
from kgrag.server import Graphs, Running, create_app

CANARY = [
    {
        "id": "canary-a",
        "title": "Quibbleton Observatory",
        "text": "Vexmora Kintrell founded the Quibbleton Observatory in Draxholm in 1873. "
        "The Quibbleton Observatory charted the comet Yarrowgast for Vexmora Kintrell.",
    },
    {
        "id": "canary-b",
        "title": "Draxholm",
        "text": "Draxholm is a town on the Snarvik River. Vexmora Kintrell was born in "
        "Draxholm and later moved to Ostrevane, where Kintrell taught astronomy.",
    },
]
#: words of the canaries found in no other document of the science graph
WORDS = ("vexmora", "kintrell", "quibbleton", "draxholm", "yarrowgast", "snarvik", "ostrevane")
QUERIES = (
    "Who founded the Quibbleton Observatory in Draxholm?",
    "Vexmora Kintrell Snarvik River Ostrevane",
    "Which comet did the observatory chart?",
)
UNITS = ("chunk", "document", "node", "triplet", "path", "subgraph", "community", "tree-node")


@pytest.fixture(scope="module")
def served(science_graph: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    root = tmp_path_factory.mktemp("canary") / "science"
    shutil.copytree(science_graph, root)
    graphs = Graphs.open([f"canary={root}"])
    with Running(create_app(graphs)) as running:
        yield running, graphs, root
    graphs.close()


def _client(running: Running) -> rcp.Client:
    """A session on the explorer's route (``/graphs/NAME/s/KEY/rcp``)."""
    return rcp.connect_http(f"{running.url}/graphs/canary/s/{uuid.uuid4().hex}/rcp")


def _rest(running: Running, version: int, body: dict[str, Any]) -> Any:
    host, port = running.url.removeprefix("http://").rsplit(":", 1)
    conn = http.client.HTTPConnection(host, int(port), timeout=120)
    conn.request(
        "POST",
        f"/v{version}/retrieval/query",
        json.dumps(body).encode(),
        {"Content-Type": "application/json"},
    )
    resp = conn.getresponse()
    out = json.loads(resp.read())
    conn.close()
    assert resp.status == 200, out
    return out


def _answers(running: Running, graphs: Graphs) -> dict[str, Any]:
    """Every op's answer to the canary questions, by where it came from."""
    c = _client(running)
    out: dict[str, Any] = {}
    for i, q in enumerate(QUERIES):
        for unit in UNITS:
            out[f"retrieve/{unit}/{i}"] = c.call(
                "retrieve", {"query": q, "k": 10, "unit": unit, "includeText": True}
            )
        for op in ("local", "global", "drift"):
            out[f"{op}/{i}"] = c.graph(op, {"query": q, "k": 10, "includeText": True})
        seeds = [h["id"] for h in out[f"local/{i}"]["hits"] if h["unit"] in ("node", "chunk")]
        out[f"neighbors/{i}"] = c.graph("neighbors", {"seedIds": seeds[:8], "hops": 2})
        for v in (1, 2):
            out[f"rest/v{v}/{i}"] = _rest(running, v, {"query": q, "top_k": 10})
        for tool in ("retrieve", "local_search", "global_search", "drift_search"):
            result = call_tool(graphs, tool, {"query": q}, writable=False)
            assert not result.is_error, result
            out[f"mcp/{tool}/{i}"] = result.model_dump(mode="json")
        result = call_tool(graphs, "neighbors", {"seedIds": seeds[:8]}, writable=False)
        out[f"mcp/neighbors/{i}"] = result.model_dump(mode="json")
    levels = {m["level"] for m in c.graph("communities", {})["communities"]}
    for level in sorted(levels):
        out[f"communities/{level}"] = c.graph("communities", {"level": level})
    c.shutdown()
    return out


def _traces(answers: dict[str, Any], ids: set[str]) -> dict[str, list[str]]:
    """Per answer, the canary words and ids it carries."""
    found = {}
    for where, answer in answers.items():
        text = json.dumps(answer).lower()
        for q in QUERIES:  # the question as echoed back is not evidence
            text = text.replace(q.lower(), "")
        marks = [w for w in WORDS if w in text] + [i for i in ids if i.lower() in text]
        if marks:
            found[where] = marks
    return found


def _canary_ids(answers: dict[str, Any]) -> set[str]:
    """The documents, chunks and entities the canaries brought (read off the answers
    before their deletion: every hit whose text names a canary word)."""
    ids = {"d:canary-a", "d:canary-b"}
    for answer in answers.values():
        hits = answer.get("hits", []) if isinstance(answer, dict) else []
        for h in hits:
            if h.get("unit") in ("chunk", "node") and any(
                w in (h.get("text") or "").lower() for w in WORDS
            ):
                ids.add(h["id"])
    return ids


def test_deleted_canaries_leave_no_trace_in_any_answer(served, tmp_path: Path):
    running, graphs, root = served
    c = _client(running)
    assert c.index_add({"documents": CANARY})["ids"] == ["d:canary-a", "d:canary-b"]
    present = _answers(running, graphs)
    ids = _canary_ids(present)
    seen = _traces(present, ids)
    # the probes do reach the canaries: each kind of answer carried them
    for where in ("retrieve/chunk/0", "retrieve/node/1", "local/0", "drift/0", "rest/v2/0"):
        assert where in seen, where
    assert any(k.startswith("communities/") for k in seen)
    assert any(k.startswith("retrieve/tree-node/") for k in seen)
    assert any(k.startswith("mcp/local_search/") for k in seen)
    assert len(ids) > 4  # chunks and entities, not only the documents

    # 1. index/delete
    assert c.index_delete({"ids": ["canary-a", "canary-b"]})["deleted"] == 2
    assert _traces(_answers(running, graphs), ids) == {}

    # 2. kgrag delete
    assert c.index_add({"documents": CANARY})["ids"] == ["d:canary-a", "d:canary-b"]
    assert main(["delete", "canary-a", "canary-b", "--graph", str(root)]) == 0
    assert _traces(_answers(running, graphs), ids) == {}

    # 3. an edited file ingested again: its canary facts go, its new text stays
    source = tmp_path / "notes" / "observatory.md"
    source.parent.mkdir()
    source.write_text("# Quibbleton Observatory\n\n" + " ".join(d["text"] for d in CANARY))
    assert main(["ingest", str(source), "--graph", str(root), "--quiet"]) == 0
    assert "retrieve/chunk/0" in _traces(_answers(running, graphs), ids)
    source.write_text("# The Larch Library\n\nThe Larch Library lends atlases to sailors.\n")
    assert main(["ingest", str(source), "--graph", str(root), "--quiet"]) == 0
    assert _traces(_answers(running, graphs), ids) == {}
    (top,) = c.retrieve("Which library lends atlases to sailors?", 1)
    assert "Larch Library lends atlases" in top["text"]
