"""Ids packed into bytes for the SQLite relation and mention rows.

A graph holds a relation row for every stated relation and every pair of entities
named in one sentence (on 2Wiki 500k rows, 430k of them co-occurrences), each with its
id, its two ends and its evidence chunks: four or more 34-character hex ids, and the
ends again in the two indexes that find a relation by either end. A content id
(``kgrag.ids``: a kind prefix and a 128-bit hash) packs into 17 bytes: its prefix's
number, then the hash. Any other id keeps its text behind a 0 byte, so nothing is
lost. The co-occurrence predicate, the same on every such row, is stored as NULL.
Mention rows (an entity, a chunk, a count, keyed by both and indexed by the chunk) hold
their two ids packed the same way, and community rows their children, members and
leaves as packed lists.

Packed ids sort as their text does among content ids of one kind (the hash's bytes
in order are its hex digits in order), so a scan ``ORDER BY id`` meets relations in
the order it always has.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np

from kgrag.errors import StoreError
from kgrag.ids import PREFIXES
from kgrag.text.keys import COOC

_NUMBER = {prefix: i + 1 for i, prefix in enumerate(PREFIXES.values())}
_PREFIX = {i: prefix for prefix, i in _NUMBER.items()}
_CONTENT = re.compile(r"([a-z]{1,2}:)([0-9a-f]{32})")


def pack_id(id_: str) -> bytes:
    """``id_`` as bytes: 17 for a content id, else a 0 byte and its UTF-8."""
    found = _CONTENT.fullmatch(id_)
    if found and found.group(1) in _NUMBER:
        return bytes((_NUMBER[found.group(1)],)) + bytes.fromhex(found.group(2))
    return b"\0" + id_.encode()


def unpack_id(data: bytes | str) -> str:
    """The id :func:`pack_id` packed (text ids, of a version written before, as they are)."""
    if isinstance(data, str):
        return data
    if data[:1] == b"\0":
        return data[1:].decode()
    return _PREFIX[data[0]] + data[1:].hex()


def pack_ids(ids: Iterable[str]) -> bytes:
    """A list of ids as one value: each content id in 17 bytes, any other as a 0 byte,
    its length in two bytes and its UTF-8."""
    out = bytearray()
    for id_ in ids:
        packed = pack_id(id_)
        if packed[0]:
            out += packed
        else:
            text = packed[1:]
            if len(text) > 0xFFFF:
                raise ValueError(f"an id of {len(text)} bytes is too long to store")
            out += b"\0" + len(text).to_bytes(2, "big") + text
    return bytes(out)


def unpack_ids(data: bytes) -> tuple[str, ...]:
    out, at = [], 0
    while at < len(data):
        if data[at]:
            out.append(unpack_id(data[at : at + 17]))
            at += 17
        else:
            size = int.from_bytes(data[at + 1 : at + 3], "big")
            out.append(data[at + 3 : at + 3 + size].decode())
            at += 3 + size
    return tuple(out)


def id_column(ids: Sequence[bytes | str]) -> np.ndarray:
    """Ids as one array for a serving file: an ``(n, 17)`` uint8 matrix where every id
    is a packed content id (half the bytes of their hex text), else their text,
    fixed-width (a version before packed ids, or ids that are not content ids). Not
    numpy's ``S17``, which drops a hash's trailing zero bytes."""
    packed = [pack_id(i) if isinstance(i, str) else i for i in ids]
    if packed and all(len(p) == 17 and p[0] for p in packed):
        return np.frombuffer(b"".join(packed), dtype=np.uint8).reshape(-1, 17)
    text = [unpack_id(p).encode() for p in packed]
    return np.array(text) if text else np.zeros(0, dtype="S1")


def column_ids(column: np.ndarray) -> list[str]:
    """The ids of rows of an :func:`id_column` array (either layout)."""
    arr = np.asarray(column)
    if arr.ndim == 2:
        return [unpack_id(row) for row in map(bytes, arr)]
    return [b.decode() for b in arr.tolist()]


def relation_values(r: Any) -> tuple[Any, ...]:
    """The stored row of a relation (:data:`kgrag.store.schema.DDL`'s ``relations``)."""
    predicate = None if r.kind == "cooc" and r.predicate == COOC else r.predicate
    return (
        pack_id(r.id),
        pack_id(r.src),
        predicate,
        pack_id(r.dst),
        r.weight,
        r.kind,
        pack_ids(r.evidence),
    )


def relation_text(row: Any) -> tuple[Any, ...]:
    """A stored relation row as text (ids, predicate, evidence as a JSON list): how a
    version written before packed ids stored it, which is how a Neo4j version keeps it.
    A row of such a version is returned as it is."""
    if isinstance(row[0], str):
        return tuple(row)
    return (
        unpack_id(row[0]),
        unpack_id(row[1]),
        COOC if row[2] is None else row[2],
        unpack_id(row[3]),
        row[4],
        row[5],
        dumps(list(unpack_ids(row[6]))) if row[6] is not None else None,
    )


def dumps(value: Any) -> str:
    """A record field as JSON text, as every version's rows hold it (compact, keys sorted;
    :mod:`kgrag.store.schema` writes its JSON fields with this too)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=True)


#: the columns of a community row that hold packed id lists: children, members, leaves
COMMUNITY_LISTS = (3, 4, 7)


def report_text(c: Any) -> str:
    """A community's report as its row stores it (the text its full-text index reads)."""
    r = c.report
    return dumps([r.title, r.key_entities, r.key_relations, r.sentences])


def community_values(c: Any) -> tuple[Any, ...]:
    """The stored row of a community (:data:`kgrag.store.schema.DDL`'s ``communities``)."""
    return (
        c.id,
        c.level,
        c.parent,
        pack_ids(c.children),
        pack_ids(c.members),
        report_text(c),
        c.rating,
        pack_ids(c.leaves),
    )


def community_rows(communities: Sequence[Any]) -> list[tuple[Any, ...]]:
    """The stored rows of a batch of communities. A community carried down a level
    unchanged (one child in the batch, with the same members, report and leaves: on
    2Wiki 16.9k of 25.4k rows) stores NULL in those three columns, and is read back
    whole by :func:`filled_copies`."""
    by_id = {c.id: c for c in communities}
    out = []
    for c in communities:
        row = community_values(c)
        child = by_id.get(c.children[0]) if len(c.children) == 1 else None
        if child is not None and (child.members, child.report, child.leaves) == (
            c.members,
            c.report,
            c.leaves,
        ):
            row = (*row[:4], None, None, row[6], None)
        out.append(row)
    return out


def filled_copies(
    rows: Sequence[tuple[Any, ...]], fetch: Callable[[list[str]], Iterable[tuple[Any, ...]]]
) -> list[tuple[Any, ...]]:
    """Community rows with each stored copy's members, report and leaves taken from its
    child, down the chain of copies; ``fetch(ids)`` reads the rows of ids not among
    ``rows``. Rows stored whole come back as they are."""
    known = {r[0]: r for r in rows}
    need = {_child(r) for r in rows if r[5] is None} - known.keys()
    while need:
        got = list(fetch(sorted(need)))
        known.update((r[0], r) for r in got)
        missing = need - known.keys()
        if missing:
            raise StoreError(f"community {min(missing)} is a stored copy's child but absent")
        need = {_child(r) for r in got if r[5] is None} - known.keys()
    out = []
    for r in rows:
        whole = r
        while whole[5] is None:
            whole = known[_child(whole)]
        out.append(r if whole is r else (*r[:4], whole[4], whole[5], r[6], whole[7]))
    return out


def _child(row: tuple[Any, ...]) -> str:
    children = row[3]
    return (unpack_ids(children) if isinstance(children, bytes) else json.loads(children))[0]


def row_text(table: str, row: Any) -> tuple[Any, ...]:
    """A stored row of ``table`` with its packed ids as text (lists as JSON), as a
    version before packed ids stored it: how a Neo4j version keeps its records."""
    if table == "relations":
        return relation_text(row)
    if table == "sentences":  # its entity ids: a packed list
        return tuple(
            dumps(list(unpack_ids(v))) if i == 4 and isinstance(v, bytes) else v
            for i, v in enumerate(row)
        )
    if table == "communities":
        return tuple(
            dumps(list(unpack_ids(v))) if i in COMMUNITY_LISTS and isinstance(v, bytes) else v
            for i, v in enumerate(row)
        )
    return tuple(unpack_id(v) if isinstance(v, bytes) else v for v in row)
