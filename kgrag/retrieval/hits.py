"""One hit from one row of a :class:`~kgrag.retrieval.units.Source`: the RCP/1 Hit
shape (spec §7.7) that ``retrieve``, the ``graph`` method and ``memory/recall`` all
return.

Every source-row hit of the engine is built here, whichever search ranked the
row: its score, a calibrated confidence from its query cosine, its text (screened
by :mod:`kgrag.retrieval.trust`), metadata, per-stage scores, citation,
provenance leaves and trust. Hits that no source row backs (paths, subgraphs) are
drawn in :mod:`kgrag.retrieval.graph_hits`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from kgrag.config import RetrievalConfig
from kgrag.rcp import feedback as fb

from .items import Source
from .stages import finite
from .trust import Trust, assess, sanitize

#: a row's query cosine: a vector over every row of the source, or the rows scored
DenseScores = np.ndarray | Mapping[int, float]


@dataclass(frozen=True, slots=True)
class HitOptions:
    """What a call asks of its hits, and the integrity reports that mark them."""

    include_text: bool = True
    include_vectors: bool = False
    #: integrity reports as they stood when the call started (feedback, §7.16)
    flags: Mapping[str, fb.Flag] = field(default_factory=dict)


class HitBuilder:
    """Builds the hits of one graph version. The trust screen of a stored text is
    kept, since the text does not change within a version."""

    def __init__(self, config: RetrievalConfig) -> None:
        self.config = config
        self._trust: dict[str, Trust] = {}

    def confidence(self, cosine: float) -> float:
        """A query cosine mapped to a calibrated [0, 1] confidence (a logistic curve)."""
        z = self.config.confidence_slope * cosine + self.config.confidence_bias
        return round(1.0 / (1.0 + math.exp(-z)), 6)

    def trust(self, item_id: str, text: str) -> Trust:
        """The trust screen of a stored text, assessed once."""
        found = self._trust.get(item_id)
        if found is None:
            found = self._trust.setdefault(item_id, assess(text))
        return found

    def hit(
        self,
        options: HitOptions,
        source: Source,
        row: int,
        score: float,
        dense: DenseScores,
        scores: Mapping[str, Mapping[int, float]],
    ) -> dict[str, Any]:
        """The hit of ``row``: ``score`` is its rank score, ``dense[row]`` its query
        cosine, and ``scores`` each stage's score by row (the stages that scored it
        go into ``scores``)."""
        item = source.items[row]
        trust = self.trust(item.id, item.text)
        text = sanitize(item.text)[0] if trust.sanitized else item.text
        hit: dict[str, Any] = {
            "id": item.id,
            "score": round(finite(score), 6),
            "confidence": self.confidence(float(dense[row])),
            "unit": source.unit,
            "level": item.level,
        }
        if options.include_text:
            hit["text"] = text
        hit["meta"] = dict(item.meta)
        if options.include_vectors:
            hit["vector"] = [round(float(x), 7) for x in source.matrix[row]]
        stage = {"dense": round(float(dense[row]), 6)}
        stage |= {
            name: round(v[row], 6) for name, v in scores.items() if name != "dense" and row in v
        }
        hit["scores"] = stage
        if item.citation:
            hit["citation"] = dict(item.citation) | (
                {"page": item.meta["page"]} if "page" in item.meta else {}
            )
        hit["provenance"] = {"leaves": list(item.leaves)}
        hit["trust"] = trust.to_wire()
        if item.id in options.flags:
            fb.mark(hit, options.flags[item.id])
        if item.chunk is not None:
            hit["chunk"] = dict(item.chunk)
        return hit
