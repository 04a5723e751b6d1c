"""Content-hash ids with a kind prefix.

The same content always gets the same id, so re-ingesting a file changes
nothing and two builds of one corpus can be diffed.
"""

from __future__ import annotations

import hashlib

PREFIXES = {
    "document": "d:",
    "chunk": "c:",
    "entity": "e:",
    "relation": "r:",
    "community": "m:",
    "tree": "t:",
    "path": "p:",
    "subgraph": "s:",
    "page": "pg:",
}


def content_id(kind: str, *parts: str, size: int = 16) -> str:
    """Hash ``parts`` (joined unambiguously) into an id of ``kind``."""
    h = hashlib.blake2b(digest_size=size)
    for part in parts:
        data = part.encode("utf-8")
        h.update(len(data).to_bytes(8, "little"))
        h.update(data)
    return PREFIXES[kind] + h.hexdigest()


def kind_of(id_: str) -> str:
    """The kind named by an id's prefix; raises ValueError for an unknown one."""
    for kind, prefix in PREFIXES.items():
        if id_.startswith(prefix):
            return kind
    raise ValueError(f"not a kgrag id: {id_!r}")


def sentence_id(chunk_id: str, index: int) -> str:
    """The id of sentence ``index`` of a chunk (its vector is stored under it)."""
    return f"{chunk_id}#{index}"
