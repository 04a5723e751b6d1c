"""The vector files of a version: one precision per kind.

Chunk vectors, which dense retrieval scans whole, stay float32 (``vectors/chunks.npy``).
The other kinds (sentences, entities, facts, community reports, tree nodes: 95% of a
graph's vectors) are held as int8 codes with one float32 scale a row
(``vectors/<kind>.q8.npy`` and ``vectors/<kind>.scale.npy``): row i is
``codes[i] * scale[i]``, coded in steps of the row's largest magnitude / 127 and scaled
back to the row's norm. A unit MiniLM vector's components are at most ~0.3, so a step
is ~0.002 and a cosine with a unit query moves by ~1e-3 at most: the order of the
half-precision scans' rounding, which the searches already re-rank past. The codes
take a quarter of the bytes; the dequantised rows are the vectors every search, the
ANN index and a Neo4j upload read, so all stores agree on them. Whether recall holds
is measured (docs/benchmarks.md, "Bytes on disk").

A version written before this format has float32 files for every kind; they are read
as they are.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from kgrag.store.arrays import FileRows, map_array
from kgrag.store.composed import COMPOSED_KIND, ComposedMatrix, FactParts
from kgrag.store.matrix import RowMatrix, SharedRows

#: the kinds stored as int8 codes (the others as float32)
CODED_KINDS = ("sentences", "entities", "facts", "communities", "tree_nodes")
_BLOCK = 16_384  # rows converted at a time


def quantize(matrix: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """:func:`_quantize_rows` a block of rows at a time: it works in float64, so the
    whole matrix at once would take twice its float32 bytes more."""
    if len(matrix) <= _BLOCK:
        return _quantize_rows(matrix)
    parts = [_quantize_rows(matrix[lo : lo + _BLOCK]) for lo in range(0, len(matrix), _BLOCK)]
    return np.concatenate([c for c, _ in parts]), np.concatenate([s for _, s in parts])


def _quantize_rows(matrix: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """int8 codes and float32 row scales of a float matrix: codes in steps of the row's
    largest magnitude / 127, and the scale that gives the dequantised row the norm of
    the row coded (a unit vector stays a unit vector, so a cosine index and a dot
    product score it alike), rounded to 17 significant bits. With such a
    scale a code (7 bits) times its scale is exact in float32, so coding dequantised
    rows again gives the same codes and scales, bit for bit (a graph copied, or a version carried
    forward by an incremental ingest, keeps its vectors)."""
    m = np.asarray(matrix, dtype=np.float64)
    if not m.size:
        return np.zeros(m.shape, dtype=np.int8), np.zeros(len(m), dtype=np.float32)
    peak = np.abs(m).max(axis=1)
    step = np.where(peak > 0, peak / 127.0, 1.0)
    codes = np.clip(np.rint(m / step[:, None]), -127, 127).astype(np.int8)
    size = np.linalg.norm(codes.astype(np.float64), axis=1)
    norm = np.linalg.norm(m, axis=1)
    scale = np.where(size > 0, norm / np.where(size > 0, size, 1.0), 0.0)
    mantissa, exponent = np.frexp(scale)
    return codes, np.ldexp(np.rint(mantissa * 131072.0) / 131072.0, exponent).astype(np.float32)


def dequantize(codes: np.ndarray, scale: np.ndarray) -> np.ndarray:
    out: np.ndarray = codes.astype(np.float32) * np.asarray(scale, dtype=np.float32)[:, None]
    return out


def code_file(folder: Path, kind: str) -> None:
    """Replace ``folder/<kind>.npy`` (float32) by its codes and scales, a block at a time
    (the float file is read through a map, so memory stays a block's)."""
    source = folder / f"{kind}.npy"
    matrix = np.load(source, mmap_mode="r")
    n, dim = matrix.shape
    codes = np.lib.format.open_memmap(folder / f"{kind}.q8.npy", "w+", np.int8, (n, dim))
    scale = np.empty(n, dtype=np.float32)
    for i in range(0, n, _BLOCK):
        codes[i : i + _BLOCK], scale[i : i + _BLOCK] = quantize(matrix[i : i + _BLOCK])
    codes.flush()
    del codes, matrix
    np.save(folder / f"{kind}.scale.npy", scale)
    source.unlink()
    share_rows(folder, kind)


#: equal rows are stored once where at least this share of a kind's rows repeat one
SHARE_AT = 0.1


def share_rows(folder: Path, kind: str) -> None:
    """Store a coded kind's equal rows once (``<kind>.rows.npy``: each row's stored row)
    where at least :data:`SHARE_AT` of its rows repeat another: a community carried
    down a level has its child's report and vector (on 2Wiki 16.9k of 25.4k rows)."""
    codes = np.load(folder / f"{kind}.q8.npy", mmap_mode="r")
    scale = np.load(folder / f"{kind}.scale.npy")
    keys = np.empty(len(codes), dtype="V24")  # a row's codes hashed, and its scale
    for i in range(0, len(codes), _BLOCK):
        block = np.ascontiguousarray(codes[i : i + _BLOCK])
        digests = [hashlib.blake2b(row.tobytes(), digest_size=20).digest() for row in block]
        tails = scale[i : i + _BLOCK].tobytes()
        keys[i : i + len(block)] = [d + tails[4 * j : 4 * j + 4] for j, d in enumerate(digests)]
    _, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
    if len(codes) - len(first) < SHARE_AT * len(codes):
        return
    stored = np.sort(first)  # stored rows in their order
    at = np.empty(len(codes), dtype=np.int64)
    at[stored] = np.arange(len(stored))
    rows = at[first[inverse.reshape(-1)]].astype(np.int32)
    kept = np.asarray(codes[stored])
    if not np.array_equal(kept[rows], codes):  # a hash shared by unequal rows
        return
    del codes
    np.save(folder / f"{kind}.q8.npy", kept)
    np.save(folder / f"{kind}.scale.npy", scale[stored])
    np.save(folder / f"{kind}.rows.npy", rows)


def code_files(folder: Path) -> None:
    """Code every kind of :data:`CODED_KINDS` that ``folder`` holds as float32."""
    for kind in CODED_KINDS:
        if (folder / f"{kind}.npy").exists():
            code_file(folder, kind)


def is_coded(folder: Path, kind: str) -> bool:
    return (folder / f"{kind}.q8.npy").exists()


def is_composed(folder: Path, kind: str) -> bool:
    """Whether a kind is stored as the parts it is composed of (:mod:`kgrag.store.composed`)."""
    return kind == COMPOSED_KIND and (folder / f"{kind}.ends.npy").exists()


_PART_FILES = ("ends", "predicate", "weight")  # and the predicate vectors, coded


def save_fact_parts(folder: Path, parts: FactParts) -> None:
    """``parts`` as the version's files (the predicate vectors as int8 codes)."""
    for name in _PART_FILES:
        np.save(folder / f"{COMPOSED_KIND}.{name}.npy", getattr(parts, name))
    codes, scale = quantize(np.asarray(parts.predicates, dtype=np.float32))
    np.save(folder / f"{COMPOSED_KIND}.predicates.q8.npy", codes)
    np.save(folder / f"{COMPOSED_KIND}.predicates.scale.npy", scale)


def load_fact_parts(folder: Path) -> FactParts:
    """The parts :func:`save_fact_parts` wrote, mapped."""
    ends, predicate, weight = (
        np.load(folder / f"{COMPOSED_KIND}.{name}.npy", mmap_mode="r") for name in _PART_FILES
    )
    codes = np.load(folder / f"{COMPOSED_KIND}.predicates.q8.npy", mmap_mode="r")
    scale = np.load(folder / f"{COMPOSED_KIND}.predicates.scale.npy")
    return FactParts(ends, predicate, CodedMatrix(codes, scale), weight)


def remove_fact_parts(folder: Path) -> None:
    for name in (*_PART_FILES, "predicates.q8", "predicates.scale"):
        (folder / f"{COMPOSED_KIND}.{name}.npy").unlink(missing_ok=True)


def ids_file(folder: Path, kind: str) -> Path:
    """Where a kind's ids by row are kept, beside its vectors (fixed-width UTF-8): the
    one copy of them (a version written before keeps them in ``graph.sqlite``'s
    ``vector_ids`` and in ``serving/ids.<kind>.npy``)."""
    return folder / f"{kind}.ids.npy"


def kind_ids_file(serving: Path, vectors: Path, kind: str) -> Path:
    """A version's file of a kind's ids by row: ``serving/ids.<kind>.npy`` in a version
    written before, else the one beside its vectors (:func:`ids_file`)."""
    path = serving / f"ids.{kind}.npy"
    return path if path.exists() else ids_file(vectors, kind)


def save_ids(folder: Path, kind: str, ids: Sequence[str]) -> None:
    encoded = np.array([i.encode() for i in ids]) if len(ids) else np.zeros(0, "S1")
    np.save(ids_file(folder, kind), encoded)


def is_float32(folder: Path, kind: str) -> bool:
    """Whether a kind's vectors are a float32 file (a version before coded vectors)."""
    return (folder / f"{kind}.npy").exists()


class CodedMatrix(RowMatrix):
    """A coded kind's vectors read as a float32 matrix: rows, slices and products are
    dequantised as they are taken, so nothing is converted whole unless asked
    (``np.asarray``)."""

    def __init__(self, codes: np.ndarray, scale: np.ndarray) -> None:
        if codes.ndim != 2 or len(scale) != len(codes):
            raise ValueError(f"codes of shape {codes.shape} for {len(scale)} scales")
        self.codes, self.scale = codes, np.asarray(scale, dtype=np.float32)
        self.shape = tuple(codes.shape)

    def __getitem__(self, key: Any) -> np.ndarray:
        if isinstance(key, tuple):
            return self[key[0]][(slice(None), *key[1:])]
        if isinstance(key, (int, np.integer)):
            return self.codes[key].astype(np.float32) * self.scale[key]
        return dequantize(self.codes[key], self.scale[key])

    def block_product(self, lo: int, hi: int, q: np.ndarray) -> np.ndarray:
        scale = self.scale[lo:hi] if q.ndim == 1 else self.scale[lo:hi, None]
        product: np.ndarray = (self.codes[lo:hi].astype(np.float32) @ q) * scale
        return product


def open_matrix(folder: Path, kind: str, dim: int, *, random: bool = True) -> Any:
    """A kind's vectors, mapped: a float32 array, a :class:`CodedMatrix`, a
    :class:`~kgrag.store.composed.ComposedMatrix`, or an empty ``(0, dim)`` array where
    the version has none."""
    if is_composed(folder, kind):
        entities = open_matrix(folder, "entities", dim, random=True)
        return ComposedMatrix(load_fact_parts(folder), entities)
    if is_coded(folder, kind):
        codes = map_array(folder / f"{kind}.q8.npy", "r", random=random)
        coded = CodedMatrix(codes, np.load(folder / f"{kind}.scale.npy"))
        shared = folder / f"{kind}.rows.npy"
        return SharedRows(coded, np.load(shared)) if shared.exists() else coded
    path = folder / f"{kind}.npy"
    if path.exists():
        return map_array(path, "r", random=random)
    return np.zeros((0, dim), dtype=np.float32)


class VectorRows:
    """A kind's rows read with ``pread`` (:class:`~kgrag.store.arrays.FileRows`),
    dequantised where the kind is coded, composed from entity rows where it is stored
    as parts (:mod:`kgrag.store.composed`)."""

    def __init__(self, folder: Path, kind: str) -> None:
        self.parts: FactParts | None = None
        if is_composed(folder, kind):
            self.parts = load_fact_parts(folder)
            self.source = VectorRows(folder, "entities")
            return
        self.coded = is_coded(folder, kind)
        self.file = FileRows(folder / (f"{kind}.q8.npy" if self.coded else f"{kind}.npy"))
        want = np.int8 if self.coded else np.float32
        if self.file.dtype != want or len(self.file.shape) != 2:
            self.file.close()
            raise ValueError(f"{self.file.path}: not a {np.dtype(want).name} matrix")
        self.scale = np.load(folder / f"{kind}.scale.npy") if self.coded else None
        shared = folder / f"{kind}.rows.npy"
        self.shared = np.load(shared) if self.coded and shared.exists() else None
        if self.scale is not None and len(self.scale) != len(self.file):
            self.file.close()
            raise ValueError(f"{folder}/{kind}: {len(self.file)} codes, {len(self.scale)} scales")

    def take(self, rows: np.ndarray) -> np.ndarray:
        if self.parts is not None:
            return self.parts.compose(_Taken(self.source), rows)
        if self.shared is not None:
            rows = self.shared[np.asarray(rows, dtype=np.int64)]
        found = self.file.take(rows)
        if self.scale is None:
            return found
        return dequantize(found, self.scale[np.asarray(rows, dtype=np.int64)])

    def close(self) -> None:
        if self.parts is not None:
            self.source.close()
        else:
            self.file.close()


class _Taken:
    """``rows[i]`` as :meth:`VectorRows.take` reads them."""

    def __init__(self, rows: VectorRows) -> None:
        self.rows = rows

    def __getitem__(self, at: np.ndarray) -> np.ndarray:
        return self.rows.take(at)


def vector_count(folder: Path, kind: str) -> tuple[int, int]:
    """The shape of a kind's vectors, ``(0, 0)`` where the version has none."""
    if is_composed(folder, kind):
        parts = load_fact_parts(folder)
        return len(parts.ends), parts.dim
    shared = folder / f"{kind}.rows.npy"
    if shared.exists():
        dim = np.load(folder / f"{kind}.q8.npy", mmap_mode="r").shape[1]
        return len(np.load(shared, mmap_mode="r")), int(dim)
    for name in (f"{kind}.q8.npy", f"{kind}.npy"):
        if (folder / name).exists():
            shape = np.load(folder / name, mmap_mode="r").shape
            return int(shape[0]), int(shape[1])
    return 0, 0


def within_a_code_step(stored: Any, vectors: np.ndarray) -> bool:
    """Whether each stored row is within one code step (the row's largest magnitude /
    127, and 5% for the scaling back to the row's norm) of the float row ``vectors``,
    element by element: what a row coded from ``vectors``, or from a vector within
    rounding of it, holds."""
    want = np.atleast_2d(np.asarray(vectors, dtype=np.float32))
    got = np.atleast_2d(np.asarray(stored, dtype=np.float32))
    step = np.abs(want).max(axis=1, keepdims=True) / 127
    return got.shape == want.shape and bool(np.all(np.abs(got - want) <= 1.05 * step))
