"""The method table is the server's boundary: every engine-backed method declares its
result's model (:mod:`kgrag.rcp.wire`), and a result of another shape is caught on its
way out (logged by the cheap check, refused by the whole one)."""

from __future__ import annotations

import logging

import pytest

from kgrag.rcp import wire
from kgrag.server.methods import TABLE, ResultShapeError
from kgrag.server.protocol import GATES

HIT = {"id": "c:1", "score": 0.5, "unit": "chunk", "provenance": {"leaves": ["c:1"]}}


def test_every_engine_method_declares_its_result_model():
    engine_backed = {m for m, gate in GATES.items() if gate is not None}
    advertised_but_absent = {"embed/sparse", "embed/multi"}  # never offered here
    assert set(TABLE) == engine_backed - advertised_but_absent
    assert all(issubclass(m.result, wire.BaseModel) for m in TABLE.values())


def test_a_result_of_the_wrong_shape_is_logged_or_refused(caplog: pytest.LogCaptureFixture):
    method = TABLE["memory/recall"]
    right = {"clues": [{"query": "Warsaw", "seedIds": ["e:1"], "weight": 1.0}], "hits": [HIT]}
    method.check(right, whole=True)
    wrong = right | {"hits": [HIT | {"score": "high"}]}
    with caplog.at_level(logging.ERROR, logger="kgrag.server"):
        method.check(wrong, whole=False)  # top-level fields are right: nothing to say
        method.check(wrong | {"extra": 1}, whole=False)
    assert [r.getMessage() for r in caplog.records] == [
        "memory/recall result is not a MemoryRecallResult: undeclared result fields: extra"
    ]
    with pytest.raises(ResultShapeError, match=r"memory/recall: hits\.0\.score"):
        method.check(wrong, whole=True)


def test_every_result_model_rejects_unknown_fields():
    for method in TABLE.values():
        assert method.result.model_config.get("extra") == "forbid", method.name
