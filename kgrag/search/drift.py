"""Graph op ``drift``: GraphRAG's DRIFT search (Dynamic Reasoning and Inference
with Flexible Traversal), without an LLM.

1. Primer: the query against the community reports (:class:`GlobalSearch`).
2. Follow-ups: the key relations and key entities of the primer reports become
   facets; the facets closest to the query (cosine), picked by MMR so they
   differ, and not already said by the query, are each appended to the query
   as one follow-up ("<query> <facet>").
3. A local search per follow-up. With ``depth`` > 1, the next facets are the
   relations of the entities mentioned in the previous step's top passages.
4. Every list (the query's own local list first, weight 1; a follow-up list of
   step ``s`` weight ``FOLLOWUP_DECAY ** s``) is merged by reciprocal-rank fusion
   with a small constant (:data:`FUSE_K`), ties broken by chunk id; each passage
   keeps the queries that found it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from kgrag.errors import InvalidParams
from kgrag.search.global_search import CommunityScore, GlobalSearch, split_relation
from kgrag.text.keys import COOC
from kgrag.text.tokens import WORD

#: a local search: (query text, n) -> [(chunk id, score)], best first
LocalFn = Callable[[str, int], list[tuple[str, float]]]

FOLLOWUP_DECAY = 0.35  # weight of a step-s follow-up list: FOLLOWUP_DECAY ** s
#: the fusion's rank constant: 1 / (FUSE_K + rank). Local search's own order is
#: reranked and sharp at the top, which the usual 60 flattens
FUSE_K = 5
MMR_LAMBDA = 0.7
SEED_PASSAGES = 2  # top passages per follow-up whose entities feed the next step
MAX_FACETS = 256  # relation candidates encoded per step


@dataclass(frozen=True, slots=True)
class Followup:
    """A derived query: the facet it adds, the step that issued it, and where the
    facet came from (a community id at step 1, a relation id after)."""

    text: str
    facet: str
    step: int
    origin: str


@dataclass(frozen=True, slots=True)
class DriftResult:
    passages: list[tuple[str, float]]  # chunk id, fused score; best first
    followups: list[Followup]  # in the order issued
    primer: list[CommunityScore]
    found_by: dict[str, tuple[str, ...]]  # chunk id -> texts of the queries that found it


def drift(
    query: str,
    *,
    global_search: GlobalSearch,
    local: LocalFn,
    k: int,
    depth: int = 1,
    followups: int = 3,
    primer_k: int = 3,
    level: int | None = None,
) -> DriftResult:
    """DRIFT search for ``query``; ``level`` is the primer's community level (None:
    every level, copies removed)."""
    for name, value, least in (("k", k, 1), ("depth", depth, 1), ("primer_k", primer_k, 1)):
        if value < least:
            raise InvalidParams(f"{name} must be at least {least}", field=name)
    if followups < 0:
        raise InvalidParams("followups must be at least 0", field="followups")
    primer = global_search.search(
        query, primer_k, level, all_levels=level is None, summary=False
    ).communities
    qvec = global_search.encoder.encode_one(query)
    lists: list[tuple[str, float, list[tuple[str, float]]]] = [(query, 1.0, local(query, k))]
    issued: list[Followup] = []
    query_words, used = set(_words(query)), set[str]()
    facets = _report_facets(global_search, primer)
    seen_vecs = np.zeros((0, qvec.shape[0]), dtype=np.float32)  # issued facets, for MMR
    for step in range(1, depth + 1):
        chosen, vecs = _choose(global_search, qvec, facets, query_words, used, seen_vecs, followups)
        if not chosen:
            break
        seen_vecs = np.vstack([seen_vecs, vecs])
        step_lists = []
        for facet, origin in chosen:
            used.add(_key(facet))
            text = f"{query} {facet}"
            issued.append(Followup(text, facet, step, origin))
            step_lists.append((text, FOLLOWUP_DECAY**step, local(text, k)))
        lists.extend(step_lists)
        if step < depth:
            top = [cid for _, _, hits in step_lists for cid, _ in hits[:SEED_PASSAGES]]
            facets = _passage_facets(global_search, list(dict.fromkeys(top)))
    passages, found_by = _fuse(lists, k)
    return DriftResult(passages, issued, primer, found_by)


def _report_facets(gs: GlobalSearch, primer: Sequence[CommunityScore]) -> list[tuple[str, str]]:
    """(facet, community id): the SVO key relations, then the key entities, of each
    primer report in rank order."""
    out: list[tuple[str, str]] = []
    for scored in primer:
        report = gs.community(scored.id).report
        for rendered in report.key_relations:
            parts = split_relation(rendered)
            if parts and parts[1] != COOC:
                out.append((" ".join(parts), scored.id))
        out.extend((name, scored.id) for name in report.key_entities)
    return out


def _passage_facets(gs: GlobalSearch, chunk_ids: Sequence[str]) -> list[tuple[str, str]]:
    """(facet, relation id): SVO relations touching the entities the passages mention,
    heaviest first, at most MAX_FACETS."""
    if not chunk_ids:
        return []
    reader = gs.reader
    entity_ids = sorted({m.entity_id for m in reader.mentions(chunk_ids)})
    if not entity_ids:
        return []
    relations = [r for r in reader.relations(touching=entity_ids) if r.predicate != COOC]
    relations.sort(key=lambda r: (-r.weight, r.id))
    relations = relations[:MAX_FACETS]
    ends = sorted({e for r in relations for e in (r.src, r.dst)})
    names = reader.entity_names(ends)
    return [
        (f"{names.get(r.src, r.src)} {r.predicate} {names.get(r.dst, r.dst)}", r.id)
        for r in relations
    ]


def _choose(
    gs: GlobalSearch,
    qvec: np.ndarray,
    facets: Sequence[tuple[str, str]],
    query_words: set[str],
    used: set[str],
    seen_vecs: np.ndarray,
    n: int,
) -> tuple[list[tuple[str, str]], np.ndarray]:
    """Up to ``n`` facets close to the query and unlike each other and the facets
    issued before (``seen_vecs``), by MMR, with their vectors; facets already
    issued (``used`` keys), or whose words the query holds, are skipped."""
    fresh: dict[str, tuple[str, str]] = {}
    for facet, origin in facets:
        key = _key(facet)
        if key and key not in used and key not in fresh and not set(key.split()) <= query_words:
            fresh[key] = (facet, origin)
    if not fresh or n == 0:
        return [], seen_vecs[:0]
    cands = list(fresh.values())
    vecs = gs.encoder.encode([f for f, _ in cands])
    relevance = vecs @ qvec
    picked: list[int] = []
    left = list(range(len(cands)))
    while left and len(picked) < n:
        before = np.vstack([seen_vecs, vecs[picked]])
        novelty = (vecs[left] @ before.T).max(axis=1) if len(before) else np.zeros(len(left))
        mmr = MMR_LAMBDA * relevance[left] - (1 - MMR_LAMBDA) * novelty
        picked.append(left.pop(int(np.argmax(mmr))))
    return [cands[i] for i in picked], vecs[picked]


def _fuse(
    lists: Sequence[tuple[str, float, list[tuple[str, float]]]], k: int
) -> tuple[list[tuple[str, float]], dict[str, tuple[str, ...]]]:
    """Weighted RRF of the local lists, top ``k``, and the queries behind each passage."""
    score: dict[str, float] = {}
    found: dict[str, list[str]] = {}
    for text, weight, hits in lists:
        for rank, cid in enumerate(dict.fromkeys(c for c, _ in hits), start=1):
            score[cid] = score.get(cid, 0.0) + weight / (FUSE_K + rank)
            found.setdefault(cid, []).append(text)
    top = sorted(score.items(), key=lambda cs: (-cs[1], cs[0]))[:k]
    return top, {cid: tuple(dict.fromkeys(found[cid])) for cid, _ in top}


def _words(text: str) -> list[str]:
    return WORD.findall(text.lower())


def _key(text: str) -> str:
    return " ".join(_words(text))
