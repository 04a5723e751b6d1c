"""SQLite schema of one graph version, and record <-> row conversion."""

from __future__ import annotations

import json
from typing import Any

from ..types import (
    Chunk,
    Community,
    CommunityReport,
    Document,
    Entity,
    Mention,
    Relation,
    Sentence,
    Synonym,
    TreeNode,
)
from .packed import (
    COMMUNITY_LISTS,
    community_values,
    dumps,
    pack_id,
    pack_ids,
    relation_text,
    relation_values,
    unpack_id,
    unpack_ids,
)

SCHEMA_VERSION = 1

#: sparse-searchable kinds -> (FTS5 table, content table, key column of the content table)
FTS = {
    "chunks": ("chunks_fts", "chunks", "rid"),
    "communities": ("communities_fts", "communities", "rowid"),
    "tree_nodes": ("tree_nodes_fts", "tree_nodes", "rowid"),
}

DDL = """
CREATE TABLE documents (id TEXT PRIMARY KEY, title TEXT, uri TEXT, meta TEXT, text TEXT,
                        sections TEXT);
CREATE TABLE chunks (rid INTEGER PRIMARY KEY, id TEXT UNIQUE, doc_id TEXT, idx INTEGER,
                     text TEXT, context TEXT, tokens INTEGER, start INTEGER, "end" INTEGER,
                     meta TEXT);
CREATE VIRTUAL TABLE chunks_fts USING fts5(text, context, content='chunks', content_rowid='rid',
                                           tokenize='porter unicode61 remove_diacritics 2');
CREATE TABLE sentences (chunk_id TEXT, idx INTEGER, start INTEGER, "end" INTEGER,
                        entity_ids BLOB, PRIMARY KEY (chunk_id, idx));
CREATE TABLE entities (id TEXT PRIMARY KEY, name TEXT, type TEXT, aliases TEXT) WITHOUT ROWID;
CREATE TABLE mentions (entity_id BLOB, chunk_id BLOB, count INTEGER,
                       PRIMARY KEY (entity_id, chunk_id)) WITHOUT ROWID;
CREATE TABLE relations (id BLOB PRIMARY KEY, src BLOB, predicate TEXT, dst BLOB, weight REAL,
                        kind TEXT, evidence BLOB) WITHOUT ROWID;
CREATE TABLE synonyms (src BLOB, dst BLOB, score REAL, PRIMARY KEY (src, dst)) WITHOUT ROWID;
CREATE TABLE communities (id TEXT PRIMARY KEY, level INTEGER, parent TEXT, children BLOB,
                          members BLOB, report TEXT, rating REAL, leaves BLOB);
CREATE TABLE tree_nodes (id TEXT PRIMARY KEY, level INTEGER, children TEXT, summary TEXT,
                         leaves TEXT);
CREATE VIRTUAL TABLE communities_fts USING fts5(report, content='communities',
                                                content_rowid='rowid',
                                                tokenize='porter unicode61 remove_diacritics 2');
CREATE VIRTUAL TABLE tree_nodes_fts USING fts5(summary, content='tree_nodes', content_rowid='rowid',
                                               tokenize='porter unicode61 remove_diacritics 2');
"""
#: a version written before vector ids were kept beside the vectors (``vectors/<kind>.ids.npy``)
#: also has ``vector_ids (kind TEXT, row INTEGER, id TEXT, PRIMARY KEY (kind, row))``

#: secondary indexes, made when a version is committed: sorting the finished tables
#: once is faster than keeping the indexes sorted under every insert
INDEXES = """
CREATE INDEX chunks_doc ON chunks(doc_id, idx);
CREATE INDEX mentions_chunk ON mentions(chunk_id);
CREATE INDEX relations_src ON relations(src) WHERE kind = 'svo';
CREATE INDEX relations_dst ON relations(dst) WHERE kind = 'svo';
CREATE INDEX communities_level ON communities(level);
CREATE INDEX tree_nodes_level ON tree_nodes(level);
"""


def _t(value: str) -> tuple[Any, ...]:
    return tuple(json.loads(value))


# kind -> (insert SQL, record -> row)
INSERTS: dict[str, tuple[str, Any]] = {
    "documents": (
        "INSERT INTO documents VALUES (?,?,?,?,?,?)",
        lambda d: (d.id, d.title, d.uri, dumps(d.meta), d.text, dumps(d.sections)),
    ),
    "chunks": (
        'INSERT INTO chunks (id, doc_id, idx, text, context, tokens, start, "end", meta) '
        "VALUES (?,?,?,?,?,?,?,?,?)",
        lambda c: (
            c.id,
            c.doc_id,
            c.index,
            c.text,
            c.context,
            c.tokens,
            c.start,
            c.end,
            dumps(c.meta),
        ),
    ),
    "sentences": (
        "INSERT INTO sentences VALUES (?,?,?,?,?)",
        lambda s: (s.chunk_id, s.index, s.start, s.end, pack_ids(s.entity_ids)),
    ),
    "entities": (
        "INSERT INTO entities VALUES (?,?,?,?)",
        lambda e: (e.id, e.name, e.type, dumps(e.aliases)),
    ),
    "mentions": (
        "INSERT INTO mentions VALUES (?,?,?)",
        lambda m: (pack_id(m.entity_id), pack_id(m.chunk_id), m.count),  # kgrag.store.packed
    ),
    "relations": (
        "INSERT INTO relations VALUES (?,?,?,?,?,?,?)",
        relation_values,  # ids packed (kgrag.store.packed)
    ),
    "synonyms": (
        "INSERT INTO synonyms VALUES (?,?,?)",
        lambda s: (pack_id(s.src), pack_id(s.dst), s.score),
    ),
    "communities": (
        "INSERT INTO communities VALUES (?,?,?,?,?,?,?,?)",
        community_values,  # children, members and leaves packed (kgrag.store.packed)
    ),
    "tree_nodes": (
        "INSERT INTO tree_nodes VALUES (?,?,?,?,?)",
        lambda t: (t.id, t.level, dumps(t.children), t.summary, dumps(t.leaves)),
    ),
}


def document(row: Any) -> Document:
    sections = tuple((int(off), tuple(path)) for off, path in json.loads(row[5]))
    return Document(row[0], row[1], row[4], row[2], json.loads(row[3]), sections)


CHUNK_COLUMNS = 'id, doc_id, idx, text, context, tokens, start, "end", meta'


def chunk(row: Any) -> Chunk:
    return Chunk(row[0], row[1], row[2], row[3], row[4], row[5], row[6], row[7], json.loads(row[8]))


def sentence(row: Any) -> Sentence:
    """A sentence from its stored row, its entity ids packed or (a version before packed
    ids) JSON text."""
    return Sentence(row[0], row[1], row[2], row[3], _ids(row[4]))


def entity(row: Any, chunk_ids: tuple[str, ...]) -> Entity:
    return Entity(row[0], row[1], row[2], _t(row[3]), chunk_ids)


def mention(row: Any) -> Mention:
    """A mention from its stored row, its ids packed or (a version before packed ids) text."""
    return Mention(unpack_id(row[0]), unpack_id(row[1]), row[2])


def relation(row: Any) -> Relation:
    """A relation from its stored row, packed or (a version before packed ids, a Neo4j
    record) text."""
    r = relation_text(row)
    return Relation(r[0], r[1], r[2], r[3], r[4], r[5], _t(r[6]))


def synonym(row: Any) -> Synonym:
    return Synonym(unpack_id(row[0]), unpack_id(row[1]), row[2])


def community(row: Any) -> Community:
    """A community from its stored row, its id lists packed or (a version before packed
    ids, a Neo4j record) JSON text."""
    title, ents, rels, sents = json.loads(row[5])
    report = CommunityReport(title, tuple(ents), tuple(rels), tuple(sents))
    children, members, leaves = (_ids(row[i]) for i in COMMUNITY_LISTS)
    return Community(row[0], row[1], row[2], children, members, report, row[6], leaves)


def _ids(value: Any) -> tuple[str, ...]:
    return unpack_ids(value) if isinstance(value, bytes) else _t(value)


def tree_node(row: Any) -> TreeNode:
    return TreeNode(row[0], row[1], _t(row[2]), row[3], _t(row[4]))
