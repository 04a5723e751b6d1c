"""Embed stage: vectors for chunks, facts, community reports and tree nodes.

Entity vectors come from the resolve stage, which needs them for synonymy.
A chunk is embedded with its context line ("Title > Section") in front, as
HippoRAG embeds "title\\ntext". A fact is an SVO relation rendered as text.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import numpy as np

from kgrag.types import Chunk, Community, Relation, TreeNode

Encode = Callable[[list[str]], np.ndarray]


def chunk_text(chunk: Chunk) -> str:
    """The text a chunk is embedded as."""
    return f"{chunk.context}\n{chunk.text}" if chunk.context else chunk.text


def fact_text(relation: Relation, names: Mapping[str, str]) -> str:
    """A relation as a short sentence: "Marie Curie bear in Warsaw"."""
    return f"{names[relation.src]} {relation.predicate} {names[relation.dst]}"


def facts(relations: Sequence[Relation]) -> list[Relation]:
    """The relations embedded as facts: the dependency-parse ones."""
    return [r for r in relations if r.kind == "svo"]


def embed_chunks(encode: Encode, chunks: Sequence[Chunk]) -> np.ndarray:
    return encode([chunk_text(c) for c in chunks])


def embed_facts(
    encode: Encode, relations: Sequence[Relation], names: Mapping[str, str]
) -> np.ndarray:
    return encode([fact_text(r, names) for r in relations])


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
