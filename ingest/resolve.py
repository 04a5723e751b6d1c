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
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from kgrag.ids import content_id
from kgrag.types import Entity, Mention, Sentence, Synonym

from .extract import CONCEPT_LABEL, TITLE_LABEL, Extraction
from .relation_table import RelationTable

_ARTICLE = re.compile(r"^(the|a|an)\s+")
_POSSESSIVE = re.compile(r"['’]s$")
_EDGE_PUNCT = re.compile(r"^[\W_]+|[\W_]+$")
_BLOCK = 2048
_BLOCK_CELLS = 1 << 23  # similarities per block: with the sort, ~128 MiB in all
_EXACT_MAX = 150_000  # more entities than this: clustered synonym search


@dataclass(slots=True)
class Resolution:
    entities: list[Entity]
    mentions: list[Mention]
    relations: RelationTable  # a sequence of Relation, held as columns
    sentences: list[Sentence]
    synonyms: list[Synonym]
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
    vectors = encode([e.name for e in entities]) if entities else np.zeros((0, 1), np.float32)
    synonyms = synonym_pairs([e.id for e in entities], vectors, synonym_threshold, synonym_k)
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


def synonym_pairs(
    ids: Sequence[str], vectors: np.ndarray, threshold: float, k: int
) -> list[Synonym]:
    """Pairs of ids whose unit vectors have cosine >= threshold among each one's top k.

    Up to ``_EXACT_MAX`` ids the search is exact: blocked matrix products with
    argpartition, a block holding as many rows as keep it near ``_BLOCK_CELLS``
    similarities, so memory stays flat; the time is quadratic in n. Above that, each
    row is compared only with the rows of its cluster (:func:`_clustered_top`), which
    grows as n^1.5.
    """
    n = len(ids)
    if n < 2:
        return []
    k = min(k, n - 1)
    found: dict[tuple[int, int], float] = {}
    candidates = _clustered_top(vectors, k) if n > _EXACT_MAX else _exact_top(vectors, k)
    for rows, top, top_sims in candidates:
        for r, c in zip(*np.nonzero(top_sims >= threshold), strict=True):
            i, j = int(rows[r]), int(top[r, c])
            found[(min(i, j), max(i, j))] = float(top_sims[r, c])
    pairs = sorted(
        (ids[i], ids[j], s) if ids[i] < ids[j] else (ids[j], ids[i], s)
        for (i, j), s in found.items()
    )
    return [Synonym(a, b, round(s, 6)) for a, b, s in pairs]


_Top = tuple[np.ndarray, np.ndarray, np.ndarray]  # rows, their top columns, similarities


def _exact_top(vectors: np.ndarray, k: int) -> Iterator[_Top]:
    n = len(vectors)
    block = max(16, min(_BLOCK, _BLOCK_CELLS // n))
    for start in range(0, n, block):
        sims = vectors[start : start + block] @ vectors.T
        rows = np.arange(sims.shape[0])
        sims[rows, rows + start] = -1.0
        top = np.argpartition(-sims, k - 1, axis=1)[:, :k]
        yield rows + start, top, sims[rows[:, None], top]


def _clustered_top(vectors: np.ndarray, k: int, probes: int = 8) -> Iterator[_Top]:
    """Approximate top k: spherical k-means (about sqrt(n) centroids, fitted on a
    fixed sample, so the result is deterministic); each row is compared with every
    row that has its nearest centroid among their ``probes`` nearest: nearly every pair
    of the exact search, in a fraction of its time."""
    n = len(vectors)
    n_clusters = max(2, int(np.sqrt(n)))
    sample = vectors[:: max(1, n // (64 * n_clusters))]
    centroids = sample[:: max(1, len(sample) // n_clusters)][:n_clusters].copy()
    for _ in range(5):
        assign = np.argmax(sample @ centroids.T, axis=1)
        sums = np.zeros_like(centroids)
        np.add.at(sums, assign, sample)
        norms = np.linalg.norm(sums, axis=1, keepdims=True)
        centroids = np.where(norms > 0, sums / np.maximum(norms, 1e-12), centroids)
    nearest = np.empty((n, probes), dtype=np.int64)
    step = max(1, _BLOCK_CELLS // len(centroids))
    for start in range(0, n, step):
        sims = vectors[start : start + step] @ centroids.T
        nearest[start : start + step] = np.argsort(-sims, axis=1, kind="stable")[:, :probes]
    home = nearest[:, 0]
    order = np.argsort(nearest.ravel(), kind="stable")
    bounds = np.searchsorted(nearest.ravel()[order], np.arange(len(centroids) + 1))
    for c in range(len(centroids)):
        rows = np.flatnonzero(home == c)
        pool = order[bounds[c] : bounds[c + 1]] // probes  # rows probing c
        if len(rows) == 0 or len(pool) < 2:
            continue
        kk = min(k, len(pool) - 1)
        sims = vectors[rows] @ vectors[pool].T
        sims[rows[:, None] == pool[None, :]] = -1.0
        top = np.argpartition(-sims, kk - 1, axis=1)[:, :kk]
        yield rows, pool[top], sims[np.arange(len(rows))[:, None], top]
