"""The wire models hold a result to its shape: cheaply (an object whose top-level
fields the model declares) or whole (nested shapes and all)."""

from __future__ import annotations

from kgrag.rcp import wire

HIT = {"id": "c:1", "score": 0.5, "unit": "chunk", "provenance": {"leaves": ["c:1"]}}


def test_the_cheap_check_reads_only_the_top_level_fields():
    good = {"hits": [HIT | {"typo": 1}], "indexVersion": "v1", "usage": {}}
    assert wire.check_result(wire.RetrieveResult, good) is None  # nested shapes: whole only
    assert "typo" in str(wire.check_result(wire.RetrieveResult, good, whole=True))
    bad = {"hits": [], "hit": []}
    assert wire.check_result(wire.RetrieveResult, bad) == "undeclared result fields: hit"
    assert "not an object" in str(wire.check_result(wire.RetrieveResult, [HIT]))
