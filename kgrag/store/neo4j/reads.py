"""One published version of a graph in Neo4j, read by row, id or key: the reads every
query side method is made of, each one query, and what they keep.

A version's nodes carry their kind's version label (:mod:`.model`); a row is found
through the range index on ``row`` (``vertex`` for the walk). A read asks only for
what was not read before (:class:`~.memo.Memo`: a published version never changes),
and a read that finds rows by another key (an id, a name, a vector) keeps the small
properties of those rows it brought along, so that the read of them that follows asks
nothing.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from typing import Any

import numpy as np

from kgrag.errors import StoreError
from kgrag.store.neo4j.connection import Connection
from kgrag.store.neo4j.memo import Memo
from kgrag.store.neo4j.model import (
    ROW_PROPS,
    SMALL_PROPS,
    labels_of,
    props_by_row,
    props_columns,
    vector_kind,
    version_tag,
)


class VersionReads:
    """The reads of one version (``version``, described by ``meta``) of the graph
    ``connection`` reaches."""

    def __init__(self, connection: Connection, version: str, meta: dict[str, Any]) -> None:
        self.connection = connection
        self.version = version
        self.manifest = meta
        self.tag = version_tag(connection.location.name, version)
        self.labels = labels_of(self.tag)
        self.memo = Memo()
        self._sizes: dict[str, int] = {}
        self._lock = threading.Lock()
        #: run the PageRank push, the path search, the full dense scan and BM25 in
        #: kgrag's procedures where the server has them (``kgrag.push``, ``kgrag.paths``,
        #: ``kgrag.similarity``, ``kgrag.bm25``); off, in Cypher and the client alone
        self.server_push = True
        #: the version's build, for the server's cache of what its procedures read
        self.build = f"{meta.get('created', '')}/{meta.get('fingerprint', '')}"

    def columns(self, match: str, values: Sequence[str], **params: Any) -> list[list[Any]]:
        """``match`` then one record of ``collect(value)`` per value: the driver decodes
        one record of lists faster than a record per row."""
        found = self.connection.run(
            f"{match} RETURN " + ", ".join(f"collect({v})" for v in values), **params
        )
        cols = [list(c) for c in found[0]] if found else [[] for _ in values]
        if len({len(c) for c in cols}) > 1:  # collect() leaves out nulls: rows would shift
            raise StoreError(
                f"{self.connection.location.uri}: version {self.version}: a node lacks one of "
                f"{', '.join(values)} (the graph in Neo4j is incomplete: ingest again)"
            )
        return cols

    def _raw_records(self, kind: str, ids: Sequence[str] | None, key: str = "id") -> list[Any]:
        """The stored record rows of a kind (each node's ``rec``, decoded) whose ``key``
        is in ``ids`` (all when None); by id, each once, in the order asked."""
        label = self.labels[kind]
        if ids is None:
            found = self.connection.run(f"MATCH (n:`{label}`) RETURN n.rec")
            return [json.loads(r[0]) for r in found]
        if key != "id":  # sentences by chunk: several records a key
            found = self.connection.run(
                f"UNWIND $ids AS k MATCH (n:`{label}` {{{key}: k}}) RETURN n.rec",
                ids=list(dict.fromkeys(ids)),
            )
            return [json.loads(r[0]) for r in found]

        def fetch(wanted: list[str]) -> dict[str, Any]:
            found = self.connection.run(
                f"UNWIND $ids AS k MATCH (n:`{label}` {{id: k}}) RETURN k, n.rec", ids=wanted
            )
            return {k: rec for k, rec in found}

        got = self.memo.read(f"rec:{kind}", ids, fetch)
        return [json.loads(got[k]) for k in dict.fromkeys(ids) if k in got]

    def has_procedure(self, procedure: str) -> bool:
        """Whether to call one of kgrag's procedures (the server has it, and
        ``server_push`` is on)."""
        return self.server_push and procedure in self.connection.procedures()

    def _row_props(self, kind: str, rows: Sequence[int]) -> dict[int, dict[str, Any]]:
        """The small serving properties (:data:`ROW_PROPS`) of ``rows`` of a kind, read
        together: a search asks for a passage's title, mentions, links and id one after
        another, and this answers all of them with one query."""

        def fetch(wanted: list[int]) -> dict[int, dict[str, Any]]:
            cols = self.columns(
                f"UNWIND $rows AS r MATCH (n:`{self.labels[kind]}` {{row: r}})",
                ("r", *props_columns(kind, "n")),
                rows=sorted(wanted),
            )
            return props_by_row(kind, cols[0], cols[1:])

        return self.memo.read(f"node:{kind}", rows, fetch)

    #: the columns of a relation's ends (a, b) :meth:`_keep_relation_ends` keeps
    _RELATION_ENDS = (
        "a.row",
        *props_columns("entities", "a"),
        "b.row",
        *props_columns("entities", "b"),
    )

    def _keep_relation_ends(self, cols: Sequence[Sequence[Any]]) -> None:
        """Keep the properties of relations' ends read with :attr:`_RELATION_ENDS`."""
        half = len(cols) // 2
        for part in (cols[:half], cols[half:]):
            self.keep_props("entities", part[0], part[1:])

    def keep_props(self, kind: str, rows: Sequence[Any], cols: Sequence[Sequence[Any]]) -> None:
        """Keep the row properties a read brought along (``cols``: :func:`props_columns`'s
        columns for ``rows``) for the reads of them that follow, and each row's id both
        ways (rows without one, such as an OPTIONAL MATCH's misses, are left out)."""
        props = props_by_row(kind, rows, cols)
        if not props:
            return
        self.memo.read(f"node:{kind}", list(props), lambda wanted: {x: props[x] for x in wanted})
        back = {p["id"]: row for row, p in props.items()}
        self.memo.read(f"row:{kind}", list(back), lambda wanted: {i: back[i] for i in wanted})

    def size(self, kind: str) -> int:
        kind = vector_kind(kind)
        with self._lock:
            if kind not in self._sizes:
                found = self.connection.run(
                    f"MATCH (n:`{self.labels[kind]}`) WHERE n.row >= 0 RETURN count(n)"
                )
                self._sizes[kind] = int(found[0][0])
            return self._sizes[kind]

    def ids(self, kind: str, rows: Sequence[int] | np.ndarray) -> list[str]:
        kind = vector_kind(kind)
        r = [int(x) for x in np.asarray(rows, dtype=np.int64).tolist()]
        if not r:
            return []

        def fetch(wanted: list[int]) -> dict[int, str]:
            got_rows, got_ids = self.columns(
                f"UNWIND $rows AS r MATCH (n:`{self.labels[kind]}` {{row: r}})",
                ("r", "n.id"),
                rows=wanted,
            )
            return {int(a): b for a, b in zip(got_rows, got_ids, strict=True)}

        if kind in ROW_PROPS:
            by_row = {x: p["id"] for x, p in self._row_props(kind, r).items()}
        else:
            by_row = self.memo.read(f"id:{kind}", r, fetch)
        missing = [x for x in r if x not in by_row]
        if missing:
            raise StoreError(f"{kind}: no row {missing[0]}")
        found = [by_row[x] for x in r]
        # and the other way: a search looks up by id the rows it was given the ids of
        back = dict(zip(found, r, strict=True))
        self.memo.read(f"row:{kind}", found, lambda wanted: {i: back[i] for i in wanted})
        return found

    def rows(self, kind: str, ids: Sequence[str]) -> np.ndarray:
        kind = vector_kind(kind)
        if not len(ids):
            return np.zeros(0, dtype=np.int64)

        small = kind in SMALL_PROPS  # and their properties, read next as a rule

        def fetch(wanted: list[str]) -> dict[str, int]:
            got_ids, got_rows, *props = self.columns(
                f"UNWIND $ids AS k MATCH (n:`{self.labels[kind]}` {{id: k}}) WHERE n.row >= 0",
                ("k", "n.row", *(props_columns(kind, "n") if small else ())),
                ids=wanted,
            )
            if small:
                self.keep_props(kind, got_rows, props)
            by_id = {a: int(b) for a, b in zip(got_ids, got_rows, strict=True)}
            return {k: by_id.get(k, -1) for k in wanted}  # -1: no such id, for good

        by_id = self.memo.read(f"row:{kind}", list(ids), fetch)
        if kind not in ROW_PROPS:  # and the other way (a kind with row props reads them)
            back = {row: i for i, row in by_id.items() if row >= 0}
            self.memo.read(f"id:{kind}", list(back), lambda wanted: {x: back[x] for x in wanted})
        return np.array([by_id.get(i, -1) for i in ids], dtype=np.int64)

    def vectors_of(self, kind: str, rows: np.ndarray) -> np.ndarray:
        """The float32 vectors of ``rows`` of a kind."""
        r = np.asarray(rows, dtype=np.int64)
        dim = int(self.manifest.get("dim", 0))
        if not len(r):
            return np.zeros((0, dim), dtype=np.float32)

        def fetch(wanted: list[int]) -> dict[int, Any]:
            got_rows, got_vecs = self.columns(
                f"UNWIND $rows AS r MATCH (n:`{self.labels[kind]}` {{row: r}})",
                ("r", "n.vec"),
                rows=sorted(wanted),
            )
            return {
                int(a): np.asarray(b, dtype=np.float32)
                for a, b in zip(got_rows, got_vecs, strict=True)
            }

        by_row = self.memo.read(f"vec:{kind}", r.tolist(), fetch)
        return np.array([by_row[x] for x in r.tolist()], dtype=np.float32).reshape(len(r), -1)

    def _by_row(self, kind: str, prop: str, rows: np.ndarray | None, dtype: Any) -> np.ndarray:
        label = self.labels[kind]
        if rows is None:
            got, values = self.columns(
                f"MATCH (n:`{label}`) WHERE n.row >= 0", ("n.row", f"n.{prop}")
            )
            by = {int(a): b for a, b in zip(got, values, strict=True)}
            return np.array([by[i] for i in range(self.size(kind))], dtype=dtype)
        r = [int(x) for x in np.asarray(rows, dtype=np.int64).tolist()]

        def fetch(wanted: list[int]) -> dict[int, Any]:
            got, values = self.columns(
                f"UNWIND $rows AS r MATCH (n:`{label}` {{row: r}})",
                ("r", f"n.{prop}"),
                rows=sorted(wanted),
            )
            return {int(a): b for a, b in zip(got, values, strict=True)}

        if prop in ROW_PROPS.get(kind, ()):
            by = {x: p[prop] for x, p in self._row_props(kind, r).items()}
        else:
            by = self.memo.read(f"prop:{kind}:{prop}", r, fetch)
        return np.array([by[x] for x in r], dtype=dtype)
