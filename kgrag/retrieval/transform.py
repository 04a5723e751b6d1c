"""Query transformations without an LLM: rewrite, HyDE, multi-query, decompose, step-back.

Every method reads the query's spaCy parse (named entities, noun chunks, the dependency
tree); HyDE also reads short facts the knowledge graph holds about the entities the
query names. Nothing is random: the same query, pipeline and graph give the same output.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..errors import InvalidParams, Unsupported
from .decompose import decompose
from .spans import _WH_TAGS, _dedupe, find_entities

if TYPE_CHECKING:
    from ..store import GraphReader

#: given surface names of entities found in the query, short fact sentences, best first
FactLookup = Callable[[Sequence[str]], list[str]]

METHODS: tuple[str, ...] = ("rewrite", "hyde", "multi-query", "decompose", "step-back")


HYDE_FACTS = 5
_TYPE_WORDS = {
    "PERSON": "a person", "ORG": "an organization", "GPE": "a place", "LOC": "a place",
    "FAC": "a building", "NORP": "a group", "WORK_OF_ART": "a work", "EVENT": "an event",
    "PRODUCT": "a product", "LAW": "a law", "LANGUAGE": "a language", "QUOTE": "a title",
}  # fmt: skip
_KEEP_POS = frozenset({"NOUN", "PROPN", "VERB", "ADJ", "NUM"})


@dataclass(frozen=True, slots=True)
class Transformed:
    """A transformed query: ``queries[0]`` is the main one; ``hypothetical`` is HyDE's passage."""

    queries: tuple[str, ...]
    hypothetical: str | None = None


def transform(query: str, method: str, *, nlp: Any, facts: FactLookup, n: int = 3) -> Transformed:
    """Apply ``method`` (one of :data:`METHODS`) to ``query``; at most ``n`` queries come back."""
    if method not in METHODS:
        raise Unsupported(
            f"unknown query transform {method!r}; supported: {', '.join(METHODS)}",
            option="rewrite",
        )
    if not isinstance(query, str) or not query.strip():
        raise InvalidParams("query must be a non-empty string", field="query")
    if n < 1:
        raise InvalidParams(f"n must be at least 1, got {n}", field="n")
    query = " ".join(query.split())
    doc = nlp(query)
    if method == "rewrite":
        return Transformed((rewrite(doc),))
    if method == "hyde":
        return _hyde(doc, facts)
    if method == "multi-query":
        return Transformed(_multi_query(doc, nlp, n))
    if method == "decompose":
        return Transformed(tuple(decompose(query, nlp, n)))
    return Transformed(_step_back(doc, n))


def rewrite(doc: Any) -> str:
    """Keywords of ``doc``: entities as written, content words; never empty."""
    ents = find_entities(doc)
    words: list[str] = []
    for tok in doc:
        ent = next(((s, e) for s, e, _ in ents if s <= tok.idx < e), None)
        if ent is not None:
            if tok.idx == ent[0] or not words or words[-1] != doc.text[ent[0] : ent[1]]:
                words.append(doc.text[ent[0] : ent[1]])
        elif tok.pos_ == "NUM" or (
            tok.pos_ in _KEEP_POS and not tok.is_stop and tok.tag_ not in _WH_TAGS
        ):
            words.append(_lemma(tok) if tok.pos_ == "VERB" else tok.text)
    return " ".join(_dedupe(words)) or doc.text.strip()


def _lemma(tok: Any) -> str:
    """The lemma, except 'born', whose lemma 'bear' would mislead retrieval."""
    return "born" if tok.lower_ == "born" else tok.lemma_


# --- hyde, multi-query, step-back --------------------------------------------------------


def _hyde(doc: Any, facts: FactLookup) -> Transformed:
    """A passage of graph facts about the query's entities, to embed instead of the query."""
    keywords = rewrite(doc)
    names = _dedupe(doc.text[s:e] for s, e, _ in find_entities(doc))
    found = _dedupe(facts(names))[:HYDE_FACTS] if names else []
    if found:
        text = " ".join(_as_sentence(s) for s in [", ".join(names), *found])
    else:
        text = " ".join(_as_sentence(s) for s in [keywords, ", ".join(names)] if s)
    return Transformed((keywords,), hypothetical=text)


def _as_sentence(text: str) -> str:
    text = text.strip()
    text = text[:1].upper() + text[1:]
    return text if text.endswith((".", "!", "?")) else text + "."


def _multi_query(doc: Any, nlp: Any, n: int) -> tuple[str, ...]:
    """The query, its rewrite, one query per entity, then sub-questions; at most ``n``."""
    focus = _focus_noun(doc)
    variants = [doc.text, rewrite(doc)]
    for s, e, _ in find_entities(doc):
        span = doc.char_span(s, e, alignment_mode="expand")
        variants.append(" ".join(_dedupe([doc.text[s:e], _governor(span), focus])))
    if len(_dedupe(variants)) < n:
        variants += decompose(doc.text, nlp, n)
    return tuple(_dedupe(variants)[:n])


def _focus_noun(doc: Any) -> str:
    """The noun the question asks for ('what country' -> 'country'), else ''."""
    for tok in doc:
        if tok.tag_ in ("WDT", "WP") and tok.dep_ == "det" and tok.head.pos_ == "NOUN":
            return tok.head.text
    return ""


def _governor(span: Any) -> str:
    """The content word an entity depends on ('author' for 'the author of Brand')."""
    tok = span.root.head
    while tok.pos_ in ("ADP", "DET", "AUX", "PART") and tok.head.i != tok.i:
        tok = tok.head
    if span.start <= tok.i < span.end or tok.pos_ not in ("NOUN", "VERB", "ADJ"):
        return ""
    return _lemma(tok) if tok.pos_ == "VERB" else tok.text


def _step_back(doc: Any, n: int) -> tuple[str, ...]:
    """More general questions: about each entity in general, then entities replaced by types."""
    ents = find_entities(doc)
    names = _dedupe(doc.text[s:e] for s, e, _ in ents)
    out = [f"What is known about {name}?" for name in names[:1]]
    if ents:
        typed, last = [], 0
        for s, e, label in ents:
            typed += [doc.text[last:s], _TYPE_WORDS.get(label, "something")]
            last = e
        out.append(re.sub(r"\b(of|about|for) (a|an) ", r"\1 \2 ", "".join(typed) + doc.text[last:]))
    out += [f"What is known about {name}?" for name in names[1:]]
    keywords = rewrite(doc)
    if keywords != doc.text:
        out.append(f"What is known about {keywords}?")
    query = doc.text.rstrip("?").casefold()
    out = [q for q in _dedupe(out) if q.rstrip("?").casefold() != query]
    return tuple(out[:n]) if out else (f"Background of: {doc.text}",)


class EntityFacts:
    """HyDE's :data:`FactLookup` over one graph version: the stated facts (SVO
    relations, heaviest first) about the entities a query names, from an index of
    entity names built on first use."""

    def __init__(self, reader: GraphReader) -> None:
        self.reader = reader
        self._names: dict[str, str] | None = None
        self._by_name: dict[str, list[str]] | None = None
        self._lock = threading.Lock()

    def prepare(self) -> None:
        """Build the name index now (once, whichever thread asks first)."""
        with self._lock:
            if self._by_name is None:
                self([])

    def __call__(self, names: Any) -> list[str]:
        """Fact sentences about entities named in a query, for HyDE."""
        if self._names is None:  # built on first use: only HyDE needs it
            names = {e.id: e.name for e in self.reader.entities()}
            by_name: dict[str, list[str]] = {}
            for eid, name in names.items():
                by_name.setdefault(name.casefold(), []).append(eid)
            self._by_name = by_name  # before _names: a racing thread sees both or neither
            self._names = names
        assert self._by_name is not None
        ids = sorted({eid for n in names for eid in self._by_name.get(n.casefold(), [])})
        if not ids:
            return []
        rels = [r for r in self.reader.relations(touching=ids) if r.kind == "svo"]
        rels.sort(key=lambda r: (-r.weight, r.id))
        return [f"{self._names[r.src]} {r.predicate} {self._names[r.dst]}" for r in rels[:8]]
