"""The per-document stages: chunk, extract, and the encoder's pass over the chunks.

What a batch of documents gives here depends on those documents alone: ids are
content hashes, a chunk is embedded with its own file's context, a sentence is read
in its own chunk. So the stages run the same over a whole corpus in one process or a
batch at a time on Ray workers (:mod:`ingest.distributed`), and the batches' parts
join (:meth:`Parsed.join`) into the records one pass would give. The global stages
(resolve, communities, RAPTOR) take the joined result.

The chunk pass reads, beside each chunk's vector, a vector for every sentence that
names something; resolution decides which of those name an entity
(:meth:`Parsed.sentence_vectors`), and only those are kept.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from kgrag.config import Config
from kgrag.encoders import Encoder, load_encoder
from kgrag.ids import sentence_id
from kgrag.store.vectors import dequantize, quantize
from kgrag.types import Chunk, Document, Sentence

from . import embed
from .chunk import make_chunks
from .extract import Extraction, run_extract
from .progress import Stages

#: how a batch's documents are cut: (split into chunks, chunk context kept)
Flags = tuple[bool, bool]


@dataclass(slots=True)
class Parsed:
    """The chunks of some documents, what the parse found in them, and their vectors."""

    chunks: list[Chunk]
    extraction: Extraction
    chunk_vectors: np.ndarray  # row i = chunks[i]
    #: every sentence that names something, chunk by chunk, and its vector as the
    #: version stores sentence vectors, int8 codes and a scale a row (a quarter of the
    #: float32 bytes while the build waits for resolve; coding is idempotent, so the
    #: version gets the same bytes)
    named_ids: list[str]
    named_codes: np.ndarray
    named_scale: np.ndarray

    @classmethod
    def join(cls, parts: Sequence[Parsed], dim: int) -> Parsed:
        """The parts of consecutive batches as one (the order of ``parts`` is kept)."""
        ex = Extraction()
        for p in parts:
            ex.mentions.extend(p.extraction.mentions)
            ex.relations.extend(p.extraction.relations)
            ex.cooc.extend(p.extraction.cooc)
            ex.sentences.extend(p.extraction.sentences)
        return cls(
            [c for p in parts for c in p.chunks],
            ex,
            _stack([p.chunk_vectors for p in parts], dim),
            [i for p in parts for i in p.named_ids],
            _stack([p.named_codes for p in parts], dim, np.int8),
            np.concatenate([np.zeros(0, np.float32), *(p.named_scale for p in parts)]),
        )

    def sentence_vectors(self, sentences: Sequence[Sentence]) -> tuple[list[str], np.ndarray]:
        """The ids and vectors of the resolved ``sentences`` that name an entity, in
        the order the chunk pass read them."""
        keep = {sentence_id(s.chunk_id, s.index) for s in sentences if s.entity_ids}
        rows = [i for i, sid in enumerate(self.named_ids) if sid in keep]
        vectors = dequantize(self.named_codes[rows], self.named_scale[rows])
        return [self.named_ids[i] for i in rows], vectors

    def release_sentences(self) -> None:
        """Let the sentence vectors go (a build has taken the ones it keeps)."""
        self.named_ids = []
        # new empty arrays: a slice would be a view that keeps the whole buffer alive
        self.named_codes = np.zeros((0, self.named_codes.shape[1]), np.int8)
        self.named_scale = np.zeros(0, np.float32)


def _stack(blocks: Sequence[np.ndarray], dim: int, dtype: type = np.float32) -> np.ndarray:
    full = [b for b in blocks if len(b)]
    if not full:
        return np.zeros((0, dim), dtype)
    return np.concatenate(full).astype(dtype, copy=False)


def build_encoder(c: Config) -> Encoder:
    """The encoder a graph is built with, as ``c.models`` names it."""
    m = c.models
    return load_encoder(m.embedding, m.batch_size, m.device, m.runtime)


def parse_documents(
    docs: Sequence[Document],
    c: Config,
    encoder: Encoder,
    *,
    flags: Flags = (True, True),
    stages: Stages | None = None,
    n_process: int | None = None,
) -> Parsed:
    """Chunk ``docs``, parse the chunks and encode them (with their named sentences)."""
    stages = stages or Stages(False)
    with stages.stage("chunk", len(docs)) as tick:
        chunks = make_chunks(
            docs,
            max_tokens=c.chunk.max_tokens,
            overlap_tokens=c.chunk.overlap_tokens,
            split=flags[0],
            contextual=flags[1],
        )
        tick(len(docs))
    with stages.stage("extract", len(chunks)) as tick:
        ex = run_extract(chunks, docs, c, progress=tick, n_process=n_process)
    with stages.stage("embed", len(chunks)) as tick:
        named = [s for s in ex.sentences if s.names]
        vectors, (ids, matrix) = embed.embed_chunks(embed.spanned(encoder, tick), chunks, named)
    return Parsed(chunks, ex, vectors, ids, *quantize(matrix))


class Runner(Protocol):
    """Where a build's work runs: the per-document stages, and the encoder the global
    stages use (this process: :data:`LOCAL`; a Ray cluster: :mod:`ingest.distributed`)."""

    def parse(
        self, docs: Sequence[Document], c: Config, encoder: Encoder, stages: Stages, flags: Flags
    ) -> Parsed:
        """The per-document stages over ``docs``."""
        ...

    def encoder(self, local: Encoder, c: Config) -> Encoder:
        """The encoder for the global stages' texts, given this process's ``local`` one."""
        ...


class _Here:
    """Everything in this process."""

    def parse(
        self, docs: Sequence[Document], c: Config, encoder: Encoder, stages: Stages, flags: Flags
    ) -> Parsed:
        return parse_documents(docs, c, encoder, flags=flags, stages=stages)

    def encoder(self, local: Encoder, c: Config) -> Encoder:
        return local


LOCAL: Runner = _Here()
