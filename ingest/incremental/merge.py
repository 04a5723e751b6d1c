"""The record-level half of an incremental update: prune deleted documents out
of a stored version, merge newly parsed ones in, and reuse every stored vector
whose record did not change.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from ingest import embed
from ingest.graph import check_whole
from ingest.incremental.communities import repair_communities
from ingest.incremental.tree import repair_tree
from ingest.raptor import run_tree
from ingest.resolve import Resolution
from ingest.synonyms import repair_synonyms, stored_form
from kgrag.config import Config
from kgrag.ids import sentence_id
from kgrag.store import VECTOR_KINDS, GraphReader
from kgrag.types import Chunk, Community, Entity, Mention, Relation, Sentence, Synonym, TreeNode

Encode = Callable[[list[str]], np.ndarray]


@dataclass(slots=True)
class Snapshot:
    """Every record and vector of one version, as an update works on them."""

    chunks: list[Chunk]
    sentences: list[Sentence]
    entities: dict[str, Entity]
    mentions: list[Mention]
    relations: dict[str, Relation]
    synonyms: list[Synonym]
    communities: list[Community]
    tree: list[TreeNode]
    vectors: dict[str, tuple[dict[str, int], np.ndarray]]  # kind -> (id -> row, matrix)
    removed_chunks: frozenset[str] = frozenset()
    #: entities whose mentions or edges the update changed (pruning and merging add to it)
    touched: frozenset[str] = frozenset()

    @classmethod
    def read(cls, reader: GraphReader) -> Snapshot:
        vectors = {}
        for kind in VECTOR_KINDS:
            ids, matrix = reader.vectors(kind)
            vectors[kind] = ({id_: i for i, id_ in enumerate(ids)}, np.asarray(matrix))
        return cls(
            chunks=reader.chunks(),
            sentences=reader.sentences(),
            entities={e.id: e for e in reader.entities()},
            mentions=reader.mentions(),
            relations={r.id: r for r in reader.relations()},
            synonyms=reader.synonyms(),
            communities=reader.communities(),
            tree=reader.tree_nodes(),
            vectors=vectors,
        )

    def vector(self, kind: str, id_: str) -> np.ndarray | None:
        rows, matrix = self.vectors[kind]
        row = rows.get(id_)
        return None if row is None else matrix[row]


def prune(old: Snapshot, documents: set[str]) -> Snapshot:
    """``old`` without the given documents' chunks and everything only they supported.

    A relation loses the deleted evidence passages (its weight shrinks in
    proportion) and goes when none is left; an entity goes with its last
    mention, and with it its relations and synonymy edges. Communities and the
    tree are left for the repair steps.
    """
    rm = frozenset(c.id for c in old.chunks if c.doc_id in documents)
    if not rm:
        return old
    mentions = [m for m in old.mentions if m.chunk_id not in rm]
    alive = {m.entity_id for m in mentions}
    lost = {m.entity_id for m in old.mentions if m.chunk_id in rm}
    entities = {}
    for e in old.entities.values():  # only the entities of removed passages change
        if e.id in alive:
            if e.id in lost:
                e = replace(e, chunk_ids=tuple(c for c in e.chunk_ids if c not in rm))
            entities[e.id] = e
    relations = {}
    for r in old.relations.values():
        if r.src not in alive or r.dst not in alive:
            lost.update((r.src, r.dst))
            continue
        if rm.isdisjoint(r.evidence):
            relations[r.id] = r
            continue
        evidence = tuple(c for c in r.evidence if c not in rm)
        lost.update((r.src, r.dst))  # gone or weaker
        if evidence:
            weight = r.weight * len(evidence) / len(r.evidence)
            relations[r.id] = replace(r, evidence=evidence, weight=float(max(1, round(weight))))
    lost |= {
        e for s in old.synonyms if not (s.src in alive and s.dst in alive) for e in (s.src, s.dst)
    }
    return replace(
        old,
        touched=frozenset(lost & alive),
        chunks=[c for c in old.chunks if c.id not in rm],
        sentences=[s for s in old.sentences if s.chunk_id not in rm],
        entities=entities,
        mentions=mentions,
        relations=relations,
        synonyms=[s for s in old.synonyms if s.src in alive and s.dst in alive],
        removed_chunks=rm,
    )


def merge(
    kept: Snapshot,
    chunks: Sequence[Chunk],
    chunk_vecs: tuple[np.ndarray, tuple[list[str], np.ndarray]] | None,
    res: Resolution,
    encode: Encode,
    c: Config,
    tokens: Callable[[list[str]], np.ndarray],
) -> tuple[dict[str, Sequence[Any]], dict[str, Any]]:
    """Records and vectors of the new version: ``kept`` plus the parsed new chunks."""
    entities, new_vecs = _merge_entities(kept, res)
    rels = _merge_relations(kept, res)
    ents = [entities[k] for k in sorted(entities)]
    if new_vecs:  # as the version will store them (and the stored rows read)
        coded = stored_form(np.stack(list(new_vecs.values())))
        new_vecs = dict(zip(new_vecs, coded, strict=True))
    ent_matrix = _matrix([e.id for e in ents], kept, "entities", new_vecs)
    fresh = [e.id for e in ents if e.id not in kept.entities]
    fresh_set = set(fresh)
    synonyms = repair_synonyms(
        kept.synonyms,
        [e.id for e in ents],
        ent_matrix,
        [*fresh, *kept.touched],
        c.resolve.synonym_threshold,
        c.resolve.synonym_k,
    )
    all_chunks = kept.chunks + list(chunks)
    sentences = kept.sentences + res.sentences
    mentions = kept.mentions + res.mentions
    check_whole(ents, all_chunks, mentions, rels, synonyms)
    ends = [(r.src, r.dst) for r in res.relations]
    ends += [(y.src, y.dst) for y in synonyms if y.src in fresh_set or y.dst in fresh_set]
    touched = set(kept.touched) | {e.id for e in res.entities} | {e for pair in ends for e in pair}
    communities = _communities(kept, ents, rels, synonyms, sentences, all_chunks, touched, c)
    new_chunk_vecs: dict[str, np.ndarray] = {}
    new_sentence_vecs: dict[str, np.ndarray] = {}
    if chunk_vecs is not None:
        vecs, (sentence_ids, sentence_matrix) = chunk_vecs
        new_chunk_vecs = dict(zip([ch.id for ch in chunks], vecs, strict=True))
        new_sentence_vecs = dict(zip(sentence_ids, sentence_matrix, strict=True))
    chunk_matrix = _matrix([ch.id for ch in all_chunks], kept, "chunks", new_chunk_vecs)
    tree = _tree(kept, chunks, all_chunks, chunk_matrix, c)
    records: dict[str, Sequence[Any]] = {
        "chunks": all_chunks,
        "sentences": sentences,
        "entities": ents,
        "mentions": mentions,
        "relations": rels,
        "synonyms": synonyms,
        "communities": communities,
        "tree_nodes": tree,
    }
    vectors = {
        "chunks": ([ch.id for ch in all_chunks], chunk_matrix),
        "sentences": _sentence_vectors(kept, sentences, new_sentence_vecs),
        "entities": ([e.id for e in ents], ent_matrix),
        **_derived_vectors(kept, records, ent_matrix, encode, c, tokens),
    }
    return records, vectors


def _communities(
    kept: Snapshot,
    ents: Sequence[Entity],
    rels: Sequence[Relation],
    synonyms: Sequence[Synonym],
    sentences: Sequence[Sentence],
    all_chunks: Sequence[Chunk],
    touched: set[str],
    c: Config,
) -> list[Community]:
    """The stored communities repaired around the ``touched`` entities."""
    texts = {ch.id: ch.text for ch in all_chunks}
    cc = c.communities
    return repair_communities(
        ents,
        rels,
        synonyms,
        sentences,
        texts,
        kept.communities,
        max_size=cc.max_size,
        max_levels=cc.max_levels,
        seed=cc.seed,
        report_sentences=cc.report_sentences,
        touched=touched,
    )


def _merge_relations(kept: Snapshot, res: Resolution) -> list[Relation]:
    """Stored relations with the new batch's added (the same relation: weights summed,
    evidence joined), sorted by id."""
    relations = dict(kept.relations)
    for r in res.relations:
        old = relations.get(r.id)
        if old is not None:
            evidence = tuple(sorted({*old.evidence, *r.evidence}))
            r = replace(old, weight=old.weight + r.weight, evidence=evidence)
        relations[r.id] = r
    return [relations[k] for k in sorted(relations)]


def _derived_vectors(
    kept: Snapshot,
    records: Mapping[str, Sequence[Any]],
    ent_matrix: np.ndarray,
    encode: Encode,
    c: Config,
    tokens: Callable[[list[str]], np.ndarray],
) -> dict[str, tuple[list[str], np.ndarray]]:
    """The vectors of facts, community reports and tree nodes of the new version's
    ``records``: stored ones reused, the others made (facts, reports, tree, in that
    order)."""
    ents, tree = records["entities"], records["tree_nodes"]
    names = {e.id: e.name for e in ents}
    facts = embed.facts(records["relations"])
    return {
        "facts": _reuse(
            kept,
            "facts",
            facts,
            lambda fs: embed.joined(
                embed.fact_blocks(
                    c.embed.facts, encode, tokens, fs, names, ([e.id for e in ents], ent_matrix)
                ),
                ent_matrix.shape[1],
            ),
        ),
        "communities": _reuse_reports(kept, records["communities"], encode),
        "tree_nodes": _reuse(kept, "tree_nodes", tree, lambda ts: encode([t.summary for t in ts])),
    }


def _merge_entities(
    kept: Snapshot, res: Resolution
) -> tuple[dict[str, Entity], dict[str, np.ndarray]]:
    """Stored entities with the new batch resolved onto them (same normal name, same id)."""
    entities = dict(kept.entities)
    vecs: dict[str, np.ndarray] = {}
    for e, vec in zip(res.entities, res.entity_vectors, strict=True):
        old = entities.get(e.id)
        if old is None:
            entities[e.id] = e
            vecs[e.id] = vec
            continue
        extra = [a for a in (e.name, *e.aliases) if a != old.name and a not in old.aliases]
        chunk_ids = tuple(sorted({*old.chunk_ids, *e.chunk_ids}))
        entities[e.id] = replace(old, aliases=old.aliases + tuple(extra), chunk_ids=chunk_ids)
    return entities, vecs


def _matrix(
    ids: Sequence[str], kept: Snapshot, kind: str, fresh: Mapping[str, np.ndarray]
) -> np.ndarray:
    """Rows for ``ids``: the stored vector where there is one, else ``fresh``."""
    rows, matrix = kept.vectors[kind]
    dim = matrix.shape[1] if matrix.size else len(next(iter(fresh.values())))
    out = np.zeros((len(ids), dim), np.float32)
    for i, id_ in enumerate(ids):
        row = rows.get(id_)
        out[i] = matrix[row] if row is not None else fresh[id_]
    return out


def _sentence_vectors(
    kept: Snapshot, sentences: Sequence[Sentence], fresh: Mapping[str, np.ndarray]
) -> tuple[list[str], np.ndarray]:
    """Vectors of the sentences that have one: stored, or new from this batch. A graph
    built before sentences had vectors keeps none for its old sentences (global search
    then encodes those it quotes)."""
    rows, matrix = kept.vectors["sentences"]
    ids: list[str] = []
    out: list[np.ndarray] = []
    for s in sentences:
        sid = sentence_id(s.chunk_id, s.index)
        vec = fresh.get(sid)
        if vec is None and sid in rows:
            vec = matrix[rows[sid]]
        if vec is not None:
            ids.append(sid)
            out.append(vec)
    if out:
        return ids, np.stack(out).astype(np.float32, copy=False)
    return ids, np.zeros((0, kept.vectors["chunks"][1].shape[1]), np.float32)


def _reuse(
    kept: Snapshot,
    kind: str,
    items: Sequence[Any],
    vectors_of: Callable[[list[Any]], np.ndarray],
) -> tuple[list[str], np.ndarray]:
    """Vectors of ``items``: stored ones reused (ids are content hashes), new ones made
    by ``vectors_of``."""
    rows, matrix = kept.vectors[kind]
    missing = [it for it in items if it.id not in rows]
    fresh = {}
    if missing:
        fresh = dict(zip([it.id for it in missing], vectors_of(missing), strict=True))
    out = np.zeros((len(items), kept.vectors["chunks"][1].shape[1]), np.float32)
    for i, it in enumerate(items):
        out[i] = fresh[it.id] if it.id in fresh else matrix[rows[it.id]]
    return [it.id for it in items], out


def _reuse_reports(
    kept: Snapshot, communities: Sequence[Community], encode: Encode
) -> tuple[list[str], np.ndarray]:
    """Report vectors: a community whose report text is one already embedded (under its
    own id or another: an ancestor that gained a minor member keeps its report) reuses
    that vector; only new texts are encoded."""
    rows, matrix = kept.vectors["communities"]
    stored = {embed.report_text(m): rows[m.id] for m in kept.communities if m.id in rows}
    texts = [embed.report_text(m) for m in communities]
    missing = sorted({t for t in texts if t not in stored})
    fresh = dict(zip(missing, encode(missing), strict=True)) if missing else {}
    out = np.zeros((len(communities), kept.vectors["chunks"][1].shape[1]), np.float32)
    for i, text in enumerate(texts):
        out[i] = fresh[text] if text in fresh else matrix[stored[text]]
    return [m.id for m in communities], out


def _tree(
    kept: Snapshot,
    chunks: Sequence[Chunk],
    all_chunks: Sequence[Chunk],
    chunk_matrix: np.ndarray,
    c: Config,
) -> list[TreeNode]:
    """The repaired RAPTOR tree; built afresh when the stored version had none."""
    r = c.raptor
    texts = {ch.id: ch.text for ch in all_chunks}
    vector = {ch.id: chunk_matrix[i] for i, ch in enumerate(all_chunks)}
    tree = repair_tree(
        kept.tree,
        set(kept.removed_chunks),
        [ch.id for ch in chunks],
        texts,
        vector,
        summary_sentences=r.summary_sentences,
    )
    if tree or not all_chunks:
        return tree

    return run_tree(all_chunks, chunk_matrix, c)
