"""What one ``retrieve`` call will do: its params after defaults, clamping and the
strict rule (RCP/1 §7.7).

An option outside what this engine offers is -32005, or, with ``strict`` false,
replaced by its fallback and noted in ``usage.notes``. The funnel
``candidateK >= rerank.topN >= k`` (§3.3) is clamped to the configured limits and
then enforced.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kgrag.config import RetrievalConfig
from kgrag.rcp import feedback as fb
from kgrag.rcp.params import RetrieveParams

from ..errors import InvalidParams, Unsupported
from .hits import HitOptions
from .units import UNITS

MODES = ("dense", "sparse", "hybrid")
FUSIONS = ("rrf", "weighted")
TREE_STRATEGIES = ("flat", "collapsed", "traverse")
#: units a local search ranks, not a source of their own
GRAPH_UNITS = ("path", "subgraph")


@dataclass(slots=True)
class Plan:
    """What a call will actually do, after defaults, clamping and degradation."""

    p: RetrieveParams
    query: str
    unit: str
    mode: str
    level: int | None
    k: int
    candidate_k: int
    top_n: int
    fusion: str
    rerank: str | None
    rewrite: str | None
    notes: list[str] = field(default_factory=list)
    strategy: str | None = None  # tree-node: "collapsed" or "traverse" (None: flat, by level)
    #: integrity reports as they stood when the call started (feedback, §7.16)
    flags: Mapping[str, fb.Flag] = field(default_factory=dict)

    def hit_options(self) -> HitOptions:
        """What the call asks of its hits."""
        return HitOptions(self.p.includeText, self.p.includeVectors, self.flags)


class _Offers:
    """Checks each asked option against what is offered, under the strict rule."""

    def __init__(self, strict: bool) -> None:
        self.strict = strict
        self.notes: list[str] = []

    def refuse(self, option: str, message: str, fallback: Any) -> Any:
        if self.strict:
            raise Unsupported(message, option=option)
        self.notes.append(f"{message}; used {fallback!r} instead (strict=false)")
        return fallback

    def choose(self, value: Any, offered: Any, option: str, fallback: Any) -> Any:
        if value is None or value in offered:
            return value
        listed = ", ".join(offered) or "none"
        return self.refuse(
            option, f"{option} {value!r} is not offered (offered: {listed})", fallback
        )


def plan_call(
    p: RetrieveParams,
    config: RetrievalConfig,
    *,
    rerank_methods: Callable[[], Sequence[str]],
    transform_methods: Callable[[], Sequence[str]],
) -> Plan:
    """The plan of a call with params ``p`` on an engine offering these methods."""
    offers = _Offers(p.strict)
    query = p.query_text()
    unit = offers.choose(p.unit, UNITS, "unit", "chunk")
    mode = offers.choose(p.mode or "hybrid", MODES, "mode", "hybrid")
    offers.choose(p.modality, ("text",), "modality", "text")
    fusion = offers.choose(p.fusion.method if p.fusion else "rrf", FUSIONS, "fusion.method", "rrf")
    rerank = offers.choose(
        p.rerank.method if p.rerank else None, rerank_methods(), "rerank.method", None
    )
    rewrite = offers.choose(p.rewrite or None, transform_methods(), "rewrite", None)
    level = _flat_options(p, unit, offers)
    strategy = _strategy(p, unit, offers)
    if unit in GRAPH_UNITS or strategy:
        what = f"strategy {strategy}" if strategy else f"unit {unit}"
        for name, value in (("rerank", rerank), ("rewrite", rewrite), ("mmr", p.mmr)):
            if value:
                offers.refuse(name, f"{name} does not apply to {what}", None)
        rerank = rewrite = None
    k, candidate_k, top_n = funnel(p, rerank, config)
    return Plan(
        p,
        query,
        unit,
        mode,
        level,
        k,
        candidate_k,
        top_n,
        fusion,
        rerank,
        rewrite,
        offers.notes,
        strategy,
    )


def _flat_options(p: RetrieveParams, unit: str, offers: _Offers) -> int | None:
    """Filters, recency and levels, which only some units have; the level to rank."""
    flat = unit in ("chunk", "document", "page")
    if p.filter is not None and not flat:  # filters and dates are chunk metadata
        offers.refuse("filter", f"filters apply to chunks and documents, not to unit {unit}", None)
    if p.recency is not None and not flat:
        offers.refuse(
            "recency", f"recency applies to chunks and documents, not to unit {unit}", None
        )
    level = p.level
    if level not in (None, 0) and flat:
        level = offers.refuse("level", f"unit {unit} has level 0 only, not {level}", None)
    return level


def _strategy(p: RetrieveParams, unit: str, offers: _Offers) -> str | None:
    """The RAPTOR strategy of a tree-node call (None: flat, ranked by level)."""
    strategy = None
    if p.strategy is not None:
        if unit != "tree-node":
            offers.refuse("strategy", f"strategy applies to unit tree-node, not {unit}", None)
        else:
            strategy = offers.choose(p.strategy, TREE_STRATEGIES, "strategy", None)
    return None if strategy == "flat" else strategy


def funnel(p: RetrieveParams, rerank: str | None, config: RetrievalConfig) -> tuple[int, int, int]:
    """Clamp k, candidateK and rerank.topN; enforce candidateK >= topN >= k (§3.3)."""
    c = config
    k = min(p.k, c.max_k)
    candidate_k = min(
        p.candidateK if p.candidateK is not None else max(k, c.candidate_k), c.max_candidates
    )
    if candidate_k < k:
        raise InvalidParams(f"candidateK ({candidate_k}) must be >= k ({k})", field="candidateK")
    top_n = candidate_k
    if p.rerank:
        top_n = min(
            p.rerank.topN if p.rerank.topN is not None else max(k, min(candidate_k, 50)),
            c.max_candidates,
        )
        if top_n > candidate_k:
            raise InvalidParams(
                f"rerank.topN ({top_n}) must be <= candidateK ({candidate_k})",
                field="rerank.topN",
            )
        if top_n < k:
            raise InvalidParams(f"rerank.topN ({top_n}) must be >= k ({k})", field="rerank.topN")
    return k, candidate_k, top_n
