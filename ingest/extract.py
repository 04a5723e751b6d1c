"""Extract stage: entity mentions, SVO relations and co-occurrences per chunk.

spaCy gives named entities and noun chunks (kept as CONCEPT entities); the
dependency parse gives subject-verb-object relations whose predicate is the
verb lemma, extended by a preposition ("bear in") or by the object noun and
its preposition ("be son of"). Personal pronouns in subject or object place
stand for the chunk's title entity, which is also recorded as mentioned by
every chunk of its document: Wikipedia-style passages are about their title.
Entities in one sentence are linked by weighted co-occurrence.

Names here are surface strings; :mod:`ingest.resolve` turns them into ids.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kgrag.config import Config
from kgrag.text.keys import COOC, DISAMBIGUATOR, subject_title
from kgrag.text.nlp import load_spacy
from kgrag.types import Chunk, Document

TITLE_LABEL = "TITLE"
CONCEPT_LABEL = "CONCEPT"
_PRONOUNS = frozenset({"he", "she", "it", "they", "him", "her", "them"})
_SUBJ = frozenset({"nsubj", "nsubjpass", "csubj"})
_OBJ = frozenset({"dobj", "attr", "oprd", "dative", "acomp"})
_CONCEPT_POS = frozenset({"ADJ", "NOUN", "PROPN"})
_STRIP_HEAD = frozenset({"DET", "PRON", "PUNCT", "CCONJ", "PART"})


@dataclass(frozen=True, slots=True)
class RawMention:
    chunk_id: str
    sentence: int  # -1 for the title mention, which comes from the chunk context
    name: str
    label: str


@dataclass(frozen=True, slots=True)
class RawRelation:
    chunk_id: str
    src: str
    predicate: str
    dst: str
    kind: str  # svo | cooc


@dataclass(frozen=True, slots=True)
class RawSentence:
    chunk_id: str
    index: int
    start: int
    end: int
    names: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class RawCooc:
    """The co-occurrences one sentence states, held as its names: every pair of
    ``linked`` names, and ``title`` with each of ``with_title``. A sentence naming
    many things states many pairs; at 60k passages one record each for them took
    ~0.4 GB, this takes a tenth of that."""

    chunk_id: str
    linked: tuple[str, ...]
    title: str
    with_title: tuple[str, ...]

    def relations(self) -> Iterator[RawRelation]:
        linked = self.linked
        for i, a in enumerate(linked):
            for b in linked[i + 1 :]:
                yield RawRelation(self.chunk_id, a, COOC, b, "cooc")
        for name in self.with_title:
            yield RawRelation(self.chunk_id, self.title, COOC, name, "cooc")


@dataclass(slots=True)
class Extraction:
    """Everything the parse found, keyed by surface names: the stated relations in
    ``relations``, the co-occurrences of most sentences in ``cooc``
    (:meth:`every_relation` reads both)."""

    mentions: list[RawMention] = field(default_factory=list)
    relations: list[RawRelation] = field(default_factory=list)
    sentences: list[RawSentence] = field(default_factory=list)
    cooc: list[RawCooc] = field(default_factory=list)

    def every_relation(self) -> Iterator[RawRelation]:
        """The relations, then the co-occurrences, one raw relation each."""
        yield from self.relations
        for group in self.cooc:
            yield from group.relations()


def extract(
    chunks: Sequence[Chunk],
    titles: Mapping[str, str],
    nlp: Any,
    *,
    skip_labels: Sequence[str],
    concepts: bool,
    max_cooc_entities: int,
    n_process: int,
    batch_size: int,
    progress: Callable[[int], None] | None = None,
    tables: Mapping[str, TableRows] | None = None,
) -> Extraction:
    """Parse every chunk and collect mentions, relations and sentences; a table chunk
    (``tables``: its rows by chunk id) states its facts by row instead."""
    out = Extraction()
    skip = frozenset(skip_labels)
    tables = tables or {}
    parsed = [c for c in chunks if c.id not in tables]
    n_process = n_process if len(parsed) >= 200 else 1  # worker start-up costs more than it saves
    docs = iter(nlp.pipe((c.text for c in parsed), batch_size=batch_size, n_process=n_process))
    for chunk in chunks:
        title = subject_title(titles.get(chunk.doc_id, ""), chunk.meta).strip()
        if chunk.id in tables:
            _extract_table(out, chunk, tables[chunk.id], title)
        else:
            _extract_doc(out, chunk.id, next(docs), title, skip, concepts, max_cooc_entities)
        if progress:
            progress(1)
    return out


@dataclass(frozen=True, slots=True)
class TableRows:
    """The rows a table chunk holds, under its column headers (its last lines are
    these rows, one per line, in order)."""

    header: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]


def table_rows(chunks: Sequence[Chunk], docs: Sequence[Document]) -> dict[str, TableRows]:
    """The rows of every table chunk, from its document's layout."""
    layouts = {d.id: d.meta.get("layout") or {} for d in docs}
    out: dict[str, TableRows] = {}
    for c in chunks:
        where = c.meta.get("table")
        if c.meta.get("chunk_type") != "table" or not isinstance(where, dict):
            continue
        tables = layouts.get(c.doc_id, {}).get("tables") or []
        index, (lo, hi) = int(where["index"]), where["rows"]
        if 0 <= index < len(tables):
            table = tables[index]
            rows = tuple(tuple(r) for r in table["rows"][int(lo) - 1 : int(hi)])
            out[c.id] = TableRows(tuple(table["header"]), rows)
    return out


def _key_column(rows: Sequence[Sequence[str]]) -> int:
    """The column that names each row's entity: the first whose cells mostly hold words."""
    width = max((len(r) for r in rows), default=0)
    for col in range(width):
        cells = [r[col] for r in rows if col < len(r) and r[col]]
        if cells and sum(any(ch.isalpha() for ch in v) for v in cells) * 2 >= len(cells):
            return col
    return 0


def _extract_table(out: Extraction, chunk: Chunk, table: TableRows, title: str) -> None:
    """Each row a sentence stating ``row entity -header-> cell`` for its other cells."""
    if title:
        out.mentions.append(RawMention(chunk.id, -1, title, TITLE_LABEL))
    lines = chunk.text.split("\n")
    first = len(lines) - len(table.rows)
    offset = sum(len(line) + 1 for line in lines[:first])
    key = _key_column(table.rows)
    for i, row in enumerate(table.rows):
        line = lines[first + i] if first + i < len(lines) else ""
        start, offset = offset, offset + len(line) + 1
        name = row[key].strip() if key < len(row) else ""
        names = [name] if name else []
        for col, value in enumerate(row):
            value = value.strip()
            if col == key or not name or not value or col >= len(table.header):
                continue
            if value not in names:
                names.append(value)
            out.relations.append(
                RawRelation(chunk.id, name, table.header[col].lower(), value, "svo")
            )
        for n in names:
            out.mentions.append(RawMention(chunk.id, i, n, CONCEPT_LABEL))
        out.sentences.append(RawSentence(chunk.id, i, start, start + len(line), tuple(names)))
        if title and name and name != title:
            out.relations.append(RawRelation(chunk.id, title, COOC, name, "cooc"))


def _spans(
    doc: Any, skip: frozenset[str], concepts: bool, title: str = ""
) -> dict[int, tuple[str, str]]:
    """Token index -> (name, label) for every token inside a kept entity or concept.
    Where the text names its own title ("Battle in Seattle is a film ...", for the
    title "Battle in Seattle"; a trailing "(film)" is not looked for), those tokens
    are the title's, whatever the named-entity tagger made of them (its label kept
    where it found the same span)."""
    owner: dict[int, tuple[str, str]] = {}
    named = DISAMBIGUATOR.sub("", title).strip()
    if len(named) > 2:
        for found in re.finditer(rf"(?<!\w){re.escape(named)}(?!\w)", doc.text):
            span = doc.char_span(found.start(), found.end(), alignment_mode="expand")
            if span is None or any(  # inside a longer name ("University of Paris")
                e.start <= span.start and span.end <= e.end and len(e) > len(span) for e in doc.ents
            ):
                continue
            same = [e.label_ for e in doc.ents if (e.start, e.end) == (span.start, span.end)]
            label = same[0] if same and same[0] not in skip else TITLE_LABEL
            for tok in span:
                owner[tok.i] = (title, label)
    for ent in doc.ents:
        if ent.label_ in skip:
            continue
        name = _clean(ent)
        if name:
            for tok in ent:
                owner.setdefault(tok.i, (name, ent.label_))
    if concepts:
        for nc in doc.noun_chunks:
            if nc.root.i in owner or nc.root.pos_ == "PRON":
                continue
            toks = list(nc)
            owned = [k for k, t in enumerate(toks) if t.i in owner]
            toks = toks[owned[-1] + 1 :] if owned else toks  # "a Polish film director"
            name = _concept(toks)
            if name:
                for tok in toks:
                    owner[tok.i] = (name, CONCEPT_LABEL)
    return owner


def _clean(span: Any) -> str:
    toks = list(span)
    while toks and (toks[0].pos_ in _STRIP_HEAD or toks[0].lower_ == "the"):
        toks = toks[1:]
    while toks and toks[-1].pos_ in ("PUNCT", "PART"):
        toks = toks[:-1]
    text = "".join(t.text_with_ws for t in toks).strip()
    return text if any(ch.isalnum() for ch in text) else ""


def _concept(span: Sequence[Any]) -> str:
    toks = [t for t in span if t.pos_ in _CONCEPT_POS and not t.is_stop and not t.like_num]
    if not toks or len(toks) > 6 or not any(t.pos_ in ("NOUN", "PROPN") for t in toks):
        return ""
    if all(t.pos_ == "PROPN" for t in toks):  # a name NER missed: keep it as written
        return " ".join(t.text for t in toks)
    words = [t.lower_ for t in toks[:-1]] + [toks[-1].lemma_.lower()]
    text = " ".join(words)
    return text if len(text) > 2 and any(ch.isalpha() for ch in text) else ""


def _extract_doc(
    out: Extraction,
    chunk_id: str,
    doc: Any,
    title: str,
    skip: frozenset[str],
    concepts: bool,
    max_cooc: int,
) -> None:
    owner = _spans(doc, skip, concepts, title)
    if title:
        out.mentions.append(RawMention(chunk_id, -1, title, TITLE_LABEL))
    for s_idx, sent in enumerate(doc.sents):
        found: dict[str, str] = {}
        for tok in sent:
            hit = owner.get(tok.i)
            if hit:
                found.setdefault(*hit)
        for name, label in found.items():
            out.mentions.append(RawMention(chunk_id, s_idx, name, label))
        names = list(found)
        out.sentences.append(
            RawSentence(chunk_id, s_idx, sent.start_char, sent.end_char, tuple(names))
        )
        for src, pred, dst in _svo(sent, owner, title):
            if src != dst:
                out.relations.append(RawRelation(chunk_id, src, pred, dst, "svo"))
                for name in (src, dst):
                    if name not in names:  # a pronoun stood for the title
                        names.append(name)
        linked = names[:max_cooc]
        with_title = (
            tuple(n for n in names if n != title and not (title in linked and n in linked))
            if title
            else ()
        )
        if len(linked) > 1 or with_title:
            out.cooc.append(RawCooc(chunk_id, tuple(linked), title, with_title))


def _name(tok: Any, owner: Mapping[int, tuple[str, str]], title: str) -> str:
    hit = owner.get(tok.i)
    if hit:
        return hit[0]
    if title and tok.lower_ in _PRONOUNS:
        return title
    return ""


def _with_conj(tok: Any) -> Iterator[Any]:
    yield tok
    yield from tok.conjuncts


def _subject_name(tok: Any, owner: Mapping[int, tuple[str, str]], title: str) -> str:
    """A subject's entity; "The city" / "This film" in subject place stands for the title."""
    hit = owner.get(tok.i)
    if hit and hit[1] == CONCEPT_LABEL and title:
        det = [c for c in tok.children if c.dep_ == "det"]
        if det and det[0].lower_ in ("the", "this") and hit[0] == tok.lemma_.lower():
            return title
    return _name(tok, owner, title)


def _subjects(verb: Any) -> list[Any]:
    subs = [c for c in verb.children if c.dep_ in _SUBJ]
    if not subs and verb.dep_ == "conj" and verb.head.pos_ in ("VERB", "AUX"):
        subs = _subjects(verb.head)
    if not subs and verb.dep_ == "relcl":
        subs = [verb.head]
    return [s for sub in subs for s in _with_conj(sub)]


def _svo(
    sent: Any, owner: Mapping[int, tuple[str, str]], title: str
) -> Iterator[tuple[str, str, str]]:
    """(subject, predicate, object) names from the dependency parse of one sentence."""
    for verb in sent:
        if verb.pos_ not in ("VERB", "AUX") or verb.dep_ in ("aux", "auxpass"):
            continue
        lemma = verb.lemma_.lower()
        subjects = [n for n in (_subject_name(s, owner, title) for s in _subjects(verb)) if n]
        passive = any(c.dep_ == "nsubjpass" for c in verb.children)
        objects: list[tuple[str, str]] = []
        described = _described(verb, owner, title)
        if described is not None:  # "a film directed by X"
            subjects, passive = ([described] if described else []), True
        for child in verb.children:
            if child.dep_ in _OBJ:
                for obj in _with_conj(child):
                    objects += _object_terms(lemma, obj, owner, title)
            elif child.dep_ in ("prep", "agent"):
                for pobj in (c for c in child.children if c.dep_ == "pobj"):
                    for obj in _with_conj(pobj):
                        if child.dep_ == "agent" and passive:
                            name = _name(obj, owner, title)
                            objects += [(f"{lemma} by", name)] if name else []
                        else:  # "lie on the island of Zealand" -> "lie on island of"
                            objects += _object_terms(f"{lemma} {child.lower_}", obj, owner, title)
        for subj in subjects:
            for pred, obj in objects:
                yield subj, pred, obj
    yield from _appositions(sent, owner, title)


def _described(verb: Any, owner: Mapping[int, tuple[str, str]], title: str) -> str | None:
    """For a participle that describes a noun ("a film directed by X", also "written
    and directed by X"), the name that noun stands for: the subject of the copula
    when the noun is its complement ("Y is a film directed by X": Y), else the noun's
    own entity ("" when it has none). None for a verb that is no such participle."""
    while verb.dep_ == "conj" and verb.head.pos_ == "VERB":
        verb = verb.head
    if verb.dep_ != "acl" or verb.tag_ != "VBN":
        return None
    noun = verb.head
    if noun.dep_ == "attr" and noun.head.lemma_ == "be":
        for subject in (c for c in noun.head.children if c.dep_ in _SUBJ):
            name = _subject_name(subject, owner, title)
            if name:
                return name
    return _name(noun, owner, title)


def _object_terms(
    lemma: str, obj: Any, owner: Mapping[int, tuple[str, str]], title: str
) -> list[tuple[str, str]]:
    """The object itself, and "verb noun prep" objects such as "be son of X"."""
    out: list[tuple[str, str]] = []
    name = _name(obj, owner, title)
    if name:
        out.append((lemma, name))
    for prep in (c for c in obj.children if c.dep_ == "prep"):
        for pobj in (c for c in prep.children if c.dep_ == "pobj"):
            for target in _with_conj(pobj):
                tname = _name(target, owner, title)
                if tname and tname != name:  # not inside one entity ("Prize in Physics")
                    out.append((f"{lemma} {obj.lemma_.lower()} {prep.lower_}", tname))
    return out


def _appositions(
    sent: Any, owner: Mapping[int, tuple[str, str]], title: str
) -> Iterator[tuple[str, str, str]]:
    for tok in sent:
        if tok.dep_ == "appos":
            head = _name(tok.head, owner, title)
            if head:
                for pred, obj in _object_terms("be", tok, owner, title):
                    yield head, pred, obj


def run_extract(
    chunks: Sequence[Chunk],
    docs: Sequence[Document],
    c: Config,
    progress: Callable[[int], None] | None = None,
    n_process: int | None = None,
) -> Extraction:
    """The extract stage with its settings unpacked from ``c`` (``n_process``, when
    given, in place of the config's: a Ray worker parses in its own process)."""
    return extract(
        chunks,
        {d.id: d.title for d in docs},
        load_spacy(c.models.spacy),
        skip_labels=c.extract.skip_labels,
        concepts=c.extract.concepts,
        max_cooc_entities=c.extract.max_cooc_entities,
        n_process=c.extract.n_process if n_process is None else n_process,
        batch_size=c.extract.batch_size,
        progress=progress,
        tables=table_rows(chunks, docs),
    )
