"""One published version of a graph in Neo4j behind the store's reader interface.

Each query-side method is one query: records by id through uniqueness constraints;
adjacency and attributes by row through range indexes (per-row structures are
properties of the row's node: ``walk``/``walk_w``, ``rel``/``rel_len``/``rel_edge``,
``mentioned``, ``links``); the searches in :mod:`.search`. A reader keeps what it read
of its version (a published version never changes) up to
:data:`~.memo.MEMO_NUMBERS`. Nothing loads a whole label into Python except the record
readers asked for everything (``chunks()`` with no ids), as the embedded store does.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import numpy as np

from kgrag.errors import InvalidParams
from kgrag.store import schema
from kgrag.store.base import GRAPHS, RECORD_KINDS, PassageText, RecordReader
from kgrag.store.kernels import Adjacency, PathLimits
from kgrag.store.neo4j.connection import Connection
from kgrag.store.neo4j.model import ATTRIBUTES, ROW_PROPS, props_columns, vector_kind
from kgrag.store.neo4j.search import RemoteMatrix, VersionSearch
from kgrag.types import (
    Chunk,
    Community,
    Document,
    Entity,
    Mention,
    Relation,
    Sentence,
    Synonym,
    TreeNode,
)


class Neo4jGraphReader(VersionSearch, RecordReader):
    """One published version (``version``, described by ``meta``) of the graph
    ``connection`` reaches."""

    concurrent_reads = True

    def __init__(self, connection: Connection, version: str, meta: dict[str, Any]) -> None:
        super().__init__(connection, version, meta)
        self.index_version = version

    # -- record readers ---------------------------------------------------------------

    def counts(self) -> dict[str, int]:
        counts = self.manifest.get("counts") or {}
        return {kind: int(counts.get(kind, 0)) for kind in RECORD_KINDS}

    def _documents(self, ids: Sequence[str] | None) -> list[Document]:
        return sorted(
            (schema.document(r) for r in self._raw_records("documents", ids)), key=lambda d: d.id
        )

    def _chunks(self, ids: Sequence[str] | None) -> list[Chunk]:
        out = (schema.chunk(r) for r in self._raw_records("chunks", ids))
        return sorted(out, key=lambda c: (c.doc_id, c.index))

    def _sentences(self, chunk_ids: Sequence[str] | None) -> list[Sentence]:
        out = (
            schema.sentence(r) for r in self._raw_records("sentences", chunk_ids, key="chunk_id")
        )
        return sorted(out, key=lambda s: (s.chunk_id, s.index))

    def _entities(self, ids: Sequence[str] | None) -> list[Entity]:
        label = self.labels["entities"]
        query = (
            f"MATCH (e:`{label}`) %sOPTIONAL MATCH (c)-[:MENTIONS]->(e) "
            "RETURN e.id, e.rec, collect(c.id)"
        )
        if ids is None:
            found = self.connection.run(query % "")
            out = [schema.entity(json.loads(r[1]), tuple(sorted(r[2]))) for r in found]
            return sorted(out, key=lambda e: e.id)

        def fetch(wanted: list[str]) -> dict[str, Any]:
            found = self.connection.run(query % "WHERE e.id IN $ids ", ids=wanted)
            return {r[0]: schema.entity(json.loads(r[1]), tuple(sorted(r[2]))) for r in found}

        got = self.memo.read("entity", ids, fetch)
        return sorted(got.values(), key=lambda e: e.id)

    def entity_names(self, ids: Sequence[str]) -> dict[str, str]:
        label = self.labels["entities"]

        def fetch(wanted: list[str]) -> dict[str, Any]:
            # the names of entities whose row properties were read already are kept
            rows = self.memo.read("row:entities", wanted, lambda _: {})
            props = self.memo.read(
                "node:entities", [r for r in rows.values() if r >= 0], lambda _: {}
            )
            have = {p["id"]: p["name"] for p in props.values()}
            rest = [i for i in wanted if i not in have]
            if rest:
                found = self.connection.run(
                    f"MATCH (e:`{label}`) WHERE e.id IN $ids RETURN e.id, e.name", ids=rest
                )
                have.update({r[0]: r[1] for r in found})
            return {i: have[i] for i in wanted if i in have}

        return self.memo.read("entity-name", ids, fetch)

    def _mentions(self, chunk_ids: Sequence[str] | None) -> list[Mention]:
        where = "" if chunk_ids is None else "WHERE c.id IN $ids "
        found = self.connection.run(
            f"MATCH (c:`{self.labels['chunks']}`)-[m:MENTIONS]->(e) "
            f"{where}RETURN e.id, c.id, m.count",
            ids=list(chunk_ids or ()),
        )
        return sorted(
            (Mention(r[0], r[1], r[2]) for r in found), key=lambda m: (m.chunk_id, m.entity_id)
        )

    def _relations(self, ids: Sequence[str] | None, by_end: bool) -> list[Relation]:
        e = self.labels["entities"]
        if by_end and ids is not None:
            found = self.connection.run(
                f"UNWIND $t AS k MATCH (a:`{e}` {{id: k}})-[r:RELATED]-(:`{e}`) "
                "WHERE r.kind = 'svo' RETURN DISTINCT r.rec",
                t=list(dict.fromkeys(ids)),
            )
            recs = [json.loads(r[0]) for r in found]
        elif ids is not None:

            def fetch(wanted: list[str]) -> dict[str, Any]:
                # with the rows and properties of their ends (a search seeds a walk from
                # the ends of the facts it found)
                keys, got, *ends = self.columns(
                    f"UNWIND $ids AS k MATCH (a:`{e}`)-[r:RELATED {{id: k}}]->(b:`{e}`)",
                    ("k", "r.rec", *self._RELATION_ENDS),
                    ids=wanted,
                )
                self._keep_relation_ends(ends)
                return dict(zip(keys, got, strict=True))

            recs = [json.loads(v) for v in self.memo.read("relation", ids, fetch).values()]
        else:
            found = self.connection.run(f"MATCH (:`{e}`)-[r:RELATED]->(:`{e}`) RETURN r.rec")
            recs = [json.loads(r[0]) for r in found]
        unique = {r[0]: r for r in recs}
        return [schema.relation(unique[k]) for k in sorted(unique)]

    def _synonyms(self) -> list[Synonym]:
        e = self.labels["entities"]
        found = self.connection.run(
            f"MATCH (a:`{e}`)-[s:SYNONYM]->(b:`{e}`) RETURN a.id, b.id, s.score"
        )
        return sorted((Synonym(r[0], r[1], r[2]) for r in found), key=lambda s: (s.src, s.dst))

    def _communities(self, level: int | None, ids: Sequence[str] | None) -> list[Community]:
        out = [schema.community(r) for r in self._leveled("communities", level, ids)]
        return sorted(out, key=lambda c: (c.level, c.id))

    def _tree_nodes(self, level: int | None, ids: Sequence[str] | None) -> list[TreeNode]:
        out = [schema.tree_node(r) for r in self._leveled("tree_nodes", level, ids)]
        return sorted(out, key=lambda t: (t.level, t.id))

    def _leveled(self, kind: str, level: int | None, ids: Sequence[str] | None) -> list[Any]:
        """Record rows of a kind with levels: at ``level`` or by id (all when both None)."""
        if ids is None and level is not None:
            found = self.connection.run(
                f"MATCH (n:`{self.labels[kind]}` {{level: $level}}) RETURN n.rec", level=level
            )
            return [json.loads(r[0]) for r in found]
        return [r for r in self._raw_records(kind, ids) if level is None or r[1] == level]

    def vectors(self, kind: str) -> tuple[list[str], np.ndarray]:
        vector_kind(kind)
        n = self.size(kind)
        return self.ids(kind, np.arange(n)), self.vectors_of(kind, np.arange(n))

    # -- the query side ---------------------------------------------------------------

    def matrix(self, kind: str) -> Any:
        return RemoteMatrix(self, vector_kind(kind))

    def pushed_pagerank(
        self, reset: np.ndarray, damping: float, eps: float, rounds: int = 100
    ) -> np.ndarray:
        """The push in the database (:meth:`push_in_server`): one query instead of one
        per round. Without the procedure, or with ``server_push`` off, the client
        pushes."""
        if not self.has_procedure("kgrag.push"):
            return super().pushed_pagerank(reset, damping, eps, rounds)
        return self.push_in_server(reset, damping, eps, rounds)

    def shortest_paths(
        self, seeds: Sequence[int], groups: Sequence[set[int]] | None, limits: PathLimits
    ) -> tuple[dict[int, float], dict[int, int]]:
        """The path search in the database (:meth:`paths_in_server`). Without the
        procedure, or with ``server_push`` off, the client searches."""
        if not self.has_procedure("kgrag.paths"):
            return super().shortest_paths(seeds, groups, limits)
        return self.paths_in_server(seeds, groups, limits)

    def adjacency(self, graph: str, rows: np.ndarray) -> Adjacency:
        if graph not in GRAPHS:
            raise InvalidParams(f"unknown graph {graph!r}; known: {', '.join(GRAPHS)}")
        r = [int(x) for x in np.asarray(rows, dtype=np.int64).tolist()]
        label, key, fields = {
            "walk": (f"Vertex_{self.tag}", "vertex", ("walk", "walk_w")),
            "relations": (self.labels["entities"], "row", ("rel", "rel_len", "rel_edge")),
            "mentions": (self.labels["chunks"], "row", ("mentioned",)),
            "links": (self.labels["chunks"], "row", ("links", "links_in")),
        }[graph]

        def fetch(wanted: list[int]) -> dict[int, Any]:
            # one record of lists: a record per vertex costs the driver more time
            found = self.columns(
                f"UNWIND $rows AS r MATCH (n:`{label}` {{{key}: r}})",
                ("r", *(f"coalesce(n.{f}, [])" for f in fields)),
                rows=sorted(wanted),
            )
            return {int(v): parts for v, *parts in zip(*found, strict=True)}

        if graph in ("mentions", "links"):  # with the chunk's other small properties
            props = self._row_props("chunks", r)
            by = {x: [props[x][f] for f in fields] for x in props}
        else:
            by = self.memo.read(f"adj:{graph}", r, fetch)
        indptr = np.zeros(len(r) + 1, dtype=np.int64)
        cols, data, edge = [], [], []
        for i, row in enumerate(r):
            got = by.get(row)
            idx = list(got[0] or []) if got else []
            indptr[i + 1] = indptr[i] + len(idx)
            cols += idx
            if graph in ("walk", "relations", "links") and got:
                data += list(got[1] or [])
            elif graph == "mentions":
                data += [1.0] * len(idx)
            if graph == "relations" and got:
                edge += list(got[2] or [])
        indices = np.array(cols, dtype=np.int64)
        if graph == "walk":
            return Adjacency(indptr, indices, np.array(data, dtype=np.float32))
        if graph == "relations":
            return Adjacency(
                indptr, indices, np.array(data, dtype=np.float64), np.array(edge, dtype=np.int64)
            )
        if graph == "links":
            return Adjacency(indptr, indices, np.array(data, dtype=np.int64))
        return Adjacency(indptr, indices, np.ones(len(indices)))

    def passage_texts(
        self, chunk_ids: Sequence[str], query: np.ndarray | None = None
    ) -> dict[str, PassageText]:
        ids = sorted(set(chunk_ids))
        if not ids:
            return {}
        c, e, s = self.labels["chunks"], self.labels["entities"], self.labels["sentences"]
        # one query: each chunk's text and title entity, and its sentences with the
        # vectors of those that have one (scored here, as :meth:`similarity` scores rows)
        found = self.connection.run(
            f"UNWIND $ids AS k MATCH (c:`{c}` {{id: k}}) "
            f"OPTIONAL MATCH (t:`{e}` {{row: c.title_entity}}) WHERE c.title_entity >= 0 "
            f"WITH k, c, t OPTIONAL MATCH (s:`{s}` {{chunk_id: k}}) "
            "RETURN k, c.text, t.id, collect([s.rec, CASE WHEN s.row >= 0 AND $scored "
            "THEN s.vec END])",
            ids=ids,
            scored=query is not None and self.size("sentences") > 0,
        )
        read = {k: (text, title, pairs) for k, text, title, pairs in found}
        out: dict[str, PassageText] = {}
        keys: list[tuple[str, int]] = []
        vecs: list[Any] = []
        for k in (k for k in ids if k in read):  # scored in the order the folder scores
            text, title, pairs = read[k]
            said = sorted(
                ((schema.sentence(json.loads(rec)), v) for rec, v in pairs if rec is not None),
                key=lambda x: x[0].index,
            )
            keys += [(k, x.index) for x, v in said if v is not None]
            vecs += [v for _, v in said if v is not None]
            out[k] = PassageText(text, title, tuple(x for x, _ in said), {})
        if keys and query is not None:
            q = np.asarray(query, dtype=np.float32)
            sims = (np.array(vecs, dtype=np.float32).reshape(len(vecs), -1) @ q).tolist()
            for (k, i), sim in zip(keys, sims, strict=True):
                out[k].similarity[i] = sim
        return out

    def attribute(self, kind: str, name: str, rows: np.ndarray | None = None) -> np.ndarray:
        if name not in ATTRIBUTES.get(kind, ()):
            raise InvalidParams(f"no attribute {name!r} of {kind}", field="name")
        if kind == "chunks" and name == "title":  # UTF-8 bytes, as the folder gives them
            values = self._by_row(kind, name, rows, object)
            return np.array([str(v).encode() for v in values.tolist()], dtype=object).astype(bytes)
        if kind == "chunks":  # the graph vertex, the title's entity row
            return self._by_row(kind, name, rows, np.int64)
        dtype = np.float64 if name == "rating" else (np.bool_ if name == "canonical" else np.int64)
        return self._by_row(kind, f"a_{name}", rows, dtype)

    def lookup(self, kind: str, keys: Sequence[str]) -> dict[str, int]:
        table = {"entities": "names", "sentences": "sentence_keys"}.get(kind)
        if table is None:
            raise InvalidParams(f"no lookup for {kind!r}", field="kind")
        wanted = list(dict.fromkeys(keys))
        if not wanted:
            return {}
        if kind != "entities":
            found = self.connection.run(
                f"UNWIND $keys AS k MATCH (n:`{self.labels[table]}` {{key: k}}) RETURN k, n.row",
                keys=wanted,
            )
            return {a: int(b) for a, b in found}
        # with the named entities' properties (a search seeds from them)
        keys, rows, props = self.columns(
            f"UNWIND $keys AS k MATCH (n:`{self.labels[table]}` {{key: k}}) "
            f"OPTIONAL MATCH (e:`{self.labels['entities']}` {{row: n.row}})",
            ("k", "n.row", "[e.row, " + ", ".join(props_columns("entities", "e")) + "]"),
            keys=wanted,
        )
        found = [p for p in props if p[0] is not None]
        cols = [[p[i] for p in found] for i in range(1, 1 + len(ROW_PROPS["entities"]))]
        self.keep_props("entities", [p[0] for p in found], cols)
        return {a: int(b) for a, b in zip(keys, rows, strict=True)}

    def relation_ids(self, edges: np.ndarray) -> list[str]:
        e = [int(x) for x in np.asarray(edges, dtype=np.int64).tolist()]
        if not e:
            return []
        ent = self.labels["entities"]

        def fetch(wanted: list[int]) -> dict[int, str]:
            keys, rids, recs_, *ends = self.columns(
                f"UNWIND $edges AS k MATCH (a:`{ent}`)-[r:RELATED {{edge: k}}]->(b:`{ent}`)",
                ("k", "r.id", "r.rec", *self._RELATION_ENDS),
                edges=sorted(wanted),
            )
            # the records too, kept for the read of them that follows (paths' chains and
            # endings ask for the relations of the edges they found): one query, not two;
            # and the properties of their ends (the endings' entities are scored next)
            recs = dict(zip(rids, recs_, strict=True))
            self.memo.read("relation", list(recs), lambda ids: {i: recs[i] for i in ids})
            self._keep_relation_ends(ends)
            return {int(a): b for a, b in zip(keys, rids, strict=True)}

        by = self.memo.read("edge", e, fetch)
        return [by[x] for x in e]

    def close(self) -> None:
        """The query tokenizers' in-memory tables and what the reader kept; the store
        owns the connection."""
        self.close_searches()
        self.memo.clear()
