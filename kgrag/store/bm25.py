"""BM25 over an FTS5 index, scored in memory: the same scores as SQLite's ``bm25()``.

An FTS5 ``MATCH "a" OR "b" ...`` query with ``bm25()`` decodes and scores
every matching row in SQLite's virtual machine, and questions share common words
("film", "born") with thousands of rows. :class:`Postings` reads the index's postings once, when the
version is written (through the ``fts5vocab`` table, so the terms are exactly
the index's own tokens), stores them as arrays a reader maps, and scores a query
with numpy from the postings of its own terms.

Scores are SQLite's to the bit: FTS5's formula (``fts5_aux.c``) with its
constants, evaluated in the same order in double precision::

    idf_i  = ln((N - n_i + 0.5) / (n_i + 0.5)), or 1e-6 when that is <= 0
    score  = sum over phrases i of idf_i * (f_i * (k1 + 1)) / (f_i + k1 * (1 - b + b * D / avgdl))

with N rows, n_i the rows holding phrase i, f_i its occurrences in the row
(every column weighs 1), D the row's tokens and avgdl the mean over rows.
Query words are tokenized by an FTS5 table with the index's own tokenizer; a
word that becomes more than one token (a phrase) is left to SQLite.
"""

from __future__ import annotations

import json
import math
import re
import sqlite3
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from kgrag.store.arrays import FileRows, map_array
from kgrag.text.tokens import WORD as _WORD

K1, B = 1.2, 0.75  # FTS5's constants
_TOKENIZE = re.compile(r"tokenize\s*=\s*'([^']*)'", re.IGNORECASE)


def stop_words() -> frozenset[str]:
    """The words a query leaves out (scikit-learn's English stop words)."""
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

    return frozenset(ENGLISH_STOP_WORDS)


def query_words(query: str, stop: frozenset[str]) -> list[str]:
    """A query's distinct words, lower-cased, stop words left out, in order."""
    return list(dict.fromkeys(w for w in _WORD.findall(query.lower()) if w not in stop))


def inverse_frequency(n: int, df: int) -> float:
    """FTS5's idf of a phrase in ``df`` of ``n`` rows (1e-6 where it would be <= 0)."""
    idf = math.log((n - df + 0.5) / (df + 0.5))
    return idf if idf > 0.0 else 1e-6


def tokenizer_of(db: sqlite3.Connection, fts: str) -> str:
    """The tokenizer table ``fts`` was made with (FTS5's default when none is named)."""
    sql = db.execute("SELECT sql FROM sqlite_master WHERE name = ?", (fts,)).fetchone()
    found = _TOKENIZE.search(sql[0] if sql else "")
    return found[1] if found else "unicode61"


def best(
    docs: np.ndarray, scores: np.ndarray, k: int, ids: Callable[[np.ndarray], list[str]]
) -> list[tuple[str, float]]:
    """The ``k`` best (id, score) of scored documents, ties broken by id: the best k by
    score and every document tied with the k-th, then ordered by (-score, id)."""
    if len(scores) > k:
        keep = scores >= np.partition(scores, len(scores) - k)[len(scores) - k]
        docs, scores = docs[keep], scores[keep]
    found = zip(ids(docs), scores.tolist(), strict=True)
    return sorted(found, key=lambda x: (-x[1], x[0]))[:k]


class Postings:
    """The postings of one FTS5 table: built from the index at commit
    (:meth:`build`), saved beside the version (:meth:`save`) and opened by memory
    map (:meth:`open`; the postings themselves are read with ``pread``, a term's a
    slice: a common word's run over most documents is read, not kept). Documents are
    numbered 0..n-1 in FTS rowid order."""

    def __init__(
        self,
        terms: np.ndarray,
        indptr: np.ndarray,
        docs: np.ndarray | FileRows,
        tf: np.ndarray | FileRows,
        length: np.ndarray,
        avgdl: float,
    ) -> None:
        self.terms = terms  # sorted utf-8 terms, fixed width
        self.indptr, self.docs, self.tf = indptr, docs, tf  # postings of term i: a slice
        self.length, self.avgdl = length, avgdl  # tokens per document, their mean

    @classmethod
    def build(cls, db: sqlite3.Connection, fts: str) -> tuple[Postings, np.ndarray]:
        """The postings of table ``fts`` (through its ``fts5vocab`` table, so the terms
        are the index's own tokens) and the FTS rowid of each document."""
        rowids = np.array(
            [r[0] for r in db.execute(f"SELECT id FROM {fts}_docsize ORDER BY id")], dtype=np.int64
        )
        vocab = f"kgrag_vocab_{fts}"
        db.execute(
            f"CREATE VIRTUAL TABLE IF NOT EXISTS temp.{vocab} "
            f"USING fts5vocab(main, {fts}, instance)"
        )
        terms: dict[str, int] = {}
        n = len(rowids)
        span = max(n, 1)  # pair key: term * span + document
        # per batch of token instances, their distinct (term, document) pairs and counts:
        # memory grows with the pairs, not with every token of the corpus
        term_parts, doc_parts, count_parts = [], [], []
        cursor = db.execute(f"SELECT term, doc FROM temp.{vocab}")
        while batch := cursor.fetchmany(100_000):  # arrays, not a Python int per posting
            term_of = np.fromiter((terms.setdefault(t, len(terms)) for t, _ in batch), np.int64)
            docs = np.searchsorted(rowids, np.fromiter((d for _, d in batch), np.int64))
            keys, counts = np.unique(term_of * span + docs, return_counts=True)
            term_parts.append(keys // span)
            doc_parts.append(keys % span)
            count_parts.append(counts)
        db.execute(f"DROP TABLE temp.{vocab}")
        term_of = np.concatenate(term_parts) if term_parts else np.zeros(0, dtype=np.int64)
        doc_of = np.concatenate(doc_parts) if doc_parts else np.zeros(0, dtype=np.int64)
        count_of = np.concatenate(count_parts) if count_parts else np.zeros(0, dtype=np.int64)
        del term_parts, doc_parts, count_parts
        length = np.bincount(doc_of, count_of, minlength=n).astype(np.int64)
        encoded = [t.encode() for t in terms]
        order = np.argsort(np.array(encoded, dtype=object), kind="stable")  # terms by bytes
        rank = np.empty(len(order), dtype=np.int64)
        rank[order] = np.arange(len(order))
        # a pair split across two batches is summed here
        pairs, inverse = np.unique(rank[term_of] * span + doc_of, return_inverse=True)
        tf = np.bincount(inverse.ravel(), count_of, minlength=len(pairs))
        width = max((len(e) for e in encoded), default=1)
        sorted_terms = np.array([encoded[i] for i in order], dtype=f"S{width}")
        indptr = np.searchsorted(pairs // span, np.arange(len(terms) + 1))
        avgdl = float(length.sum()) / n if n else 1.0
        postings = cls(
            sorted_terms, indptr, (pairs % span).astype(_narrowest(n)), _counts(tf), length, avgdl
        )
        return postings, rowids

    def save(self, folder: Path, name: str) -> None:
        for part in ("terms", "indptr", "docs", "tf", "length"):
            np.save(folder / f"bm25.{name}.{part}.npy", getattr(self, part))
        (folder / f"bm25.{name}.json").write_text(json.dumps({"avgdl": self.avgdl}))

    @classmethod
    def open(cls, folder: Path, name: str) -> Postings:
        def part(p: str) -> np.ndarray:
            return map_array(folder / f"bm25.{name}.{p}.npy")

        def rows(p: str) -> FileRows:
            return FileRows(folder / f"bm25.{name}.{p}.npy")

        avgdl = float(json.loads((folder / f"bm25.{name}.json").read_text())["avgdl"])
        return cls(part("terms"), part("indptr"), rows("docs"), rows("tf"), part("length"), avgdl)

    def close(self) -> None:
        for part in (self.docs, self.tf):
            if isinstance(part, FileRows):
                part.close()

    def posting(self, t: int) -> tuple[np.ndarray, np.ndarray]:
        """The documents of term ``t`` (by its rank in :attr:`terms`) and its counts."""
        a, b = int(self.indptr[t]), int(self.indptr[t + 1])
        return _slice(self.docs, a, b), _slice(self.tf, a, b)

    def scores(self, tokens: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """Documents matching any of ``tokens`` (one phrase each, in query order) and
        their BM25 scores (positive: SQLite's ``-bm25()``); reads those postings only."""
        n = len(self.length)
        # summed per document in query order, as SQLite sums its phrases, into one
        # vector over the documents: a common word's run over most of the documents is
        # added where it lies, not gathered, sorted and binned
        total = np.zeros(n)  # every matching document's score is positive (idf >= 1e-6)
        for token in tokens:
            key = token.encode()
            t = int(np.searchsorted(self.terms, key)) if len(self.terms) else 0
            if t >= len(self.terms) or len(key) > self.terms.dtype.itemsize:
                continue
            if self.terms[t] != key:
                continue
            docs, counts = self.posting(t)
            f = counts.astype(np.float64)
            idf = inverse_frequency(n, len(docs))
            d = np.asarray(self.length[docs], dtype=np.float64)
            # a term's documents are distinct: one addition each
            total[docs] += idf * ((f * (K1 + 1.0)) / (f + K1 * (1 - B + B * d / self.avgdl)))
        rows = np.flatnonzero(total)
        return rows, total[rows]


def _narrowest(n: int) -> type[np.signedinteger]:
    """int32 for document numbers below ``n`` where they fit (a posting read is its
    bytes), else int64."""
    return np.int32 if n < 2**31 else np.int64


def _counts(tf: np.ndarray) -> np.ndarray:
    """Term counts in the narrowest unsigned type that holds the largest: a word seldom
    occurs 255 times in one passage or report, so most postings take one byte."""
    top = int(tf.max()) if len(tf) else 0
    dtype = next(t for t in (np.uint8, np.uint16, np.uint32, np.uint64) if top <= np.iinfo(t).max)
    return tf.astype(dtype)


def _slice(part: np.ndarray | FileRows, a: int, b: int) -> np.ndarray:
    return part.slice(a, b) if isinstance(part, FileRows) else np.asarray(part[a:b])


class QueryTokenizer:
    """Words to index tokens, by a temporary FTS5 table with ``fts``'s tokenizer (or
    the one named)."""

    def __init__(self, db: sqlite3.Connection, fts: str, tokenizer: str | None = None) -> None:
        tokenizer = tokenizer or tokenizer_of(db, fts)
        if "'" in tokenizer:
            raise ValueError(f"unusable FTS5 tokenizer {tokenizer!r}")
        self.db, self.table = db, f"kgrag_words_{fts}"
        self.cache: dict[str, tuple[str, ...]] = {}
        db.execute(
            f"CREATE VIRTUAL TABLE IF NOT EXISTS temp.{self.table} "
            f"USING fts5(x, tokenize='{tokenizer}')"
        )
        db.execute(
            f"CREATE VIRTUAL TABLE IF NOT EXISTS temp.{self.table}_v "
            f"USING fts5vocab(temp, {self.table}, instance)"
        )

    def tokens(self, words: Sequence[str]) -> list[tuple[str, ...]]:
        """Each word's tokens (remembered: a word always tokenizes the same)."""
        new = [w for w in dict.fromkeys(words) if w not in self.cache]
        if new:
            self.db.executemany(
                f"INSERT INTO temp.{self.table}(rowid, x) VALUES (?, ?)", list(enumerate(new))
            )
            found: dict[int, list[str]] = {}
            for doc, term in self.db.execute(
                f"SELECT doc, term FROM temp.{self.table}_v ORDER BY doc, offset"
            ):
                found.setdefault(doc, []).append(term)
            self.db.execute(f"DELETE FROM temp.{self.table}")
            if len(self.cache) > 100_000:
                self.cache.clear()
            for i, w in enumerate(new):
                self.cache[w] = tuple(found.get(i, ()))
        return [self.cache[w] for w in words]
