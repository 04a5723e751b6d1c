"""The relations of a build held as columns while the build runs.

A corpus states few relations but names many pairs in one sentence: at 60k
passages a build holds ~3.9M relations, 86% of them co-occurrences. As frozen
:class:`~kgrag.types.Relation` objects (an id string, a float and an evidence
tuple each) they took ~260 bytes apiece, 1 GB for the whole build; as columns
they take ~60. :class:`RelationTable` is a read-only sequence of relations: a
relation is made when it is read, and the stages that only need the ends,
weights and ids read the columns (:func:`relation_columns`).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from kgrag.types import Relation

from .columns import ColumnTable


class RelationTable(ColumnTable[Relation]):
    """Relations as columns: row i is ``Relation(ids[i], entities[src[i]],
    predicates[predicate[i]], entities[dst[i]], weight[i], kinds[kind[i]],
    evidence chunks[evidence[evidence_at[i]:evidence_at[i + 1]]])``."""

    what = "relation"

    def __init__(
        self,
        ids: np.ndarray,
        columns: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray],
        evidence: tuple[np.ndarray, np.ndarray],
        names: tuple[Sequence[str], Sequence[str], Sequence[str], Sequence[str]],
    ) -> None:
        self.ids = ids  # bytes, one per row
        self.src, self.predicate, self.dst, self.kind, self.weight = columns
        self.evidence_at, self.evidence = evidence  # row i: evidence[at[i]:at[i + 1]]
        self.entities, self.predicates, self.kinds, self.chunks = names

    def __len__(self) -> int:
        return len(self.ids)

    def _rows(self, rows: Sequence[int] | range) -> Iterator[Relation]:
        at = np.asarray(rows, dtype=np.int64)
        if not len(at):
            return
        lo, hi = self.evidence_at[at].tolist(), self.evidence_at[at + 1].tolist()
        ents, preds, kinds, chunks = self.entities, self.predicates, self.kinds, self.chunks
        block = zip(
            self.ids[at].tolist(),
            self.src[at].tolist(),
            self.predicate[at].tolist(),
            self.dst[at].tolist(),
            self.weight[at].tolist(),
            self.kind[at].tolist(),
            lo,
            hi,
            strict=True,
        )
        for id_, s, p, d, w, k, a, b in block:
            evidence = tuple(chunks[c] for c in self.evidence[a:b].tolist())
            yield Relation(id_.decode(), ents[s], preds[p], ents[d], w, kinds[k], evidence)

    def clear(self) -> None:
        """Let the columns go (a build has written the relations)."""
        empty = np.zeros(0, np.int32)
        self.ids = np.zeros(0, self.ids.dtype)  # not a view: let the buffer go
        self.src = self.predicate = self.dst = self.kind = empty
        self.weight = np.zeros(0)
        self.evidence_at, self.evidence = np.zeros(1, np.int64), empty


@dataclass(frozen=True, slots=True)
class Columns:
    """What the graph stages read of every relation, as arrays over the relations."""

    src: np.ndarray  # position of each end in the caller's ``pos`` (-1: not there)
    dst: np.ndarray
    weight: np.ndarray  # float64
    stated: np.ndarray  # bool: kind "svo"
    ids: np.ndarray | None  # bytes (None from relation objects unless asked for)


def relation_columns(
    relations: Sequence[Relation], pos: Mapping[str, int], *, ids: bool = False
) -> Columns:
    """The ends (as positions in ``pos``), weights, kinds and (a table's, or with
    ``ids``) ids of ``relations``: read from a :class:`RelationTable`'s columns, or
    gathered from relation objects."""
    if isinstance(relations, RelationTable):
        where = np.fromiter((pos.get(e, -1) for e in relations.entities), np.int64)
        where = np.append(where, -1)  # an empty table's columns index nothing
        svo = relations.kinds.index("svo") if "svo" in relations.kinds else -1
        return Columns(
            where[relations.src],
            where[relations.dst],
            relations.weight.astype(np.float64, copy=False),
            relations.kind == svo,
            relations.ids,
        )
    n = len(relations)
    return Columns(
        np.fromiter((pos.get(r.src, -1) for r in relations), np.int64, n),
        np.fromiter((pos.get(r.dst, -1) for r in relations), np.int64, n),
        np.fromiter((r.weight for r in relations), np.float64, n),
        np.fromiter((r.kind == "svo" for r in relations), bool, n),
        np.array([r.id.encode() for r in relations], dtype=bytes) if ids else None,
    )
