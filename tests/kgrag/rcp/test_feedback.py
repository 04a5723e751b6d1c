"""The ``feedback`` method (RCP §7.16): signals validated and stored in a real
``feedback.sqlite``, and integrity reports sinking hits of later calls only."""

from __future__ import annotations

import math
import os
import shutil
import sqlite3
import threading
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from kgrag.config import RetrievalConfig
from kgrag.encoders import Encoder, load_encoder
from kgrag.engine.graph import GraphOps
from kgrag.errors import InvalidParams, PayloadTooLarge
from kgrag.rcp.feedback import FILENAME, MAX_SIGNALS, FeedbackStore, Flag
from kgrag.rcp.wire import GraphResult, RetrieveResult
from kgrag.retrieval.pipeline import Retriever
from kgrag.store import open_store

QUERY = {"query": "Where was Marie Curie born?", "k": 12}
BRIDGE_Q = "Which river flows through the city where Marie Curie was born?"


@pytest.fixture(scope="module")
def encoder(science_reader) -> Encoder:
    return load_encoder(science_reader.manifest["models"]["embedding"], 16, "cpu")


@pytest.fixture
def graph(science_graph: Path, tmp_path: Path) -> Path:
    """A private copy of the session graph: feedback.sqlite is written into it."""
    return Path(shutil.copytree(science_graph, tmp_path / "science"))


@pytest.fixture
def store(graph: Path):
    with FeedbackStore(graph) as fs:
        yield fs


@pytest.fixture
def make_retriever(graph: Path, encoder: Encoder):
    readers = []

    def make(feedback: FeedbackStore | None, enc: Encoder = encoder) -> Retriever:
        readers.append(open_store(graph).reader())
        return Retriever(readers[-1], enc, RetrievalConfig(), feedback=feedback)

    yield make
    for reader in readers:
        reader.close()


def _strip(result: dict) -> dict:
    result["usage"].pop("latencyMs", None)
    return result


def _poison(store: FeedbackStore, hit_id: str, **extra: bool) -> None:
    assert store.record({"signals": [{"hitId": hit_id, "poisonSuspected": True, **extra}]}) == {
        "accepted": 1
    }


# -- params and storage -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ([], "params"),
        ({}, "signals"),
        ({"signals": "c:1"}, "signals"),
        ({"signals": [{"used": True}]}, "signals.0.hitId"),
        ({"signals": [{"hitId": 7}]}, "signals.0.hitId"),
        ({"signals": [{"hitId": ""}]}, "signals.0.hitId"),
        (
            {"signals": [{"hitId": "a"}, {"hitId": "b"}, {"hitId": "c", "reward": 1.5}]},
            "signals.2.reward",
        ),
        ({"signals": [{"hitId": "a", "reward": -1.01}]}, "signals.0.reward"),
        ({"signals": [{"hitId": "a", "reward": float("nan")}]}, "signals.0.reward"),
        ({"signals": [{"hitId": "a", "reward": float("inf")}]}, "signals.0.reward"),
        ({"signals": [{"hitId": "a", "reward": True}]}, "signals.0.reward"),
        ({"signals": [{"hitId": "a", "reward": "0.5"}]}, "signals.0.reward"),
        ({"signals": [{"hitId": "a", "poisonSuspected": "yes"}]}, "signals.0.poisonSuspected"),
        ({"signals": [{"hitId": "a", "used": 1}]}, "signals.0.used"),
        ({"signals": [{"hitId": "a"}, "a"]}, "signals.1"),
        ({"sessionId": 3, "signals": []}, "sessionId"),
        ({"query": ["x"], "signals": []}, "query"),
    ],
)
def test_invalid_params_name_the_field_and_record_nothing(store, params, field):
    with pytest.raises(InvalidParams) as err:
        store.record(params)
    assert err.value.code == -32602
    assert err.value.data["field"] == field
    assert store.signals("a") == []


def test_too_many_signals_is_payload_too_large(store):
    signals = [{"hitId": f"c:{i}", "poisonSuspected": True} for i in range(MAX_SIGNALS + 1)]
    with pytest.raises(PayloadTooLarge) as err:
        store.record({"signals": signals})
    assert err.value.code == -32013 and err.value.data["field"] == "signals"
    assert store.flagged() == {}
    assert store.record({"signals": signals[:MAX_SIGNALS]}) == {"accepted": MAX_SIGNALS}
    assert len(store.flagged()) == MAX_SIGNALS


def test_accepted_counts_every_signal_and_stores_its_fields(store, graph):
    assert store.persistent and store.flagged() == {} and store.signals("c:a") == []
    assert not (graph / FILENAME).exists()  # serving a graph writes nothing into it
    assert store.record({"signals": []}) == {"accepted": 0}
    assert (graph / FILENAME).is_file()
    result = store.record(
        {
            "sessionId": "s1",
            "query": "q" * 5000,
            "unknown": {"ignored": True},
            "signals": [
                {"hitId": "c:a", "used": True, "cited": False, "reward": 0.8, "future": 1},
                {"hitId": "c:b", "helpful": False, "reward": -1},
                {"hitId": "c:a", "poisonSuspected": False, "injectionSuspected": False},
            ],
        }
    )
    assert result == {"accepted": 3}
    first, second = store.signals("c:a")
    assert first["session_id"] == "s1" and len(first["query"]) == 2000
    assert (first["used"], first["cited"], first["helpful"], first["reward"]) == (1, 0, None, 0.8)
    assert (second["poison"], second["injection"]) == (0, 0)
    assert store.signals("c:b")[0]["reward"] == -1.0
    assert store.flagged() == {}  # nothing here is an integrity report


def test_reports_survive_reopening_and_false_never_clears_them(graph):
    with FeedbackStore(graph) as fs:
        _poison(fs, "c:x")
        fs.record({"signals": [{"hitId": "c:y", "injectionSuspected": True}]})
    with FeedbackStore(graph) as fs:
        assert fs.persistent
        assert fs.flagged() == {"c:x": Flag(1, 0), "c:y": Flag(0, 1)}
        fs.record({"signals": [{"hitId": "c:x", "poisonSuspected": False}]})
        _poison(fs, "c:x")
        assert fs.flagged()["c:x"] == Flag(2, 0)
    with sqlite3.connect(graph / FILENAME) as db:
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert db.execute("SELECT COUNT(*) FROM feedback").fetchone()[0] == 4


def test_reports_from_another_connection_are_seen(graph):
    """Another process writing the same file (a second server, the CLI)."""
    with FeedbackStore(graph) as serving, FeedbackStore(graph) as other:
        assert serving.flagged() == {}
        _poison(other, "c:x")
        assert serving.flagged() == {"c:x": Flag(1, 0)}


def test_concurrent_records_are_all_kept(store):
    def send(t: int) -> None:
        for i in range(20):
            store.record({"signals": [{"hitId": f"c:{t}-{i}", "poisonSuspected": True}] * 2})

    threads = [threading.Thread(target=send, args=(t,)) for t in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    flags = store.flagged()
    assert len(flags) == 160 and set(flags.values()) == {Flag(2, 0)}


def test_snapshots_are_immutable(store):
    before = store.flagged()
    _poison(store, "c:x")
    assert "c:x" not in before and "c:x" in store.flagged()
    with pytest.raises(TypeError):
        before["c:y"] = Flag(1, 0)  # type: ignore[index]


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="root ignores permissions")
def test_read_only_folder_keeps_feedback_in_memory(graph):
    with FeedbackStore(graph) as fs:
        _poison(fs, "c:old")
    os.chmod(graph, 0o555)
    try:
        with FeedbackStore(graph) as fs:
            assert not fs.persistent and "memory" in fs.reason
            assert fs.flagged() == {"c:old": Flag(1, 0)}  # old reports still apply
            _poison(fs, "c:new")
            assert set(fs.flagged()) == {"c:old", "c:new"}
        os.chmod(graph, 0o755)
        with FeedbackStore(graph) as fs:
            assert set(fs.flagged()) == {"c:old"}  # "c:new" lived in memory only
        (graph / FILENAME).unlink()
        os.chmod(graph, 0o555)
        with FeedbackStore(graph) as fs:  # no file yet, and none can be made
            assert not fs.persistent
            _poison(fs, "c:new")
            assert set(fs.flagged()) == {"c:new"}
    finally:
        os.chmod(graph, 0o755)


def test_a_broken_file_or_no_folder_keeps_feedback_in_memory(graph):
    (graph / FILENAME).write_bytes(b"not a database, " * 100)
    with FeedbackStore(graph) as fs:
        assert not fs.persistent and "memory" in fs.reason
        _poison(fs, "c:x")
        assert fs.flagged() == {"c:x": Flag(1, 0)}
    assert (graph / FILENAME).read_bytes() == b"not a database, " * 100
    with FeedbackStore(None) as fs:
        assert not fs.persistent
        assert fs.record({"signals": [{"hitId": "c:x"}]}) == {"accepted": 1}


# -- effect on retrieve ------------------------------------------------------------------


def test_poisoned_top_hit_sinks_below_every_other_hit(store, make_retriever):
    retriever = make_retriever(store)
    before = retriever.retrieve(QUERY)
    ids = [h["id"] for h in before["hits"]]
    assert before["hits"][0]["citation"]["title"] == "Marie Curie" and len(ids) >= 5
    top = ids[0]
    _poison(store, top)
    after = retriever.retrieve(QUERY)
    RetrieveResult.model_validate(after)
    assert [h["id"] for h in after["hits"]] == [*ids[1:], top]
    scores = [h["score"] for h in after["hits"]]
    assert all(math.isfinite(s) for s in scores)
    assert scores == sorted(scores, reverse=True) and scores[-1] < scores[-2]
    sunk = after["hits"][-1]
    assert sunk["trust"]["level"] == "untrusted" and not sunk["trust"]["injectionSuspected"]
    assert sunk["scores"]["feedback"] < 0
    assert math.isclose(sunk["score"], before["hits"][0]["score"] + sunk["scores"]["feedback"])
    assert all("feedback" not in h["scores"] for h in after["hits"][:-1])
    assert all(h["trust"]["level"] != "untrusted" for h in after["hits"][:-1])
    assert "1 candidates down-weighted by feedback" in after["usage"]["notes"]
    page = retriever.retrieve(QUERY | {"k": 3})
    assert top not in [h["id"] for h in page["hits"]]  # it moved to the last page


def test_injection_report_marks_trust(store, make_retriever):
    retriever = make_retriever(store)
    ids = [h["id"] for h in retriever.retrieve(QUERY)["hits"]]
    store.record({"signals": [{"hitId": ids[1], "injectionSuspected": True}]})
    hits = {h["id"]: h for h in retriever.retrieve(QUERY)["hits"]}
    assert hits[ids[1]]["trust"]["injectionSuspected"] is True
    assert hits[ids[1]]["trust"]["level"] == "untrusted"
    assert not any(h["trust"]["injectionSuspected"] for i, h in hits.items() if i != ids[1])


def test_other_signals_are_stored_but_change_nothing(store, make_retriever):
    retriever = make_retriever(store)
    before = _strip(retriever.retrieve(QUERY))
    top = before["hits"][0]["id"]
    signals = [
        {"hitId": top, "used": True, "cited": True, "helpful": False, "reward": -1},
        {"hitId": top, "poisonSuspected": False, "injectionSuspected": False},
    ]
    assert store.record({"sessionId": "s", "signals": signals}) == {"accepted": 2}
    assert _strip(retriever.retrieve(QUERY)) == before
    assert len(store.signals(top)) == 2


def test_without_a_store_reports_have_no_effect(store, make_retriever):
    plain = make_retriever(None)
    before = _strip(plain.retrieve(QUERY))
    _poison(store, before["hits"][0]["id"])
    assert _strip(plain.retrieve(QUERY)) == before


class _Paused(Encoder):
    """The real encoder, holding its first call until released."""

    def __init__(self, inner: Encoder) -> None:
        self.inner, self.model_id, self.dim = inner, inner.model_id, inner.dim
        self.entered, self.release = threading.Event(), threading.Event()

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        if not self.entered.is_set():
            self.entered.set()
            assert self.release.wait(60)
        return self.inner.encode(texts)


def test_a_call_in_flight_is_not_altered(store, make_retriever, encoder):
    paused = _Paused(encoder)
    retriever = make_retriever(store, paused)
    top = make_retriever(store).retrieve(QUERY)["hits"][0]["id"]
    results: list[dict] = []
    worker = threading.Thread(target=lambda: results.append(retriever.retrieve(QUERY)))
    worker.start()
    try:
        assert paused.entered.wait(60)  # the call has started and is encoding the query
        _poison(store, top)
    finally:
        paused.release.set()
        worker.join(60)
    assert results[0]["hits"][0]["id"] == top
    assert results[0]["hits"][0]["trust"]["level"] != "untrusted"
    assert retriever.retrieve(QUERY)["hits"][-1]["id"] == top  # the next call applies it


# -- effect on graph ---------------------------------------------------------------------


def test_graph_local_hits_sink_within_their_unit(store, make_retriever):
    retriever = make_retriever(store)
    params = {"op": "local", "query": BRIDGE_Q, "k": 8}
    before = _strip(GraphOps(retriever).run(params))
    by_unit = {u: [h for h in before["hits"] if h["unit"] == u] for u in ("chunk", "node")}
    assert len(by_unit["chunk"]) >= 3 and len(by_unit["node"]) >= 2
    chunk, node = by_unit["chunk"][0]["id"], by_unit["node"][0]["id"]
    _poison(store, chunk)
    store.record({"signals": [{"hitId": node, "injectionSuspected": True}]})
    after = _strip(GraphOps(retriever).run(params))
    GraphResult.model_validate(after)
    assert [h["unit"] for h in after["hits"]] == [h["unit"] for h in before["hits"]]
    for unit, flagged in (("chunk", chunk), ("node", node)):
        old = [h["id"] for h in by_unit[unit]]
        new = [h for h in after["hits"] if h["unit"] == unit]
        assert [h["id"] for h in new] == [i for i in old if i != flagged] + [flagged]
        scores = [h["score"] for h in new]
        assert scores == sorted(scores, reverse=True) and all(map(math.isfinite, scores))
        assert new[-1]["trust"]["level"] == "untrusted" and new[-1]["scores"]["feedback"] < 0
    assert [h for h in after["hits"] if h["unit"] == "node"][-1]["trust"]["injectionSuspected"]
    others = [h for h in after["hits"] if h["id"] not in (chunk, node)]
    assert others == [h for h in before["hits"] if h["id"] not in (chunk, node)]
    assert "2 hits down-weighted by feedback" in after["usage"]["notes"]


def test_retrieve_path_unit_hits_sink(store, make_retriever):
    retriever = make_retriever(store)
    params = {"query": BRIDGE_Q, "unit": "path", "k": 5}
    ids = [h["id"] for h in retriever.retrieve(params)["hits"]]
    assert len(ids) >= 2
    _poison(store, ids[0])
    hits = retriever.retrieve(params)["hits"]
    assert [h["id"] for h in hits] == [*ids[1:], ids[0]]
    assert hits[-1]["trust"] == {"level": "untrusted"} and hits[-1]["score"] < hits[-2]["score"]


def test_memory_recall_hits_sink_like_graph_local_hits(store, make_retriever):
    from kgrag.engine.tools import memory_recall

    retriever = make_retriever(store)
    before = [h["id"] for h in memory_recall(retriever, {"query": BRIDGE_Q, "n": 5})["hits"]]
    assert len(before) >= 3
    _poison(store, before[0])
    after = memory_recall(retriever, {"query": BRIDGE_Q, "n": 5})["hits"]
    assert [h["id"] for h in after] == before[1:] + before[:1]
    assert after[-1]["trust"]["level"] == "untrusted"
