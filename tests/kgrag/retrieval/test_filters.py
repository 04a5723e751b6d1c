"""RCP §8 metadata filters: inference, validation errors and evaluation."""

from __future__ import annotations

from datetime import date, datetime, timezone

import pytest

from kgrag.errors import InvalidParams, Unsupported
from kgrag.retrieval.filters import BUILTIN_FIELDS, OPERATORS, compile_filter, infer_fields

FIELDS = {
    "docId": "keyword",
    "title": "keyword",
    "section": "text",
    "lang": "keyword",
    "year": "int",
    "rating": "float",
    "open": "bool",
    "published": "date",
    "tags": "keyword",
    "counts": "int",
}

DOCS = {
    "a": {
        "docId": "a",
        "title": "Danube",
        "section": "Rivers > Europe",
        "lang": "en",
        "year": 2019,
        "rating": 4.5,
        "open": True,
        "published": "2019-06-12T00:00:00Z",
        "tags": ["river", "europe"],
        "counts": [1, 2],
    },
    "b": {
        "docId": "b",
        "title": "Nile",
        "section": "Rivers > Africa",
        "lang": "fr",
        "year": 2021,
        "rating": 3,
        "open": False,
        "published": 1640995200000,  # 2022-01-01T00:00:00Z in epoch-ms
        "tags": ["river", "africa"],
    },
    "c": {"docId": "c", "title": "Alps", "section": "Mountains", "lang": None, "year": 2020},
}


def matching(node, fields=FIELDS, operators=OPERATORS) -> list[str]:
    pred = compile_filter(node, fields, operators)
    assert pred is not None
    return sorted(k for k, meta in DOCS.items() if pred(meta))


def leaf(field, op, value):
    return {"field": field, "op": op, "value": value}


# ── evaluation ───────────────────────────────────────────────────────────────
@pytest.mark.parametrize(
    ("node", "expected"),
    [
        (leaf("lang", "eq", "en"), ["a"]),
        (leaf("lang", "ne", "en"), ["b", "c"]),  # c has lang null: ne is true
        (leaf("lang", "in", ["en", "fr"]), ["a", "b"]),
        (leaf("lang", "nin", ["en"]), ["b", "c"]),
        (leaf("title", "contains", "an"), ["a"]),
        (leaf("title", "contains", "dan"), []),  # case-sensitive
        (leaf("section", "contains", "Rivers"), ["a", "b"]),
        (leaf("section", "eq", "Mountains"), ["c"]),
    ],
)
def test_string_operators(node, expected):
    assert matching(node) == expected


@pytest.mark.parametrize(
    ("node", "expected"),
    [
        (leaf("year", "eq", 2020), ["c"]),
        (leaf("year", "ne", 2020), ["a", "b"]),
        (leaf("year", "gt", 2020), ["b"]),
        (leaf("year", "gte", 2020), ["b", "c"]),
        (leaf("year", "lt", 2020), ["a"]),
        (leaf("year", "lte", 2020), ["a", "c"]),
        (leaf("year", "in", [2019, 2021]), ["a", "b"]),
        (leaf("year", "nin", [2019, 2021]), ["c"]),
        (leaf("year", "gt", 2019.5), ["b", "c"]),
        (leaf("rating", "gte", 3.0), ["a", "b"]),  # int 3 stored, float compared
        (leaf("rating", "eq", 3), ["b"]),
        (leaf("rating", "lt", 4), ["b"]),  # c has no rating: comparisons false
    ],
)
def test_numeric_operators(node, expected):
    assert matching(node) == expected


@pytest.mark.parametrize(
    ("node", "expected"),
    [
        (leaf("open", "eq", True), ["a"]),
        (leaf("open", "eq", False), ["b"]),
        (leaf("open", "ne", True), ["b", "c"]),
        (leaf("open", "in", [False]), ["b"]),
    ],
)
def test_bool_operators(node, expected):
    assert matching(node) == expected


def test_bool_is_not_a_number():
    pred = compile_filter(leaf("year", "eq", 1), FIELDS)
    assert pred({"year": True}) is False
    pred = compile_filter(leaf("open", "eq", True), FIELDS)
    assert pred({"open": 1}) is False


@pytest.mark.parametrize(
    ("node", "expected"),
    [
        (leaf("published", "gte", "2020-01-01"), ["b"]),
        (leaf("published", "lt", "2020-01-01T00:00:00+00:00"), ["a"]),
        (leaf("published", "lt", 1577836800000), ["a"]),  # 2020-01-01 in epoch-ms
        (leaf("published", "eq", "2022-01-01T01:00:00+01:00"), ["b"]),  # same instant
        (leaf("published", "eq", 1560297600000), ["a"]),
        (leaf("published", "gt", "2019-06-12T00:00:00"), ["b"]),  # naive reads as UTC
        (leaf("published", "lte", "2019-06-12T00:00:00"), ["a"]),
        (leaf("published", "in", ["2019-06-12T00:00:00Z", 0]), ["a"]),
    ],
)
def test_date_operators(node, expected):
    assert matching(node) == expected


def test_date_accepts_python_dates_in_metadata():
    pred = compile_filter(leaf("published", "gt", "2020-05-01"), FIELDS)
    assert pred({"published": date(2020, 5, 2)})
    assert pred({"published": datetime(2020, 5, 1, 12)})  # naive datetime is UTC
    assert not pred({"published": datetime(2020, 5, 1, tzinfo=timezone.utc)})
    assert not pred({"published": "not a date"})


@pytest.mark.parametrize(
    ("node", "expected"),
    [
        (leaf("tags", "contains", "river"), ["a", "b"]),
        (leaf("tags", "contains", "riv"), []),  # element membership, not substring
        (leaf("tags", "eq", "europe"), ["a"]),  # any element
        (leaf("tags", "ne", "europe"), ["b", "c"]),  # no element
        (leaf("tags", "in", ["africa", "asia"]), ["b"]),
        (leaf("tags", "nin", ["africa", "asia"]), ["a", "c"]),
        (leaf("counts", "contains", 2), ["a"]),
        (leaf("counts", "gt", 1), ["a"]),
    ],
)
def test_list_fields(node, expected):
    assert matching(node) == expected


@pytest.mark.parametrize(
    ("node", "expected"),
    [
        (leaf("rating", "exists", True), ["a", "b"]),
        (leaf("rating", "exists", False), ["c"]),
        ({"field": "rating", "op": "exists"}, ["a", "b"]),  # value defaults to true
        (leaf("lang", "exists", False), ["c"]),  # null counts as absent
    ],
)
def test_exists(node, expected):
    assert matching(node) == expected


def test_boolean_combinators_nest():
    node = {
        "and": [
            leaf("tags", "contains", "river"),
            {"or": [leaf("year", "gte", 2021), {"not": leaf("lang", "eq", "fr")}]},
        ]
    }
    assert matching(node) == ["a", "b"]
    assert matching({"not": node}) == ["c"]
    assert matching({"or": [leaf("year", "eq", 2019), leaf("year", "eq", 2020)]}) == ["a", "c"]
    assert matching({"not": {"not": leaf("open", "eq", True)}}) == ["a"]


def test_stored_value_of_the_wrong_type_never_matches():
    pred = compile_filter(leaf("year", "gte", 2000), FIELDS)
    assert not pred({"year": "2020"})
    neq = compile_filter(leaf("year", "ne", 2020), FIELDS)
    assert neq({"year": "2020"})  # ne is the negation of eq


@pytest.mark.parametrize("node", [None, {}])
def test_empty_filter_is_none(node):
    assert compile_filter(node, FIELDS) is None


# ── errors ───────────────────────────────────────────────────────────────────
def test_unadvertised_field_is_invalid_params():
    with pytest.raises(InvalidParams) as err:
        compile_filter(leaf("secret", "eq", "x"), FIELDS)
    assert err.value.code == -32602
    assert err.value.data == {"field": "filter.secret"}


def test_nested_error_path_names_the_leaf():
    node = {"and": [leaf("lang", "eq", "en"), {"not": leaf("secret", "eq", 1)}]}
    with pytest.raises(InvalidParams) as err:
        compile_filter(node, FIELDS)
    assert err.value.data == {"field": "filter.and[1].not.secret"}


def test_operator_outside_advertised_list_is_unsupported():
    with pytest.raises(Unsupported) as err:
        compile_filter(leaf("lang", "contains", "e"), FIELDS, operators=("eq", "ne"))
    assert err.value.code == -32005
    assert err.value.data == {"option": "filter.op"}
    assert compile_filter(leaf("lang", "eq", "en"), FIELDS, operators=("eq",)) is not None


def test_unknown_operator_is_invalid_params():
    with pytest.raises(InvalidParams) as err:
        compile_filter(leaf("lang", "regex", "e.*"), FIELDS)
    assert err.value.data == {"field": "filter.op"}


@pytest.mark.parametrize("key", ["and", "or"])
def test_empty_combinator_is_invalid_params(key):
    with pytest.raises(InvalidParams) as err:
        compile_filter({"not": {key: []}}, FIELDS)
    assert err.value.data == {"field": f"filter.not.{key}"}


@pytest.mark.parametrize(
    ("node", "field"),
    [
        (leaf("year", "eq", "2020"), "filter.year"),
        (leaf("year", "gt", True), "filter.year"),
        (leaf("rating", "in", [1.5, "high"]), "filter.rating"),
        (leaf("lang", "eq", 5), "filter.lang"),
        (leaf("section", "contains", 3), "filter.section"),
        (leaf("open", "eq", "true"), "filter.open"),
        (leaf("published", "gte", "last year"), "filter.published"),
        (leaf("published", "gte", 1.5e12), "filter.published"),
        (leaf("tags", "contains", None), "filter.tags"),  # null is no value
        (leaf("year", "exists", "no"), "filter.year"),
    ],
)
def test_value_incompatible_with_field_type(node, field):
    with pytest.raises(InvalidParams) as err:
        compile_filter(node, FIELDS)
    assert err.value.data == {"field": field}


@pytest.mark.parametrize(
    ("node", "field"),
    [
        (leaf("lang", "gt", "en"), "filter.op"),  # ordered op on a keyword field
        (leaf("year", "in", []), "filter.value"),
        (leaf("year", "in", 2020), "filter.value"),
        ({"field": "year", "op": "eq"}, "filter.value"),
        ({"and": leaf("year", "eq", 1)}, "filter.and"),
        ({"and": [], "or": []}, "filter"),
        ("year > 2000", "filter"),
    ],
)
def test_malformed_tree_is_invalid_params(node, field):
    with pytest.raises(InvalidParams) as err:
        compile_filter(node, FIELDS)
    assert err.value.data == {"field": field}


# ── field inference ──────────────────────────────────────────────────────────
def test_infer_fields_types():
    metas = [
        {"year": 2019, "score": 1, "lang": "en", "when": "2019-06-12", "tags": ["a"], "ok": True},
        {"year": 2020, "score": 2.5, "lang": "fr", "when": "2020-01-01T10:00:00Z", "ok": False},
        {"year": None, "tags": ["b", "c"], "stamp": datetime(2020, 1, 1)},
    ]
    fields = infer_fields(metas)
    assert fields == {
        **BUILTIN_FIELDS,
        "lang": "keyword",
        "ok": "bool",
        "score": "float",
        "stamp": "date",
        "tags": "keyword",
        "when": "date",
        "year": "int",
    }
    assert list(fields) == sorted(fields)


def test_infer_fields_mixed_and_nested():
    metas = [
        {
            "id": "2020-01-01",
            "n": 1,
            "flag": True,
            "obj": {"a": 1},
            "deep": [[1]],
            "nums": [1, 2.5],
        },
        {"id": "x-17", "n": "one", "flag": 0, "empty": []},
    ]
    fields = infer_fields(metas)
    assert fields["id"] == "keyword"  # dates mixed with other strings
    assert fields["nums"] == "float"
    for dropped in ("n", "flag", "obj", "deep", "empty"):
        assert dropped not in fields


def test_infer_fields_always_has_builtins():
    fields = infer_fields([{"title": 3}])
    assert fields == BUILTIN_FIELDS
    assert fields["section"] == "text"


def test_inferred_fields_compile_and_filter():
    metas = [{"year": 2019, "tags": ["x"]}, {"year": 2021, "tags": ["y"]}]
    fields = infer_fields(metas)
    pred = compile_filter(
        {"and": [leaf("year", "gt", 2020), leaf("tags", "contains", "y")]}, fields
    )
    assert [pred(m) for m in metas] == [False, True]
