"""Packed ids (kgrag.store.packed): every id survives the round trip, content ids take
17 bytes and sort as their text, and stored rows read back as the records written."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from kgrag.errors import StoreError
from kgrag.ids import content_id
from kgrag.store.packed import (
    column_ids,
    community_rows,
    community_values,
    filled_copies,
    id_column,
    pack_id,
    pack_ids,
    relation_text,
    relation_values,
    row_text,
    unpack_id,
    unpack_ids,
)
from kgrag.store.schema import community, relation
from kgrag.text.keys import COOC
from kgrag.types import Community, CommunityReport, Relation

CONTENT = [content_id(kind, f"x{i}") for i, kind in enumerate(("entity", "chunk", "relation"))]
OTHER = ["e:d", "c:1", "mine", "", "é:ü", "r:" + "A" * 32, "r:" + "0" * 31]


def test_every_id_survives_and_content_ids_take_17_bytes():
    for id_ in CONTENT + OTHER:
        assert unpack_id(pack_id(id_)) == id_
    assert all(len(pack_id(i)) == 17 for i in CONTENT)
    assert all(pack_id(i)[0] == 0 for i in OTHER)  # upper-case hex or 31 digits: text
    assert unpack_id("e:already-text") == "e:already-text"  # a row of an older version
    for ids in ([], CONTENT, OTHER, CONTENT + OTHER + CONTENT):
        assert unpack_ids(pack_ids(ids)) == tuple(ids)
    with pytest.raises(ValueError, match="too long"):
        pack_ids(["x" * 70_000])


def test_content_ids_of_a_kind_sort_as_their_text():
    ids = sorted(content_id("relation", str(i)) for i in range(500))
    assert sorted(ids, key=pack_id) == ids


def test_a_relation_row_reads_back_as_the_relation_written():
    stated = Relation(CONTENT[2], CONTENT[0], "be born in", "e:d", 2.0, "svo", (CONTENT[1], "c:1"))
    cooc = Relation(content_id("relation", "c"), "e:d", COOC, CONTENT[0], 1.0, "cooc", ())
    for r in (stated, cooc):
        row = relation_values(r)
        assert relation(row) == r
        assert relation(relation_text(row)) == r  # as a Neo4j record keeps it
        assert row_text("relations", row) == relation_text(row)
    assert relation_values(cooc)[2] is None  # the co-occurrence predicate is not stored
    odd = Relation("r:x", "e:a", COOC, "e:b", 1.0, "svo", ())  # the predicate, not a co-occurrence
    assert relation_values(odd)[2] == COOC and relation(relation_values(odd)) == odd


def test_a_community_row_reads_back_as_the_community_written():
    report = CommunityReport("T", ("A", "B"), ("A -be-> B",), ("A is B.",))
    c = Community(
        content_id("community", "1"), 1, None, (), tuple(CONTENT[:1]), report, 7.5, ("c:1",)
    )
    row = community_values(c)
    assert community(row) == c and community(row_text("communities", row)) == c
    assert isinstance(row[4], bytes) and row_text("communities", row)[4] == f'["{CONTENT[0]}"]'


def test_an_id_column_keeps_every_byte_of_a_packed_id():
    """Packed ids as a (n, 17) matrix, not numpy's ``S17``, which drops trailing zero
    bytes: a hash ending in 00 comes back whole; ids that are not all content ids stay
    text."""
    zero_tail = "r:" + "ab" * 15 + "00"
    ids = [*CONTENT, zero_tail]
    column = id_column(ids)
    assert column.shape == (4, 17) and column.dtype == np.uint8
    assert column_ids(column) == ids and column_ids(column[[3, 0]]) == [zero_tail, CONTENT[0]]
    assert column_ids(id_column([pack_id(i) for i in ids])) == ids  # as SQLite returns them
    mixed = id_column([CONTENT[0], "r:1"])
    assert mixed.ndim == 1 and column_ids(mixed) == [CONTENT[0], "r:1"]
    assert column_ids(id_column([])) == []


def test_copies_are_stored_as_nulls_and_filled_from_their_children():
    report = CommunityReport("T", ("A",), (), ("A is.",))
    leaf = Community("m:0", 0, "m:1", (), ("e:a",), report, 2.0, ("c:1",))
    copy = Community("m:1", 1, "m:2", ("m:0",), ("e:a",), report, 3.0, ("c:1",))
    top = Community("m:2", 2, None, ("m:1",), ("e:a",), report, 4.0, ("c:1",))
    rows = community_rows([leaf, copy, top])
    assert rows[0] == community_values(leaf)
    assert [r[4:6] + r[7:] for r in rows[1:]] == [(None, None, None)] * 2
    assert rows[2][6] == 4.0  # a copy keeps its own rating
    everything = {r[0]: r for r in rows}
    fetched: list[list[str]] = []

    def fetch(ids: list[str]) -> list[tuple]:
        fetched.append(ids)
        return [everything[i] for i in ids if i in everything]

    assert [community(r) for r in filled_copies(rows, fetch)] == [leaf, copy, top]
    assert fetched == []  # every child was among the rows
    assert [community(r) for r in filled_copies(rows[2:], fetch)] == [top]
    assert fetched == [["m:1"], ["m:0"]]  # down the chain
    differs = replace(copy, report=replace(report, title="U"))
    assert community_rows([leaf, differs])[1] == community_values(differs)
    del everything["m:0"]
    with pytest.raises(StoreError, match="m:0"):
        filled_copies(rows[1:2], fetch)
