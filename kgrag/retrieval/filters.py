"""RCP metadata filters (spec §8) compiled to predicates over hit metadata.

A filter arrives as a JSON tree of ``and``/``or``/``not`` combinators over
``{field, op, value}`` leaves. :func:`compile_filter` checks it with the
canonical ``rcp.filter.validate`` and the rules that validator leaves out
(operator allow-list as ``-32005``, empty ``and``/``or``, value type against
field type), then turns it into a plain ``meta -> bool`` function.

Evaluation semantics, chosen to match common document databases:

* A field that is absent or ``null`` makes every comparison false except
  ``ne`` and ``nin``, which are true (they negate ``eq`` and ``in``), and
  ``exists``, which tests exactly that.
* A list-valued field matches a comparison when any element does
  (``eq``/``gt``/``in``/...); ``ne`` and ``nin`` hold when no element matches.
* ``contains`` is a case-sensitive substring test on a string and element
  membership on a list.
* ``date`` fields compare as instants: RFC 3339 strings and epoch-ms integers
  mix freely, and a timezone-naive value is read as UTC.
* A stored value whose type does not fit the field type never matches.
* Strings compare case-sensitively by code point.

The metadata dict a predicate sees is the caller's business; every chunk
should carry the built-in fields of :data:`~kgrag.rcp.fields.BUILTIN_FIELDS`
(the fields and their types live in :mod:`kgrag.rcp.fields`, shared with the
write side).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import date, datetime, timedelta, timezone
from typing import Any

from rcp import RcpError
from rcp import filter as rcp_filter

from kgrag.rcp.fields import BUILTIN_FIELDS, infer_fields, parse_date

from ..errors import InvalidParams, Unsupported

__all__ = ["BUILTIN_FIELDS", "OPERATORS", "Predicate", "compile_filter", "infer_fields"]

OPERATORS: tuple[str, ...] = (
    "eq",
    "ne",
    "gt",
    "gte",
    "lt",
    "lte",
    "in",
    "nin",
    "contains",
    "exists",
)

Predicate = Callable[[Mapping[str, Any]], bool]

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


class _Bad:
    """Marks a value that does not fit the field type."""


_BAD = _Bad()


# ── value conversion ─────────────────────────────────────────────────────────
def _as_date(value: Any) -> Any:
    if isinstance(value, bool):
        return _BAD
    if isinstance(value, int):
        try:
            return _EPOCH + timedelta(milliseconds=value)
        except OverflowError:
            return _BAD
    if isinstance(value, str):
        parsed = parse_date(value)
        return _BAD if parsed is None else parsed
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=timezone.utc)
    if isinstance(value, date):
        return datetime(value.year, value.month, value.day, tzinfo=timezone.utc)
    return _BAD


def _as_number(value: Any) -> Any:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    return value if ok else _BAD


def _as_str(value: Any) -> Any:
    return value if isinstance(value, str) else _BAD


def _as_bool(value: Any) -> Any:
    return value if isinstance(value, bool) else _BAD


def _as_scalar(value: Any) -> Any:
    return value if isinstance(value, (str, int, float, bool)) else _BAD


_CONVERTERS: dict[str, Callable[[Any], Any]] = {
    "keyword": _as_str,
    "text": _as_str,
    "int": _as_number,
    "float": _as_number,
    "bool": _as_bool,
    "date": _as_date,
}


# ── compilation ──────────────────────────────────────────────────────────────
def compile_filter(
    node: Any, fields: Mapping[str, str], operators: Sequence[str] = OPERATORS
) -> Predicate | None:
    """A predicate over a metadata dict for the RCP filter ``node``.

    ``fields`` maps each advertised field to its RCP type and ``operators`` is
    the advertised operator list. Returns ``None`` for an absent or empty
    filter. Raises :class:`InvalidParams` (``data.field`` = the params path)
    for a malformed tree, an unadvertised field, an empty ``and``/``or``, or a
    value whose type does not fit the field; :class:`Unsupported`
    (``data.option = "filter.op"``) for an operator outside ``operators``.
    An operator that is not an RCP operator at all is malformed: ``-32602``.
    """
    try:
        tree = rcp_filter.validate(node, fields=dict(fields))
    except RcpError as exc:
        data = exc.data if isinstance(exc.data, dict) else {}
        raise InvalidParams(exc.message, field=data.get("field", "filter")) from None
    if tree is None:
        return None
    # compile the caller's tree, not rcp's normal form, which coerces an
    # ``exists`` value by truthiness ("false" -> True); the shapes are the same
    return _compile(node, fields, frozenset(operators), "filter")


def _compile(
    node: dict[str, Any], fields: Mapping[str, str], ops: frozenset[str], path: str
) -> Predicate:
    if "not" in node:
        inner = _compile(node["not"], fields, ops, f"{path}.not")
        return lambda meta: not inner(meta)
    for key, combine in (("and", all), ("or", any)):
        if key in node:
            if not node[key]:
                raise InvalidParams(f"empty '{key}' array ({path}.{key})", field=f"{path}.{key}")
            parts = [
                _compile(child, fields, ops, f"{path}.{key}[{i}]")
                for i, child in enumerate(node[key])
            ]
            return _combined(combine, parts)
    return _compile_leaf(node, fields, ops, path)


def _combined(combine: Callable[[Iterable[bool]], bool], parts: list[Predicate]) -> Predicate:
    return lambda meta: combine(p(meta) for p in parts)


def _compile_leaf(
    node: dict[str, Any], fields: Mapping[str, str], ops: frozenset[str], path: str
) -> Predicate:
    field, op = node["field"], node["op"]
    value = node.get("value", True) if op == "exists" else node["value"]
    if op not in ops:
        raise Unsupported(
            f"filter operator {op!r} is not supported ({path}.op)", option="filter.op"
        )
    ftype = fields[field]
    convert = _CONVERTERS.get(ftype, _as_scalar)
    target = _check_value(op, value, convert, f"{path}.{field}", ftype)
    if op == "exists":
        return lambda meta: (meta.get(field) is not None) == target
    test = _TESTS[op]
    negate = op in ("ne", "nin")

    def predicate(meta: Mapping[str, Any]) -> bool:
        stored = meta.get(field)
        if stored is None:
            return negate
        if op == "contains":
            return test(stored, target, convert)
        items = stored if isinstance(stored, (list, tuple)) else (stored,)
        hit = any(_safe(test, convert(v), target) for v in items)
        return not hit if negate else hit

    return predicate


def _check_value(op: str, value: Any, convert: Callable[[Any], Any], where: str, ftype: str) -> Any:
    """The filter value converted for comparison, or :class:`InvalidParams`."""
    if op == "exists":
        if not isinstance(value, bool):
            raise InvalidParams(f"'exists' takes a boolean ({where})", field=where)
        return value
    values = value if op in ("in", "nin") else [value]
    converted = [convert(v) for v in values]
    if any(c is _BAD for c in converted):
        raise InvalidParams(f"value does not fit {ftype!r} field ({where})", field=where)
    if op in ("in", "nin"):
        return converted
    return converted[0]


def _safe(test: Callable[[Any, Any], bool], stored: Any, target: Any) -> bool:
    if stored is _BAD:
        return False
    try:
        return test(stored, target)
    except TypeError:
        return False


def _eq(a: Any, b: Any) -> bool:
    return a == b and isinstance(a, bool) == isinstance(b, bool)


def _in(a: Any, bs: list[Any]) -> bool:
    return any(_eq(a, b) for b in bs)


def _contains(stored: Any, target: Any, convert: Callable[[Any], Any]) -> bool:
    if isinstance(stored, str):
        return isinstance(target, str) and target in stored
    if isinstance(stored, (list, tuple)):
        return any(_safe(_eq, convert(v), target) for v in stored)
    return False


_TESTS: dict[str, Callable[..., bool]] = {
    "eq": _eq,
    "ne": _eq,
    "gt": lambda a, b: a > b,
    "gte": lambda a, b: a >= b,
    "lt": lambda a, b: a < b,
    "lte": lambda a, b: a <= b,
    "in": _in,
    "nin": _in,
    "contains": _contains,
}
