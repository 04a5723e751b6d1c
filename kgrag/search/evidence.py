"""What a provenance path's passage states, and the sentences that say so.

Steps over the explanations :class:`kgrag.search.paths.PathFinder` gives:

- :func:`state_endings`: a path that ends "entity X is mentioned in passage P" ends
  instead with the relation P states about X that is closest to the query (by the
  similarity of the sentence that states it): "X —directed by→ Y", evidence P. A
  path says what the passage says, not only that it names X. When P states no
  relation about X, or only ones in sentences far less about the query than its
  best sentence on X (:data:`ENDING_MARGIN`), the mention stays.
- :func:`state_links`: a bridge "X is mentioned in P, P names T's title" becomes the
  relation between X and T that P states, where it states one.
- :func:`quote_edges`: every edge gets ``quote``, the sentence of its evidence
  passage that states it (a relation's or co-occurrence's: the one naming both
  ends; a mention's: the one naming the entity), the one closest to the query
  where several do, so a person can check the edge without opening the passage.

All three read the passages through one :class:`Reading` a search: each passage's text,
title entity, sentences and their similarity to the query once, in one query on a
server-backed store (:meth:`kgrag.store.GraphReader.passage_texts`).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from kgrag.search.explanation import STATED, Explanation
from kgrag.store import GraphReader, PassageText
from kgrag.text.keys import DISAMBIGUATOR
from kgrag.types import Sentence

#: a quote longer than this is cut at a word boundary, with an ellipsis
QUOTE_CHARS = 320
#: a path ends with a statement of its passage when that statement's sentence is at
#: most this much less similar to the query than the passage's best sentence naming
#: the path's last entity (cosine)
ENDING_MARGIN = 0.05


class Reading:
    """What one search has read of its evidence passages: each passage's text, title
    entity, sentences and their similarity to the query, read once
    (:meth:`GraphReader.passage_texts`, one query on a server-backed store) whichever
    step asks first, and the entities' similarity to the query."""

    def __init__(self, reader: GraphReader, qvec: np.ndarray | None) -> None:
        self.reader, self.qvec = reader, qvec
        self.passages: dict[str, PassageText] = {}
        self._absent: set[str] = set()
        self._near: dict[str, float] = {}

    def read(self, chunks: Iterable[str]) -> dict[str, str]:
        """Read the passages of ``chunks`` not read yet; their texts (chunk id -> text)."""
        wanted = set(chunks)
        missing = sorted(wanted - self.passages.keys() - self._absent)
        if missing:
            got = self.reader.passage_texts(missing, self.qvec)
            self.passages.update(got)
            self._absent.update(c for c in missing if c not in got)
        return {c: self.passages[c].text for c in sorted(wanted) if c in self.passages}

    def title(self, chunk: str) -> str | None:
        """The entity a read passage's title names."""
        found = self.passages.get(chunk)
        return found.title_entity if found is not None else None

    def similarity(self, chunk: str, sentence: Sentence) -> float:
        found = self.passages.get(chunk)
        return found.similarity.get(sentence.index, 0.0) if found is not None else 0.0

    def best(self, chunk: str, names: tuple[str, ...] = ()) -> Sentence | None:
        """The sentence of read passage ``chunk`` naming every entity of ``names`` (else
        any one of them, else any) that is closest to the query; earlier on ties."""
        found = self.passages[chunk].sentences if chunk in self.passages else ()
        for need in (len(names), 1, 0) if names else (0,):
            pool = [s for s in found if sum(n in s.entity_ids for n in names) >= need]
            if pool:
                return max(pool, key=lambda s: (self.similarity(chunk, s), -s.index))
        return None

    def quote(self, sentence: Sentence, names: tuple[str, ...] = ()) -> str:
        """The sentence, whitespace collapsed; a long one cut to the part that names
        ``names`` (display names), :data:`QUOTE_CHARS` at most, " … " where cut."""
        text = self.passages[sentence.chunk_id].text[sentence.start : sentence.end].strip()
        return excerpt(" ".join(text.split()), names)

    def near(self, ids: list[str]) -> dict[str, float]:
        """Each entity's cosine to the query (a tie-break between statements of one
        sentence: "born in Warsaw in 1867" answers "which city" with Warsaw)."""
        missing = sorted(set(ids) - self._near.keys())
        if self.qvec is not None and missing and self.reader.size("entities"):
            rows = self.reader.rows("entities", missing)
            known = rows >= 0
            sims = self.reader.similarity("entities", self.qvec, rows[known]).tolist()
            kept = [i for i, k in zip(missing, known.tolist(), strict=True) if k]
            self._near.update(zip(kept, sims, strict=True))
        return {i: self._near[i] for i in ids if i in self._near}


def excerpt(text: str, names: tuple[str, ...], limit: int = QUOTE_CHARS) -> str:
    """``text`` when short; else the window of at most ``limit`` characters holding
    the first place each of ``names`` occurs (or the two ends' surroundings, when
    they lie further apart), cut at spaces, with " … " where text is left out."""
    if len(text) <= limit:
        return text
    lower = text.lower()
    spots = [
        (at, at + len(n))
        for n in (DISAMBIGUATOR.sub("", n).strip().lower() for n in names)
        if n and (at := lower.find(n)) >= 0
    ]
    if not spots:
        return _cut(text, 0, limit)
    lo, hi = min(a for a, _ in spots), max(b for _, b in spots)
    if hi - lo <= limit:
        start = max(0, min(lo - (limit - (hi - lo)) // 2, len(text) - limit))
        return _cut(text, start, start + limit)
    half = limit // 2
    first = _cut(text, max(0, lo - 20), max(0, lo - 20) + half)
    last = _cut(text, hi - half + 20, min(len(text), hi + 20))
    return first + " " + last.removeprefix("… ")


def _cut(text: str, start: int, end: int) -> str:
    """text[start:end] at word boundaries, " … " on each side where text goes on."""
    piece = text[start:end]
    if start > 0:
        piece = piece.split(" ", 1)[-1]
    if end < len(text):
        piece = piece.rsplit(" ", 1)[0]
    return ("… " if start > 0 else "") + piece + (" …" if end < len(text) else "")


def state_endings(
    reading: Reading,
    explained: Mapping[str, Explanation],
    mentioned: Mapping[str, np.ndarray],
    also: Iterable[str] = (),
) -> None:
    """End each path of ``explained`` (passage id -> explanation) whose last edge is
    "X mentioned in P" with the relation P states about X closest to the query,
    in place. ``mentioned``: the entity rows each passage mentions; ``also``: passages
    to read with the ones it reads (where it reads any), for the caller's next step."""
    reader = reading.reader
    ends = {
        cid: ex.edges[-1]["src"]
        for cid, ex in explained.items()
        if ex.edges and ex.edges[-1]["kind"] == "mention" and ex.edges[-1]["dst"] == cid
    }
    if not ends:
        return
    pairs = _stated_pairs(reader, ends, mentioned)
    if not pairs:
        return
    options = _statements(reader, pairs)
    if not options:
        return
    reading.read({*options, *also})
    others = sorted({r.dst if r.src == ends[c] else r.src for c, rs in options.items() for r in rs})
    near = reading.near(others)
    for cid, rels in options.items():
        _end_with_statement(reading, explained[cid], cid, ends[cid], rels, near)


def _stated_pairs(
    reader: GraphReader, ends: Mapping[str, str], mentioned: Mapping[str, np.ndarray]
) -> list[tuple[str, int]]:
    """(passage, relation edge row) for each stated relation of a path's last entity
    (``ends``: passage id -> entity id) with another entity its passage mentions."""
    entities = sorted(set(ends.values()))
    rows = reader.rows("entities", entities)
    adj = reader.adjacency("relations", np.maximum(rows, 0))
    at = {e: i for i, e in enumerate(entities) if rows[i] >= 0}
    pairs: list[tuple[str, int]] = []  # (passage, relation edge row)
    for cid, eid in ends.items():
        if eid not in at:
            continue
        i = at[eid]
        cols = adj.of(i)
        inside = mentioned.get(cid, np.zeros(0, dtype=np.int64))
        # a pair's relation is a stated one where its length is 1 (the store keeps the
        # stated relation of a pair first): co-occurrences are not read
        stated = adj.data[adj.indptr[i] : adj.indptr[i + 1]] == 1.0
        hit = np.flatnonzero(np.isin(cols, inside) & stated)
        assert adj.edge is not None
        pairs += [(cid, int(adj.edge[adj.indptr[i] + j])) for j in hit.tolist()]
    return pairs


def _statements(reader: GraphReader, pairs: list[tuple[str, int]]) -> dict[str, list[Any]]:
    """The relations of ``pairs`` each passage states (its evidence), by passage."""
    rel_ids = reader.relation_ids(np.array([e for _, e in pairs], dtype=np.int64))
    relations = {r.id: r for r in reader.relations(sorted(set(rel_ids)))}
    options: dict[str, list[Any]] = defaultdict(list)
    for (cid, _), rid in zip(pairs, rel_ids, strict=True):
        rel = relations.get(rid)
        if rel is not None and rel.kind == STATED and cid in rel.evidence:
            options[cid].append(rel)
    return options


def _end_with_statement(
    reading: Reading,
    ex: Explanation,
    cid: str,
    eid: str,
    rels: list[Any],
    near: Mapping[str, float],
) -> None:
    """End ``ex`` (its last edge: ``eid`` mentioned in passage ``cid``) with the one of
    ``rels`` closest to the query, unless it is far less about the query than the
    passage's best sentence on ``eid``. ``near``: entities' similarity to the query."""
    on_path = set(ex.path)

    def other(rel: Any, eid: str = eid) -> str:
        return str(rel.dst if rel.src == eid else rel.src)

    def closeness(ends: tuple[str, ...], cid: str = cid) -> float:
        s = reading.best(cid, tuple(n for n in ends if n != reading.title(cid)))
        return reading.similarity(cid, s) if s is not None else 0.0

    rels = [r for r in rels if other(r) not in on_path]
    if not rels:
        return
    best = min(rels, key=lambda r: (-closeness((r.src, r.dst)), -near.get(other(r), 0.0), r.id))
    # a statement far less about the query than the passage's best sentence on the
    # entity says less than that sentence does: the mention stays, quoting it
    if closeness((best.src, best.dst)) < closeness((eid,)) - ENDING_MARGIN:
        return
    ex.edges[-1] = {
        "src": best.src,
        "dst": best.dst,
        "kind": "relation",
        "evidence": cid,
        "predicate": best.predicate,
        "relation": best.id,
    }
    ex.path.insert(len(ex.path) - 1, other(best))


def state_links(reader: GraphReader, explained: Mapping[str, Explanation]) -> None:
    """Where a bridge path reads "X mentioned in P, P names T" and P states a relation
    between X and T, put that relation in place of the two edges (in place)."""
    found: list[tuple[Explanation, int]] = []  # (explanation, index of the mention edge)
    for ex in explained.values():
        for i, (a, b) in enumerate(zip(ex.edges, ex.edges[1:], strict=False)):
            link = a["kind"] == "mention" and b["kind"] == "names" and a["dst"] == b["src"]
            if link and a["src"] != b["dst"]:
                found.append((ex, i))
    if not found:
        return
    heads = sorted({ex.edges[i]["src"] for ex, i in found})
    rows = reader.rows("entities", heads)
    tails = sorted({ex.edges[i + 1]["dst"] for ex, i in found})
    tail_rows = dict(zip(tails, reader.rows("entities", tails).tolist(), strict=True))
    adj = reader.adjacency("relations", np.maximum(rows, 0))
    at = {h: i for i, h in enumerate(heads) if rows[i] >= 0}
    picks: list[tuple[Explanation, int, int]] = []  # (explanation, index, relation edge)
    for ex, i in found:
        head, tail = ex.edges[i]["src"], ex.edges[i + 1]["dst"]
        if head not in at or tail_rows[tail] < 0:
            continue
        j = at[head]
        cols = adj.of(j)
        k = int(np.searchsorted(cols, tail_rows[tail]))
        if k < len(cols) and int(cols[k]) == tail_rows[tail]:
            assert adj.edge is not None
            picks.append((ex, i, int(adj.edge[adj.indptr[j] + k])))
    if not picks:
        return
    rel_ids = reader.relation_ids(np.array([e for _, _, e in picks], dtype=np.int64))
    relations = {r.id: r for r in reader.relations(sorted(set(rel_ids)))}
    for (ex, i, _), rid in sorted(
        zip(picks, rel_ids, strict=True), key=lambda p: -p[0][1]
    ):  # later edges first: the indices of earlier ones stay put
        rel, passage = relations.get(rid), ex.edges[i]["dst"]
        if rel is None or rel.kind != STATED or passage not in rel.evidence:
            continue
        ex.edges[i : i + 2] = [
            {
                "src": rel.src,
                "dst": rel.dst,
                "kind": "relation",
                "evidence": passage,
                "predicate": rel.predicate,
                "relation": rel.id,
            }
        ]
        ex.path.remove(passage)


def quote_edges(reading: Reading, explained: list[Explanation]) -> dict[str, str]:
    """Give every edge of ``explained`` its ``quote`` (in place); returns the texts of
    the evidence passages (chunk id -> text), for a caller that shows them."""
    edges = [e for ex in explained for e in ex.edges if e.get("evidence") and "quote" not in e]
    if not edges:
        return {}
    texts = reading.read(e["evidence"] for e in edges)
    ends = sorted({x for e in edges for x in (e["src"], e["dst"]) if x.startswith("e:")})
    shown = reading.reader.entity_names(ends)
    for e in edges:
        names = (e["src"],) if e["kind"] == "mention" else (e["src"], e["dst"])
        # a passage's own title is often a pronoun ("She was born in Warsaw")
        title = reading.title(e["evidence"])
        names = tuple(n for n in names if n.startswith("e:") and n != title)
        s = reading.best(e["evidence"], names)
        if s is not None:
            pair = (e["src"], e["dst"])
            e["quote"] = reading.quote(s, tuple(shown[x] for x in pair if x in shown))
    return texts
