"""Resolve stage: surface names -> entities, then relations, mentions, synonymy.

Names are normalised (Unicode NFKC, case folded, leading article and
possessive dropped, inner whitespace collapsed) and names with one normal
form become one entity. Inside a document, a one-word PERSON name that is
the last word of exactly one longer PERSON name there ("Curie" beside
"Marie Curie") is an alias of it. Entities whose name embeddings are close
get synonymy edges, found with a blocked matrix top-k search.
"""

from __future__ import annotations

import re
import unicodedata
from array import array
from collections import Counter, defaultdict
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np

from kgrag.ids import content_id
from kgrag.threads import give_back
from kgrag.types import Entity, Mention, Sentence

from .extract import CONCEPT_LABEL, TITLE_LABEL, Extraction
from .relation_table import RelationTable
from .synonyms import SynonymTable, stored_form, synonym_pairs

_ARTICLE = re.compile(r"^(the|a|an)\s+")
_POSSESSIVE = re.compile(r"['’]s$")
_EDGE_PUNCT = re.compile(r"^[\W_]+|[\W_]+$")


@dataclass(slots=True)
class Resolution:
    entities: list[Entity]
    mentions: list[Mention]
    relations: RelationTable  # a sequence of Relation, held as columns
    sentences: list[Sentence]
    synonyms: SynonymTable  # a sequence of Synonym, held as columns
    entity_vectors: np.ndarray  # row i = entities[i]


def normalise(name: str) -> str:
    """The key under which surface names are merged."""
    text = unicodedata.normalize("NFKC", name).casefold().strip()
    text = _POSSESSIVE.sub("", text)
    text = _ARTICLE.sub("", text)
    text = " ".join(text.split())
    return _EDGE_PUNCT.sub("", text)


def resolve(
    extraction: Extraction,
    chunk_docs: Mapping[str, str],
    encode: Callable[[list[str]], np.ndarray],
    *,
    synonym_threshold: float,
    synonym_k: int,
    release: bool = False,
) -> Resolution:
    """Turn the surface names of ``extraction`` into entities and id-based records; with
    ``release``, the extraction's lists are emptied as they are read, so the raw names
    are gone before the entity names are encoded (a build's peak)."""
    key_of = _keys(extraction, chunk_docs)
    by_key = _by_key(extraction, chunk_docs, key_of)
    id_of = {key: e.id for key, e in by_key.items()}

    def eid(chunk_id: str, name: str) -> str:
        return id_of.get(key_of(chunk_docs[chunk_id], name), "")

    mentions = _mentions(extraction, eid)
    relations = _relations(extraction, eid)
    if release:
        extraction.mentions.clear()
        extraction.relations.clear()
        extraction.cooc.clear()
    sentences = [
        Sentence(
            s.chunk_id,
            s.index,
            s.start,
            s.end,
            tuple(e for e in dict.fromkeys(eid(s.chunk_id, n) for n in s.names) if e),
        )
        for s in extraction.sentences
    ]
    if release:
        extraction.sentences.clear()
    chunk_ids: dict[str, set[str]] = defaultdict(set)
    for m in mentions:
        chunk_ids[m.entity_id].add(m.chunk_id)
    entities = sorted(
        (
            Entity(e.id, e.name, e.type, e.aliases, tuple(sorted(chunk_ids[e.id])))
            for e in by_key.values()
        ),
        key=lambda e: e.id,
    )
    del chunk_ids, by_key
    if release:
        give_back()  # the raw extraction's pages, before the names' matrix is made
    vectors = encode([e.name for e in entities]) if entities else np.zeros((0, 1), np.float32)
    # scored on the vectors as stored, as a write that grows the graph reads them
    synonyms = synonym_pairs(
        [e.id for e in entities], stored_form(vectors), synonym_threshold, synonym_k
    )
    return Resolution(entities, mentions, relations, sentences, synonyms, vectors)


def _keys(extraction: Extraction, chunk_docs: Mapping[str, str]) -> Callable[[str, str], str]:
    """A function (doc id, surface name) -> entity key, with document-local aliases."""
    persons: dict[str, set[str]] = defaultdict(set)
    for m in extraction.mentions:
        if m.label == "PERSON" and " " in m.name.strip():
            persons[chunk_docs[m.chunk_id]].add(normalise(m.name))
    aliases: dict[tuple[str, str], str] = {}
    for doc_id, fulls in persons.items():
        by_last: dict[str, list[str]] = defaultdict(list)
        for full in fulls:
            by_last[full.rsplit(" ", 1)[-1]].append(full)
        for last, options in by_last.items():
            if len(options) == 1:
                aliases[(doc_id, last)] = options[0]

    def key_of(doc_id: str, name: str) -> str:
        key = normalise(name)
        return aliases.get((doc_id, key), key)

    return key_of


def _by_key(
    extraction: Extraction, chunk_docs: Mapping[str, str], key_of: Callable[[str, str], str]
) -> dict[str, Entity]:
    """One entity per key: the most frequent surface name and the most telling label."""
    surfaces: dict[str, Counter[str]] = defaultdict(Counter)
    labels: dict[str, Counter[str]] = defaultdict(Counter)
    for m in extraction.mentions:
        key = key_of(chunk_docs[m.chunk_id], m.name)
        if key:
            surfaces[key][m.name] += 1
            labels[key][m.label] += 1
    out: dict[str, Entity] = {}
    for key in sorted(surfaces):
        names = sorted(surfaces[key].items(), key=lambda kv: (-kv[1], -len(kv[0]), kv[0]))
        out[key] = Entity(
            content_id("entity", key),
            names[0][0],
            _label(labels[key]),
            tuple(n for n, _ in names[1:]),
        )
    return out


def _label(counts: Counter[str]) -> str:
    named = {k: v for k, v in counts.items() if k not in (TITLE_LABEL, CONCEPT_LABEL)}
    pool = named or counts
    return sorted(pool.items(), key=lambda kv: (-kv[1], kv[0]))[0][0]


def _mentions(extraction: Extraction, eid: Callable[[str, str], str]) -> list[Mention]:
    counts: Counter[tuple[str, str]] = Counter()
    for m in extraction.mentions:
        entity_id = eid(m.chunk_id, m.name)
        if entity_id:
            counts[(entity_id, m.chunk_id)] += 1
    return [Mention(e, c, n) for (e, c), n in sorted(counts.items())]


def _relations(extraction: Extraction, eid: Callable[[str, str], str]) -> RelationTable:
    """One relation per (subject, predicate, object, kind), weighted by how often it
    was read, with the chunks it was read in. The raw relations are numbered into
    integer columns and grouped by one sort (a dict of tuples and a set per relation
    cost ~0.7 KB each, 2.8 GB at 60k passages); the strings are numbered in sorted
    order, so the groups come out in the order of the strings."""
    ent: dict[str, int] = {}
    pred: dict[str, int] = {}
    kinds: dict[str, int] = {}
    chunk: dict[str, int] = {}
    cs, cp, cd, ck, cc = (array("i") for _ in range(5))
    for r in extraction.every_relation():
        src, dst = eid(r.chunk_id, r.src), eid(r.chunk_id, r.dst)
        if src == dst or not src or not dst:
            continue
        if r.kind == "cooc" and dst < src:
            src, dst = dst, src
        cs.append(ent.setdefault(src, len(ent)))
        cp.append(pred.setdefault(r.predicate, len(pred)))
        cd.append(ent.setdefault(dst, len(ent)))
        ck.append(kinds.setdefault(r.kind, len(kinds)))
        cc.append(chunk.setdefault(r.chunk_id, len(chunk)))
    if not cs:
        return _no_relations()
    s, d = (_ranks(ent)[np.frombuffer(col, np.int32)] for col in (cs, cd))
    p, k, c = (
        _ranks(table)[np.frombuffer(col, np.int32)]
        for table, col in ((pred, cp), (kinds, ck), (chunk, cc))
    )
    del cs, cp, cd, ck, cc
    order = np.lexsort((c, k, d, p, s))
    s, p, d, k, c = s[order], p[order], d[order], k[order], c[order]
    del order
    new_key = np.ones(len(s), bool)
    new_key[1:] = (s[1:] != s[:-1]) | (p[1:] != p[:-1]) | (d[1:] != d[:-1]) | (k[1:] != k[:-1])
    starts = np.flatnonzero(new_key)
    ends = np.append(starts, len(s))
    new_chunk = new_key.copy()
    new_chunk[1:] |= c[1:] != c[:-1]
    evidence = np.flatnonzero(new_chunk)  # rows that start a (relation, chunk) pair
    evidence_at = np.searchsorted(evidence, ends).astype(np.int64)
    ent_names, pred_names = sorted(ent), sorted(pred)
    ids = np.empty(len(starts), dtype=f"S{len(content_id('relation'))}")
    step = 1 << 13  # ids hashed at a time
    for lo in range(0, len(starts), step):
        at = starts[lo : lo + step]
        ids[lo : lo + len(at)] = [
            content_id("relation", ent_names[si], pred_names[pi], ent_names[di]).encode()
            for si, pi, di in zip(s[at].tolist(), p[at].tolist(), d[at].tolist(), strict=True)
        ]
    columns = (s[starts], p[starts], d[starts], k[starts].astype(np.int8))
    weight = np.diff(ends).astype(np.float32)  # times read: exact in float32
    names = (ent_names, pred_names, sorted(kinds), sorted(chunk))
    return RelationTable(ids, (*columns, weight), (evidence_at, c[evidence]), names)


def _no_relations() -> RelationTable:
    none = np.zeros(0, np.int32)
    return RelationTable(
        np.zeros(0, "S1"),
        (none, none, none, none.astype(np.int8), np.zeros(0)),
        (np.zeros(1, np.int64), none),
        ([], [], [], []),
    )


def _ranks(numbered: Mapping[str, int]) -> np.ndarray:
    """For each number given in first-seen order, the rank of its string."""
    ranks = np.empty(len(numbered), np.int32)
    for rank, key in enumerate(sorted(numbered)):
        ranks[numbered[key]] = rank
    return ranks
