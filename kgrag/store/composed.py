"""Fact vectors kept as their parts, composed as they are read.

A build composes a fact's vector from parts it has already embedded
(``ingest.embed.composed_blocks``): the subject's and the object's entity vectors and
the predicate's, each weighted by its token count, summed and scaled to unit length.
A version stores those parts instead of the rows (``vectors/`` of the version):

- ``facts.ends.npy``: ``(n, 2)`` int32, each fact's subject and object as rows of the
  version's ``entities`` vectors;
- ``facts.predicate.npy``: ``(n,)`` int32, each fact's row of ``facts.predicates``;
- ``facts.predicates.q8.npy`` and ``.scale.npy``: ``(p, dim)``, each distinct
  predicate's vector times its token count, as int8 codes with a scale a row (on 2Wiki
  12k predicates for 69k facts; float32 they would take 18.7 MB);
- ``facts.weight.npy``: ``(entities,)`` float32, each entity name's token count.

Twelve bytes a fact instead of a coded row's 388 (on 2Wiki 69k facts: 27 MB, 4.5 KB a
passage, down to 1.1 MB). A row is composed from the stored entity vectors (int8
codes, :mod:`kgrag.store.vectors`), so it lies within a code step or two of the one
the build composed from float32 ones; what recall that costs is measured
(docs/benchmarks.md, "Bytes on disk"). Every store and search reads the composed rows:
the ANN index and a Neo4j upload are made from them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from kgrag.encoders.base import normalise
from kgrag.store.matrix import BLOCK, RowMatrix

#: the kind stored as parts
COMPOSED_KIND = "facts"


@dataclass(frozen=True)
class FactParts:
    """What a fact vector is composed of (the module's docstring)."""

    ends: np.ndarray  # (n, 2) int32: subject and object entity rows
    predicate: np.ndarray  # (n,) int32: rows of ``predicates``
    predicates: Any  # (p, dim) float32 rows (int8 codes as stored): predicate vectors
    # times their token count
    weight: np.ndarray  # (entities,) float32: each entity name's token count

    def __post_init__(self) -> None:
        n = len(self.ends)
        if self.ends.ndim != 2 or self.ends.shape[1] != 2 or self.predicate.shape != (n,):
            shapes = f"ends {self.ends.shape}, predicates {self.predicate.shape}"
            raise ValueError(f"fact parts: {shapes}")
        if self.predicates.ndim != 2:
            raise ValueError(f"fact parts: predicate vectors of shape {self.predicates.shape}")
        if n and (self.ends.min() < 0 or self.ends.max() >= len(self.weight)):
            raise ValueError(f"fact parts: an end outside the {len(self.weight)} entities")
        if n and (self.predicate.min() < 0 or self.predicate.max() >= len(self.predicates)):
            raise ValueError(f"fact parts: a predicate outside the {len(self.predicates)}")

    @property
    def dim(self) -> int:
        return int(self.predicates.shape[1])

    def compose(self, entities: Any, rows: Any) -> np.ndarray:
        """The unit vectors of facts ``rows`` (a slice or row numbers), from
        ``entities`` (anything whose ``[rows]`` gives float32 entity vectors)."""
        ends = np.asarray(self.ends[rows], dtype=np.int64)
        if not len(ends):
            return np.zeros((0, self.dim), np.float32)
        used, inverse = np.unique(ends, return_inverse=True)
        vecs = np.asarray(entities[used], dtype=np.float32)
        vecs = vecs * np.asarray(self.weight, np.float32)[used][:, None]
        inverse = inverse.reshape(ends.shape)
        pred = np.asarray(self.predicate[rows], dtype=np.int64)
        used_pred, pred_at = np.unique(pred, return_inverse=True)
        pvecs = np.asarray(self.predicates[used_pred], dtype=np.float32)
        summed = vecs[inverse[:, 0]] + vecs[inverse[:, 1]] + pvecs[pred_at.reshape(-1)]
        return normalise(summed)


class ComposedMatrix(RowMatrix):
    """Facts stored as parts read as a float32 matrix: rows, slices and products are
    composed as they are taken (from ``entities``, the entity vectors as stored), so
    nothing is made whole unless asked (``np.asarray``)."""

    def __init__(self, parts: FactParts, entities: Any) -> None:
        if len(entities) != len(parts.weight):
            raise ValueError(f"fact parts for {len(parts.weight)} entities, {len(entities)} here")
        self.parts, self.entities = parts, entities
        self.shape = (len(parts.ends), parts.dim)

    def __getitem__(self, key: Any) -> np.ndarray:
        if isinstance(key, tuple):
            return self[key[0]][(slice(None), *key[1:])]
        if isinstance(key, (int, np.integer)):
            return self.parts.compose(self.entities, [int(key) % max(len(self), 1)])[0]
        if isinstance(key, slice):
            start, stop, step = key.indices(len(self))
            if step != 1:
                return self[np.arange(start, stop, step)]
            blocks = [
                self.parts.compose(self.entities, slice(i, min(i + BLOCK, stop)))
                for i in range(start, stop, BLOCK)
            ]
            return np.concatenate(blocks) if blocks else np.zeros((0, self.shape[1]), np.float32)
        return self.parts.compose(self.entities, np.asarray(key))
