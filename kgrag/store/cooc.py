"""A folder version's co-occurrence relations, kept as columns beside graph.sqlite.

Most of a graph's relations are pairs of entities named in one sentence (on 2Wiki
430k of 500k; 3.3M of 3.9M at 60k passages). As SQLite rows each held its id, both
ends and its evidence chunks as 17-byte packed ids, with the B-tree's own bytes on
top: ~110 bytes a row, the largest part of a graph on disk. Here each keeps its id
(17 bytes, sorted, so a lookup by id is a binary search), its ends and evidence as
numbers into two sorted id tables, and its weight: ~40 bytes.

``cooc/`` in a version folder::

    ids.npy          (n, 17) uint8   packed relation ids, ascending
    ends.npy         (n, 2)          rows of entities.npy: source, target
    weight.npy       (n,)            each weight, in the narrowest of uint8, uint16,
                                     float32 and float64 that holds them all exactly
    evidence_at.npy  (n + 1,)        relation i's evidence is evidence[at[i]:at[i + 1]]
    evidence.npy                     rows of chunks.npy
    entities.npy     (m, 17) uint8   packed entity ids, ascending
    chunks.npy       (c, 17) uint8   packed chunk ids, ascending

A relation is kept here when it is a co-occurrence (kind ``cooc``, the co-occurrence
predicate) whose id, ends and evidence are all content ids; any other stays a SQLite
row. Readers see one set of relations either way: :func:`relation_batches` gives every
row, SQLite's and these, in id order, as packed rows
(:func:`kgrag.store.packed.relation_values`).
"""

from __future__ import annotations

import heapq
import shutil
import sqlite3
from array import array
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from kgrag.errors import StoreError
from kgrag.store.arrays import map_array
from kgrag.store.packed import pack_id, unpack_id
from kgrag.text.keys import COOC

FOLDER = "cooc"
_WIDTH = 17  # a packed content id
_BATCH = 100_000  # rows made at a time
_SQL = "SELECT id, src, predicate, dst, weight, kind, evidence FROM relations"


def _packed(id_: str) -> bytes | None:
    """``id_`` packed, or None where it is not a content id (17 bytes, prefix known)."""
    data = pack_id(id_)
    return data if data[0] else None


def _index_dtype(n: int) -> Any:
    """Rows of a table of ``n``."""
    return np.uint16 if n <= 0xFFFF else np.int32


def _offset_dtype(last: int) -> Any:
    """Offsets up to ``last``."""
    return np.uint16 if last <= 0xFFFF else np.uint32 if last <= 0xFFFFFFFF else np.int64


class CoocWriter:
    """Co-occurrences gathered as a version is written, saved by :meth:`save`. Ends and
    evidence are numbered as they come (a dict of the distinct ids), so a relation
    costs ~45 bytes until the save."""

    def __init__(self) -> None:
        self._ids = bytearray()
        self._ends = array("i")
        self._weight = array("d")
        self._evidence = array("i")
        self._count = array("i")
        self._entities: dict[bytes, int] = {}
        self._chunks: dict[bytes, int] = {}

    def __len__(self) -> int:
        return len(self._count)

    def take(self, r: Any) -> bool:
        """Keep relation ``r`` here if it is a co-occurrence of content ids (True);
        else leave it to the caller (False)."""
        if r.kind != "cooc" or r.predicate != COOC:
            return False
        id_, src, dst = _packed(r.id), _packed(r.src), _packed(r.dst)
        evidence = [_packed(c) for c in r.evidence]
        if id_ is None or src is None or dst is None or None in evidence:
            return False
        ents, chunks = self._entities, self._chunks
        self._ids += id_
        self._ends.append(ents.setdefault(src, len(ents)))
        self._ends.append(ents.setdefault(dst, len(ents)))
        self._weight.append(float(r.weight))
        for c in evidence:
            self._evidence.append(chunks.setdefault(c, len(chunks)))  # type: ignore[arg-type]
        self._count.append(len(evidence))
        return True

    def save(self, version: Path) -> None:
        """Write the files, with any the version holds already (so a writer saves after
        each batch and holds nothing between them); nothing when no co-occurrence was
        kept. A repeated id is a :class:`StoreError`."""
        if not len(self):
            return
        stored = CoocColumns.of(version)
        if stored is not None:
            self._absorb(stored)
            del stored
        n = len(self)
        # each column is written, and what it was made from let go, before the next:
        # at 60k passages (3.3M co-occurrences) the save's peak stays near 0.25 GB
        ids = np.frombuffer(self._ids, np.uint8).reshape(n, _WIDTH)
        order = np.argsort(_keys(ids), kind="stable")
        ids = ids[order]
        self._ids = bytearray()
        keys = _keys(ids)
        same = np.flatnonzero(keys[1:] == keys[:-1])
        if len(same):
            raise StoreError(f"duplicate relations record: {unpack_id(bytes(ids[same[0]]))}")
        folder = version / FOLDER
        shutil.rmtree(folder, ignore_errors=True)  # new files: a map of the old stays valid
        folder.mkdir()
        np.save(folder / "ids.npy", ids)
        del ids, keys
        entity_ids, rank = _ranked(self._entities)
        self._entities = {}
        ends = np.frombuffer(self._ends, np.int32).reshape(n, 2)[order]
        self._ends = array("i")
        np.save(folder / "ends.npy", rank.astype(_index_dtype(len(entity_ids)))[ends])
        np.save(folder / "entities.npy", entity_ids)
        del ends, entity_ids, rank
        weight = np.frombuffer(self._weight, np.float64)[order]
        self._weight = array("d")
        np.save(folder / "weight.npy", _narrowest(weight))
        del weight
        counts = np.frombuffer(self._count, np.int32)
        old_at = np.zeros(n + 1, np.int64)
        np.cumsum(counts, out=old_at[1:])
        ordered = counts[order]
        del counts
        self._count = array("i")
        new_at = np.zeros(n + 1, np.int64)
        np.cumsum(ordered, out=new_at[1:])
        np.save(folder / "evidence_at.npy", new_at.astype(_offset_dtype(int(new_at[-1]))))
        # new position p of relation k reads old position old_at[order[k]] + p - new_at[k]
        start = old_at[:-1][order]
        start -= new_at[:-1]
        del old_at, order
        source = np.repeat(start, ordered)
        del start, ordered
        source += np.arange(len(source))
        chunk_ids, rank = _ranked(self._chunks)
        flat = np.frombuffer(self._evidence, np.int32)[source]
        del source
        self._evidence = array("i")
        np.save(folder / "evidence.npy", rank.astype(_index_dtype(len(chunk_ids)))[flat])
        np.save(folder / "chunks.npy", chunk_ids)
        self.__init__()  # type: ignore[misc]

    def _absorb(self, stored: CoocColumns) -> None:
        """Take in the columns a version holds already (their rows come first)."""
        n = len(stored)
        ents, chunks = self._entities, self._chunks
        ent_at = np.array([ents.setdefault(e.tobytes(), len(ents)) for e in stored.entities])
        chunk_at = np.array([chunks.setdefault(c.tobytes(), len(chunks)) for c in stored.chunks])
        at = np.asarray(stored.evidence_at, np.int64)
        self._ids[:0] = np.asarray(stored.ids).tobytes()
        ends = ent_at[np.asarray(stored.ends, np.int64)] if n else np.zeros(0)
        self._ends[:0] = array("i", ends.astype(np.int32).ravel().tobytes())
        self._weight[:0] = array("d", np.asarray(stored.weight, np.float64).tobytes())
        evidence = chunk_at[np.asarray(stored.evidence, np.int64)] if len(chunk_at) else np.zeros(0)
        self._evidence[:0] = array("i", evidence.astype(np.int32).tobytes())
        self._count[:0] = array("i", np.diff(at).astype(np.int32).tobytes())


def _narrowest(values: np.ndarray) -> np.ndarray:
    """``values`` (float64) in the narrowest of uint8, uint16, float32 and float64 that
    holds every one exactly."""
    for dtype in (np.uint8, np.uint16, np.float32):
        narrow = values.astype(dtype)
        if np.array_equal(narrow.astype(np.float64), values):
            return narrow
    return values


def _keys(ids: np.ndarray) -> np.ndarray:
    """Packed ids as one sortable, searchable value each (fixed width: numpy's strip of
    trailing zero bytes cannot make two of them equal)."""
    return np.ascontiguousarray(ids).view(f"S{_WIDTH}").ravel()


def _ranked(numbered: dict[bytes, int]) -> tuple[np.ndarray, np.ndarray]:
    """The ids numbered in first-seen order, sorted, and each number's sorted row."""
    if not numbered:
        return np.zeros((0, _WIDTH), np.uint8), np.zeros(0, np.int64)
    ids = np.frombuffer(b"".join(numbered), np.uint8).reshape(-1, _WIDTH)
    order = np.argsort(_keys(ids), kind="stable")
    rank = np.empty(len(order), np.int64)
    rank[order] = np.arange(len(order))
    return ids[order], rank


class CoocColumns:
    """The co-occurrence files of a version, mapped; rows made as they are read."""

    def __init__(self, version: Path) -> None:
        folder = version / FOLDER
        self.ids = map_array(folder / "ids.npy")
        self.keys = _keys(self.ids)
        self.ends = map_array(folder / "ends.npy")
        self.weight = map_array(folder / "weight.npy")
        self.evidence_at = map_array(folder / "evidence_at.npy")
        self.evidence = map_array(folder / "evidence.npy")
        self.entities = map_array(folder / "entities.npy")
        self.chunks = map_array(folder / "chunks.npy")

    @staticmethod
    def of(version: Path) -> CoocColumns | None:
        """The version's columns; None for a version that keeps every relation in SQLite."""
        return CoocColumns(version) if (version / FOLDER / "ids.npy").exists() else None

    def __len__(self) -> int:
        return len(self.ids)

    def rows(self, at: Sequence[int] | np.ndarray) -> list[tuple[Any, ...]]:
        """The packed rows (as :data:`kgrag.store.schema.DDL`'s ``relations`` stores
        them) of positions ``at``."""
        at = np.asarray(at, dtype=np.int64)
        if not len(at):
            return []
        ents, chunks = self.entities, self.chunks
        lo = self.evidence_at[at].astype(np.int64).tolist()
        hi = self.evidence_at[at + 1].astype(np.int64).tolist()
        ends = self.ends[at]
        src, dst = ents[ends[:, 0]], ents[ends[:, 1]]
        return [
            (
                id_.tobytes(),
                a.tobytes(),
                None,
                b.tobytes(),
                w,
                "cooc",
                chunks[self.evidence[x:y]].tobytes(),
            )
            for id_, a, b, w, x, y in zip(
                self.ids[at],
                src,
                dst,
                self.weight[at].astype(np.float64).tolist(),
                lo,
                hi,
                strict=True,
            )
        ]

    def find(self, packed: Sequence[bytes]) -> list[tuple[Any, ...]]:
        """The rows whose packed ids are among ``packed`` (others are not here)."""
        wanted = np.array([p for p in packed if len(p) == _WIDTH and p[0]], dtype=f"S{_WIDTH}")
        if not len(wanted) or not len(self):
            return []
        at = np.minimum(np.searchsorted(self.keys, wanted), len(self) - 1)
        return self.rows(np.unique(at[self.keys[at] == wanted]))

    def batches(self, size: int = _BATCH) -> Iterator[list[tuple[Any, ...]]]:
        for lo in range(0, len(self), size):
            yield self.rows(np.arange(lo, min(lo + size, len(self))))


def relation_batches(
    db: sqlite3.Connection, version: Path, size: int = _BATCH
) -> Iterator[list[tuple[Any, ...]]]:
    """Every relation row of a version, SQLite's and the co-occurrence columns', in id
    order (packed ids sort as their text), ``size`` rows at a time."""
    cursor = db.execute(f"{_SQL} ORDER BY id")
    stored = iter(lambda: cursor.fetchmany(size), [])
    cooc = CoocColumns.of(version)
    if cooc is None:
        yield from stored
        return
    rows = heapq.merge(
        (r for batch in stored for r in batch),
        (r for batch in cooc.batches(size) for r in batch),
        key=lambda r: r[0],
    )
    batch: list[tuple[Any, ...]] = []
    for r in rows:
        batch.append(r)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch
