"""The searches of one Neo4j version, run where the graph lives: nearest neighbours,
BM25, the dense scan, and the PageRank push and the path search in kgrag's
procedures.

Nearest neighbours go through the version's vector indexes (unquantised: their scores
are the stored vectors' cosines), or, for the kinds with product-quantised codes, the
folder's own way in ``kgrag.nearest``; BM25 is scored from the embedded store's own
postings, uploaded as term nodes, with its arithmetic (in ``kgrag.bm25``, or in
Cypher). Where the server has kgrag's procedures (``neo4j/README.md``: the launcher
registers them), the PageRank push (``kgrag.push``), the path search
(``kgrag.paths``), the full dense scan (``kgrag.similarity``) and BM25 run beside the
data; otherwise the client does that work over plain Cypher.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any

import numpy as np

from kgrag.errors import InvalidParams, StoreError
from kgrag.store import schema
from kgrag.store.ann import ANN_CANDIDATES, ANN_EXPANSION, ANN_KINDS
from kgrag.store.base import exact_scores, nearest_request, top_rows
from kgrag.store.bm25 import K1, B, QueryTokenizer, best, query_words, stop_words
from kgrag.store.kernels import PathLimits
from kgrag.store.neo4j.connection import Connection
from kgrag.store.neo4j.model import (
    FULLTEXT,
    ROW_PROPS,
    SMALL_PROPS,
    props_columns,
    vector_kind,
)
from kgrag.store.neo4j.reads import VersionReads


class VersionSearch(VersionReads):
    """The searches of one version, over its reads."""

    def __init__(self, connection: Connection, version: str, meta: dict[str, Any]) -> None:
        super().__init__(connection, version, meta)
        self._tokenizers: dict[str, QueryTokenizer] = {}
        self._token_tables: sqlite3.Connection | None = None  # the query tokenizers' tables

    def close_searches(self) -> None:
        """Close the query tokenizers' in-memory tables."""
        with self._lock:
            if self._token_tables is not None:
                self._token_tables.close()
                self._token_tables = None
            self._tokenizers.clear()

    def _tokenizer(self, kind: str) -> QueryTokenizer:
        """The query tokenizer of a sparse kind's index (its tokenizer read once)."""
        with self._lock:
            if kind not in self._tokenizers:
                found = self.connection.run(
                    f"MATCH (n:`{self.labels['bm25_indexes']}` {{kind: $kind}}) RETURN n.tokenizer",
                    kind=kind,
                )
                if not found:
                    raise StoreError(
                        f"{self.connection.location.uri}: version {self.version} has no BM25 "
                        f"postings for {kind} (written by an older kgrag: ingest again)"
                    )
                if self._token_tables is None:
                    self._token_tables = sqlite3.connect(":memory:", check_same_thread=False)
                fts = schema.FTS[kind][0]
                self._tokenizers[kind] = QueryTokenizer(self._token_tables, fts, str(found[0][0]))
            return self._tokenizers[kind]

    def search_sparse(self, query: str, k: int, kind: str = "chunks") -> list[tuple[str, float]]:
        if kind not in FULLTEXT:
            raise InvalidParams(f"no sparse index for {kind!r}", field="kind")
        words = query_words(query, stop_words())
        if not words or k <= 0:
            return []
        tokenizer = self._tokenizer(kind)
        with self._lock:
            tokens = tokenizer.tokens(words)
        if all(len(t) == 1 for t in tokens) and self.has_procedure("kgrag.bm25"):
            return self._bm25_procedure(kind, [t[0] for t in tokens], k)
        if all(len(t) == 1 for t in tokens):
            return self._bm25_cypher(kind, [t[0] for t in tokens], k)
        return self._fulltext(kind, words, k)

    def _bm25_procedure(self, kind: str, terms: list[str], k: int) -> list[tuple[str, float]]:
        """BM25 of ``terms`` by ``kgrag.bm25``, the embedded store's arithmetic."""
        found = self.connection.run(
            "CALL kgrag.bm25($tag, $kind, $label, $terms, $k1, $b, $limit) "
            "YIELD id, score RETURN id, score",
            tag=self.tag,
            kind=kind,
            label=self.labels[kind],
            terms=terms,
            k1=K1,
            b=B,
            limit=2 * k + 10,
        )
        ids = [str(x) for x in found[0][0]]
        scores = np.array(found[0][1], dtype=np.float64)
        return best(np.arange(len(ids)), scores, k, lambda d: [ids[i] for i in d.tolist()])

    def _bm25_cypher(self, kind: str, terms: list[str], k: int) -> list[tuple[str, float]]:
        """BM25 of ``terms`` scored in the database as the embedded store scores
        (Postings.scores): per posting in double precision, summed per document in the
        query's order."""
        found = self.connection.run(
            f"MATCH (x:`{self.labels['bm25_indexes']}` {{kind: $kind}}) "
            "UNWIND range(0, size($terms) - 1) AS qi "
            f"MATCH (t:`{self.labels['bm25_terms']}` {{kind: $kind, term: $terms[qi]}}) "
            "WITH x.avgdl AS avgdl, qi, t.idf AS idf, t.docs AS docs, t.tf AS tf, "
            "t.lens AS lens ORDER BY qi "
            "UNWIND range(0, size(docs) - 1) AS j "
            "WITH docs[j] AS doc, idf * ((toFloat(tf[j]) * ($k1 + 1.0)) / (toFloat(tf[j]) "
            "+ $k1 * (1 - $b + $b * toFloat(lens[j]) / avgdl))) AS s "
            "WITH doc, sum(s) AS score ORDER BY score DESC LIMIT $limit "
            f"MATCH (n:`{self.labels[kind]}` {{bm25: doc}}) RETURN n.id, score",
            kind=kind,
            terms=terms,
            k1=K1,
            b=B,
            limit=2 * k + 10,  # ties at the k-th are broken by id below
        )
        ids = [str(r[0]) for r in found]
        scores = np.array([float(r[1]) for r in found], dtype=np.float64)
        return best(np.arange(len(ids)), scores, k, lambda d: [ids[i] for i in d.tolist()])

    def _fulltext(self, kind: str, words: list[str], k: int) -> list[tuple[str, float]]:
        """A query with a word the tokenizer splits (a phrase): Neo4j's full-text index
        answers, its own BM25 (Lucene's English analyzer); every word on its own,
        quoted, so Lucene's syntax never sees the query's text."""
        lucene = " OR ".join(f'"{w}"' for w in words)
        found = self.connection.run(
            "CALL db.index.fulltext.queryNodes($index, $q, {limit: $limit}) "
            "YIELD node, score RETURN node.id, score",
            index=f"kg_{self.tag}__{kind}_text",
            q=lucene,
            limit=k * 2 + 10,
        )
        hits = sorted(((r[0], float(r[1])) for r in found), key=lambda x: (-x[1], x[0]))
        return hits[:k]

    def nearest(
        self, kind: str, queries: np.ndarray, k: int, among: np.ndarray | None = None
    ) -> list[list[tuple[int, float]]]:
        kind = vector_kind(kind)
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
        return self._indexed_nearest(kind, q, k, n)

    def _indexed_nearest(
        self, kind: str, q: np.ndarray, k: int, n: int
    ) -> list[list[tuple[int, float]]]:
        """The ``k`` nearest rows of an indexed kind to each query row of ``q``, from the
        best candidates of its codes or its vector index re-scored exactly; the rows'
        ids or small properties are kept for the reads that follow."""
        wide = min(n, max(ANN_CANDIDATES, ANN_EXPANSION * k))
        if kind in (self.manifest.get("pq_kinds") or ()) and self.has_procedure("kgrag.nearest"):
            # the folder's way, in the database: the best codes re-scored exactly
            search = (
                "CALL kgrag.nearest($label, $codebook, $kind, $qs, $wide, $k, $n, $build) "
                "YIELD query AS i, row, score "
                f"MATCH (node:`{self.labels[kind]}` {{row: row}})"
            )
        else:
            # the index's best candidates (a search of that width). The index is
            # unquantised, so its score is the cosine of the stored vectors itself
            # (equal to vector.similarity.cosine over them, as (1 + cos) / 2)
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
        small = kind in SMALL_PROPS
        extra = ("node.id",) if with_ids else props_columns(kind, "node") if small else ()
        query_of, found_rows, scores, *brought = self.columns(
            search,
            ("i", "node.row", "score", *extra),
            index=f"kg_{self.tag}__{kind}_vec",
            label=self.labels[kind],
            codebook=self.labels["codebooks"],
            kind=kind,
            k=k,
            n=n,
            build=self.build,
            wide=wide,
            qs=[v.tolist() for v in q],
        )
        which = np.array(query_of, dtype=np.int64)
        rows = np.array(found_rows, dtype=np.int64)
        cos = np.array(scores, dtype=np.float64)
        found = [top_rows(rows[which == i], cos[which == i], k) for i in range(len(q))]
        kept = sorted({row for best in found for row, _ in best})
        if with_ids:
            id_of = dict(zip(rows.tolist(), brought[0], strict=True))
            self.memo.read(f"id:{kind}", kept, lambda wanted: {x: id_of[x] for x in wanted})
        elif small:
            at = {row: i for i, row in enumerate(rows.tolist())}
            self.keep_props(kind, kept, [[col[at[x]] for x in kept] for col in brought])
        return found

    def similarity(
        self, kind: str, query: np.ndarray, rows: np.ndarray | None = None
    ) -> np.ndarray:
        kind = vector_kind(kind)
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
        if self.has_procedure("kgrag.similarity"):
            found = self.connection.run(
                "CALL kgrag.similarity($label, $q, $n, $build) YIELD score RETURN score",
                label=self.labels[kind],
                q=q.astype(np.float64).tolist(),
                n=n,
                build=self.build,
            )
            return np.frombuffer(bytes(found[0][0]), dtype="<f4").astype(np.float32)
        # Neo4j's cosine is (1 + cos) / 2
        found_rows, sims = self.columns(
            f"MATCH (n:`{self.labels[kind]}`) WHERE n.row >= 0",
            ("n.row", "vector.similarity.cosine(n.vec, $q)"),
            q=q.tolist(),
        )
        out[np.array(found_rows, dtype=np.int64)] = 2.0 * np.array(sims, dtype=np.float64) - 1.0
        return out

    def push_in_server(
        self, reset: np.ndarray, damping: float, eps: float, rounds: int
    ) -> np.ndarray:
        """The PageRank push in the database (``kgrag.push``, the same float32
        arithmetic in the same order as :func:`kgrag.store.kernels.pushed_pagerank`, so
        the same mass): one query instead of one per round."""
        r = (reset / reset.sum()).astype(np.float32)
        at = np.flatnonzero(r)
        found = self.connection.run(
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
            build=self.build,
        )
        return np.frombuffer(bytes(found[0][0]), dtype="<f4").astype(np.float32)

    def paths_in_server(
        self, seeds: Sequence[int], groups: Sequence[set[int]] | None, limits: PathLimits
    ) -> tuple[dict[int, float], dict[int, int]]:
        """The path search in the database (``kgrag.paths``, the rules of
        :func:`kgrag.store.kernels.path_rounds` step for step, so the same lengths and
        predecessors): one query instead of two a round (the round's relations, the
        tolls of the entities they reach)."""
        found = self.connection.run(
            "CALL kgrag.paths($label, $seeds, $groups, $use_groups, $limit, $hub_degree, "
            "$max_reached, $max_offers, $generic, $toll, $n, $build) "
            "YIELD rows, lengths, preds RETURN rows, lengths, preds",
            label=self.labels["entities"],
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
            build=self.build,
        )
        rows, lengths, preds = found[0]
        return (
            dict(zip(rows, lengths, strict=True)),
            dict(zip(rows, preds, strict=True)),
        )


class RemoteMatrix:
    """The vectors of one kind, read from Neo4j by row: ``m[rows]`` fetches them,
    ``m @ q`` scores every row in the database."""

    def __init__(self, reader: VersionSearch, kind: str) -> None:
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
