"""Linking a query to the graph: the seed entities of local search's walk.

Seeds come from the facts closest to the query (a fact is an SVO relation rendered
as text: both its entities), from the entities closest to the whole query, and from
the query's named spans (:mod:`kgrag.search.names`): a span that is an entity's
name links to it directly, another capitalised run to its nearest entity by
embedding. The caller starts the three nearest-neighbour reads together
(overlapping on a server) and hands them here to be combined.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from kgrag.store import GraphReader
from kgrag.types import Relation


class Pending(Protocol):
    """A read under way: its result when asked for."""

    def result(self) -> Any: ...


@dataclass(frozen=True, slots=True)
class Seeds:
    """What a query links to."""

    weights: dict[str, float]  # entity id -> reset weight before specificity
    by_row: dict[int, float]  # the same weights by entity row (entities the store holds)
    facts: list[tuple[int, float]]  # fact row, similarity to the query; best first
    named: tuple[str, ...]  # the entities the query's spans name, best first


def nearest_facts(
    reader: GraphReader, qvec: np.ndarray, top_facts: int
) -> tuple[list[tuple[int, float]], list[str], dict[str, Relation]]:
    """The ``top_facts`` facts nearest ``qvec`` (row, similarity), their ids and
    their relations by id."""
    facts = reader.nearest("facts", qvec, top_facts)[0] if top_facts > 0 else []
    fids = reader.ids("facts", [row for row, _ in facts])
    return facts, fids, {x.id: x for x in reader.relations(fids)}


def link(
    reader: GraphReader,
    fact_read: Pending,
    top_read: Pending | None,
    span_read: Pending | None,
    known: list[int],
    *,
    entities: bool,
    span_boost: float,
    named_similarity: float,
) -> Seeds:
    """Seed weights from the closest facts (``fact_read``: :func:`nearest_facts`) and
    entities to the query (``top_read``), and from the query's spans: a span that is a
    known name (entity row in ``known``) links to that entity with similarity 1;
    another to its nearest entity (``span_read``). The entities the spans name are the
    known names and the nearest entities at least ``named_similarity`` close.
    ``entities``: whether the graph has any (else only the facts link)."""
    seeds: dict[str, float] = {}
    named: list[str] = []

    def add(eid: str, weight: float) -> None:
        seeds[eid] = max(seeds.get(eid, 0.0), weight)

    facts, fids, relations = fact_read.result()
    for fid, (_, sim) in zip(fids, facts, strict=True):
        rel = relations[fid]
        add(rel.src, sim)
        add(rel.dst, sim)
    if entities:
        linked: list[tuple[int, float]] = []
        if top_read is not None:
            linked += top_read.result()[0]
        linked += [(row, span_boost) for row in known]
        named_rows = list(known)
        if span_read is not None:
            for found in span_read.result():
                linked += [(row, sim * span_boost) for row, sim in found]
                named_rows += [row for row, sim in found if sim >= named_similarity]
        linked_ids = reader.ids("entities", [row for row, _ in linked])
        for eid, (_, weight) in zip(linked_ids, linked, strict=True):
            add(eid, weight)
        of_row = {row: eid for eid, (row, _) in zip(linked_ids, linked, strict=True)}
        named = [of_row[row] for row in dict.fromkeys(named_rows)]
    rows = reader.rows("entities", list(seeds))
    by_row = {int(row): seeds[e] for e, row in zip(seeds, rows.tolist(), strict=True) if row >= 0}
    named.sort(key=lambda e: (-seeds[e], e))
    return Seeds(seeds, by_row, facts, tuple(named))
