"""The write side of the Neo4j store: a staged version uploaded into Neo4j.

A writer stages the version in a private embedded store (SQLite and numpy, in a
temporary folder), derives the same serving structures the embedded store serves from
(:mod:`kgrag.store.serving`: rows, the PageRank walk, relation and title-link
adjacency, name keys, per-entity statistics), and :func:`upload` writes it all with
batched ``UNWIND`` writes. Derived per-row structures are properties of the row's node
(``walk``/``walk_w``, ``rel``/``rel_len``/``rel_edge``, ``mentioned``, ``links``); the
graph itself is there as relationships for people and Cypher:
``(:Chunk)-[:PART_OF]->(:Document)``, ``(:Chunk)-[:MENTIONS {count}]->(:Entity)``,
``(:Entity)-[:RELATED {id, predicate, kind, weight, evidence}]->(:Entity)``,
``(:Entity)-[:SYNONYM]->``, ``(:Chunk)-[:NAMES]->(:Chunk)`` (title links),
``(:Community)-[:CHILD_OF]->``, ``(:TreeNode)-[:SUMMARIZES]->``.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from kgrag.errors import StoreError
from kgrag.store import schema
from kgrag.store.ann import ANN_KINDS, ANN_MIN_ROWS, trained_pq
from kgrag.store.base import GRAPHS
from kgrag.store.bm25 import Postings, inverse_frequency, tokenizer_of
from kgrag.store.cooc import relation_batches
from kgrag.store.neo4j.connection import Connection
from kgrag.store.neo4j.indexes import await_indexes, text_indexes, vector_index, version_indexes
from kgrag.store.neo4j.model import ATTRIBUTES, LABELS, ids_of, labels_of, plain
from kgrag.store.packed import (
    column_ids,
    filled_copies,
    relation_text,
    row_text,
    unpack_id,
)
from kgrag.store.serving import SERVING
from kgrag.store.vectors import kind_ids_file, open_matrix

#: an upload row: a node's properties, and its vector (None: none)
Row = dict[str, Any]


def upload(
    connection: Connection, tag: str, folder: Path, ann_min_rows: int = ANN_MIN_ROWS
) -> list[str]:
    """Write the staged version ``folder`` (an embedded version with serving files)
    into Neo4j under ``tag``, indexes included; nothing is published. The kinds of at
    least ``ann_min_rows`` rows carry the product-quantised codes the folder's index
    would hold (``kgrag.nearest`` searches them); the list of those kinds."""
    staged = _Staged(folder)
    writing = _Upload(connection, tag, staged, ann_min_rows)
    version_indexes(connection, tag, writing.labels)
    writing.documents()
    writing.chunks()
    writing.sentences()
    writing.entities()
    writing.facts_and_relations()
    writing.links()
    writing.communities()
    writing.tree_nodes()
    writing.name_keys()
    _postings(connection, writing.labels, staged.serving, staged.db)
    staged.db.close()
    text_indexes(connection, tag, writing.labels)
    await_indexes(connection)
    return writing.coded


class _Staged:
    """What an upload reads of the staged version ``folder``: its records (SQLite),
    serving arrays and vectors."""

    def __init__(self, folder: Path) -> None:
        self.folder, self.serving = folder, folder / SERVING
        self.csrs = {g: (self.array(f"{g}.indptr"), self.array(f"{g}.indices")) for g in GRAPHS}
        self.walk_ptr, self.walk_data = self.array("walk.indptr"), self.array("walk.data")
        self.db = sqlite3.connect(f"file:{folder / 'graph.sqlite'}?mode=ro", uri=True)

    def array(self, name: str) -> np.ndarray:
        return np.load(self.serving / f"{name}.npy", mmap_mode="r")

    def ids(self, kind: str) -> list[str]:
        path = kind_ids_file(self.serving, self.folder / "vectors", kind)
        return [b.decode() for b in np.load(path, mmap_mode="r").tolist()]

    def vectors(self, kind: str) -> Any:
        """A kind's vectors as the folder reads them (coded kinds dequantised)."""
        return open_matrix(self.folder / "vectors", kind, 0, random=False)

    def csr(self, graph: str, i: int) -> np.ndarray:
        """Row ``i`` of one of :data:`GRAPHS`' adjacency."""
        indptr, indices = self.csrs[graph]
        return np.asarray(indices[int(indptr[i]) : int(indptr[i + 1])])

    def node_rows(self, kind: str) -> Iterator[tuple[int, str, list[float] | None]]:
        """Each row of a kind: its row, id and vector."""
        vec = self.vectors(kind)
        for row, id_ in enumerate(self.ids(kind)):
            yield row, id_, vec[row].tolist() if len(vec) else None

    def walk_of(self, vertex: int) -> dict[str, Any]:
        """A vertex's walk column, as its node's ``walk`` and ``walk_w``."""
        a, b = int(self.walk_ptr[vertex]), int(self.walk_ptr[vertex + 1])
        return {
            "walk": np.asarray(self.csrs["walk"][1][a:b]).tolist(),
            "walk_w": np.asarray(self.walk_data[a:b], dtype=np.float64).tolist(),
        }


class _Upload:
    """The writes of one upload, kind by kind, in the order :func:`upload` makes them."""

    def __init__(
        self, connection: Connection, tag: str, staged: _Staged, ann_min_rows: int
    ) -> None:
        self.connection, self.tag, self.staged = connection, tag, staged
        self.ann_min_rows = ann_min_rows
        self.labels = labels_of(tag)
        self.coded: list[str] = []  # the kinds written with product-quantised codes

    def put(self, kind: str, rows: Iterable[Row], extra: str = "") -> None:
        """Create a kind's nodes from ``rows`` (properties and vector), with codes where
        the kind has enough rows, and start its vector index filling."""
        labels = f"{LABELS[kind]}:`{self.labels[kind]}`"
        vecs = self.staged.vectors(kind)
        if kind in ANN_KINDS and 0 < self.ann_min_rows <= len(vecs):
            rows = _with_codes(rows, _codebook(self.connection, self.labels, kind, vecs))
            self.coded.append(kind)
        self.connection.write(
            f"CREATE (n:{labels}) SET n = row.props {extra}"
            + (
                " WITH n, row WHERE row.vec IS NOT NULL "
                "CALL db.create.setNodeVectorProperty(n, 'vec', row.vec)"
            ),
            rows,
        )
        if kind in ANN_KINDS:  # its index fills in the background while the rest goes in
            vector_index(self.connection, self.tag, self.labels, self.staged.folder, kind)

    def documents(self) -> None:
        docs = (
            {"props": {"id": r[0], "title": r[1], "rec": json.dumps(list(r))}}
            for r in self.staged.db.execute(
                "SELECT id, title, uri, meta, text, sections FROM documents"
            )
        )
        self.connection.write(
            f"CREATE (n:Document:`{self.labels['documents']}`) SET n = row.props", docs
        )

    def chunks(self) -> None:
        staged = self.staged
        rec = {
            r[0]: r
            for r in staged.db.execute(f"SELECT {schema.CHUNK_COLUMNS} FROM chunks")  # noqa: S608
        }
        chunk_vertex = np.asarray(staged.array("chunk_vertex"))
        titles = np.asarray(staged.array("attr.chunks.title"))
        title_entity = np.asarray(staged.array("title_entity"))
        link_in = np.asarray(staged.array("link_in"))

        def chunk_rows() -> Iterator[Row]:
            for row, id_, vec in staged.node_rows("chunks"):
                r = rec.pop(id_)
                v = int(chunk_vertex[row])
                links = staged.csr("links", row)
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
                    "mentioned": staged.csr("mentions", row).tolist(),
                    "links": links.tolist(),
                    "links_in": link_in[links].astype(np.int64).tolist(),
                    "rec": json.dumps(list(r)),
                    **staged.walk_of(v),
                }
                yield {"props": props, "vec": vec}
            if rec:
                raise StoreError(f"{len(rec)} chunks have no vector; the build is incomplete")

        self.put("chunks", chunk_rows(), "SET n:`Vertex_" + self.tag + "`")

    def sentences(self) -> None:
        staged = self.staged
        srec = {
            f"{r[0]}#{r[1]}": row_text("sentences", r)  # entity ids as JSON text
            for r in staged.db.execute(
                'SELECT chunk_id, idx, start, "end", entity_ids FROM sentences'
            )
        }

        def sentence_rows() -> Iterator[Row]:
            for row, id_, vec in staged.node_rows("sentences"):
                r = srec.pop(id_)
                props = {"id": id_, "row": row, "chunk_id": r[0], "rec": json.dumps(list(r))}
                yield {"props": props, "vec": vec}
            for id_, r in srec.items():  # those without a vector, once the others are out
                props = {"id": id_, "row": -1, "chunk_id": r[0], "rec": json.dumps(list(r))}
                yield {"props": props, "vec": None}

        self.put("sentences", sentence_rows())

    def entities(self) -> None:
        staged = self.staged
        erec = {r[0]: r for r in staged.db.execute("SELECT id, name, type, aliases FROM entities")}
        attrs = {n: np.asarray(staged.array(f"attr.entities.{n}")) for n in ATTRIBUTES["entities"]}
        rel_ptr, rel_cols = staged.csrs["relations"]
        rel_data, rel_edge = staged.array("relations.data"), staged.array("relations.edge")

        def entity_rows() -> Iterator[Row]:
            for row, id_, vec in staged.node_rows("entities"):
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
                    "rel": np.asarray(rel_cols[a:b]).tolist(),
                    "rel_len": np.asarray(rel_data[a:b], dtype=np.float64).tolist(),
                    "rel_edge": np.asarray(rel_edge[a:b], dtype=np.int64).tolist(),
                    **staged.walk_of(row),
                }
                yield {"props": props, "vec": vec}
            for i, r in erec.items():  # those without a vector, once the others are out
                props = {"id": i, "row": -1, "name": r[1], "type": r[2], "rec": json.dumps(list(r))}
                yield {"props": props, "vec": None}

        self.put("entities", entity_rows(), "SET n:`Vertex_" + self.tag + "`")

    def facts_and_relations(self) -> None:
        """The facts (the vectors of stated relations) and the relations themselves."""
        staged, entity = self.staged, self.labels["entities"]
        facts = staged.node_rows("facts")
        self.put("facts", ({"props": {"id": i, "row": row}, "vec": v} for row, i, v in facts))
        edge_of = {rid: i for i, rid in enumerate(column_ids(staged.array("relations.ids")))}
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
            for r in map(  # rows as text, however the staged version packs them
                relation_text,
                (r for batch in relation_batches(staged.db, staged.folder) for r in batch),
            )
        )
        self.connection.write(
            f"MATCH (a:`{entity}` {{id: row.src}}), (b:`{entity}` {{id: row.dst}}) "
            "CREATE (a)-[x:RELATED]->(b) SET x = row.props",
            rels,
        )

    def links(self) -> None:
        """Mentions, synonyms, the chunks' documents and the title links."""
        db, write = self.staged.db, self.connection.write
        chunk, entity, document = (
            self.labels["chunks"],
            self.labels["entities"],
            self.labels["documents"],
        )
        write(
            f"MATCH (c:`{chunk}` {{id: row.chunk}}), (e:`{entity}` {{id: row.entity}}) "
            "CREATE (c)-[:MENTIONS {count: row.count}]->(e)",
            (
                {"entity": unpack_id(r[0]), "chunk": unpack_id(r[1]), "count": r[2]}
                for r in db.execute("SELECT entity_id, chunk_id, count FROM mentions")
            ),
        )
        write(
            f"MATCH (a:`{entity}` {{id: row.src}}), (b:`{entity}` {{id: row.dst}}) "
            "CREATE (a)-[:SYNONYM {score: row.score}]->(b)",
            (
                {"src": unpack_id(r[0]), "dst": unpack_id(r[1]), "score": r[2]}
                for r in db.execute("SELECT src, dst, score FROM synonyms")
            ),
        )
        write(
            f"MATCH (c:`{chunk}` {{id: row.chunk}}), (d:`{document}` {{id: row.doc}}) "
            "CREATE (c)-[:PART_OF]->(d)",
            ({"chunk": r[0], "doc": r[1]} for r in db.execute("SELECT id, doc_id FROM chunks")),
        )
        chunk_ids = self.staged.ids("chunks")
        write(
            f"MATCH (a:`{chunk}` {{row: row.a}}), (b:`{chunk}` {{row: row.b}}) "
            "CREATE (a)-[:NAMES]->(b)",
            (
                {"a": row, "b": int(t)}
                for row in range(len(chunk_ids))
                for t in self.staged.csr("links", row).tolist()
            ),
        )

    def leveled(
        self, kind: str, text: str, column: int, extra: Callable[[int], Row] | None = None
    ) -> Iterator[Row]:
        """Rows of a leveled kind: those with a vector by row, then those without
        (``row`` -1); ``extra(row)``: more properties of a row with a vector."""
        stored = list(self.staged.db.execute(f"SELECT * FROM {kind}"))  # noqa: S608
        if kind == "communities":  # every row is here: a copy's child among them
            stored = filled_copies(stored, lambda _: ())
        rec = {r[0]: row_text(kind, r) for r in stored}  # packed ids as text
        del stored
        for row, id_, vec in self.staged.node_rows(kind):
            r = rec.pop(id_)
            props = {"id": id_, "row": row, "level": r[1], text: r[column]}
            props.update({"rec": json.dumps(list(r)), **(extra(row) if extra else {})})
            yield {"props": props, "vec": vec}
        for id_, r in rec.items():
            props = {"id": id_, "row": -1, "level": r[1], text: r[column]}
            yield {"props": {**props, "rec": json.dumps(list(r))}, "vec": None}

    def communities(self) -> None:
        staged, community = self.staged, self.labels["communities"]
        cattrs = {
            n: np.asarray(staged.array(f"attr.communities.{n}")) for n in ATTRIBUTES["communities"]
        }
        rows = self.leveled(
            "communities",
            "report",
            5,
            lambda row: {f"a_{n}": plain(v[row]) for n, v in cattrs.items()},
        )
        self.put("communities", rows)
        self.connection.write(
            f"MATCH (a:`{community}` {{id: row.a}}), (b:`{community}` {{id: row.b}}) "
            "CREATE (a)-[:CHILD_OF]->(b)",
            [
                {"a": r[0], "b": r[1]}
                for r in staged.db.execute(
                    "SELECT id, parent FROM communities WHERE parent IS NOT NULL"
                )
            ],
        )

    def tree_nodes(self) -> None:
        tree, chunk = self.labels["tree_nodes"], self.labels["chunks"]
        rows = self.leveled("tree_nodes", "summary", 3)
        self.put("tree_nodes", rows)
        children = (
            {"a": r[0], "b": c}
            for r in self.staged.db.execute("SELECT id, children FROM tree_nodes")
            for c in json.loads(r[1])
        )
        self.connection.write(
            f"MATCH (a:`{tree}` {{id: row.a}}) "
            f"OPTIONAL MATCH (t:`{tree}` {{id: row.b}}) "
            f"OPTIONAL MATCH (c:`{chunk}` {{id: row.b}}) "
            "WITH a, coalesce(t, c) AS b WHERE b IS NOT NULL CREATE (a)-[:SUMMARIZES]->(b)",
            children,
        )

    def name_keys(self) -> None:
        """The entity name keys and the sentence keys (:meth:`GraphReader.lookup`)."""
        path = self.staged.serving / "names.sqlite"
        names = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        for kind, table in (("names", "names"), ("sentence_keys", "sentences")):
            self.connection.write(
                f"CREATE (n:{LABELS[kind]}:`{self.labels[kind]}`) SET n = row",
                ({"key": k, "row": r} for k, r in names.execute(f"SELECT key, row FROM {table}")),  # noqa: S608
            )
        names.close()


def _codebook(
    connection: Connection, labels: dict[str, str], kind: str, matrix: np.ndarray
) -> np.ndarray:
    """Train the folder's product quantiser on a kind's vectors (:func:`trained_pq`),
    write its codebook node and return every row's code (``code_size`` bytes)."""
    import faiss

    index = trained_pq(matrix)  # held: its pq is a view into it
    pq = index.pq
    if pq.nbits != 4:
        raise StoreError(f"{kind}: codes of {pq.nbits} bits; kgrag.nearest reads 4")
    centroids = faiss.vector_to_array(pq.centroids).astype(np.float64)
    connection.run(
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
    connection: Connection, labels: dict[str, str], serving: Path, db: sqlite3.Connection
) -> None:
    """The BM25 postings the embedded store scores from, as they are: a node per term
    (its idf, documents, counts and the documents' lengths), one per index (the mean
    length, the tokenizer), and each document's number on its node, so that a query is
    scored in the database with the embedded store's arithmetic."""
    for kind, (fts, _, _) in schema.FTS.items():
        postings = Postings.open(serving, kind)
        try:
            connection.write(
                f"CREATE (n:Bm25Term:`{labels['bm25_terms']}`) SET n = row",
                _term_rows(kind, postings),
            )
            connection.run(
                f"CREATE (n:Bm25Index:`{labels['bm25_indexes']}`) SET n = $props",
                props={"kind": kind, "avgdl": postings.avgdl, "tokenizer": tokenizer_of(db, fts)},
            )
            doc_ids = ids_of(np.load(serving / f"bm25.{kind}.ids.npy", mmap_mode="r"))
            connection.write(
                f"MATCH (n:`{labels[kind]}` {{id: row.id}}) SET n.bm25 = row.doc",
                ({"id": i, "doc": d} for d, i in enumerate(doc_ids)),
            )
        finally:
            postings.close()


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
