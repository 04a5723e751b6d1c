"""Steps a full build and an incremental update share: the build report, the
fingerprint of a document set, batched encoding, the extract and RAPTOR stages
with their settings unpacked, and the version metadata.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from kgrag.config import Config
from kgrag.encoders import Encoder
from kgrag.errors import InputError
from kgrag.text.nlp import load_spacy, pick_pipeline
from kgrag.types import Chunk, Document, TreeNode

from . import embed
from .extract import Extraction, extract
from .raptor import build_tree

_ENCODE_BATCH = 256


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
    errors: list[InputError] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)

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
        if self.skipped:
            lines.append(f"skipped      {len(self.skipped)} file(s) of unsupported type")
        if self.errors:
            lines.append(f"failed       {len(self.errors)} file(s); see the errors above")
        return "\n".join(lines)


def fingerprint(docs: Sequence[Document], config: Config) -> str:
    h = hashlib.blake2b(digest_size=16)
    h.update(config.model_dump_json(exclude={"retrieval", "store"}).encode())
    for d in docs:
        body = json.dumps([d.id, d.title, d.text, d.uri, d.meta, d.sections], sort_keys=True)
        h.update(hashlib.blake2b(body.encode(), digest_size=16).digest())
    return h.hexdigest()


def batched(encoder: Encoder, update: Any) -> Any:
    """An encode function that embeds each distinct text once, longest first
    (:func:`spanned` without spans); the progress bar advances per input text."""

    def encode(texts: list[str]) -> np.ndarray:
        unique = list(dict.fromkeys(texts))
        scale = len(texts) / len(unique) if unique else 1.0
        encode_spans = spanned(encoder, lambda n: update(round(n * scale)))
        out, _ = encode_spans(unique, [[] for _ in unique])
        row_of = {t: i for i, t in enumerate(unique)}
        return out[[row_of[t] for t in texts]] if texts else out

    return encode


def spanned(encoder: Encoder, update: Any) -> embed.EncodeSpans:
    """A span encode function (:meth:`Encoder.encode_spans`) over batches of texts
    sorted longest first (padding stays low in every batch); the progress bar advances
    per text."""

    def encode(
        texts: list[str], spans: list[list[tuple[int, int]]]
    ) -> tuple[np.ndarray, list[np.ndarray]]:
        order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
        out = np.zeros((len(texts), encoder.dim), np.float32)
        span_out: list[np.ndarray] = [np.zeros((0, encoder.dim), np.float32)] * len(texts)
        for i in range(0, len(order), _ENCODE_BATCH):
            rows = order[i : i + _ENCODE_BATCH]
            vecs, span_vecs = encoder.encode_spans(
                [texts[r] for r in rows], [spans[r] for r in rows]
            )
            out[rows] = vecs
            for r, matrix in zip(rows, span_vecs, strict=True):
                span_out[r] = matrix
            update(len(rows))
        return out, span_out

    return encode


def run_extract(
    chunks: Sequence[Chunk],
    docs: Sequence[Document],
    c: Config,
    progress: Callable[[int], None] | None = None,
) -> Extraction:
    """The extract stage with its settings unpacked from ``c``."""
    return extract(
        chunks,
        {d.id: d.title for d in docs},
        load_spacy(c.models.spacy),
        skip_labels=c.extract.skip_labels,
        concepts=c.extract.concepts,
        max_cooc_entities=c.extract.max_cooc_entities,
        n_process=c.extract.n_process,
        batch_size=c.extract.batch_size,
        progress=progress,
    )


def run_tree(chunks: Sequence[Chunk], vectors: np.ndarray, c: Config) -> list[TreeNode]:
    """The RAPTOR stage with its settings unpacked from ``c``."""
    r = c.raptor
    return build_tree(
        [ch.id for ch in chunks],
        [ch.text for ch in chunks],
        vectors,
        reduced_dim=r.reduced_dim,
        threshold=r.threshold,
        top_size=r.top_size,
        max_levels=r.max_levels,
        max_cluster=r.max_cluster,
        summary_sentences=r.summary_sentences,
        seed=r.seed,
    )


def build_meta(c: Config, encoder: Encoder, report: BuildReport) -> dict[str, Any]:
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
