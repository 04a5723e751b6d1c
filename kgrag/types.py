"""Internal records of a knowledge graph.

These are the frozen, slotted dataclasses that the ingest stages produce and
the store persists. Wire shapes (RCP hits, REST bodies) are pydantic models
and live with the server; nothing here knows about them.

Ids are content hashes with a kind prefix (see :mod:`kgrag.ids`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class Document:
    """A source document as loaded: one file, one JSON record, one corpus entry."""

    id: str
    title: str
    text: str
    uri: str = ""
    meta: dict[str, Any] = field(default_factory=dict)
    # (start offset, section path) pairs, sorted by offset; empty for flat text.
    sections: tuple[tuple[int, tuple[str, ...]], ...] = ()


@dataclass(frozen=True, slots=True)
class Chunk:
    """A sentence-aligned window of a document (unit ``chunk``, level 0)."""

    id: str
    doc_id: str
    index: int
    text: str
    context: str  # "Title > Section > Subsection"
    tokens: int
    start: int  # character offsets into the document text
    end: int
    meta: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Sentence:
    """A sentence of a chunk and the entities it mentions (used for reports)."""

    chunk_id: str
    index: int
    start: int  # character offsets into the chunk text
    end: int
    entity_ids: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Entity:
    """A resolved entity (unit ``node``)."""

    id: str
    name: str
    type: str  # spaCy label, CONCEPT, or TITLE
    aliases: tuple[str, ...] = ()
    chunk_ids: tuple[str, ...] = ()  # chunks that mention it, sorted


@dataclass(frozen=True, slots=True)
class Mention:
    """An entity mentioned in a chunk, with how often."""

    entity_id: str
    chunk_id: str
    count: int = 1


@dataclass(frozen=True, slots=True)
class Relation:
    """A directed edge between entities (unit ``triplet``).

    ``kind`` is ``svo`` for dependency-parse relations (predicate = verb lemma,
    possibly with a preposition) and ``cooc`` for sentence co-occurrence.
    Every relation keeps the chunks that state it.
    """

    id: str
    src: str
    predicate: str
    dst: str
    weight: float
    kind: str
    evidence: tuple[str, ...]  # chunk ids, sorted


@dataclass(frozen=True, slots=True)
class Synonym:
    """An undirected synonymy edge between entities with close embeddings."""

    src: str
    dst: str
    score: float


@dataclass(frozen=True, slots=True)
class CommunityReport:
    """An extractive community report."""

    title: str
    key_entities: tuple[str, ...]
    key_relations: tuple[str, ...]  # rendered "A -predicate-> B"
    sentences: tuple[str, ...]

    def text(self) -> str:
        """The report as one passage, for embedding and display."""
        parts = [self.title]
        if self.key_entities:
            parts.append("Entities: " + ", ".join(self.key_entities))
        if self.key_relations:
            parts.append("Relations: " + "; ".join(self.key_relations))
        parts.extend(self.sentences)
        return "\n".join(parts)


@dataclass(frozen=True, slots=True)
class Community:
    """A Leiden community at one level (0 = finest)."""

    id: str
    level: int
    parent: str | None
    children: tuple[str, ...]
    members: tuple[str, ...]  # entity ids, sorted
    report: CommunityReport
    rating: float  # 0..10
    leaves: tuple[str, ...]  # chunk ids, sorted


@dataclass(frozen=True, slots=True)
class TreeNode:
    """A RAPTOR summary node; level 1 and above (level 0 are the chunks)."""

    id: str
    level: int
    children: tuple[str, ...]  # chunk ids at level 1, tree node ids above
    summary: str
    leaves: tuple[str, ...]  # chunk ids, sorted
