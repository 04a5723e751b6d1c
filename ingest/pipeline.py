"""The ingest pipeline: load -> chunk -> extract -> resolve -> graph ->
communities -> embed -> raptor -> commit, each stage a plain function.

Ingesting into a graph that already has documents adds the new ones
incrementally (:mod:`ingest.incremental.update`) when the graph was built with the same
settings, and rebuilds from the union of stored and new documents otherwise.
Content-hash ids make the same file a no-op.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from kgrag.config import Config
from kgrag.store import RECORD_KINDS, GraphStore, GraphWriter, open_store
from kgrag.store.vectors import CodedMatrix, quantize
from kgrag.threads import give_back
from kgrag.types import Chunk, Community, Document

from . import embed
from .commit import commit_with
from .communities import build_communities
from .embed import batched
from .extract import Extraction
from .graph import graph_stats
from .load import LoadResult, load_paths
from .parse import LOCAL, Runner, build_encoder
from .progress import PageBars, Stages
from .raptor import run_tree
from .report import BuildReport, build_meta, fingerprint
from .resolve import Resolution, resolve

if TYPE_CHECKING:
    from .distributed import RayOptions


def ingest_paths(
    paths: Sequence[str | Path],
    graph_dir: str | Path,
    config: Config | None = None,
    *,
    progress: bool = False,
    prune: bool = False,
    ray: RayOptions | None = None,
) -> BuildReport:
    """Load ``paths`` and build (or grow) the graph at ``graph_dir``: new files are
    added, changed files replace what they held, unchanged files cost nothing; with
    ``prune``, documents read from files under the folders given whose files are
    gone are removed. With ``ray``, files are read and documents parsed on the
    workers of a Ray cluster (:mod:`ingest.distributed`); the graph is the same."""
    config = config or Config()
    stages = Stages(progress)
    if ray is not None:
        from .distributed import ray_session

        with ray_session(ray, progress) as session:
            with stages.stage("load"):
                loaded = session.load(paths)
            report = _build_loaded(loaded, graph_dir, config, stages, prune, session)
            report.worker_seconds = dict(session.busy)
            report.encode_seconds = session.encode_seconds
            return report
    bars = PageBars(progress)
    with stages.stage("load"):
        loaded = load_paths(paths, bars)
    bars.close()
    return _build_loaded(loaded, graph_dir, config, stages, prune, LOCAL)


def _build_loaded(
    loaded: LoadResult,
    graph_dir: str | Path,
    config: Config,
    stages: Stages,
    prune: bool,
    runner: Runner,
) -> BuildReport:
    gone: list[str] = []
    if prune:
        store = open_store(graph_dir)
        if store.current():
            with store.reader() as reader:
                gone = loaded.gone(reader.documents())
    report = build(loaded.documents, graph_dir, config, stages=stages, delete=gone, runner=runner)
    report.errors, report.skipped = loaded.errors, loaded.skipped
    report.warnings, report.pruned = loaded.warnings, len(gone)
    return report


def build(
    documents: Sequence[Document],
    graph_dir: str | Path,
    config: Config,
    *,
    stages: Stages | None = None,
    delete: Sequence[str] = (),
    runner: Runner = LOCAL,
) -> BuildReport:
    """Build a new version of the graph from ``documents`` plus those already stored
    (a stored document of the same id is replaced), less the ids in ``delete``;
    ``runner`` says where the work runs (here by default)."""
    stages = stages or Stages(False)
    store = open_store(
        graph_dir,
        **config.store.model_dump(),
    )
    report = BuildReport(graph=str(graph_dir), index_version=store.current())
    docs = _merge(store, documents, delete)
    stamp = fingerprint(docs, config)
    current = store.manifest().get("versions", {}).get(report.index_version or "", {})
    if not docs or current.get("fingerprint") == stamp:
        report.counts = current.get("counts", {})
        report.seconds = dict(stages.seconds)
        report.memory_mib = dict(stages.memory_mib)
        return report
    if report.index_version and _same_settings(current.get("config", {}), config):
        return _incremental(store, documents, delete, config, stages, report, runner)
    with store.writer() as writer:  # records go in as each is final (bounded memory)
        records, vectors, meta = _run_stages(docs, config, stages, report, runner, writer)
        meta["fingerprint"] = stamp
        with stages.stage("commit"):
            report.index_version = commit_with(writer, records, vectors, meta)
    report.changed = True
    report.seconds = dict(stages.seconds)
    report.memory_mib = dict(stages.memory_mib)
    return report


def _same_settings(stored: dict[str, Any], config: Config) -> bool:
    """Whether a graph built with ``stored`` settings can grow under ``config``."""
    skip = {"retrieval", "store"}
    mine = config.model_dump(mode="json", exclude=skip)
    return {k: v for k, v in stored.items() if k not in skip} == mine


def _incremental(
    store: GraphStore,
    documents: Sequence[Document],
    delete: Sequence[str],
    config: Config,
    stages: Stages,
    report: BuildReport,
    runner: Runner,
) -> BuildReport:
    from ingest.incremental.update import apply_update

    result = apply_update(
        store,
        config,
        runner.encoder(build_encoder(config), config),
        add=documents,
        delete=delete,
        stages=stages,
        runner=runner,
    )
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
    report.memory_mib = dict(stages.memory_mib)
    return report


def _merge(
    store: GraphStore, documents: Sequence[Document], delete: Sequence[str] = ()
) -> list[Document]:
    merged: dict[str, Document] = {}
    if store.current():
        with store.reader() as reader:
            merged.update((d.id, d) for d in reader.documents())
    merged.update((d.id, d) for d in documents)
    for doc_id in delete:
        merged.pop(doc_id, None)
    return [merged[k] for k in sorted(merged)]


def _run_stages(
    docs: list[Document],
    c: Config,
    stages: Stages,
    report: BuildReport,
    runner: Runner,
    writer: GraphWriter,
) -> tuple[dict[str, Sequence[Any]], dict[str, Any], dict[str, Any]]:
    """Run chunk .. raptor, handing ``writer`` each record and vector kind once the
    later stages no longer read it (and letting it go here); return the rest of the
    records and vectors, and the manifest metadata."""
    counts: dict[str, int] = {}

    def put(kind: str, batch: Sequence[Any]) -> None:
        counts[kind] = len(batch)
        writer.add(kind, batch)

    encoder = build_encoder(c)  # first, so a bad model name fails before any parsing
    parsed = runner.parse(docs, c, encoder, stages, (True, True))
    encoder = runner.encoder(encoder, c)
    chunks = parsed.chunks
    with stages.stage("resolve") as tick:
        res = resolve(
            parsed.extraction,
            {ch.id: ch.doc_id for ch in chunks},
            batched(encoder, tick),
            synonym_threshold=c.resolve.synonym_threshold,
            synonym_k=c.resolve.synonym_k,
            release=True,  # the raw names go once resolved
        )
    parsed.extraction = Extraction()
    # the entity vectors go to the version now: facts are kept as parts and read the
    # version's own; what a writer that stores composed rows composes from is the codes
    # the version holds (a quarter of the float32 bytes: 0.5 GB at 60k passages)
    entity_ids = [e.id for e in res.entities]
    dim = res.entity_vectors.shape[1]
    writer.add_vectors("entities", entity_ids, res.entity_vectors)
    entity_codes = CodedMatrix(*quantize(res.entity_vectors))
    res.entity_vectors = np.zeros((0, dim), np.float32)  # not a view: let it go
    writer.add_vectors("sentences", *parsed.sentence_vectors(res.sentences))
    parsed.release_sentences()
    with stages.stage("graph", 1):
        report.graph_stats = graph_stats(
            res.entities, chunks, res.mentions, res.relations, res.synonyms
        )
    put("mentions", res.mentions)
    res.mentions.clear()
    give_back()
    with stages.stage("communities", 1):
        communities = _communities(res, chunks, c)
    for kind, batch in (("sentences", res.sentences), ("synonyms", res.synonyms)):
        put(kind, batch)
        batch.clear()
    give_back()
    names = {e.id: e.name for e in res.entities}
    facts = embed.facts(res.relations)
    with stages.stage("embed", len(facts) + len(communities)) as tick:
        fact_ids = [f.id for f in facts]
        quiet = batched(encoder, lambda _n: None)  # the bar counts facts, not predicates
        if c.embed.facts == "encode":
            writer.add_vectors("facts", fact_ids, embed.embed_facts(quiet, facts, names))
        else:  # composed: the store keeps the parts
            parts = embed.fact_parts(quiet, encoder.token_counts, facts, names, entity_ids, dim)
            writer.add_fact_parts(fact_ids, parts, entity_codes)
            del parts
        del facts, names, entity_codes
        tick(len(fact_ids))
        put("relations", res.relations)
        res.relations.clear()
        give_back()
        community_vecs = embed.embed_communities(batched(encoder, tick), communities)
        writer.add_vectors("communities", [m.id for m in communities], community_vecs)
        del community_vecs
    report.communities_per_level = dict(sorted(Counter(m.level for m in communities).items()))
    put("communities", communities)
    del communities
    with stages.stage("raptor") as tick:
        tree = run_tree(chunks, parsed.chunk_vectors, c)
        tree_vecs = embed.embed_tree(batched(encoder, tick), tree)
        writer.add_vectors("tree_nodes", [t.id for t in tree], tree_vecs)
    report.tree_nodes_per_level = dict(sorted(Counter(t.level for t in tree).items()))
    put("tree_nodes", tree)
    records: dict[str, Sequence[Any]] = {
        "documents": docs,
        "chunks": chunks,
        "entities": res.entities,
    }
    vectors = {"chunks": ([ch.id for ch in chunks], parsed.chunk_vectors)}
    counts.update((k, len(v)) for k, v in records.items())
    report.counts = {k: counts[k] for k in RECORD_KINDS}  # in the writer's order
    return records, vectors, build_meta(c, encoder, report)


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
