"""Embed stage: vectors for chunks, facts, community reports and tree nodes.

Entity vectors come from the resolve stage, which needs them for synonymy.
A chunk is embedded with its context line ("Title > Section") in front, as
HippoRAG embeds "title\\ntext"; a chunk of a collection (a file most of whose
sections are each about their heading) is embedded under its own heading, with the
file's title and enclosing headings after the passage (:func:`collections`). The
sentences that name entities (the ones a community report can quote) get vectors
from the same model pass: with a mean-pooling model, the mean of the chunk's token
vectors inside the sentence. A fact is an SVO relation rendered as text; by default
its vector is composed, not encoded (:func:`composed_blocks`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, Protocol

import numpy as np

from kgrag.encoders.base import Encoder, normalise
from kgrag.ids import sentence_id
from kgrag.store.composed import FactParts
from kgrag.types import Chunk, Community, Relation, TreeNode

Encode = Callable[[list[str]], np.ndarray]


class EncodeSpans(Protocol):
    """Texts and character spans of each -> text vectors and a span matrix per text
    (the text vectors written into ``into``'s matrix at its rows when given)."""

    def __call__(
        self,
        texts: list[str],
        spans: list[list[tuple[int, int]]],
        into: tuple[np.ndarray, Sequence[int]] | None = None,
    ) -> tuple[np.ndarray, list[np.ndarray]]: ...


#: a file is a collection when at least this share of its sections are each about
#: their heading (``meta.subject``)
COLLECTION_SHARE = 0.5


def chunk_text(chunk: Chunk, collection: bool = False) -> str:
    """The text a chunk is embedded as: its context line, then its text; for a chunk
    of a ``collection``, its heading, its text, then the rest of its context line."""
    return _joined(*_context_parts(chunk, collection), chunk.text)


def _joined(head: str, tail: str, text: str) -> str:
    text = f"{head}\n{text}" if head else text
    return f"{text}\n{tail}" if tail else text


def _context_parts(chunk: Chunk, collection: bool) -> tuple[str, str]:
    path = chunk.meta.get("parent_path") or ()
    if not collection or not path or not chunk.context.endswith(path[-1]):
        return chunk.context, ""
    rest = chunk.context[: -len(path[-1])].removesuffix(" > ")
    return path[-1], rest


def collections(chunks: Sequence[Chunk]) -> set[str]:
    """The documents among ``chunks`` that are collections: files most of whose
    sections are each about their heading, as an encyclopedia's or a glossary's
    articles are. The file's title and the headings above a section say where an
    article was filed, not what it is about, so in front of every one of them they
    pull all of a file's articles towards a query that shares their words, and
    blur one article against the next; a manual's sections, most of which are not
    about their bare heading ("xrange" under "set"), keep their path in front.
    docs/benchmarks.md ("Reading documents") has the figures."""
    sections: dict[str, dict[tuple[str, ...], bool]] = {}
    for c in chunks:
        path = tuple(c.meta.get("parent_path") or ())
        if path:
            seen = sections.setdefault(c.doc_id, {})
            seen[path] = seen.get(path, False) or bool(c.meta.get("subject"))
    return {
        doc for doc, seen in sections.items() if sum(seen.values()) >= COLLECTION_SHARE * len(seen)
    }


def fact_text(relation: Relation, names: Mapping[str, str]) -> str:
    """A relation as a short sentence: "Marie Curie bear in Warsaw"."""
    return f"{names[relation.src]} {relation.predicate} {names[relation.dst]}"


def facts(relations: Sequence[Relation]) -> list[Relation]:
    """The relations embedded as facts: the dependency-parse ones."""
    return [r for r in relations if r.kind == "svo"]


class Span(Protocol):
    """A sentence of a chunk: a resolved :class:`Sentence` or an extracted one."""

    @property
    def chunk_id(self) -> str: ...
    @property
    def index(self) -> int: ...
    @property
    def start(self) -> int: ...
    @property
    def end(self) -> int: ...


def embed_chunks(
    encode: EncodeSpans, chunks: Sequence[Chunk], sentences: Sequence[Span]
) -> tuple[np.ndarray, tuple[list[str], np.ndarray]]:
    """Chunk vectors, and the ids and vectors of ``sentences`` (one model pass; each
    sentence read in the context of its chunk; an empty sentence is passed over).
    The callers give the sentences that name an entity."""
    by_chunk: dict[str, list[Span]] = {}
    for s in sentences:
        if s.end > s.start:
            by_chunk.setdefault(s.chunk_id, []).append(s)
    texts: list[str] = []
    spans: list[list[tuple[int, int]]] = []
    ids: list[str] = []
    grouped = collections(chunks)
    for c in chunks:
        head, tail = _context_parts(c, c.doc_id in grouped)
        shift = len(head) + 1 if head else 0
        own = by_chunk.get(c.id, [])
        texts.append(_joined(head, tail, c.text))
        spans.append([(s.start + shift, s.end + shift) for s in own])
        ids.extend(sentence_id(s.chunk_id, s.index) for s in own)
    vectors, span_vectors = encode(texts, spans)
    dim = vectors.shape[1] if vectors.ndim == 2 else 0
    matrix = np.concatenate(span_vectors) if ids else np.zeros((0, dim), np.float32)
    return vectors, (ids, matrix.astype(np.float32, copy=False))


def embed_facts(
    encode: Encode, relations: Sequence[Relation], names: Mapping[str, str]
) -> np.ndarray:
    return encode([fact_text(r, names) for r in relations])


#: facts composed at a time (three float32 temporaries of this many rows)
_COMPOSE_BLOCK = 16384


def composed_blocks(
    encode: Encode,
    tokens: Callable[[list[str]], np.ndarray],
    relations: Sequence[Relation],
    names: Mapping[str, str],
    entity_vectors: tuple[Sequence[str], np.ndarray],
) -> Iterator[np.ndarray]:
    """Fact vectors from parts already embedded, a block of rows at a time (a writer
    stores each block as it comes; :func:`joined` makes them one matrix): the subject's
    and object's entity vectors and the predicate's (one model call per distinct
    predicate), each weighted by its token count, summed and scaled to unit length.

    A mean-pooling encoder makes a text's vector the mean of its token vectors, so
    this is the encoding of "subject predicate object" with each part's tokens seen
    in their own context instead of the whole fact's, with a model call per distinct
    predicate instead of one per fact; ``embed.facts = "encode"`` encodes each fact
    instead.
    """
    if not relations:
        return
    ids, matrix = entity_vectors
    row = {e: i for i, e in enumerate(ids)}
    preds = sorted({r.predicate for r in relations})
    pred_row = {p: i for i, p in enumerate(preds)}
    pred_vecs = encode(preds) * tokens(preds)[:, None]
    used = sorted({e for r in relations for e in (r.src, r.dst)})
    used_row = {e: i for i, e in enumerate(used)}
    ent_vecs = matrix[[row[e] for e in used]] * tokens([names[e] for e in used])[:, None]
    for lo in range(0, len(relations), _COMPOSE_BLOCK):
        block = relations[lo : lo + _COMPOSE_BLOCK]
        src = [used_row[r.src] for r in block]
        dst = [used_row[r.dst] for r in block]
        summed = ent_vecs[src] + ent_vecs[dst] + pred_vecs[[pred_row[r.predicate] for r in block]]
        yield normalise(summed)


def fact_parts(
    encode: Encode,
    tokens: Callable[[list[str]], np.ndarray],
    relations: Sequence[Relation],
    names: Mapping[str, str],
    entity_ids: Sequence[str],
    dim: int,
) -> FactParts:
    """What :func:`composed_blocks` composes each fact from, for a store to keep instead
    of the rows (:mod:`kgrag.store.composed`): each fact's subject and object as rows
    of ``entity_ids`` (the order the entity vectors are stored in), its predicate's row
    among the distinct predicates' vectors (one model call per distinct predicate,
    each times its token count), and the token count of each entity named by a fact
    (0 for the others, which no fact reads)."""
    row = {e: i for i, e in enumerate(entity_ids)}
    preds = sorted({r.predicate for r in relations})
    pred_row = {p: i for i, p in enumerate(preds)}
    predicates = np.zeros((0, dim), np.float32)
    if preds:
        predicates = np.asarray(encode(preds) * tokens(preds)[:, None], np.float32)
    ends = np.array([(row[r.src], row[r.dst]) for r in relations], np.int32).reshape(-1, 2)
    used = np.unique(ends)
    weight = np.zeros(len(entity_ids), np.float32)
    if len(used):
        weight[used] = tokens([names[entity_ids[i]] for i in used.tolist()])
    predicate = np.array([pred_row[r.predicate] for r in relations], np.int32)
    return FactParts(ends, predicate, predicates, weight)


def fact_blocks(
    mode: str,
    encode: Encode,
    tokens: Callable[[list[str]], np.ndarray],
    relations: Sequence[Relation],
    names: Mapping[str, str],
    entity_vectors: tuple[Sequence[str], np.ndarray],
) -> Iterator[np.ndarray]:
    """Fact vectors as the config's ``embed.facts`` asks ("compose" or "encode"), in
    consecutive blocks of rows (:func:`joined` makes them one matrix)."""
    if mode != "encode":
        yield from composed_blocks(encode, tokens, relations, names, entity_vectors)
    elif relations:
        yield embed_facts(encode, relations, names)


def joined(blocks: Iterable[np.ndarray], dim: int) -> np.ndarray:
    """Blocks of rows as one matrix (``dim`` columns when there are none)."""
    parts = list(blocks)
    return np.concatenate(parts) if parts else np.zeros((0, dim), np.float32)


def report_text(community: Community, relations: int = 3) -> str:
    """What a community is embedded as: its title, key entities and strongest relations.

    The representative sentences are left out: they are passages already
    embedded as chunks, and they would make each report several times longer
    to encode.
    """
    r = community.report
    parts = [r.title, ", ".join(r.key_entities), "; ".join(r.key_relations[:relations])]
    return "\n".join(p for p in parts if p)


def embed_communities(encode: Encode, communities: Sequence[Community]) -> np.ndarray:
    return encode([report_text(c) for c in communities])


def embed_tree(encode: Encode, nodes: Sequence[TreeNode]) -> np.ndarray:
    return encode([n.summary for n in nodes])


_ENCODE_BATCH = 256


def batched(encoder: Encoder, update: Any) -> Any:
    """An encode function that embeds each distinct text once, longest first
    (:func:`spanned` without spans), into the rows of the first time each text
    comes and copies those rows to its repeats: one matrix of the texts' size, not a
    matrix of the distinct texts and then a reordered copy (1 GB at 60k passages'
    entity names); the progress bar advances per input text."""

    def encode(texts: list[str]) -> np.ndarray:
        first: dict[str, int] = {}
        for i, t in enumerate(texts):
            first.setdefault(t, i)
        out = np.zeros((len(texts), encoder.dim), np.float32)
        if not first:
            return out
        scale = len(texts) / len(first)
        encode_spans = spanned(encoder, lambda n: update(round(n * scale)))
        encode_spans(list(first), [[] for _ in first], into=(out, list(first.values())))
        repeats = [i for i, t in enumerate(texts) if first[t] != i]
        if repeats:
            out[repeats] = out[[first[texts[i]] for i in repeats]]
        return out

    return encode


def spanned(encoder: Encoder, update: Any) -> EncodeSpans:
    """A span encode function (:meth:`Encoder.encode_spans`) over batches of texts
    sorted longest first (padding stays low in every batch); the progress bar advances
    per text. With ``into`` (a matrix and a row for each text), the text vectors are
    written there instead of into a new matrix."""

    def encode(
        texts: list[str],
        spans: list[list[tuple[int, int]]],
        into: tuple[np.ndarray, Sequence[int]] | None = None,
    ) -> tuple[np.ndarray, list[np.ndarray]]:
        order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
        out, where = into or (np.zeros((len(texts), encoder.dim), np.float32), None)
        span_out: list[np.ndarray] = [np.zeros((0, encoder.dim), np.float32)] * len(texts)
        step = getattr(encoder, "texts_per_call", _ENCODE_BATCH)  # a pool takes more
        for i in range(0, len(order), step):
            rows = order[i : i + step]
            vecs, span_vecs = encoder.encode_spans(
                [texts[r] for r in rows], [spans[r] for r in rows]
            )
            out[rows if where is None else [where[r] for r in rows]] = vecs
            for r, matrix in zip(rows, span_vecs, strict=True):
                span_out[r] = matrix
            update(len(rows))
        return out, span_out

    return encode
