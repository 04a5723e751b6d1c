"""A graph in Neo4j, behind the same store interface as the embedded store.

    kgrag ingest docs/ --graph neo4j://127.0.0.1:7687/NAME[?database=DB]

NAME is the graph's name inside the database (several graphs share one); the
credentials come from ``KGRAG_NEO4J_USER`` / ``KGRAG_NEO4J_PASSWORD`` (no
authentication when neither is set).

**Versions.** A version is written under its own labels: every node carries
its kind's label (``Chunk``, ``Entity``, ...) and that kind's label for the
version (``Chunk_<tag>``, the tag naming the graph and version), which is what
the version's indexes and constraints cover. The graph's ``:KgragGraph`` node
holds the manifest; a commit writes the whole version first, waits for its
indexes, and then replaces the manifest in one transaction, so readers never see
half a build, and a reader pinned to a version keeps reading its labels until
the version is collected (the oldest beyond ``keep_versions``).

**Write side.** A writer stages the version in a private embedded store (SQLite
and numpy, in a temporary folder), derives the same serving structures the
embedded store serves from (:mod:`kgrag.store.serving`: rows, the PageRank walk,
relation and title-link adjacency, name keys, per-entity statistics), and
uploads it all with batched ``UNWIND`` writes. Derived per-row structures are
properties of the row's node (``walk``/``walk_w``, ``rel``/``rel_len``/
``rel_edge``, ``mentioned``, ``links``); the graph itself is there as
relationships for people and Cypher: ``(:Chunk)-[:PART_OF]->(:Document)``,
``(:Chunk)-[:MENTIONS {count}]->(:Entity)``, ``(:Entity)-[:RELATED {id,
predicate, kind, weight, evidence}]->(:Entity)``, ``(:Entity)-[:SYNONYM]->``,
``(:Chunk)-[:NAMES]->(:Chunk)`` (title links), ``(:Community)-[:CHILD_OF]->``,
``(:TreeNode)-[:SUMMARIZES]->``.

**Read side.** Each query-side method is one query: nearest neighbours through
the version's vector indexes (unquantised: their scores are the stored vectors'
cosines); BM25 from the embedded store's own postings, uploaded as term nodes and
scored with its arithmetic; adjacency and attributes by row through range indexes;
and, where the server has kgrag's procedures (``neo4j/README.md``: the launcher
registers them), the PageRank push (``kgrag.push``), the full dense scan
(``kgrag.similarity``) and BM25 (``kgrag.bm25``) run beside the data, otherwise the
client does that work over plain Cypher. A reader keeps what it read of its version
(a published version never changes) up to :data:`MEMO_NUMBERS`. Nothing loads a
whole label into Python except the record readers asked for everything (``chunks()``
with no ids), as the embedded store does.
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import itertools
import json
import os
import re
import shutil
import socket
import sqlite3
import tempfile
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from kgrag.errors import InvalidParams, StoreError, VersionGone
from kgrag.store import schema
from kgrag.store.base import (
    GRAPHS,
    RECORD_KINDS,
    VECTOR_KINDS,
    Adjacency,
    GraphReader,
    GraphStore,
    GraphWriter,
    PassageText,
    PathLimits,
    exact_scores,
    nearest_request,
    record_request,
    top_rows,
)
from kgrag.store.bm25 import (
    K1,
    B,
    Postings,
    QueryTokenizer,
    best,
    inverse_frequency,
    query_words,
    stop_words,
    tokenizer_of,
)
from kgrag.store.folder.files import ANN_CANDIDATES, ANN_EXPANSION
from kgrag.store.location import Location
from kgrag.store.serving import ANN_KINDS, ANN_MIN_ROWS, SERVING, trained_pq
from kgrag.store.versions import check_manifest, crash_point, new_manifest, next_version, publish
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

FORMAT = "kgrag-neo4j"
BATCH = 5000  # rows per UNWIND
#: how long an upload waits for its indexes to fill, at most (seconds)
INDEX_WAIT_S = 6 * 3600
#: node label of each kind
LABELS = {
    "documents": "Document",
    "chunks": "Chunk",
    "sentences": "Sentence",
    "entities": "Entity",
    "facts": "Fact",
    "communities": "Community",
    "tree_nodes": "TreeNode",
    "names": "NameKey",
    "sentence_keys": "SentenceKey",
    "bm25_terms": "Bm25Term",
    "bm25_indexes": "Bm25Index",
    "codebooks": "PQCodebook",
}
#: full-text indexed properties of the sparse kinds
FULLTEXT = {"chunks": ("text", "context"), "communities": ("report",), "tree_nodes": ("summary",)}
#: how much a reader keeps of what it read (:meth:`Neo4jGraphReader._memo`: ids, rows,
#: vectors, adjacency lists, attributes and records of one immutable version), in
#: numbers held (a vector of 384 counts 384, a record 1 per 8 characters): 4 Mi, some
#: 50-100 MB of Python objects
MEMO_NUMBERS = 4 << 20
_NONE = object()
#: the per-row properties read together (:meth:`Neo4jGraphReader._row_props`)
ROW_PROPS = {
    "chunks": ("id", "title", "title_entity", "vertex", "mentioned", "links", "links_in"),
    "entities": ("id", "name", "a_chunks", "a_degree", "a_component"),
}
_LISTS = {"mentioned", "links", "links_in"}
#: the kinds whose row properties are a few numbers: a read that finds such rows by
#: another key (an id, a name, a vector) brings their properties along
_SMALL_PROPS = frozenset(k for k, names in ROW_PROPS.items() if not _LISTS & set(names))


def _weight(value: Any) -> int:
    """About how many numbers ``value`` holds, for the memo's budget."""
    if isinstance(value, str):
        return 1 + len(value) // 8
    if isinstance(value, np.ndarray):
        return 1 + value.size
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, (list, tuple)):
        return 1 + sum(_weight(v) if isinstance(v, (list, tuple, str)) else 1 for v in value)
    if isinstance(value, Entity):
        return 8 + len(value.chunk_ids)
    return 1


_ATTRS = {
    "chunks": ("title", "vertex", "title_entity"),
    "entities": ("chunks", "degree", "component"),
    "communities": ("level", "rating", "size", "id_rank", "canonical", "hierarchy"),
}


def _props_of(kind: str, var: str) -> tuple[str, ...]:
    """The Cypher columns of :data:`ROW_PROPS` of ``kind`` on node ``var``."""
    return tuple(
        f"coalesce({var}.{f}, [])" if f in _LISTS else f"{var}.{f}" for f in ROW_PROPS[kind]
    )


def _props_by_row(
    kind: str, rows: Sequence[Any], cols: Sequence[Sequence[Any]]
) -> dict[int, dict[str, Any]]:
    """Rows' :data:`ROW_PROPS` by row, from :func:`_props_of`'s columns (a node without
    a row, such as an entity without a vector, left out)."""
    names = ROW_PROPS[kind]
    return {
        int(r): dict(zip(names, values, strict=True))
        for r, *values in zip(rows, *cols, strict=True)
        if r is not None and r >= 0
    }


def _tag(name: str, version: str) -> str:
    digest = hashlib.sha1(name.encode()).hexdigest()[:10]
    return f"g{digest}_{version}"


def _label(kind: str, tag: str) -> str:
    return f"{LABELS[kind]}_{tag}"


class Neo4jGraphStore(GraphStore):
    """One named graph in a Neo4j database."""

    def __init__(
        self,
        location: str,
        *,
        keep_versions: int = 3,
        ann_min_rows: int = ANN_MIN_ROWS,
        driver: Any = None,
    ) -> None:
        self.location = Location.parse(location)
        self.keep_versions = keep_versions
        #: kinds of at least this many rows carry product-quantised codes
        #: (``kgrag.nearest``; 0: none)
        self.ann_min_rows = ann_min_rows
        self.name = self.location.name
        # sidecars (feedback.sqlite) live in a local folder named after the graph
        cache = Path(os.environ.get("KGRAG_NEO4J_SIDECARS", Path.home() / ".cache" / "kgrag"))
        host = re.sub(r"[^A-Za-z0-9._-]", "_", self.location.uri.split("://", 1)[1])
        self.root = cache / "neo4j" / host / (self.location.database or "default") / self.name
        with contextlib.suppress(OSError):
            self.root.mkdir(parents=True, exist_ok=True)
        self._driver = driver or _connect(self.location)
        self._procedures: set[str] | None = None

    # -- sessions ---------------------------------------------------------------------

    def run(self, cypher: str, **params: Any) -> list[Any]:
        """Run one auto-committed query; its records."""
        from neo4j.exceptions import Neo4jError, ServiceUnavailable

        quiet = {k: _Quiet(v) if isinstance(v, list) else v for k, v in params.items()}
        try:
            with self._driver.session(database=self.location.database) as s:
                return list(s.run(cypher, **quiet))
        except ServiceUnavailable as exc:
            raise StoreError(
                f"{self.location.uri}: Neo4j is unreachable: {_one_line(exc)}"
            ) from exc
        except Neo4jError as exc:
            raise StoreError(f"{self.location.uri}: {exc.code}: {exc.message}") from exc

    def write(self, cypher: str, rows: Iterable[dict[str, Any]], **params: Any) -> None:
        """``UNWIND $rows AS row`` + ``cypher``, in batches, each its own transaction;
        ``rows`` is read a batch at a time (an upload's rows are made as they go)."""
        it = iter(rows)
        while batch := list(itertools.islice(it, BATCH)):
            self.run(f"UNWIND $rows AS row {cypher}", rows=batch, **params)

    def close(self) -> None:
        """Nothing to release: connections are pooled per server for the process
        (one driver per server, as Neo4j advises) and closed at exit."""

    def procedures(self) -> set[str]:
        """kgrag's procedures the server has (``kgrag.push``: the launcher registers
        it; a server a team runs has it when the launcher's jar is in its plugins
        folder). Asked once per store."""
        if self._procedures is None:
            found = self.run(
                "SHOW PROCEDURES YIELD name WHERE name STARTS WITH 'kgrag.' RETURN name"
            )
            self._procedures = {str(r[0]) for r in found}
        return self._procedures

    # -- the manifest -----------------------------------------------------------------

    def manifest(self) -> dict[str, Any]:
        found = self.run("MATCH (g:KgragGraph {name: $name}) RETURN g.manifest", name=self.name)
        if not found or not found[0][0]:
            return {}
        data: dict[str, Any] = json.loads(found[0][0])
        where = f"{self.location.uri}/{self.name}"
        return check_manifest(data, FORMAT, where, f"{where}: not a kgrag graph")

    def versions(self) -> list[str]:
        return sorted(self.manifest().get("versions", {}))

    def current(self) -> str | None:
        version: str | None = self.manifest().get("indexVersion")
        return version

    def reader(self, version: str | None = None) -> Neo4jGraphReader:
        manifest = self.manifest()
        if not manifest:
            raise StoreError(
                f"{self.location.uri}/{self.name}: no graph here (run `kgrag ingest ... "
                f"--graph {self.location.uri}/{self.name}`)"
            )
        version = version or manifest["indexVersion"]
        if version not in manifest["versions"]:
            raise VersionGone(f"indexVersion {version!r} is no longer stored", indexVersion=version)
        meta = dict(manifest["versions"][version], indexVersion=version)
        return Neo4jGraphReader(self, version, meta)

    def writer(self) -> Neo4jGraphWriter:
        return Neo4jGraphWriter(self)

    # -- used by the writer -----------------------------------------------------------

    def _lock(self, token: str) -> None:
        """Take the graph's writer lock (one writer at a time); a lock whose holder
        is a dead process on this machine is taken over."""
        self.run("MERGE (g:KgragGraph {name: $name})", name=self.name)
        for _ in range(600):
            got = self.run(
                "MATCH (g:KgragGraph {name: $name}) "
                "WITH g, coalesce(g.writer, '') AS held "
                "SET g.writer = CASE WHEN held = '' THEN $token ELSE held END "
                "RETURN g.writer = $token, held",
                name=self.name,
                token=token,
            )
            ok, held = bool(got[0][0]), str(got[0][1])
            if ok:
                return
            if _dead_holder(held):
                self.run(
                    "MATCH (g:KgragGraph {name: $name}) WHERE g.writer = $held "
                    "SET g.writer = $token",
                    name=self.name,
                    held=held,
                    token=token,
                )
                continue
            time.sleep(0.5)
        raise StoreError(f"{self.location.uri}/{self.name}: another writer holds the graph")

    def _unlock(self, token: str) -> None:
        with contextlib.suppress(StoreError):
            self.run(
                "MATCH (g:KgragGraph {name: $name}) WHERE g.writer = $token REMOVE g.writer",
                name=self.name,
                token=token,
            )

    def _tags_written(self) -> set[str]:
        """Versions with indexes in the database (published or left by a dead writer)."""
        prefix = f"kg_{_tag(self.name, '')}"
        found = self.run("SHOW INDEXES YIELD name WHERE name STARTS WITH $p RETURN name", p=prefix)
        return {str(r[0])[len(prefix) :].split("__")[0] for r in found}

    def _drop(self, version: str) -> None:
        """Delete a version's nodes and drop its indexes."""
        tag = _tag(self.name, version)
        for kind in LABELS:
            label = _label(kind, tag)
            self.run(
                f"MATCH (n:`{label}`) CALL {{ WITH n DETACH DELETE n }} "
                "IN TRANSACTIONS OF 10000 ROWS"
            )
        prefix = f"kg_{tag}__"
        for (name,) in self.run(
            "SHOW CONSTRAINTS YIELD name WHERE name STARTS WITH $p RETURN name", p=prefix
        ):
            self.run(f"DROP CONSTRAINT `{name}` IF EXISTS")
        for (name,) in self.run(
            "SHOW INDEXES YIELD name WHERE name STARTS WITH $p RETURN name", p=prefix
        ):
            self.run(f"DROP INDEX `{name}` IF EXISTS")


class _Quiet(list):  # type: ignore[type-arg]
    """A query parameter list whose ``repr`` is its length. The driver formats every
    RUN's parameters for its debug log before it asks whether anything logs; for an
    upload batch (5,000 rows of vectors) that was most of the client's time: 10k
    vectors went in 6.1 s as a plain list, 1.1 s so."""

    def __repr__(self) -> str:
        return f"<{len(self)} items>"


def _dead_holder(held: str) -> bool:
    host, _, pid = held.rpartition(":")[0].rpartition(":")
    if pid == "" or host != socket.gethostname():
        return False
    try:
        os.kill(int(pid), 0)
    except (ProcessLookupError, ValueError):
        return True
    except PermissionError:
        return False
    return False


_DRIVERS: dict[tuple[str, Any], Any] = {}
_DRIVERS_LOCK = threading.Lock()


def _close_drivers() -> None:
    with _DRIVERS_LOCK:
        for driver in _DRIVERS.values():
            with contextlib.suppress(Exception):
                driver.close()
        _DRIVERS.clear()


atexit.register(_close_drivers)


def _connect(location: Location) -> Any:
    """The process's driver for the server ``location`` names (made once)."""
    user = os.environ.get("KGRAG_NEO4J_USER")
    password = os.environ.get("KGRAG_NEO4J_PASSWORD")
    auth = (user or "neo4j", password or "") if (user or password) else None
    key = (location.uri, auth)
    with _DRIVERS_LOCK:
        if key not in _DRIVERS:
            _DRIVERS[key] = _new_driver(location, auth)
        return _DRIVERS[key]


def _new_driver(location: Location, auth: Any) -> Any:
    try:
        import neo4j
    except ImportError as exc:  # pragma: no cover - a dependency
        raise StoreError("the neo4j Python driver is not installed") from exc
    driver = None
    try:
        driver = neo4j.GraphDatabase.driver(
            location.uri, auth=auth, connection_timeout=10, notifications_min_severity="OFF"
        )
        driver.verify_connectivity()
    except BaseException as exc:
        if driver is not None:
            driver.close()
        if isinstance(exc, neo4j.exceptions.AuthError):
            raise StoreError(
                f"{location.uri}: Neo4j refused the credentials: {exc.message}"
            ) from exc
        if isinstance(exc, (neo4j.exceptions.ServiceUnavailable, OSError)):
            raise StoreError(f"{location.uri}: Neo4j is unreachable: {_one_line(exc)}") from exc
        if isinstance(exc, (neo4j.exceptions.Neo4jError, neo4j.exceptions.DriverError, ValueError)):
            raise StoreError(f"{location.uri}: cannot connect to Neo4j: {_one_line(exc)}") from exc
        raise
    return driver


# -- the write side ------------------------------------------------------------------------


class Neo4jGraphWriter(GraphWriter):
    """Stages a version in a private embedded store, then uploads and publishes it."""

    def __init__(self, store: Neo4jGraphStore) -> None:
        from kgrag.store.folder.store import SQLiteGraphStore

        self.store = store
        self.token = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        store._lock(self.token)
        self._done = False
        try:
            published = set(store.versions())
            for stale in store._tags_written() - published:  # left by a writer that died
                store._drop(stale)
            self._tmp = Path(tempfile.mkdtemp(prefix="kgrag-neo4j-"))
            # no ANN files: Neo4j's vector indexes answer nearest neighbours
            self._stage = SQLiteGraphStore(self._tmp, keep_versions=1, ann_min_rows=2**62)
            self._writer = self._stage.writer()
        except BaseException:
            store._unlock(self.token)
            raise

    def add(self, kind: str, records: Iterable[Any]) -> None:
        self._writer.add(kind, records)

    def add_vectors(self, kind: str, ids: Sequence[str], matrix: np.ndarray) -> None:
        self._writer.add_vectors(kind, ids, matrix)

    def commit(self, meta: dict[str, Any]) -> str:
        staged = self._writer.commit(meta)
        store = self.store
        manifest = store.manifest() or new_manifest(FORMAT)
        version = next_version([*manifest.get("versions", {}), *store._tags_written()])
        folder = self._tmp / "versions" / staged
        coded = upload(store, _tag(store.name, version), folder, store.ann_min_rows)
        version_meta = json.loads((folder / "version.json").read_text())
        version_meta["pq_kinds"] = coded
        with self._stage.reader(staged) as reader:
            version_meta["counts"] = reader.counts()
        crash_point("neo4j-before-publish")  # uploaded, not published
        dropped = publish(manifest, version, version_meta, store.keep_versions)
        done = store.run(
            "MATCH (g:KgragGraph {name: $name}) WHERE g.writer = $token "
            "SET g.manifest = $manifest RETURN count(g)",
            name=store.name,
            token=self.token,
            manifest=json.dumps(manifest, sort_keys=True),
        )
        if not done or not done[0][0]:
            raise StoreError(f"{store.location.uri}/{store.name}: lost the writer lock")
        for old in dropped:
            store._drop(old)
        self._finish()
        return version

    def abort(self) -> None:
        if self._done:
            return
        with contextlib.suppress(Exception):
            self._writer.abort()
        self._finish()

    def _finish(self) -> None:
        self._done = True
        shutil.rmtree(self._tmp, ignore_errors=True)
        self.store._unlock(self.token)


def upload(
    store: Neo4jGraphStore, tag: str, folder: Path, ann_min_rows: int = ANN_MIN_ROWS
) -> list[str]:
    """Write the staged version ``folder`` (an embedded version with serving files)
    into Neo4j under ``tag``, indexes included; nothing is published. The kinds of at
    least ``ann_min_rows`` rows carry the product-quantised codes the folder's index
    would hold (``kgrag.nearest`` searches them); the list of those kinds."""
    serving = folder / SERVING

    def arr(name: str) -> np.ndarray:
        return np.load(serving / f"{name}.npy", mmap_mode="r")

    def ids(kind: str) -> list[str]:
        return [b.decode() for b in np.asarray(arr(f"ids.{kind}")).tolist()]

    def vectors(kind: str) -> np.ndarray:
        path = folder / "vectors" / f"{kind}.npy"
        return np.load(path, mmap_mode="r") if path.exists() else np.zeros((0, 0), np.float32)

    def csr(graph: str, i: int) -> np.ndarray:
        indptr, indices = csrs[graph]
        return np.asarray(indices[int(indptr[i]) : int(indptr[i + 1])])

    csrs = {g: (arr(f"{g}.indptr"), arr(f"{g}.indices")) for g in GRAPHS}
    walk_data, rel_data, rel_edge = arr("walk.data"), arr("relations.data"), arr("relations.edge")
    db = sqlite3.connect(f"file:{folder / 'graph.sqlite'}?mode=ro", uri=True)
    L = {kind: _label(kind, tag) for kind in LABELS}  # noqa: N806
    _indexes(store, tag, L)

    def node_rows(kind: str) -> Iterator[tuple[int, str, list[float] | None]]:
        vec = vectors(kind)
        for row, id_ in enumerate(ids(kind)):
            yield row, id_, vec[row].tolist() if len(vec) else None

    coded: list[str] = []

    def put(kind: str, rows: Iterable[dict[str, Any]], extra: str = "") -> None:
        labels = f"{LABELS[kind]}:`{L[kind]}`"
        vecs = vectors(kind)
        if kind in ANN_KINDS and 0 < ann_min_rows <= len(vecs):
            rows = _with_codes(rows, _codebook(store, L, kind, vecs))
            coded.append(kind)
        store.write(
            f"CREATE (n:{labels}) SET n = row.props {extra}"
            + (
                " WITH n, row WHERE row.vec IS NOT NULL "
                "CALL db.create.setNodeVectorProperty(n, 'vec', row.vec)"
            ),
            rows,
        )
        if kind in ANN_KINDS:  # its index fills in the background while the rest goes in
            _vector_index(store, tag, L, folder, kind)

    chunk_vertex = np.asarray(arr("chunk_vertex"))
    titles = np.asarray(arr("attr.chunks.title"))
    title_entity = np.asarray(arr("title_entity"))
    link_in = np.asarray(arr("link_in"))
    walk_ptr = arr("walk.indptr")

    def walk_of(vertex: int) -> dict[str, Any]:
        a, b = int(walk_ptr[vertex]), int(walk_ptr[vertex + 1])
        return {
            "walk": np.asarray(csrs["walk"][1][a:b]).tolist(),
            "walk_w": np.asarray(walk_data[a:b], dtype=np.float64).tolist(),
        }

    # documents
    docs = (
        {"props": {"id": r[0], "title": r[1], "rec": json.dumps(list(r))}}
        for r in db.execute("SELECT id, title, uri, meta, text, sections FROM documents")
    )
    store.write(f"CREATE (n:Document:`{L['documents']}`) SET n = row.props", docs)
    # chunks
    rec = {
        r[0]: r
        for r in db.execute(f"SELECT {schema.CHUNK_COLUMNS} FROM chunks")  # noqa: S608
    }

    def chunk_rows() -> Iterator[dict[str, Any]]:
        for row, id_, vec in node_rows("chunks"):
            r = rec.pop(id_)
            v = int(chunk_vertex[row])
            links = csr("links", row)
            props = {
                "id": id_,
                "row": row,
                "vertex": v,
                "doc_id": r[1],
                "idx": r[2],
                "text": r[3],
                "context": r[4],
                "title": titles[row].decode(),
                "title_entity": int(title_entity[row]),
                "mentioned": csr("mentions", row).tolist(),
                "links": links.tolist(),
                "links_in": link_in[links].astype(np.int64).tolist(),
                "rec": json.dumps(list(r)),
                **walk_of(v),
            }
            yield {"props": props, "vec": vec}
        if rec:
            raise StoreError(f"{len(rec)} chunks have no vector; the build is incomplete")

    put("chunks", chunk_rows(), "SET n:`Vertex_" + tag + "`")
    # sentences
    srec = {
        f"{r[0]}#{r[1]}": r
        for r in db.execute('SELECT chunk_id, idx, start, "end", entity_ids FROM sentences')
    }

    def sentence_rows() -> Iterator[dict[str, Any]]:
        for row, id_, vec in node_rows("sentences"):
            r = srec.pop(id_)
            props = {"id": id_, "row": row, "chunk_id": r[0], "rec": json.dumps(list(r))}
            yield {"props": props, "vec": vec}
        for id_, r in srec.items():  # those without a vector, once the others are out
            props = {"id": id_, "row": -1, "chunk_id": r[0], "rec": json.dumps(list(r))}
            yield {"props": props, "vec": None}

    put("sentences", sentence_rows())
    # entities
    erec = {r[0]: r for r in db.execute("SELECT id, name, type, aliases FROM entities")}
    attrs = {name: np.asarray(arr(f"attr.entities.{name}")) for name in _ATTRS["entities"]}
    rel_ptr = csrs["relations"][0]

    def entity_rows() -> Iterator[dict[str, Any]]:
        for row, id_, vec in node_rows("entities"):
            r = erec.pop(id_)
            a, b = int(rel_ptr[row]), int(rel_ptr[row + 1])
            props = {
                "id": id_,
                "row": row,
                "vertex": row,
                "name": r[1],
                "type": r[2],
                "rec": json.dumps(list(r)),
                "a_chunks": int(attrs["chunks"][row]),
                "a_degree": int(attrs["degree"][row]),
                "a_component": int(attrs["component"][row]),
                "rel": np.asarray(csrs["relations"][1][a:b]).tolist(),
                "rel_len": np.asarray(rel_data[a:b], dtype=np.float64).tolist(),
                "rel_edge": np.asarray(rel_edge[a:b], dtype=np.int64).tolist(),
                **walk_of(row),
            }
            yield {"props": props, "vec": vec}
        for i, r in erec.items():  # those without a vector, once the others are out
            props = {"id": i, "row": -1, "name": r[1], "type": r[2], "rec": json.dumps(list(r))}
            yield {"props": props, "vec": None}

    put("entities", entity_rows(), "SET n:`Vertex_" + tag + "`")
    # facts (the vectors of stated relations) and the relations themselves
    put("facts", ({"props": {"id": i, "row": row}, "vec": v} for row, i, v in node_rows("facts")))
    edge_of = {rid: i for i, rid in enumerate(ids_of(arr("relations.ids")))}
    rels = (
        {
            "src": r[1],
            "dst": r[3],
            "props": {
                "id": r[0],
                "predicate": r[2],
                "weight": r[4],
                "kind": r[5],
                "evidence": json.loads(r[6]),
                "edge": edge_of.get(r[0], -1),
                "rec": json.dumps(list(r)),
            },
        }
        for r in db.execute("SELECT id, src, predicate, dst, weight, kind, evidence FROM relations")
    )
    store.write(
        f"MATCH (a:`{L['entities']}` {{id: row.src}}), (b:`{L['entities']}` {{id: row.dst}}) "
        "CREATE (a)-[x:RELATED]->(b) SET x = row.props",
        rels,
    )
    store.write(
        f"MATCH (c:`{L['chunks']}` {{id: row.chunk}}), (e:`{L['entities']}` {{id: row.entity}}) "
        "CREATE (c)-[:MENTIONS {count: row.count}]->(e)",
        (
            {"entity": r[0], "chunk": r[1], "count": r[2]}
            for r in db.execute("SELECT entity_id, chunk_id, count FROM mentions")
        ),
    )
    store.write(
        f"MATCH (a:`{L['entities']}` {{id: row.src}}), (b:`{L['entities']}` {{id: row.dst}}) "
        "CREATE (a)-[:SYNONYM {score: row.score}]->(b)",
        (
            {"src": r[0], "dst": r[1], "score": r[2]}
            for r in db.execute("SELECT src, dst, score FROM synonyms")
        ),
    )
    store.write(
        f"MATCH (c:`{L['chunks']}` {{id: row.chunk}}), (d:`{L['documents']}` {{id: row.doc}}) "
        "CREATE (c)-[:PART_OF]->(d)",
        ({"chunk": r[0], "doc": r[1]} for r in db.execute("SELECT id, doc_id FROM chunks")),
    )
    chunk_ids = ids("chunks")
    store.write(
        f"MATCH (a:`{L['chunks']}` {{row: row.a}}), (b:`{L['chunks']}` {{row: row.b}}) "
        "CREATE (a)-[:NAMES]->(b)",
        (
            {"a": row, "b": int(t)}
            for row in range(len(chunk_ids))
            for t in csr("links", row).tolist()
        ),
    )

    def leveled(kind: str, text: str, column: int, extra: Any = None) -> Iterator[dict[str, Any]]:
        """Rows of a leveled kind: those with a vector by row, then those without
        (``row`` -1); ``extra(row)``: more properties of a row with a vector."""
        rec = {r[0]: r for r in db.execute(f"SELECT * FROM {kind}")}  # noqa: S608
        for row, id_, vec in node_rows(kind):
            r = rec.pop(id_)
            props = {"id": id_, "row": row, "level": r[1], text: r[column]}
            props.update({"rec": json.dumps(list(r)), **(extra(row) if extra else {})})
            yield {"props": props, "vec": vec}
        for id_, r in rec.items():
            props = {"id": id_, "row": -1, "level": r[1], text: r[column]}
            yield {"props": {**props, "rec": json.dumps(list(r))}, "vec": None}

    # communities
    cattrs = {n: np.asarray(arr(f"attr.communities.{n}")) for n in _ATTRS["communities"]}
    rows = leveled(
        "communities",
        "report",
        5,
        lambda row: {f"a_{n}": _plain(v[row]) for n, v in cattrs.items()},
    )
    put("communities", rows)
    store.write(
        f"MATCH (a:`{L['communities']}` {{id: row.a}}), (b:`{L['communities']}` {{id: row.b}}) "
        "CREATE (a)-[:CHILD_OF]->(b)",
        [
            {"a": r[0], "b": r[1]}
            for r in db.execute("SELECT id, parent FROM communities WHERE parent IS NOT NULL")
        ],
    )
    # tree nodes
    rows = leveled("tree_nodes", "summary", 3)
    put("tree_nodes", rows)
    children = (
        {"a": r[0], "b": c}
        for r in db.execute("SELECT id, children FROM tree_nodes")
        for c in json.loads(r[1])
    )
    store.write(
        f"MATCH (a:`{L['tree_nodes']}` {{id: row.a}}) "
        f"OPTIONAL MATCH (t:`{L['tree_nodes']}` {{id: row.b}}) "
        f"OPTIONAL MATCH (c:`{L['chunks']}` {{id: row.b}}) "
        "WITH a, coalesce(t, c) AS b WHERE b IS NOT NULL CREATE (a)-[:SUMMARIZES]->(b)",
        children,
    )
    # name keys
    names = sqlite3.connect(f"file:{serving / 'names.sqlite'}?mode=ro", uri=True)
    for kind, table in (("names", "names"), ("sentence_keys", "sentences")):
        store.write(
            f"CREATE (n:{LABELS[kind]}:`{L[kind]}`) SET n = row",
            ({"key": k, "row": r} for k, r in names.execute(f"SELECT key, row FROM {table}")),  # noqa: S608
        )
    names.close()
    _postings(store, L, serving, db)
    db.close()
    _text_indexes(store, tag, L)
    _await_indexes(store)
    return coded


def _codebook(
    store: Neo4jGraphStore, labels: dict[str, str], kind: str, matrix: np.ndarray
) -> np.ndarray:
    """Train the folder's product quantiser on a kind's vectors (:func:`trained_pq`),
    write its codebook node and return every row's code (``code_size`` bytes)."""
    import faiss

    index = trained_pq(matrix)  # held: its pq is a view into it
    pq = index.pq
    if pq.nbits != 4:
        raise StoreError(f"{kind}: codes of {pq.nbits} bits; kgrag.nearest reads 4")
    centroids = faiss.vector_to_array(pq.centroids).astype(np.float64)
    store.run(
        f"CREATE (n:{LABELS['codebooks']}:`{labels['codebooks']}`) "
        "SET n.kind = $kind, n.m = $m, n.sub = $sub, n.centroids = $centroids",
        kind=kind,
        m=int(pq.M),
        sub=int(pq.dsub),
        centroids=centroids.tolist(),
    )
    codes = np.empty((len(matrix), pq.code_size), dtype=np.uint8)
    for start in range(0, len(matrix), 65_536):
        block = np.asarray(matrix[start : start + 65_536], dtype=np.float32)
        codes[start : start + len(block)] = pq.compute_codes(np.ascontiguousarray(block))
    return codes


def _with_codes(rows: Iterable[dict[str, Any]], codes: np.ndarray) -> Iterator[dict[str, Any]]:
    """Upload rows with each vector row's code as its ``pq`` property (bytes)."""
    for r in rows:
        row = r["props"].get("row", -1)
        if r.get("vec") is not None and row >= 0:
            r["props"]["pq"] = codes[row].tobytes()
        yield r


def _postings(
    store: Neo4jGraphStore, labels: dict[str, str], serving: Path, db: sqlite3.Connection
) -> None:
    """The BM25 postings the embedded store scores from, as they are: a node per term
    (its idf, documents, counts and the documents' lengths), one per index (the mean
    length, the tokenizer), and each document's number on its node, so that a query is
    scored in the database with the embedded store's arithmetic."""
    for kind, (fts, _, _) in schema.FTS.items():
        postings = Postings.open(serving, kind)
        try:
            store.write(
                f"CREATE (n:Bm25Term:`{labels['bm25_terms']}`) SET n = row",
                _term_rows(kind, postings),
            )
            store.run(
                f"CREATE (n:Bm25Index:`{labels['bm25_indexes']}`) SET n = $props",
                props={"kind": kind, "avgdl": postings.avgdl, "tokenizer": tokenizer_of(db, fts)},
            )
            doc_ids = ids_of(np.load(serving / f"bm25.{kind}.ids.npy", mmap_mode="r"))
            store.write(
                f"MATCH (n:`{labels[kind]}` {{id: row.id}}) SET n.bm25 = row.doc",
                ({"id": i, "doc": d} for d, i in enumerate(doc_ids)),
            )
        finally:
            postings.close()


def _await_indexes(store: Neo4jGraphStore, limit_s: float = INDEX_WAIT_S) -> None:
    """Wait until every index is online: a big graph's vector indexes fill for longer
    than one ``db.awaitIndexes`` call waits (60k passages: 1.35M vectors). An index
    that failed, or one still filling after ``limit_s``, is an error (nothing is
    published)."""
    deadline = time.monotonic() + limit_s
    while True:
        waiting = store.run(
            "SHOW INDEXES YIELD name, state, populationPercent WHERE state <> 'ONLINE' "
            "RETURN name, state, populationPercent"
        )
        if not waiting:
            return
        failed = [name for name, state, _ in waiting if state == "FAILED"]
        if failed:
            raise StoreError(f"{store.location.uri}: index {failed[0]} failed to fill")
        if time.monotonic() > deadline:
            name, _, share = waiting[0]
            raise StoreError(
                f"{store.location.uri}: index {name} still filling ({share or 0:.0f}%) after "
                f"{limit_s:.0f} s"
            )
        time.sleep(1.0)


def _term_rows(kind: str, postings: Postings) -> Iterator[dict[str, Any]]:
    """Each term of ``postings`` as the properties of its node (made as they go)."""
    n, length = len(postings.length), np.asarray(postings.length, dtype=np.int64)
    for t, term in enumerate(ids_of(postings.terms)):
        docs, tf = postings.posting(t)
        yield {
            "kind": kind,
            "term": term,
            "idf": inverse_frequency(n, len(docs)),
            "docs": docs.astype(np.int64).tolist(),
            "tf": tf.astype(np.int64).tolist(),
            "lens": length[docs].tolist(),
        }


def ids_of(arr: np.ndarray) -> list[str]:
    return [b.decode() for b in np.asarray(arr).tolist()]


def _plain(value: Any) -> Any:
    return value.item() if hasattr(value, "item") else value


def _indexes(store: Neo4jGraphStore, tag: str, labels: dict[str, str]) -> None:
    """Constraints and range indexes of a version, made before its nodes."""
    p = f"kg_{tag}__"
    for kind in (
        "documents",
        "chunks",
        "entities",
        "facts",
        "communities",
        "tree_nodes",
        "sentences",
    ):
        store.run(
            f"CREATE CONSTRAINT `{p}{kind}_id` IF NOT EXISTS "
            f"FOR (n:`{labels[kind]}`) REQUIRE n.id IS UNIQUE"
        )
    for kind in ("chunks", "entities", "facts", "communities", "tree_nodes", "sentences"):
        store.run(f"CREATE INDEX `{p}{kind}_row` IF NOT EXISTS FOR (n:`{labels[kind]}`) ON (n.row)")
    index = "CREATE INDEX `{}` IF NOT EXISTS FOR (n:`{}`) ON (n.{})"
    store.run(index.format(f"{p}sentences_chunk", labels["sentences"], "chunk_id"))
    store.run(f"CREATE INDEX `{p}vertex` IF NOT EXISTS FOR (n:`Vertex_{tag}`) ON (n.vertex)")
    store.run(index.format(f"{p}communities_level", labels["communities"], "level"))
    store.run(index.format(f"{p}tree_nodes_level", labels["tree_nodes"], "level"))
    for kind in ("names", "sentence_keys"):
        store.run(f"CREATE INDEX `{p}{kind}` IF NOT EXISTS FOR (n:`{labels[kind]}`) ON (n.key)")
    store.run(
        f"CREATE INDEX `{p}bm25_terms` IF NOT EXISTS "
        f"FOR (n:`{labels['bm25_terms']}`) ON (n.kind, n.term)"
    )
    for kind in FULLTEXT:
        store.run(index.format(f"{p}{kind}_bm25", labels[kind], "bm25"))
    store.run("CREATE INDEX kg_related_id IF NOT EXISTS FOR ()-[r:RELATED]-() ON (r.id)")
    store.run("CREATE INDEX kg_related_edge IF NOT EXISTS FOR ()-[r:RELATED]-() ON (r.edge)")
    store.run("CREATE INDEX kg_graph_name IF NOT EXISTS FOR (g:KgragGraph) ON (g.name)")


def _vector_index(
    store: Neo4jGraphStore, tag: str, labels: dict[str, str], folder: Path, kind: str
) -> None:
    """The vector index of one kind (none where the version has no such vectors)."""
    p = f"kg_{tag}__"
    path = folder / "vectors" / f"{kind}.npy"
    shape = np.load(path, mmap_mode="r").shape if path.exists() else (0, 0)
    if shape[0]:
        store.run(
            f"CREATE VECTOR INDEX `{p}{kind}_vec` IF NOT EXISTS "
            f"FOR (n:`{labels[kind]}`) ON (n.vec) "
            # unquantised, denser than the defaults (16, 100): 2Wiki facts, exact top 5 among
            # the best 256: 0.994 at the defaults, 0.998 so
            "OPTIONS {indexConfig: {`vector.dimensions`: $dim, "
            "`vector.similarity_function`: 'cosine', `vector.quantization.enabled`: false, "
            "`vector.hnsw.m`: 32, `vector.hnsw.ef_construction`: 200}}",
            dim=int(shape[1]),
        )


def _text_indexes(store: Neo4jGraphStore, tag: str, labels: dict[str, str]) -> None:
    p = f"kg_{tag}__"
    for kind, props in FULLTEXT.items():
        on = ", ".join(f"n.{x}" for x in props)
        store.run(
            f"CREATE FULLTEXT INDEX `{p}{kind}_text` IF NOT EXISTS FOR (n:`{labels[kind]}`) "
            f"ON EACH [{on}] OPTIONS {{indexConfig: {{`fulltext.analyzer`: 'english'}}}}"
        )


# -- the read side --------------------------------------------------------------------------


class RemoteMatrix:
    """The vectors of one kind, read from Neo4j by row: ``m[rows]`` fetches them,
    ``m @ q`` scores every row in the database."""

    def __init__(self, reader: Neo4jGraphReader, kind: str) -> None:
        self.reader, self.kind = reader, kind
        self.shape = (reader.size(kind), int(reader.manifest.get("dim", 0)))
        self.dtype = np.dtype(np.float32)
        self.ndim = 2

    def __len__(self) -> int:
        return self.shape[0]

    def __getitem__(self, rows: Any) -> np.ndarray:
        if isinstance(rows, (int, np.integer)):
            return self.reader.vectors_of(self.kind, np.array([int(rows)]))[0]
        if isinstance(rows, slice):
            rows = np.arange(self.shape[0])[rows]
        return self.reader.vectors_of(self.kind, np.asarray(rows, dtype=np.int64))

    def __matmul__(self, q: np.ndarray) -> np.ndarray:
        q = np.asarray(q, dtype=np.float32)
        if q.ndim == 1:
            return self.reader.similarity(self.kind, q)
        return np.stack([self.reader.similarity(self.kind, q[:, j]) for j in range(q.shape[1])], 1)

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        out = self[np.arange(self.shape[0])]
        return out.astype(dtype) if dtype is not None else out


class Neo4jGraphReader(GraphReader):
    """One published version of a graph in Neo4j."""

    concurrent_reads = True

    def __init__(self, store: Neo4jGraphStore, version: str, meta: dict[str, Any]) -> None:
        self.store = store
        self.version = version
        self.manifest = meta
        self.index_version = version
        self.tag = _tag(store.name, version)
        self.L = {kind: _label(kind, self.tag) for kind in LABELS}
        self._sizes: dict[str, int] = {}
        self._lock = threading.Lock()
        self._sparse: dict[str, QueryTokenizer] = {}
        self._words: sqlite3.Connection | None = None  # the query tokenizers' tables
        self._kept: OrderedDict[tuple[str, Any], Any] = OrderedDict()  # see _memo
        self._held = 0  # the numbers _kept holds, about (_weight)
        #: run the PageRank push, the full dense scan and BM25 in kgrag's procedures
        #: where the server has them (``kgrag.push``, ``kgrag.similarity``,
        #: ``kgrag.bm25``); off, in Cypher and the client alone
        self.server_push = True
        #: the version's build, for the server's cache of what its procedures read
        self._build = f"{meta.get('created', '')}/{meta.get('fingerprint', '')}"

    def _q(self, cypher: str, **params: Any) -> list[Any]:
        return self.store.run(cypher, **params)

    def _cols(self, match: str, values: Sequence[str], **params: Any) -> list[list[Any]]:
        """``match`` then one record of ``collect(value)`` per value: the driver decodes
        one record of lists in about half the time of a record per row."""
        found = self._q(f"{match} RETURN " + ", ".join(f"collect({v})" for v in values), **params)
        cols = [list(c) for c in found[0]] if found else [[] for _ in values]
        if len({len(c) for c in cols}) > 1:  # collect() leaves out nulls: rows would shift
            raise StoreError(
                f"{self.store.location.uri}: version {self.version}: a node lacks one of "
                f"{', '.join(values)} (the graph in Neo4j is incomplete: ingest again)"
            )
        return cols

    def _recs(self, kind: str, ids: Sequence[str] | None, key: str = "id") -> list[Any]:
        label = self.L[kind]
        if ids is None:
            found = self._q(f"MATCH (n:`{label}`) RETURN n.rec")
            return [json.loads(r[0]) for r in found]
        if key != "id":  # sentences by chunk: several records a key
            found = self._q(
                f"UNWIND $ids AS k MATCH (n:`{label}` {{{key}: k}}) RETURN n.rec",
                ids=list(dict.fromkeys(ids)),
            )
            return [json.loads(r[0]) for r in found]

        def fetch(wanted: list[str]) -> dict[str, Any]:
            found = self._q(
                f"UNWIND $ids AS k MATCH (n:`{label}` {{id: k}}) RETURN k, n.rec", ids=wanted
            )
            return {k: rec for k, rec in found}

        got = self._memo(f"rec:{kind}", ids, fetch)
        return [json.loads(got[k]) for k in dict.fromkeys(ids) if k in got]

    def _has(self, procedure: str) -> bool:
        """Whether to call one of kgrag's procedures (the server has it, and
        ``server_push`` is on)."""
        return self.server_push and procedure in self.store.procedures()

    def _memo(
        self, space: str, keys: Sequence[Any], fetch: Callable[[list[Any]], dict[Any, Any]]
    ) -> dict[Any, Any]:
        """The values of ``keys`` in ``space``, asking ``fetch`` (one query) only for the
        keys not kept yet. A published version never changes, so what was read stays
        true; the reader keeps the last :data:`MEMO_ENTRIES` values it read (a search
        reads the same seeds, chains and hubs again and again: one query per path, per
        hit and per feature otherwise). Keys ``fetch`` does not answer are asked again."""
        wanted = list(dict.fromkeys(keys))
        out: dict[Any, Any] = {}
        missing = []
        with self._lock:
            for k in wanted:
                hit = self._kept.get((space, k), _NONE)
                if hit is _NONE:
                    missing.append(k)
                else:
                    self._kept.move_to_end((space, k))
                    out[k] = hit
        if missing:
            got = fetch(missing)
            out.update(got)
            with self._lock:
                for k, v in got.items():
                    key = (space, k)
                    if key not in self._kept:
                        self._kept[key] = v
                        self._held += _weight(v)
                while self._held > MEMO_NUMBERS and self._kept:
                    self._held -= _weight(self._kept.popitem(last=False)[1])
        return out

    def _row_props(self, kind: str, rows: Sequence[int]) -> dict[int, dict[str, Any]]:
        """The small serving properties (:data:`ROW_PROPS`) of ``rows`` of a kind, read
        together: a search asks for a passage's title, mentions, links and id one after
        another, and this answers all of them with one query."""

        def fetch(wanted: list[int]) -> dict[int, dict[str, Any]]:
            cols = self._cols(
                f"UNWIND $rows AS r MATCH (n:`{self.L[kind]}` {{row: r}})",
                ("r", *_props_of(kind, "n")),
                rows=sorted(wanted),
            )
            return _props_by_row(kind, cols[0], cols[1:])

        return self._memo(f"node:{kind}", rows, fetch)

    #: the columns of a relation's ends (a, b) :meth:`_keep_ends` keeps
    _ends = ("a.row", *_props_of("entities", "a"), "b.row", *_props_of("entities", "b"))

    def _keep_ends(self, cols: Sequence[Sequence[Any]]) -> None:
        """Keep the properties of relations' ends read with :attr:`_ends`."""
        half = len(cols) // 2
        for part in (cols[:half], cols[half:]):
            self._keep_props("entities", part[0], part[1:])

    def _keep_props(self, kind: str, rows: Sequence[Any], cols: Sequence[Sequence[Any]]) -> None:
        """Keep the row properties a read brought along (``cols``: :func:`_props_of`'s
        columns for ``rows``) for the reads of them that follow, and each row's id both
        ways (rows without one, such as an OPTIONAL MATCH's misses, are left out)."""
        props = _props_by_row(kind, rows, cols)
        if not props:
            return
        self._memo(f"node:{kind}", list(props), lambda wanted: {x: props[x] for x in wanted})
        back = {p["id"]: row for row, p in props.items()}
        self._memo(f"row:{kind}", list(back), lambda wanted: {i: back[i] for i in wanted})

    # -- record readers ---------------------------------------------------------------

    def counts(self) -> dict[str, int]:
        counts = self.manifest.get("counts") or {}
        return {kind: int(counts.get(kind, 0)) for kind in RECORD_KINDS}

    def records(
        self,
        kind: str,
        keys: Sequence[str] | None = None,
        *,
        key: str = "id",
        level: int | None = None,
    ) -> list[Any]:
        record_request(kind, keys, key)
        if kind == "communities":
            return self._communities(level, keys)
        if kind == "tree_nodes":
            return self._tree_nodes(level, keys)
        if kind == "relations":
            return self._relations(keys, by_end=key == "end")
        if kind == "synonyms":
            return self._synonyms()
        read: dict[str, Callable[[Sequence[str] | None], list[Any]]] = {
            "documents": self._documents,
            "chunks": self._chunks,
            "sentences": self._sentences,
            "entities": self._entities,
            "mentions": self._mentions,
        }
        return read[kind](keys)

    def _documents(self, ids: Sequence[str] | None) -> list[Document]:
        return sorted(
            (schema.document(r) for r in self._recs("documents", ids)), key=lambda d: d.id
        )

    def _chunks(self, ids: Sequence[str] | None) -> list[Chunk]:
        out = (schema.chunk(r) for r in self._recs("chunks", ids))
        return sorted(out, key=lambda c: (c.doc_id, c.index))

    def _sentences(self, chunk_ids: Sequence[str] | None) -> list[Sentence]:
        out = (schema.sentence(r) for r in self._recs("sentences", chunk_ids, key="chunk_id"))
        return sorted(out, key=lambda s: (s.chunk_id, s.index))

    def _entities(self, ids: Sequence[str] | None) -> list[Entity]:
        label = self.L["entities"]
        query = (
            f"MATCH (e:`{label}`) %sOPTIONAL MATCH (c)-[:MENTIONS]->(e) "
            "RETURN e.id, e.rec, collect(c.id)"
        )
        if ids is None:
            found = self._q(query % "")
            out = [schema.entity(json.loads(r[1]), tuple(sorted(r[2]))) for r in found]
            return sorted(out, key=lambda e: e.id)

        def fetch(wanted: list[str]) -> dict[str, Any]:
            found = self._q(query % "WHERE e.id IN $ids ", ids=wanted)
            return {r[0]: schema.entity(json.loads(r[1]), tuple(sorted(r[2]))) for r in found}

        got = self._memo("entity", ids, fetch)
        return sorted(got.values(), key=lambda e: e.id)

    def entity_names(self, ids: Sequence[str]) -> dict[str, str]:
        label = self.L["entities"]

        def fetch(wanted: list[str]) -> dict[str, Any]:
            # the names of entities whose row properties were read already are kept
            rows = self._memo("row:entities", wanted, lambda _: {})
            props = self._memo("node:entities", [r for r in rows.values() if r >= 0], lambda _: {})
            have = {p["id"]: p["name"] for p in props.values()}
            rest = [i for i in wanted if i not in have]
            if rest:
                found = self._q(
                    f"MATCH (e:`{label}`) WHERE e.id IN $ids RETURN e.id, e.name", ids=rest
                )
                have.update({r[0]: r[1] for r in found})
            return {i: have[i] for i in wanted if i in have}

        return self._memo("entity-name", ids, fetch)

    def _mentions(self, chunk_ids: Sequence[str] | None) -> list[Mention]:
        where = "" if chunk_ids is None else "WHERE c.id IN $ids "
        found = self._q(
            f"MATCH (c:`{self.L['chunks']}`)-[m:MENTIONS]->(e) {where}RETURN e.id, c.id, m.count",
            ids=list(chunk_ids or ()),
        )
        return sorted(
            (Mention(r[0], r[1], r[2]) for r in found), key=lambda m: (m.chunk_id, m.entity_id)
        )

    def _relations(self, ids: Sequence[str] | None, by_end: bool) -> list[Relation]:
        e = self.L["entities"]
        if by_end and ids is not None:
            found = self._q(
                f"UNWIND $t AS k MATCH (a:`{e}` {{id: k}})-[r:RELATED]-(:`{e}`) "
                "RETURN DISTINCT r.rec",
                t=list(dict.fromkeys(ids)),
            )
            recs = [json.loads(r[0]) for r in found]
        elif ids is not None:

            def fetch(wanted: list[str]) -> dict[str, Any]:
                # with the rows and properties of their ends (a search seeds a walk from
                # the ends of the facts it found)
                keys, got, *ends = self._cols(
                    f"UNWIND $ids AS k MATCH (a:`{e}`)-[r:RELATED {{id: k}}]->(b:`{e}`)",
                    ("k", "r.rec", *self._ends),
                    ids=wanted,
                )
                self._keep_ends(ends)
                return dict(zip(keys, got, strict=True))

            recs = [json.loads(v) for v in self._memo("relation", ids, fetch).values()]
        else:
            found = self._q(f"MATCH (:`{e}`)-[r:RELATED]->(:`{e}`) RETURN r.rec")
            recs = [json.loads(r[0]) for r in found]
        unique = {r[0]: r for r in recs}
        return [schema.relation(unique[k]) for k in sorted(unique)]

    def _synonyms(self) -> list[Synonym]:
        e = self.L["entities"]
        found = self._q(f"MATCH (a:`{e}`)-[s:SYNONYM]->(b:`{e}`) RETURN a.id, b.id, s.score")
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
            found = self._q(
                f"MATCH (n:`{self.L[kind]}` {{level: $level}}) RETURN n.rec", level=level
            )
            return [json.loads(r[0]) for r in found]
        return [r for r in self._recs(kind, ids) if level is None or r[1] == level]

    def vectors(self, kind: str) -> tuple[list[str], np.ndarray]:
        _check_kind(kind)
        n = self.size(kind)
        return self.ids(kind, np.arange(n)), self.vectors_of(kind, np.arange(n))

    def _tokenizer(self, kind: str) -> QueryTokenizer:
        """The query tokenizer of a sparse kind's index (its tokenizer read once)."""
        with self._lock:
            if kind not in self._sparse:
                found = self._q(
                    f"MATCH (n:`{self.L['bm25_indexes']}` {{kind: $kind}}) RETURN n.tokenizer",
                    kind=kind,
                )
                if not found:
                    raise StoreError(
                        f"{self.store.location.uri}: version {self.version} has no BM25 "
                        f"postings for {kind} (written by an older kgrag: ingest again)"
                    )
                if self._words is None:
                    self._words = sqlite3.connect(":memory:", check_same_thread=False)
                fts = schema.FTS[kind][0]
                self._sparse[kind] = QueryTokenizer(self._words, fts, str(found[0][0]))
            return self._sparse[kind]

    def search_sparse(self, query: str, k: int, kind: str = "chunks") -> list[tuple[str, float]]:
        if kind not in FULLTEXT:
            raise InvalidParams(f"no sparse index for {kind!r}", field="kind")
        words = query_words(query, stop_words())
        if not words or k <= 0:
            return []
        tokenizer = self._tokenizer(kind)
        with self._lock:
            tokens = tokenizer.tokens(words)
        if all(len(t) == 1 for t in tokens) and self._has("kgrag.bm25"):
            found = self._q(
                "CALL kgrag.bm25($tag, $kind, $label, $terms, $k1, $b, $limit) "
                "YIELD id, score RETURN id, score",
                tag=self.tag,
                kind=kind,
                label=self.L[kind],
                terms=[t[0] for t in tokens],
                k1=K1,
                b=B,
                limit=2 * k + 10,
            )
            ids = [str(x) for x in found[0][0]]
            scores = np.array(found[0][1], dtype=np.float64)
            return best(np.arange(len(ids)), scores, k, lambda d: [ids[i] for i in d.tolist()])
        if all(len(t) == 1 for t in tokens):
            # scored in the database as the embedded store scores (Postings.scores): per
            # posting in double precision, summed per document in the query's order
            found = self._q(
                f"MATCH (x:`{self.L['bm25_indexes']}` {{kind: $kind}}) "
                "UNWIND range(0, size($terms) - 1) AS qi "
                f"MATCH (t:`{self.L['bm25_terms']}` {{kind: $kind, term: $terms[qi]}}) "
                "WITH x.avgdl AS avgdl, qi, t.idf AS idf, t.docs AS docs, t.tf AS tf, "
                "t.lens AS lens ORDER BY qi "
                "UNWIND range(0, size(docs) - 1) AS j "
                "WITH docs[j] AS doc, idf * ((toFloat(tf[j]) * ($k1 + 1.0)) / (toFloat(tf[j]) "
                "+ $k1 * (1 - $b + $b * toFloat(lens[j]) / avgdl))) AS s "
                "WITH doc, sum(s) AS score ORDER BY score DESC LIMIT $limit "
                f"MATCH (n:`{self.L[kind]}` {{bm25: doc}}) RETURN n.id, score",
                kind=kind,
                terms=[t[0] for t in tokens],
                k1=K1,
                b=B,
                limit=2 * k + 10,  # ties at the k-th are broken by id below
            )
            ids = [str(r[0]) for r in found]
            scores = np.array([float(r[1]) for r in found], dtype=np.float64)
            return best(np.arange(len(ids)), scores, k, lambda d: [ids[i] for i in d.tolist()])
        # a word the tokenizer splits (a phrase): Neo4j's full-text index answers, its
        # own BM25 (Lucene's English analyzer); every word on its own, quoted, so
        # Lucene's syntax never sees the query's text
        lucene = " OR ".join(f'"{w}"' for w in words)
        found = self._q(
            "CALL db.index.fulltext.queryNodes($index, $q, {limit: $limit}) "
            "YIELD node, score RETURN node.id, score",
            index=f"kg_{self.tag}__{kind}_text",
            q=lucene,
            limit=k * 2 + 10,
        )
        hits = sorted(((r[0], float(r[1])) for r in found), key=lambda x: (-x[1], x[0]))
        return hits[:k]

    # -- the query side ---------------------------------------------------------------

    def size(self, kind: str) -> int:
        kind = _check_kind(kind)
        with self._lock:
            if kind not in self._sizes:
                found = self._q(f"MATCH (n:`{self.L[kind]}`) WHERE n.row >= 0 RETURN count(n)")
                self._sizes[kind] = int(found[0][0])
            return self._sizes[kind]

    def ids(self, kind: str, rows: Sequence[int] | np.ndarray) -> list[str]:
        kind = _check_kind(kind)
        r = [int(x) for x in np.asarray(rows, dtype=np.int64).tolist()]
        if not r:
            return []

        def fetch(wanted: list[int]) -> dict[int, str]:
            got_rows, got_ids = self._cols(
                f"UNWIND $rows AS r MATCH (n:`{self.L[kind]}` {{row: r}})",
                ("r", "n.id"),
                rows=wanted,
            )
            return {int(a): b for a, b in zip(got_rows, got_ids, strict=True)}

        if kind in ROW_PROPS:
            by_row = {x: p["id"] for x, p in self._row_props(kind, r).items()}
        else:
            by_row = self._memo(f"id:{kind}", r, fetch)
        missing = [x for x in r if x not in by_row]
        if missing:
            raise StoreError(f"{kind}: no row {missing[0]}")
        found = [by_row[x] for x in r]
        # and the other way: a search looks up by id the rows it was given the ids of
        back = dict(zip(found, r, strict=True))
        self._memo(f"row:{kind}", found, lambda wanted: {i: back[i] for i in wanted})
        return found

    def rows(self, kind: str, ids: Sequence[str]) -> np.ndarray:
        kind = _check_kind(kind)
        if not len(ids):
            return np.zeros(0, dtype=np.int64)

        small = kind in _SMALL_PROPS  # and their properties, read next as a rule

        def fetch(wanted: list[str]) -> dict[str, int]:
            got_ids, got_rows, *props = self._cols(
                f"UNWIND $ids AS k MATCH (n:`{self.L[kind]}` {{id: k}}) WHERE n.row >= 0",
                ("k", "n.row", *(_props_of(kind, "n") if small else ())),
                ids=wanted,
            )
            if small:
                self._keep_props(kind, got_rows, props)
            by_id = {a: int(b) for a, b in zip(got_ids, got_rows, strict=True)}
            return {k: by_id.get(k, -1) for k in wanted}  # -1: no such id, for good

        by_id = self._memo(f"row:{kind}", list(ids), fetch)
        if kind not in ROW_PROPS:  # and the other way (a kind with row props reads them)
            back = {row: i for i, row in by_id.items() if row >= 0}
            self._memo(f"id:{kind}", list(back), lambda wanted: {x: back[x] for x in wanted})
        return np.array([by_id.get(i, -1) for i in ids], dtype=np.int64)

    def matrix(self, kind: str) -> Any:
        return RemoteMatrix(self, _check_kind(kind))

    def vectors_of(self, kind: str, rows: np.ndarray) -> np.ndarray:
        """The float32 vectors of ``rows`` of a kind."""
        r = np.asarray(rows, dtype=np.int64)
        dim = int(self.manifest.get("dim", 0))
        if not len(r):
            return np.zeros((0, dim), dtype=np.float32)

        def fetch(wanted: list[int]) -> dict[int, Any]:
            got_rows, got_vecs = self._cols(
                f"UNWIND $rows AS r MATCH (n:`{self.L[kind]}` {{row: r}})",
                ("r", "n.vec"),
                rows=sorted(wanted),
            )
            return {
                int(a): np.asarray(b, dtype=np.float32)
                for a, b in zip(got_rows, got_vecs, strict=True)
            }

        by_row = self._memo(f"vec:{kind}", r.tolist(), fetch)
        return np.array([by_row[x] for x in r.tolist()], dtype=np.float32).reshape(len(r), -1)

    def nearest(
        self, kind: str, queries: np.ndarray, k: int, among: np.ndarray | None = None
    ) -> list[list[tuple[int, float]]]:
        kind = _check_kind(kind)
        n = self.size(kind)
        q, k, cand = nearest_request(n, queries, k, among)
        if k <= 0:
            return [[] for _ in range(len(q))]
        if cand is not None:
            vecs = self.vectors_of(kind, cand)
            return [top_rows(cand, exact_scores(vecs, vec), k) for vec in q]
        if kind not in ANN_KINDS:  # no vector index (searched within a level, or looked up):
            # the best by the float32 scan re-scored exactly, as the folder's exact path
            # does (over more candidates here)
            wide = min(n, max(ANN_CANDIDATES, ANN_EXPANSION * k))
            out = []
            for vec in q:
                rough = self.similarity(kind, vec)
                keep = np.sort(np.argpartition(-rough, wide - 1)[:wide]) if wide < n else None
                rows = keep if keep is not None else np.arange(n, dtype=np.int64)
                out.append(top_rows(rows, exact_scores(self.vectors_of(kind, rows), vec), k))
            return out
        wide = min(n, max(ANN_CANDIDATES, ANN_EXPANSION * k))
        if kind in (self.manifest.get("pq_kinds") or ()) and self._has("kgrag.nearest"):
            # the folder's way, in the database: the best codes re-scored exactly
            search = (
                "CALL kgrag.nearest($label, $codebook, $kind, $qs, $wide, $k, $n, $build) "
                "YIELD query AS i, row, score "
                f"MATCH (node:`{self.L[kind]}` {{row: row}})"
            )
        else:
            # the index's best candidates (a search of that width: at Neo4j's defaults,
            # quantised, M 16, a true top-5 fact of 2Wiki was missing from the best 32
            # in 12 of 40 questions). The index is unquantised, so its score is the
            # cosine of the stored vectors itself (equal to vector.similarity.cosine over
            # them, as (1 + cos) / 2; reading and re-scoring the 256 candidates' vectors
            # cost ~11 ms a query on 2Wiki's facts)
            search = (
                "UNWIND range(0, size($qs) - 1) AS i "
                "CALL db.index.vector.queryNodes($index, $wide, $qs[i]) YIELD node, score "
                "WITH i, node, 2.0 * score - 1.0 AS score"
            )
        # a kind without row properties (facts) brings its ids along: a search asks for
        # the ids of the rows it found next, and they are kept for it
        with_ids = kind not in ROW_PROPS
        # a kind with a few numbers a row brings them (read next: an entity's id and
        # passage count)
        small = kind in _SMALL_PROPS
        extra = ("node.id",) if with_ids else _props_of(kind, "node") if small else ()
        qi, rows_, sims, *ids_ = self._cols(
            search,
            ("i", "node.row", "score", *extra),
            index=f"kg_{self.tag}__{kind}_vec",
            label=self.L[kind],
            codebook=self.L["codebooks"],
            kind=kind,
            k=k,
            n=n,
            build=self._build,
            wide=wide,
            qs=[v.tolist() for v in q],
        )
        which = np.array(qi, dtype=np.int64)
        rows = np.array(rows_, dtype=np.int64)
        cos = np.array(sims, dtype=np.float64)
        found = [top_rows(rows[which == i], cos[which == i], k) for i in range(len(q))]
        kept = sorted({row for best in found for row, _ in best})
        if with_ids:
            id_of = dict(zip(rows.tolist(), ids_[0], strict=True))
            self._memo(f"id:{kind}", kept, lambda wanted: {x: id_of[x] for x in wanted})
        elif small:
            at = {row: i for i, row in enumerate(rows.tolist())}
            self._keep_props(kind, kept, [[col[at[x]] for x in kept] for col in ids_])
        return found

    def similarity(
        self, kind: str, query: np.ndarray, rows: np.ndarray | None = None
    ) -> np.ndarray:
        kind = _check_kind(kind)
        q = np.asarray(query, dtype=np.float32)
        if rows is not None:
            r = np.asarray(rows, dtype=np.int64)
            return (
                (self.vectors_of(kind, r) @ q).astype(np.float32)
                if len(r)
                else np.zeros(0, np.float32)
            )
        n = self.size(kind)
        out = np.zeros(n, dtype=np.float32)
        if not n:
            return out
        if self._has("kgrag.similarity"):
            found = self._q(
                "CALL kgrag.similarity($label, $q, $n, $build) YIELD score RETURN score",
                label=self.L[kind],
                q=q.astype(np.float64).tolist(),
                n=n,
                build=self._build,
            )
            return np.frombuffer(bytes(found[0][0]), dtype="<f4").astype(np.float32)
        # Neo4j's cosine is (1 + cos) / 2
        rows_, sims = self._cols(
            f"MATCH (n:`{self.L[kind]}`) WHERE n.row >= 0",
            ("n.row", "vector.similarity.cosine(n.vec, $q)"),
            q=q.tolist(),
        )
        out[np.array(rows_, dtype=np.int64)] = 2.0 * np.array(sims, dtype=np.float64) - 1.0
        return out

    def adjacency(self, graph: str, rows: np.ndarray) -> Adjacency:
        if graph not in GRAPHS:
            raise InvalidParams(f"unknown graph {graph!r}; known: {', '.join(GRAPHS)}")
        r = [int(x) for x in np.asarray(rows, dtype=np.int64).tolist()]
        label, key, fields = {
            "walk": (f"Vertex_{self.tag}", "vertex", ("walk", "walk_w")),
            "relations": (self.L["entities"], "row", ("rel", "rel_len", "rel_edge")),
            "mentions": (self.L["chunks"], "row", ("mentioned",)),
            "links": (self.L["chunks"], "row", ("links", "links_in")),
        }[graph]

        def fetch(wanted: list[int]) -> dict[int, Any]:
            # one record of lists: a record per vertex costs the driver ~2x the time
            found = self._cols(
                f"UNWIND $rows AS r MATCH (n:`{label}` {{{key}: r}})",
                ("r", *(f"coalesce(n.{f}, [])" for f in fields)),
                rows=sorted(wanted),
            )
            return {int(v): parts for v, *parts in zip(*found, strict=True)}

        if graph in ("mentions", "links"):  # with the chunk's other small properties
            props = self._row_props("chunks", r)
            by = {x: [props[x][f] for f in fields] for x in props}
        else:
            by = self._memo(f"adj:{graph}", r, fetch)
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

    def pushed_pagerank(
        self, reset: np.ndarray, damping: float, eps: float, rounds: int = 100
    ) -> np.ndarray:
        """The push in the database (``kgrag.push``, the same float32 arithmetic in the
        same order as the client's, so the same mass): one query instead of one per
        round. Without the procedure, or with ``server_push`` off, the client pushes."""
        if not self._has("kgrag.push"):
            return super().pushed_pagerank(reset, damping, eps, rounds)
        r = (reset / reset.sum()).astype(np.float32)
        at = np.flatnonzero(r)
        found = self._q(
            "CALL kgrag.push($label, $vertices, $reset, $n, $damping, $eps, $rounds, $build) "
            "YIELD mass RETURN mass",
            label=f"Vertex_{self.tag}",
            vertices=at.tolist(),
            reset=r[at].astype(np.float64).tolist(),
            n=len(r),
            damping=float(damping),
            eps=float(eps),
            rounds=int(rounds),
            # the server keeps the columns it reads, per build of the version
            build=self._build,
        )
        return np.frombuffer(bytes(found[0][0]), dtype="<f4").astype(np.float32)

    def shortest_paths(
        self, seeds: Sequence[int], groups: Sequence[set[int]] | None, limits: PathLimits
    ) -> tuple[dict[int, float], dict[int, int]]:
        """The path search in the database (``kgrag.paths``, the client's rules step for
        step, so the same lengths and predecessors): one query instead of two a round
        (the round's relations, the tolls of the entities they reach). Without the
        procedure, or with ``server_push`` off, the client searches."""
        if not self._has("kgrag.paths"):
            return super().shortest_paths(seeds, groups, limits)
        found = self._q(
            "CALL kgrag.paths($label, $seeds, $groups, $use_groups, $limit, $hub_degree, "
            "$max_reached, $max_offers, $generic, $toll, $n, $build) "
            "YIELD rows, lengths, preds RETURN rows, lengths, preds",
            label=self.L["entities"],
            seeds=[int(x) for x in seeds],
            groups=[sorted(int(x) for x in g) for g in groups or ()],
            use_groups=groups is not None,
            limit=float(limits.limit),
            hub_degree=int(limits.hub_degree),
            max_reached=int(limits.max_reached),
            max_offers=int(limits.max_offers),
            generic=float(limits.generic),
            toll=float(limits.toll),
            n=self.size("entities"),
            # the server keeps the entities it reads, per build of the version
            build=self._build,
        )
        rows, lengths, preds = found[0]
        return (
            dict(zip(rows, lengths, strict=True)),
            dict(zip(rows, preds, strict=True)),
        )

    def passage_texts(
        self, chunk_ids: Sequence[str], query: np.ndarray | None = None
    ) -> dict[str, PassageText]:
        ids = sorted(set(chunk_ids))
        if not ids:
            return {}
        c, e, s = self.L["chunks"], self.L["entities"], self.L["sentences"]
        # one query: each chunk's text and title entity, and its sentences with the
        # vectors of those that have one (scored here, as :meth:`similarity` scores rows)
        found = self._q(
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

    def _by_row(self, kind: str, prop: str, rows: np.ndarray | None, dtype: Any) -> np.ndarray:
        label = self.L[kind]
        if rows is None:
            got, values = self._cols(
                f"MATCH (n:`{label}`) WHERE n.row >= 0", ("n.row", f"n.{prop}")
            )
            by = {int(a): b for a, b in zip(got, values, strict=True)}
            return np.array([by[i] for i in range(self.size(kind))], dtype=dtype)
        r = [int(x) for x in np.asarray(rows, dtype=np.int64).tolist()]

        def fetch(wanted: list[int]) -> dict[int, Any]:
            got, values = self._cols(
                f"UNWIND $rows AS r MATCH (n:`{label}` {{row: r}})",
                ("r", f"n.{prop}"),
                rows=sorted(wanted),
            )
            return {int(a): b for a, b in zip(got, values, strict=True)}

        if prop in ROW_PROPS.get(kind, ()):
            by = {x: p[prop] for x, p in self._row_props(kind, r).items()}
        else:
            by = self._memo(f"prop:{kind}:{prop}", r, fetch)
        return np.array([by[x] for x in r], dtype=dtype)

    def attribute(self, kind: str, name: str, rows: np.ndarray | None = None) -> np.ndarray:
        if name not in _ATTRS.get(kind, ()):
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
            found = self._q(
                f"UNWIND $keys AS k MATCH (n:`{self.L[table]}` {{key: k}}) RETURN k, n.row",
                keys=wanted,
            )
            return {a: int(b) for a, b in found}
        # with the named entities' properties (a search seeds from them)
        keys, rows, props = self._cols(
            f"UNWIND $keys AS k MATCH (n:`{self.L[table]}` {{key: k}}) "
            f"OPTIONAL MATCH (e:`{self.L['entities']}` {{row: n.row}})",
            ("k", "n.row", "[e.row, " + ", ".join(_props_of("entities", "e")) + "]"),
            keys=wanted,
        )
        found = [p for p in props if p[0] is not None]
        cols = [[p[i] for p in found] for i in range(1, 1 + len(ROW_PROPS["entities"]))]
        self._keep_props("entities", [p[0] for p in found], cols)
        return {a: int(b) for a, b in zip(keys, rows, strict=True)}

    def relation_ids(self, edges: np.ndarray) -> list[str]:
        e = [int(x) for x in np.asarray(edges, dtype=np.int64).tolist()]
        if not e:
            return []
        ent = self.L["entities"]

        def fetch(wanted: list[int]) -> dict[int, str]:
            keys, rids, recs_, *ends = self._cols(
                f"UNWIND $edges AS k MATCH (a:`{ent}`)-[r:RELATED {{edge: k}}]->(b:`{ent}`)",
                ("k", "r.id", "r.rec", *self._ends),
                edges=sorted(wanted),
            )
            # the records too, kept for the read of them that follows (paths' chains and
            # endings ask for the relations of the edges they found): one query, not two;
            # and the properties of their ends (the endings' entities are scored next)
            recs = dict(zip(rids, recs_, strict=True))
            self._memo("relation", list(recs), lambda ids: {i: recs[i] for i in ids})
            self._keep_ends(ends)
            return {int(a): b for a, b in zip(keys, rids, strict=True)}

        by = self._memo("edge", e, fetch)
        return [by[x] for x in e]

    def close(self) -> None:
        """The query tokenizers' in-memory tables; the store owns the connection."""
        with self._lock:
            if self._words is not None:
                self._words.close()
                self._words = None
            self._sparse.clear()
            self._kept.clear()
            self._held = 0


def _check_kind(kind: str) -> str:
    if kind not in VECTOR_KINDS:
        raise InvalidParams(f"unknown vector kind {kind!r}", field="kind")
    return kind


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())
