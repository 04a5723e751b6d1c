"""The lineage of a local-search hit: the provenance path from a seed entity, its
edges and the passages that evidence them (:mod:`kgrag.search.paths` finds it,
:mod:`kgrag.search.evidence` says what its passages state)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

STATED = "svo"  # the relation kind of a parsed statement (the others: co-occurrence)


@dataclass(slots=True)
class Explanation:
    """The lineage of one hit."""

    path: list[str] = field(default_factory=list)  # seed entity ... hit
    edges: list[dict[str, Any]] = field(default_factory=list)
    leaves: list[str] = field(default_factory=list)

    def nodes(self) -> list[str]:
        return list(dict.fromkeys(self.path))

    def relations(self) -> int:
        return sum(1 for e in self.edges if e["kind"] == "relation")

    def to_wire(self) -> dict[str, Any]:
        return {
            "path": list(self.path),
            "nodes": self.nodes(),
            "edges": [dict(e) for e in self.edges],
            "leaves": list(dict.fromkeys(self.leaves)),
        }
