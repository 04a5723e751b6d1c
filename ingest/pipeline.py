"""The ingest pipeline: load -> chunk -> extract -> resolve -> graph ->
communities -> embed -> raptor -> commit, each stage a plain function.

Ingesting into a graph that already has documents adds the new ones
incrementally (:mod:`ingest.update`) when the graph was built with the same
settings, and rebuilds from the union of stored and new documents otherwise.
Content-hash ids make the same file a no-op.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from kgrag.config import Config
from kgrag.encoders import Encoder, load_encoder
from kgrag.errors import InputError
from kgrag.nlp import load_spacy, pick_pipeline
from kgrag.store import GraphStore, open_store
from kgrag.types import Chunk, Community, Document, TreeNode

from . import embed
from .chunk import chunk_documents
from .commit import commit
from .communities import build_communities
from .extract import Extraction, extract
from .graph import assemble
from .load import load_paths
from .progress import Stages
from .raptor import build_tree
from .resolve import Resolution, resolve

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


def ingest_paths(
    paths: Sequence[str | Path],
    graph_dir: str | Path,
    config: Config | None = None,
    *,
    progress: bool = False,
) -> BuildReport:
    """Load ``paths`` and build (or rebuild) the graph at ``graph_dir``."""
    config = config or Config()
    stages = Stages(progress)
    with stages.stage("load"):
        loaded = load_paths(paths)
    report = build(loaded.documents, graph_dir, config, stages=stages)
    report.errors, report.skipped = loaded.errors, loaded.skipped
    return report


def build(
    documents: Sequence[Document],
    graph_dir: str | Path,
    config: Config,
    *,
    stages: Stages | None = None,
) -> BuildReport:
    """Build a new version of the graph from ``documents`` plus those already stored."""
    stages = stages or Stages(False)
    store = open_store(
        graph_dir,
        keep_versions=config.store.keep_versions,
        ann_min_rows=config.store.ann_min_rows,
    )
    report = BuildReport(graph=str(graph_dir), index_version=store.current())
    docs = _merge(store, documents)
    fingerprint = _fingerprint(docs, config)
    current = store.manifest().get("versions", {}).get(report.index_version or "", {})
    if not docs or current.get("fingerprint") == fingerprint:
        report.counts = current.get("counts", {})
        report.seconds = dict(stages.seconds)
        return report
    if report.index_version and _same_settings(current.get("config", {}), config):
        return _incremental(store, documents, config, stages, report)
    records, vectors, meta = _run_stages(docs, config, stages, report)
    meta["fingerprint"] = fingerprint
    with stages.stage("commit"):
        report.index_version = commit(store, records, vectors, meta)
    report.changed = True
    report.seconds = dict(stages.seconds)
    return report


def _same_settings(stored: dict[str, Any], config: Config) -> bool:
    """Whether a graph built with ``stored`` settings can grow under ``config``."""
    skip = {"retrieval", "store"}
    mine = config.model_dump(mode="json", exclude=skip)
    return {k: v for k, v in stored.items() if k not in skip} == mine


def _incremental(
    store: GraphStore,
    documents: Sequence[Document],
    config: Config,
    stages: Stages,
    report: BuildReport,
) -> BuildReport:
    from .update import apply_update

    result = apply_update(store, config, _encoder(config), add=documents, stages=stages)
    meta = store.manifest().get("versions", {}).get(result.index_version or "", {})
    report.index_version, report.changed, report.counts = (
        result.index_version,
        result.changed,
        result.counts,
    )
    for key, field_ in (
        ("communities_per_level", report.communities_per_level),
        ("tree_nodes_per_level", report.tree_nodes_per_level),
    ):
        field_.update({int(k): v for k, v in meta.get(key, {}).items()})
    report.seconds = dict(stages.seconds)
    return report


def _merge(store: GraphStore, documents: Sequence[Document]) -> list[Document]:
    merged: dict[str, Document] = {}
    if store.current():
        with store.reader() as reader:
            merged.update((d.id, d) for d in reader.documents())
    merged.update((d.id, d) for d in documents)
    return [merged[k] for k in sorted(merged)]


def _fingerprint(docs: Sequence[Document], config: Config) -> str:
    h = hashlib.blake2b(digest_size=16)
    h.update(config.model_dump_json(exclude={"retrieval", "store"}).encode())
    for d in docs:
        body = json.dumps([d.id, d.title, d.text, d.uri, d.meta, d.sections], sort_keys=True)
        h.update(hashlib.blake2b(body.encode(), digest_size=16).digest())
    return h.hexdigest()


def _encoder(config: Config) -> Encoder:
    m = config.models
    return load_encoder(m.embedding, m.batch_size, m.device)


def _batched(encoder: Encoder, update: Any) -> Any:
    """An encode function that embeds each distinct text once, longest first
    (:func:`_spanned` without spans); the progress bar advances per input text."""

    def encode(texts: list[str]) -> np.ndarray:
        unique = list(dict.fromkeys(texts))
        scale = len(texts) / len(unique) if unique else 1.0
        spanned = _spanned(encoder, lambda n: update(round(n * scale)))
        out, _ = spanned(unique, [[] for _ in unique])
        row_of = {t: i for i, t in enumerate(unique)}
        return out[[row_of[t] for t in texts]] if texts else out

    return encode


def _spanned(encoder: Encoder, update: Any) -> embed.EncodeSpans:
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


def _run_stages(
    docs: list[Document], c: Config, stages: Stages, report: BuildReport
) -> tuple[dict[str, Sequence[Any]], dict[str, Any], dict[str, Any]]:
    """Run chunk .. raptor; return the records, vectors and manifest metadata."""
    encoder = _encoder(c)  # first, so a bad model name fails before any parsing
    chunks, res = _parse(docs, c, encoder, stages)
    with stages.stage("graph", 1):
        _, report.graph_stats = assemble(
            res.entities, chunks, res.mentions, res.relations, res.synonyms
        )
    with stages.stage("communities", 1):
        communities = _communities(res, chunks, c)
    names = {e.id: e.name for e in res.entities}
    facts = embed.facts(res.relations)
    with stages.stage("embed", len(chunks) + len(facts) + len(communities)) as tick:
        encode = _batched(encoder, tick)
        chunk_vecs, sentence_vecs = embed.embed_chunks(
            _spanned(encoder, tick), chunks, res.sentences
        )
        entity_vectors = ([e.id for e in res.entities], res.entity_vectors)
        quiet = _batched(encoder, lambda _n: None)  # the bar counts facts, not predicates
        fact_vecs = embed.fact_vectors(
            c.embed.facts, quiet, encoder.token_counts, facts, names, entity_vectors
        )
        tick(len(facts))
        community_vecs = embed.embed_communities(encode, communities)
    with stages.stage("raptor") as tick:
        tree = run_tree(chunks, chunk_vecs, c)
        tree_vecs = embed.embed_tree(_batched(encoder, tick), tree)
    records: dict[str, Sequence[Any]] = {
        "documents": docs,
        "chunks": chunks,
        "sentences": res.sentences,
        "entities": res.entities,
        "mentions": res.mentions,
        "relations": res.relations,
        "synonyms": res.synonyms,
        "communities": communities,
        "tree_nodes": tree,
    }
    vectors = {
        "chunks": ([ch.id for ch in chunks], chunk_vecs),
        "sentences": sentence_vecs,
        "entities": ([e.id for e in res.entities], res.entity_vectors),
        "facts": ([f.id for f in facts], fact_vecs),
        "communities": ([m.id for m in communities], community_vecs),
        "tree_nodes": ([t.id for t in tree], tree_vecs),
    }
    report.counts = {k: len(v) for k, v in records.items()}
    report.communities_per_level = dict(sorted(Counter(m.level for m in communities).items()))
    report.tree_nodes_per_level = dict(sorted(Counter(t.level for t in tree).items()))
    return records, vectors, _meta(c, encoder, report)


def _parse(
    docs: list[Document], c: Config, encoder: Encoder, stages: Stages
) -> tuple[list[Chunk], Resolution]:
    """Chunk, extract and resolve: documents to entity-level records."""
    with stages.stage("chunk", len(docs)) as tick:
        chunks = chunk_documents(
            docs, max_tokens=c.chunk.max_tokens, overlap_tokens=c.chunk.overlap_tokens
        )
        tick(len(docs))
    with stages.stage("extract", len(chunks)) as tick:
        ex = run_extract(chunks, docs, c, progress=tick)
    with stages.stage("resolve") as tick:
        res = resolve(
            ex,
            {ch.id: ch.doc_id for ch in chunks},
            _batched(encoder, tick),
            synonym_threshold=c.resolve.synonym_threshold,
            synonym_k=c.resolve.synonym_k,
        )
    return chunks, res


def _communities(res: Resolution, chunks: Sequence[Chunk], c: Config) -> list[Community]:
    return build_communities(
        res.entities,
        res.relations,
        res.synonyms,
        res.sentences,
        {ch.id: ch.text for ch in chunks},
        max_size=c.communities.max_size,
        max_levels=c.communities.max_levels,
        seed=c.communities.seed,
        report_sentences=c.communities.report_sentences,
    )


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


def _meta(c: Config, encoder: Encoder, report: BuildReport) -> dict[str, Any]:
    return {
        "models": {"embedding": c.models.embedding, "spacy": pick_pipeline(c.models.spacy)},
        "dim": encoder.dim,
        "config": c.model_dump(mode="json"),
        "counts": report.counts,
        "communities_per_level": {str(k): v for k, v in report.communities_per_level.items()},
        "tree_nodes_per_level": {str(k): v for k, v in report.tree_nodes_per_level.items()},
    }
