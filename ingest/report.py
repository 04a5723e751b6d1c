"""What a build says about itself: the report an ingest returns, the fingerprint of
the document set it built from (the same set and settings build nothing new), and
the version's manifest entry.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from kgrag.config import Config
from kgrag.encoders import Encoder
from kgrag.errors import InputError
from kgrag.text.nlp import pick_pipeline
from kgrag.types import Document


@dataclass(slots=True)
class BuildReport:
    """What an ingest did: counts, per-stage seconds, and the files that failed."""

    graph: str
    index_version: str | None = None
    changed: bool = False
    counts: dict[str, int] = field(default_factory=dict)
    communities_per_level: dict[int, int] = field(default_factory=dict)
    tree_nodes_per_level: dict[int, int] = field(default_factory=dict)
    graph_stats: dict[str, int] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)
    #: per stage, (resident MiB at its end, the process's peak MiB so far)
    memory_mib: dict[str, tuple[float, float]] = field(default_factory=dict)
    errors: list[InputError] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    warnings: list[InputError] = field(default_factory=list)
    pruned: int = 0
    #: seconds each Ray parse worker spent on its batches (an ingest with ``--ray``)
    worker_seconds: dict[str, float] = field(default_factory=dict)
    #: seconds the global stages waited on the cluster's encode actors (with ``--ray``)
    encode_seconds: float = 0.0

    def summary(self) -> str:
        """A human-readable end-of-ingest summary."""
        lines = [f"graph        {self.graph}"]
        state = "published" if self.changed else "unchanged (nothing new to ingest)"
        lines.append(f"indexVersion {self.index_version or '-'} ({state})")
        for key in ("documents", "chunks", "entities", "relations", "synonyms"):
            if key in self.counts:
                lines.append(f"{key:<12} {self.counts[key]:,}")
        if self.communities_per_level:
            per = ", ".join(f"L{lv}: {n:,}" for lv, n in sorted(self.communities_per_level.items()))
            lines.append(f"communities  {per}")
        if self.tree_nodes_per_level:
            per = ", ".join(f"L{lv}: {n:,}" for lv, n in sorted(self.tree_nodes_per_level.items()))
            lines.append(f"tree nodes   {per}")
        if self.seconds:
            per = ", ".join(f"{k} {v:.1f}s" for k, v in self.seconds.items())
            lines.append(f"seconds      {per} (total {sum(self.seconds.values()):.1f}s)")
        if self.memory_mib:
            peak = max(p for _r, p in self.memory_mib.values())
            lines.append(f"peak memory  {peak:,.0f} MiB resident")
        if self.worker_seconds:
            busy = sum(self.worker_seconds.values())
            lines.append(f"ray          {len(self.worker_seconds)} parse workers, {busy:.1f}s busy")
        if self.skipped:
            lines.append(f"skipped      {len(self.skipped)} file(s) of unsupported type")
        if self.pruned:
            lines.append(f"pruned       {self.pruned} document(s) whose files are gone")
        if self.warnings:
            lines.append(f"warnings     {len(self.warnings)}; see the warnings above")
        if self.errors:
            lines.append(f"failed       {len(self.errors)} file(s); see the errors above")
        return "\n".join(lines)


def fingerprint(docs: Sequence[Document], config: Config) -> str:
    """A hash of the documents and of the settings a graph is built with."""
    h = hashlib.blake2b(digest_size=16)
    h.update(config.model_dump_json(exclude={"retrieval", "store"}).encode())
    for d in docs:
        body = json.dumps([d.id, d.title, d.text, d.uri, d.meta, d.sections], sort_keys=True)
        h.update(hashlib.blake2b(body.encode(), digest_size=16).digest())
    return h.hexdigest()


def build_meta(c: Config, encoder: Encoder, report: BuildReport) -> dict[str, Any]:
    """The version's manifest entry: models, settings and the report's counts."""
    return {
        "models": {"embedding": c.models.embedding, "spacy": pick_pipeline(c.models.spacy)},
        "dim": encoder.dim,
        # local search's tunables are read-side settings no graph is built with: left out,
        # so that a manifest is the same as before they joined the config
        "config": c.model_dump(mode="json", exclude={"retrieval": {"local"}}),
        "counts": report.counts,
        "communities_per_level": {str(k): v for k, v in report.communities_per_level.items()},
        "tree_nodes_per_level": {str(k): v for k, v in report.tree_nodes_per_level.items()},
    }
