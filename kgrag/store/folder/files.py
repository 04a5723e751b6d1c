"""The query side of the embedded store: the serving files of one version
(:mod:`kgrag.store.serving`), opened by memory map on first use.

Nothing here reads a file whole: arrays are mapped and a query touches the
pages of the rows it asks for (a full scan only where one is asked for, the
dense similarity over every chunk). Nearest neighbours go through the
version's product-quantised index for the kinds that have one (faiss, its
codes read into memory: 48 bytes a vector) and otherwise through a
half-precision scan; either way the candidates are re-scored by exact float32
cosines.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

import numpy as np
import scipy.sparse as sp

from kgrag.errors import InvalidParams, StoreError
from kgrag.store.ann import ann_nearest, open_ann
from kgrag.store.arrays import FileRows, map_array
from kgrag.store.base import GRAPHS, exact_scores, nearest_request, top_rows
from kgrag.store.kernels import Adjacency, gather_rows, row_ranges
from kgrag.store.packed import column_ids
from kgrag.store.serving import HALF_KINDS
from kgrag.store.vectors import VectorRows, kind_ids_file, open_matrix

_MIN_CANDIDATES = 32  # half-precision scans take at least this many
#: a walk of at most this many entries is held in memory once read (8 bytes an entry):
#: scipy's column slicing of an in-memory matrix takes less time than gathering the
#: columns from the map
_SMALL_WALK = 16_000_000
_FEW_ROWS = 512  # scattered rows read by pread rather than through a map, at most
_SMALL_FILE = 8 << 20  # ... of a file larger than this (bytes)

#: attributes of a row kept in a file of their own, not ``attr.<kind>.<name>.npy``
_ATTRIBUTE_FILES = {
    ("chunks", "vertex"): "chunk_vertex",
    ("chunks", "title_entity"): "title_entity",
}


class ServingFiles:
    """The mapped serving files of one version folder."""

    def __init__(self, folder: Path, vectors: Path, dim: int) -> None:
        self.folder, self.vector_folder, self.dim = folder, vectors, dim
        self._maps: dict[str, Any] = {}
        self._lock = threading.RLock()  # re-entered: the small walk reads its files under it
        self._names: sqlite3.Connection | None = None
        self.meta = json.loads((folder / "serving.json").read_text())

    def path(self, name: str) -> Path:
        """The file of ``name``: ``<name>.npy`` here, a kind's ids (``ids.<kind>``)
        beside its vectors where the version keeps them there."""
        if name.startswith("ids."):
            return kind_ids_file(self.folder, self.vector_folder, name[4:])
        return self.folder / f"{name}.npy"

    def array(self, name: str, mode: Literal["r", "c"] = "r") -> np.ndarray:
        """``name``.npy, mapped (once)."""
        arr = self._maps.get(name)
        if arr is None:
            path = self.path(name)
            try:
                arr = map_array(path, mode)
            except (OSError, ValueError) as exc:
                raise StoreError(f"{path}: cannot map: {exc}") from exc
            self._maps[name] = arr
        return arr

    def matrix(self, kind: str) -> Any:
        """A kind's vectors, mapped: float32, or int8 codes read as float32
        (:class:`~kgrag.store.vectors.CodedMatrix`)."""
        key = f"vectors:{kind}"
        if key not in self._maps:  # chunks: scanned in full, read ahead
            scanned = kind == "chunks"
            self._maps[key] = open_matrix(self.vector_folder, kind, self.dim, random=not scanned)
        return self._maps[key]

    # -- ids ---------------------------------------------------------------------------

    def size(self, kind: str) -> int:
        return len(self.array(f"ids.{kind}"))

    def ids(self, kind: str, rows: Sequence[int] | np.ndarray) -> list[str]:
        return [b.decode() for b in self._gather(f"ids.{kind}", rows).tolist()]

    def _gather(self, name: str, rows: Sequence[int] | np.ndarray) -> np.ndarray:
        """Rows of ``name``.npy: from a large file a few hundred scattered ones are read
        by ``pread`` (a map would keep ~64 KB resident around each), else through the
        map (a small file's pages are few, and a map's gather is cheaper per call)."""
        idx = np.asarray(rows, dtype=np.int64)
        mapped = self.array(name)
        if len(idx) > _FEW_ROWS or mapped.nbytes <= _SMALL_FILE:
            return np.asarray(mapped[idx])
        if not len(idx):
            return self.array(name)[:0]
        wanted, inverse = np.unique(idx, return_inverse=True)
        found: np.ndarray = self._file(self.path(name)).take(wanted)[inverse]
        return found

    def rows(self, kind: str, ids: Sequence[str]) -> np.ndarray:
        ordered, order = self.array(f"sorted.{kind}"), self.array(f"order.{kind}")
        if not len(ids) or not len(ordered):
            return np.full(len(ids), -1, dtype=np.int64)
        encoded = [i.encode() for i in ids]
        keys = np.array(encoded, dtype=ordered.dtype)  # longer ids are cut: checked below
        pos = np.minimum(np.searchsorted(ordered, keys), len(ordered) - 1)
        ok = ordered[pos] == keys
        ok &= np.array([len(e) <= ordered.dtype.itemsize for e in encoded])
        return np.where(ok, np.asarray(order[pos], dtype=np.int64), -1)

    # -- vectors -------------------------------------------------------------------------

    def similarity(self, kind: str, query: np.ndarray, rows: np.ndarray | None) -> np.ndarray:
        matrix = self.matrix(kind)
        q = np.asarray(query, dtype=np.float32)
        if rows is None:
            return matrix @ q if len(matrix) else np.zeros(0, dtype=np.float32)
        r = np.asarray(rows, dtype=np.int64)
        if not len(r):
            return np.zeros(0, dtype=np.float32)
        # in blocks: a community level's rows are read, scored and let go 8k at a time
        blocks = [self.vectors_of(kind, r[i : i + 8192]) @ q for i in range(0, len(r), 8192)]
        return np.concatenate(blocks)

    def nearest(
        self, kind: str, queries: np.ndarray, k: int, among: np.ndarray | None
    ) -> list[list[tuple[int, float]]]:
        q, k, cand = nearest_request(self.size(kind), queries, k, among)
        if k <= 0:
            return [[] for _ in range(len(q))]
        if cand is not None:
            return [self._rescore(kind, vec, cand, k) for vec in q]
        if kind in self.meta.get("ann", ()):
            return self._ann(kind, q, k)
        if kind in HALF_KINDS:
            return self._half(kind, q, k)
        matrix = self.matrix(kind)
        return [self._rescore(kind, vec, np.arange(len(matrix)), k) for vec in q]

    def vectors_of(self, kind: str, rows: np.ndarray) -> np.ndarray:
        """The float32 vectors of ``rows``: for a kind that is not scanned whole, read
        with ``pread`` rather than through the map (:class:`~kgrag.store.arrays.FileRows`),
        so that a few scattered rows do not make the process hold the pages around them."""
        r = np.asarray(rows, dtype=np.int64)
        if kind == "chunks" or not len(r):
            return np.asarray(self.matrix(kind)[r], dtype=np.float32)
        key = f"rows:{kind}"
        with self._lock:
            if key not in self._maps:
                try:
                    self._maps[key] = VectorRows(self.vector_folder, kind)
                except (OSError, ValueError) as exc:
                    raise StoreError(f"{self.vector_folder}: cannot read {kind}: {exc}") from exc
            found: VectorRows = self._maps[key]
        return found.take(r)

    def _rescore(self, kind: str, vec: np.ndarray, rows: np.ndarray, k: int) -> list[Any]:
        """The top ``k`` of ``rows`` by :func:`exact_scores`, ties by row; over many rows,
        of the ``max(32, 4k)`` best by a float32 product."""
        vectors = self.vectors_of(kind, rows)
        wide = max(_MIN_CANDIDATES, 4 * k)
        if len(rows) > wide:
            rough = vectors @ vec
            keep = np.sort(np.argpartition(-rough, wide - 1)[:wide])
            rows, vectors = rows[keep], vectors[keep]
        return top_rows(rows, exact_scores(vectors, vec), k)

    def _half(self, kind: str, q: np.ndarray, k: int) -> list[list[tuple[int, float]]]:
        """Top k of each query row by half-precision scores over a candidate margin,
        ranked by exact ones.

        A half-precision copy holds half the bytes of the float32 vectors, and torch's
        fp16 matrix-vector kernel scans it about as fast as numpy scans float32 (numpy
        has no fp16 kernel). Half precision rounds scores by ~1e-3, so the
        ``max(32, 4k)`` best rows by fp16 score are ranked by exact scores
        (:func:`exact_scores`): the result is the exact top k unless a true top-k row
        scores more than that margin below the fp16 cut."""
        import torch

        key = f"torch:{kind}"
        with self._lock:
            if key not in self._maps:
                self._maps[key] = torch.from_numpy(self._half_copy(kind))
        half = self._maps[key]
        n = len(half)
        wide = min(n, max(_MIN_CANDIDATES, 4 * k))
        qh = torch.from_numpy(np.ascontiguousarray(q, dtype=np.float16))
        out = []
        for i, vec in enumerate(q):
            # one matrix-vector product per query: torch's fp16 mv kernel is faster than
            # its fp16 matrix product here
            col = torch.mv(half, qh[i]).float().numpy()
            rows = np.sort(np.argpartition(-col, wide - 1)[:wide]) if wide < n else np.arange(n)
            out.append(self._rescore(kind, vec, rows, k))
        return out

    def _half_copy(self, kind: str) -> np.ndarray:
        """A kind's half-precision copy: converted from its vectors on first use, a block
        at a time (at most :data:`~kgrag.store.ann.ANN_MIN_ROWS` rows by default: a kind
        with more has an ANN index instead), or, in a version written before vectors
        were coded, its ``half.<kind>.npy`` file mapped copy-on-write (torch wants a
        writable buffer)."""
        if (self.folder / f"half.{kind}.npy").exists():
            return self.array(f"half.{kind}", mode="c")
        matrix = self.matrix(kind)
        half = np.empty(matrix.shape, dtype=np.float16)
        for i in range(0, len(matrix), 16_384):
            half[i : i + 16_384] = matrix[i : i + 16_384]
        return half

    def _ann(self, kind: str, q: np.ndarray, k: int) -> list[list[tuple[int, float]]]:
        return ann_nearest(
            self.ann_index(kind), lambda rows: self.vectors_of(kind, rows), self.size(kind), q, k
        )

    def ann_index(self, kind: str) -> Any:
        key = f"ann:{kind}"
        with self._lock:
            if key not in self._maps:
                self._maps[key] = open_ann(self.folder / f"ann.{kind}.faiss")
            return self._maps[key]

    # -- graphs --------------------------------------------------------------------------

    def adjacency(self, graph: str, rows: np.ndarray) -> Adjacency:
        if graph not in GRAPHS:
            raise InvalidParams(f"unknown graph {graph!r}; known: {', '.join(GRAPHS)}")
        r = np.asarray(rows, dtype=np.int64)
        small = self._small_walk() if graph == "walk" else None
        if small is not None:  # in memory: scipy's gather kernel
            return Adjacency(*gather_rows(small.indptr, small.indices, small.data, r))
        indptr, indices = self.array(f"{graph}.indptr"), self.array(f"{graph}.indices")
        out_ptr, take = row_ranges(indptr, r)
        cols = np.asarray(indices[take])
        if graph == "links":
            return Adjacency(out_ptr, cols, np.asarray(self.array("link_in")[cols]))
        data = edge = None
        if graph == "walk":  # float32, as the walk is summed
            data = np.asarray(self.array("walk.data")[take])
        elif graph == "relations":  # path lengths in float64, whatever the file's width
            data = np.asarray(self.array("relations.data")[take], dtype=np.float64)
            edge = np.asarray(self.array("relations.edge")[take], dtype=np.int64)
        return Adjacency(out_ptr, cols, data if data is not None else np.ones(len(cols)), edge)

    def _small_walk(self) -> sp.csc_matrix | None:
        """The walk as an in-memory CSC matrix when it has at most :data:`_SMALL_WALK`
        entries (read once, on the first walk request), else None."""
        with self._lock:
            if "walk:small" not in self._maps:
                indptr = self.array("walk.indptr")
                small = None
                if int(indptr[-1]) <= _SMALL_WALK:
                    n = len(indptr) - 1
                    small = sp.csc_matrix(
                        (self._whole("walk.data"), self._whole("walk.indices"), np.array(indptr)),
                        shape=(n, n),
                    )
                self._maps["walk:small"] = small
            return self._maps["walk:small"]

    def _whole(self, name: str) -> np.ndarray:
        """``name``.npy read whole into memory (by ``pread``: no page of it stays mapped)."""
        found = self._file(self.folder / f"{name}.npy")
        return found.slice(0, len(found)).copy()

    def _file(self, path: Path) -> FileRows:
        """``path`` opened for ``pread`` (once)."""
        key = f"file:{path}"
        with self._lock:
            if key not in self._maps:
                try:
                    self._maps[key] = FileRows(path)
                except (OSError, ValueError) as exc:
                    raise StoreError(f"{path}: cannot read: {exc}") from exc
            rows: FileRows = self._maps[key]
            return rows

    def relation_ids(self, edges: np.ndarray) -> list[str]:
        return column_ids(self._gather("relations.ids", edges))

    def attribute(self, kind: str, name: str, rows: np.ndarray | None) -> np.ndarray:
        file = _ATTRIBUTE_FILES.get((kind, name), f"attr.{kind}.{name}")
        path = self.folder / f"{file}.npy"
        if not path.exists():
            raise InvalidParams(f"no attribute {name!r} of {kind}", field="name")
        column = self.array(file)
        return column if rows is None else np.asarray(column[np.asarray(rows, dtype=np.int64)])

    def lookup(self, kind: str, keys: Sequence[str]) -> dict[str, int]:
        table = {"entities": "names", "sentences": "sentences"}.get(kind)
        if table is None:
            raise InvalidParams(f"no lookup for {kind!r}", field="kind")
        wanted = list(dict.fromkeys(keys))
        if not wanted:
            return {}
        with self._lock:
            if self._names is None:
                uri = f"file:{self.folder / 'names.sqlite'}?mode=ro"
                self._names = sqlite3.connect(uri, uri=True, check_same_thread=False)
            found: dict[str, int] = {}
            for i in range(0, len(wanted), 900):
                batch = wanted[i : i + 900]
                marks = ",".join("?" * len(batch))
                sql = f"SELECT key, row FROM {table} WHERE key IN ({marks})"
                found.update(self._names.execute(sql, batch).fetchall())
        return found

    def close(self) -> None:
        with self._lock:
            if self._names is not None:
                self._names.close()
            for value in self._maps.values():
                if isinstance(value, (FileRows, VectorRows)):
                    value.close()
            self._maps.clear()
