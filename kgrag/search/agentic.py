"""The agentic route without an LLM: a graph-guided exploration with a stop rule.

Step 0 is hybrid recall; step 1 a local graph search on the question
(entity linking, personalized PageRank, the title-link bridge). Then, one at
a time, the most promising unexplored entry point is expanded with another
local search, the question plus that entry point: first the entities and
facts the question links to (``memory/recall`` clues, by weight), then the
titles of the documents found so far, which is how a multi-hop chain moves to
its next page. Every list is fused by weighted RRF (the rcp SDK's), the
classic and question lists at weight 1, each expansion at 0.5.

It stops when ``patience`` expansions in a row bring nothing new into the
top k, when the entry points run out, or when the step or latency budget is
spent; each step is a ``decision_trace`` entry.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import rcp

MAX_STEPS = 6
BUDGET_MS = 4000.0
PATIENCE = 2
EXPANSION_WEIGHT = 0.5


@dataclass
class Exploration:
    hits: list[dict[str, Any]]
    stop_reason: str
    failure_reason: str = ""
    trace: list[dict[str, Any]] = field(default_factory=list)


class _Pool:
    """Ranked lists found so far, fused on demand."""

    def __init__(self) -> None:
        self.lists: dict[str, list[dict[str, Any]]] = {}
        self.weights: dict[str, float] = {}
        self.records: dict[str, dict[str, Any]] = {}

    def add(self, name: str, hits: list[dict[str, Any]], weight: float) -> int:
        """Add a list; returns how many of its chunks were new to the pool."""
        new = sum(h["id"] not in self.records for h in hits)
        for h in hits:
            self.records.setdefault(h["id"], h)
        self.lists[name] = [{"id": h["id"]} for h in hits]
        self.weights[name] = weight
        return new

    def ranked(self) -> list[dict[str, Any]]:
        fused = rcp.rrf_fuse(self.lists, weights=self.weights)
        return [self.records[f["id"]] | {"score": f["meta"]["fusedScore"]} for f in fused]


def _top_ids(hits: list[dict[str, Any]], k: int) -> list[str]:
    return [h["id"] for h in hits[:k]]


def _titles(hits: list[dict[str, Any]]) -> list[str]:
    return [str((h.get("meta") or {}).get("title", "")) for h in hits]


class _Run:
    """One exploration: the pool of ranked lists, and the trace of its steps."""

    def __init__(self, engine: Any, query: str, scope: Any, top_k: int, recall_k: int) -> None:
        self.started = time.perf_counter()
        self.engine, self.query, self.scope = engine, query, scope
        self.top_k, self.recall_k = top_k, recall_k
        self.pool = _Pool()
        self.trace: list[dict[str, Any]] = []
        self.ranked: list[dict[str, Any]] = []

    def step(self, observation: str, decision: str, result: str, t0: float) -> None:
        self.trace.append(
            {
                "step_index": len(self.trace),
                "observation": observation,
                "decision": decision,
                "result": result,
                "latency_ms": round((time.perf_counter() - t0) * 1000, 1),
            }
        )

    def local(self, text: str) -> list[dict[str, Any]]:
        params = {"op": "local", "query": text, "k": self.recall_k, "unit": "chunk"}
        hits = self.engine.graph(params)["hits"]
        return [h for h in hits if h.get("unit") == "chunk" and self.scope.admits(h)]

    def classic(self, recall: Callable[..., list[dict[str, Any]]], body: Any) -> None:
        """Step 0: hybrid recall."""
        t0 = time.perf_counter()
        base = recall(self.engine, body, self.scope, self.recall_k)
        self.pool.add("classic", base, 1.0)
        self.step(
            f"question: {self.query!r}",
            "hybrid recall (dense + BM25, RRF)",
            f"{len(base)} chunks recalled",
            t0,
        )

    def question(self) -> list[dict[str, Any]]:
        """Step 1: a local search on the question; its clues (the entry points)."""
        top_k = self.top_k
        before = _top_ids(self.pool.ranked(), top_k)
        t0 = time.perf_counter()
        # one local search gives both the question's passages and its entry points
        recalled = self.engine.memory_recall({"query": self.query, "n": self.recall_k})
        found = [h for h in recalled["hits"] if self.scope.admits(h)]
        new = self.pool.add("graph: question", found, 1.0)
        self.ranked = self.pool.ranked()
        entered = len(set(_top_ids(self.ranked, top_k)) - set(before))
        self.step(
            f"top {top_k} holds {len(before)} chunks from classic recall",
            "local graph search on the question (entity linking, PageRank, title links)",
            f"{new} chunks classic recall missed; {entered} entered the top {top_k}",
            t0,
        )
        return list(recalled["clues"])

    def expand(self, entry: str, frontier: list[str], tried: set[str], idle: int) -> int:
        """Expand one entry point; how many of its chunks entered the top k."""
        top_k = self.top_k
        t0 = time.perf_counter()
        before = _top_ids(self.ranked, top_k)
        found = self.local(f"{self.query} {entry}")
        new = self.pool.add(f"graph: {entry}", found, EXPANSION_WEIGHT)
        self.ranked = self.pool.ranked()
        entered = len(set(_top_ids(self.ranked, top_k)) - set(before))
        frontier += [t for t in _titles(found[:top_k]) if t and t not in frontier]
        open_points = len([f for f in frontier if f not in tried])
        self.step(
            f"{idle} expansion(s) in a row added nothing to the top {top_k}; "
            f"{open_points} entry points open",
            f"expand {entry!r}: local graph search on the question with it",
            f"{new} new chunks; {entered} entered the top {top_k}",
            t0,
        )
        return entered


def explore(
    engine: Any,
    body: Any,
    scope: Any,
    top_k: int,
    recall_k: int,
    *,
    classic: Callable[..., list[dict[str, Any]]],
    max_steps: int = MAX_STEPS,
    budget_ms: float = BUDGET_MS,
    patience: int = PATIENCE,
) -> Exploration:
    """Explore for ``body.query`` within ``scope``; see the module docstring."""
    run = _Run(engine, body.query, scope, top_k, recall_k)
    run.classic(classic, body)
    clues = run.question()[:max_steps]
    frontier = [str(c["query"]) for c in clues if c.get("query")]
    frontier += [t for t in _titles(run.ranked[:top_k]) if t]
    tried: set[str] = set()
    idle = 0
    folded = run.query.casefold()
    stop = "step_budget"
    while len(run.trace) < max_steps:
        if (time.perf_counter() - run.started) * 1000 > budget_ms:
            stop = "latency_budget"
            break
        nxt = next((f for f in frontier if f not in tried and f.casefold() not in folded), None)
        if nxt is None:
            stop = "frontier_exhausted"
            break
        tried.add(nxt)
        entered = run.expand(nxt, frontier, tried, idle)
        idle = 0 if entered else idle + 1
        if idle >= patience:
            stop = "no_new_evidence"
            break
    return Exploration(run.ranked, stop, "", run.trace)
