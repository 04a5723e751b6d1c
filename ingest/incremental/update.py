"""Incremental updates: add (upsert) and delete documents without a full rebuild.

Under the store's writer lock, the current version is read once; the records
and vectors of untouched documents are copied, only the new documents'
chunks are parsed and embedded, their entities resolve onto existing ones by
the same content-hash ids a full build would give, communities are repaired
from the previous membership and the RAPTOR tree locally. Deleting a document
removes its chunks and every record only they supported. One new indexVersion
is published per call; a call that changes nothing publishes nothing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ingest.commit import commit_with
from ingest.embed import batched
from ingest.incremental.merge import Snapshot, merge, prune
from ingest.parse import LOCAL, Flags, Runner
from ingest.progress import Stages
from ingest.report import BuildReport, build_meta, fingerprint
from ingest.resolve import resolve
from kgrag.config import Config
from kgrag.encoders import Encoder
from kgrag.errors import InvalidParams
from kgrag.ids import content_id
from kgrag.store import GraphStore
from kgrag.types import Document

__all__ = ["UpdateResult", "apply_update", "documents_from_params"]


@dataclass(slots=True)
class UpdateResult:
    """What an update did: the ids added (input order), documents deleted, new chunks."""

    index_version: str | None
    changed: bool
    ids: list[str]
    deleted: int
    chunks: int
    counts: dict[str, int]


def documents_from_params(items: Sequence[Any]) -> list[Document]:
    """RCP ``index/add`` documents (``{id?, text, meta?, title?}``) as documents.

    An explicit id names the document (``d:`` is prefixed when missing); without
    one the id is a hash of title and text, so the same text is the same document.
    """
    if not isinstance(items, (list, tuple)):
        raise InvalidParams("documents must be an array", field="documents")
    out = []
    for i, item in enumerate(items):
        where = f"documents[{i}]"
        if not isinstance(item, Mapping):
            raise InvalidParams(f"{where} must be an object", field=where)
        text, raw_id = item.get("text"), item.get("id")
        title, meta = item.get("title"), item.get("meta")
        if not isinstance(text, str) or not text.strip():
            raise InvalidParams(f"{where}.text must be a non-empty string", field=f"{where}.text")
        if raw_id is not None and (not isinstance(raw_id, str) or not raw_id):
            raise InvalidParams(f"{where}.id must be a non-empty string", field=f"{where}.id")
        if title is not None and not isinstance(title, str):
            raise InvalidParams(f"{where}.title must be a string", field=f"{where}.title")
        if meta is not None and not isinstance(meta, dict):
            raise InvalidParams(f"{where}.meta must be an object", field=f"{where}.meta")
        if raw_id is None:
            doc_id = content_id("document", title or "", text)
        else:
            doc_id = raw_id if raw_id.startswith("d:") else "d:" + raw_id
        name = title if title is not None else (raw_id or "")
        out.append(Document(doc_id, name, text, "", dict(meta or {})))
    return out


def apply_update(
    store: GraphStore,
    config: Config,
    encoder: Encoder,
    *,
    add: Sequence[Document] = (),
    delete: Sequence[str] = (),
    split: bool = True,
    contextual: bool = True,
    stages: Stages | None = None,
    runner: Runner = LOCAL,
) -> UpdateResult:
    """Upsert ``add`` and remove the documents ``delete`` names; publish one version.

    The graph must have a published version (build the first one with
    :func:`ingest.build`). Re-adding a stored document unchanged and deleting
    an absent id are no-ops. ``runner`` runs the per-document stages (in this
    process by default; :mod:`ingest.distributed` spreads them over Ray workers).
    """
    stages = stages or Stages(False)
    ids = [d.id for d in add]
    with store.writer() as writer:  # the lock: no other writer interleaves from here
        with store.reader() as reader:
            stored = {d.id: d for d in reader.documents()}
            incoming = {d.id: d for d in add}  # the last of repeated ids wins
            new_docs = [d for d in incoming.values() if d != stored.get(d.id)]
            gone = {i for i in (_stored_id(raw, stored) for raw in delete) if i} - set(incoming)
            removed = gone | {d.id for d in new_docs if d.id in stored}
            if not new_docs and not removed:
                return UpdateResult(reader.index_version, False, ids, 0, 0, reader.counts())
            with stages.stage("load"):
                old = Snapshot.read(reader)
        kept = prune(old, removed)
        docs = sorted(
            [d for d in stored.values() if d.id not in removed] + new_docs, key=lambda d: d.id
        )
        records, vectors, meta = _grow(
            kept, docs, new_docs, config, encoder, (split, contextual), stages, runner
        )
        added = {d.id for d in new_docs}
        chunks = sum(1 for c in records["chunks"] if c.doc_id in added)
        with stages.stage("commit"):
            version = commit_with(writer, records, vectors, meta)
    return UpdateResult(version, True, ids, len(gone), chunks, meta["counts"])


def _stored_id(raw: str, stored: Mapping[str, Document]) -> str | None:
    if not isinstance(raw, str):
        raise InvalidParams("ids must be strings", field="ids")
    for candidate in (raw, "d:" + raw):
        if candidate in stored:
            return candidate
    return None


def _grow(
    kept: Snapshot,
    docs: list[Document],
    new_docs: Sequence[Document],
    c: Config,
    encoder: Encoder,
    flags: Flags,
    stages: Stages,
    runner: Runner,
) -> tuple[dict[str, Sequence[Any]], dict[str, Any], dict[str, Any]]:
    """Parse the new documents and merge them into ``kept``; records, vectors, meta."""
    parsed = runner.parse(new_docs, c, encoder, stages, flags)
    chunks = parsed.chunks
    encode = batched(encoder, lambda _n: None)
    with stages.stage("resolve"):
        res = resolve(
            parsed.extraction,
            {ch.id: ch.doc_id for ch in chunks},
            encode,
            synonym_threshold=c.resolve.synonym_threshold,
            synonym_k=c.resolve.synonym_k,
        )
        chunk_vecs = (
            (parsed.chunk_vectors, parsed.sentence_vectors(res.sentences)) if chunks else None
        )
    with stages.stage("repair"):
        records, vectors = merge(kept, chunks, chunk_vecs, res, encode, c, encoder.token_counts)
    records["documents"] = docs
    report = BuildReport(graph="")
    report.counts = {k: len(v) for k, v in records.items()}
    meta = build_meta(c, encoder, report)
    meta["communities_per_level"] = _per_level(records["communities"])
    meta["tree_nodes_per_level"] = _per_level(records["tree_nodes"])
    meta["fingerprint"] = fingerprint(docs, c)
    return records, vectors, meta


def _per_level(items: Sequence[Any]) -> dict[str, int]:
    levels: dict[int, int] = {}
    for item in items:
        levels[item.level] = levels.get(item.level, 0) + 1
    return {str(k): v for k, v in sorted(levels.items())}
