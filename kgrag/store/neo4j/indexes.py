"""The constraints and indexes of a version in Neo4j, made by its upload: uniqueness
of ids and range indexes on rows and keys before its nodes, a vector index per kind
searched by nearest neighbour as its nodes go in, full-text indexes last; and the
wait for them all to be online before the version is published."""

from __future__ import annotations

import time
from pathlib import Path

from kgrag.errors import StoreError
from kgrag.store.neo4j.connection import Connection
from kgrag.store.neo4j.model import FULLTEXT
from kgrag.store.vectors import vector_count

#: how long an upload waits for its indexes to fill, at most (seconds)
INDEX_WAIT_S = 6 * 3600


def version_indexes(connection: Connection, tag: str, labels: dict[str, str]) -> None:
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
        connection.run(
            f"CREATE CONSTRAINT `{p}{kind}_id` IF NOT EXISTS "
            f"FOR (n:`{labels[kind]}`) REQUIRE n.id IS UNIQUE"
        )
    for kind in ("chunks", "entities", "facts", "communities", "tree_nodes", "sentences"):
        connection.run(
            f"CREATE INDEX `{p}{kind}_row` IF NOT EXISTS FOR (n:`{labels[kind]}`) ON (n.row)"
        )
    index = "CREATE INDEX `{}` IF NOT EXISTS FOR (n:`{}`) ON (n.{})"
    connection.run(index.format(f"{p}sentences_chunk", labels["sentences"], "chunk_id"))
    connection.run(f"CREATE INDEX `{p}vertex` IF NOT EXISTS FOR (n:`Vertex_{tag}`) ON (n.vertex)")
    connection.run(index.format(f"{p}communities_level", labels["communities"], "level"))
    connection.run(index.format(f"{p}tree_nodes_level", labels["tree_nodes"], "level"))
    for kind in ("names", "sentence_keys"):
        connection.run(
            f"CREATE INDEX `{p}{kind}` IF NOT EXISTS FOR (n:`{labels[kind]}`) ON (n.key)"
        )
    connection.run(
        f"CREATE INDEX `{p}bm25_terms` IF NOT EXISTS "
        f"FOR (n:`{labels['bm25_terms']}`) ON (n.kind, n.term)"
    )
    for kind in FULLTEXT:
        connection.run(index.format(f"{p}{kind}_bm25", labels[kind], "bm25"))
    connection.run("CREATE INDEX kg_related_id IF NOT EXISTS FOR ()-[r:RELATED]-() ON (r.id)")
    connection.run("CREATE INDEX kg_related_edge IF NOT EXISTS FOR ()-[r:RELATED]-() ON (r.edge)")
    connection.run("CREATE INDEX kg_graph_name IF NOT EXISTS FOR (g:KgragGraph) ON (g.name)")


def vector_index(
    connection: Connection, tag: str, labels: dict[str, str], folder: Path, kind: str
) -> None:
    """The vector index of one kind (none where the version has no such vectors)."""
    p = f"kg_{tag}__"
    shape = vector_count(folder / "vectors", kind)
    if shape[0]:
        connection.run(
            f"CREATE VECTOR INDEX `{p}{kind}_vec` IF NOT EXISTS "
            f"FOR (n:`{labels[kind]}`) ON (n.vec) "
            # unquantised, denser than the defaults (16, 100): more of the exact top k
            # among the candidates
            "OPTIONS {indexConfig: {`vector.dimensions`: $dim, "
            "`vector.similarity_function`: 'cosine', `vector.quantization.enabled`: false, "
            "`vector.hnsw.m`: 32, `vector.hnsw.ef_construction`: 200}}",
            dim=int(shape[1]),
        )


def text_indexes(connection: Connection, tag: str, labels: dict[str, str]) -> None:
    """The full-text indexes of a version's sparse kinds (Lucene's English analyzer:
    what answers a query the BM25 tokenizer splits into a phrase)."""
    p = f"kg_{tag}__"
    for kind, props in FULLTEXT.items():
        on = ", ".join(f"n.{x}" for x in props)
        connection.run(
            f"CREATE FULLTEXT INDEX `{p}{kind}_text` IF NOT EXISTS FOR (n:`{labels[kind]}`) "
            f"ON EACH [{on}] OPTIONS {{indexConfig: {{`fulltext.analyzer`: 'english'}}}}"
        )


def await_indexes(connection: Connection, limit_s: float = INDEX_WAIT_S) -> None:
    """Wait until every index is online: a big graph's vector indexes fill for longer
    than one ``db.awaitIndexes`` call waits. An index
    that failed, or one still filling after ``limit_s``, is an error (nothing is
    published)."""
    deadline = time.monotonic() + limit_s
    while True:
        waiting = connection.run(
            "SHOW INDEXES YIELD name, state, populationPercent WHERE state <> 'ONLINE' "
            "RETURN name, state, populationPercent"
        )
        if not waiting:
            return
        failed = [name for name, state, _ in waiting if state == "FAILED"]
        if failed:
            raise StoreError(f"{connection.location.uri}: index {failed[0]} failed to fill")
        if time.monotonic() > deadline:
            name, _, share = waiting[0]
            raise StoreError(
                f"{connection.location.uri}: index {name} still filling ({share or 0:.0f}%) after "
                f"{limit_s:.0f} s"
            )
        time.sleep(1.0)
