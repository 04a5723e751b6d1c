"""Decompose a multi-hop question into single-hop sub-questions, from its parse.

Comparison and "both" questions get one question per option. Otherwise the
innermost nested construction (a relative clause, a participle modifier, "X of
Y", "Y's X", ...) becomes a sub-question and the outer question is shortened to
its head noun; this repeats, re-parsing each time, so the sub-question that can
be answered first comes first.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from .spans import _NOT_NAMES, _WH_TAGS, _dedupe, _wordset, find_entities

_AGE_WORDS = frozenset(("older", "oldest", "younger", "youngest"))

_COMPARATIVE = frozenset({"JJR", "JJS", "RBR", "RBS"})

_DO = {"VBD": "did", "VBZ": "does", "VBP": "do"}

_FUNCTION_POS = frozenset({"AUX", "PUNCT", "DET", "ADP", "PRON", "PART", "CCONJ", "SCONJ"})

_GENERIC_OF = _wordset(
    "name kind type sort part number amount one some most all each any many much rest lot "
    "percentage majority half top end side version instance city town village state county "
    "province region district island river lake mountain kingdom republic"
)

_INNER_WH = re.compile(r"\b(what|which|whom|how)\b|\b(when|where)\?$")

_LEAD_WH = re.compile(r"^(\w+\s+)?(what|which|who|whom|where|when|how)\b", re.IGNORECASE)

_MAX_HOPS = 8

_NOMINAL_POS = frozenset({"DET", "NOUN", "PROPN", "NUM", "ADJ", "PART"})

_PERSON_NOUNS = _wordset(
    "author composer director performer performers producer president spouse wife husband "
    "father mother son daughter child children sibling brother sister founder creator writer "
    "singer actor actress leader king queen owner player coach chairman governor mayor ruler "
    "member person individual man woman artist musician manager captain minister partner "
    "parent grandfather grandmother uncle aunt heir lyricist screenwriter head ceo"
)

_PLACES = _wordset("city country state town county place village region")

_SINGULAR = {"are": "is", "were": "was", "do": "does", "have": "has"}

_TIME_WORDS = _wordset("first earlier earliest last later latest sooner recently")


@dataclass(frozen=True, slots=True)
class _Hop:
    """One nested construction: its sub-question, and the text that replaces it outside."""

    cover: tuple[int, int]  # token range the sub-question is built from
    chars: tuple[int, int]  # character range of the outer text to replace
    replacement: str
    question: str
    depth: int


def decompose(query: str, nlp: Any, n: int = 3) -> list[str]:
    """Sub-questions of ``query``, innermost (answerable first) first; at most ``n``.

    Comparisons ('Who was born first, A or B?') and 'both A and B' questions give one
    question per option. Otherwise nested constructions (relative clauses, participle
    modifiers, 'X of Y', "Y's X") are peeled from the innermost out, each becoming a
    question while the outer question keeps only the head noun ('the city').
    """
    query = " ".join(query.split())
    if n < 2:
        return [query]
    options = _option_questions(nlp(query), nlp)
    if len(options) >= 2:
        return options[:n]
    subs: list[str] = []
    last: list[str] = []
    text = query
    for _ in range(min(n - 1, _MAX_HOPS)):
        hop = _innermost(_find_hops(nlp(text)))
        if hop is None:
            break
        new = text[: hop.chars[0]] + hop.replacement + text[hop.chars[1] :]
        # a clause holding the question's own wh-word ('a series that aired on what
        # station') is answered last, after what the outer statement says
        (last if _asks_inside(hop.question) else subs).append(hop.question)
        text = " ".join(new.split())
    if not subs and not last:
        return [query]
    return _dedupe([*subs, _question(text), *reversed(last)])[:n]


def _asks_inside(question: str) -> bool:
    """Whether a question holds a second, inner wh-word ('Which series aired on what station?')."""
    return _INNER_WH.search(_LEAD_WH.sub("", question, count=1)) is not None


def _find_hops(doc: Any) -> list[_Hop]:
    ents = [(s, e) for s, e, _ in find_entities(doc)]
    found = [_hop_at(tok, doc, ents) for tok in doc] + _contact_hops(doc, ents)
    return [h for h in found if h is not None and _outside_has_content(doc, h.cover)]


def _innermost(hops: list[_Hop]) -> _Hop | None:
    """The hop whose cover holds no other hop's, deepest in the tree, then rightmost."""

    def inside(o: _Hop, h: _Hop) -> bool:
        return o.cover != h.cover and h.cover[0] <= o.cover[0] and o.cover[1] <= h.cover[1]

    inner = [h for h in hops if not any(inside(o, h) for o in hops)]
    return max(inner, key=lambda h: (h.depth, h.cover[0]), default=None)


def _hop_at(tok: Any, doc: Any, ents: list[tuple[int, int]]) -> _Hop | None:
    """The construction anchored at ``tok``, if it is one."""
    head = tok.head
    if head.pos_ not in ("NOUN", "PROPN") or head.i == tok.i:
        return None
    depth = sum(1 for _ in tok.ancestors)
    if tok.dep_ in ("relcl", "acl") and tok.i > head.i:
        clause = sorted(tok.subtree, key=lambda t: t.i)
        head = _antecedent(doc, clause[0], head)
        if _same_entity(tok, head, ents) or (head.pos_ == "PROPN" and _titled(tok)):
            return None
        relative = tok.dep_ == "relcl" or clause[0].lower_ in ("that", "which", "who")
        if not relative and head.pos_ == "PROPN":
            return None
        question = _clause_question(tok, head) if relative else _acl_question(tok, head)
        if question is None:
            return None
        cover = (head.left_edge.i, clause[-1].i + 1)
        return _replace_by_head(doc, cover, head, question, depth)
    if tok.dep_ == "prep" and tok.lower_ == "of":
        pobj = next((c for c in tok.children if c.dep_ == "pobj"), None)
        head = _of_head(head)
        if pobj is None or not _is_relational(head, pobj, ents):
            return None
        cover = (head.left_edge.i, _phrase_end(doc, head, tok.right_edge.i + 1))
        question = f"{_wh(head)} {_be(head)} {_lower_det(doc[cover[0] : cover[1]])}?"
        return _replace_by_head(doc, cover, head, question, depth)
    if tok.dep_ == "prep" and tok.lower_ in ("with", "as") and tok.i > 0:
        return _with_as_hop(doc, tok, depth)
    if tok.dep_ == "poss" and _names_something(tok.subtree) and not _same_entity(tok, head, ents):
        case = next((c for c in tok.children if c.dep_ == "case"), tok.right_edge)
        of = next((c for c in head.rights if c.dep_ == "prep" and c.lower_ == "of"), None)
        end = of.right_edge.i + 1 if of is not None else head.i + 1
        cover = (head.left_edge.i, _phrase_end(doc, head, end))
        question = f"{_wh(head)} {_be(head)} {_lower_det(doc[cover[0] : cover[1]])}?"
        start, end = tok.left_edge.idx, case.idx + len(case)
        the = "The" if start == 0 else "the"
        return _Hop(cover, (start, end), the, _question(question), depth)
    return None


def _phrase_end(doc: Any, head: Any, end: int) -> int:
    """Cut a noun phrase before a verb the parser wrongly hung inside it."""
    for t in doc[head.i + 1 : end]:
        if t.pos_ in ("VERB", "AUX") and not t.is_title:
            return t.i
    return end


def _with_as_hop(doc: Any, prep: Any, depth: int) -> _Hop | None:
    """'the continent with the lowest X' and 'the same book as Y' as sub-questions."""
    noun, pobj = doc[prep.i - 1], next((c for c in prep.children if c.dep_ == "pobj"), None)
    if noun.pos_ != "NOUN" or pobj is None:
        return None
    obj = _render(sorted(pobj.subtree, key=lambda t: t.i))
    same = any(c.lower_ == "same" for c in noun.children)
    if prep.lower_ == "as" and same and _names_something(pobj.subtree):
        question = f"What {noun.text} {_be(pobj)} {obj} in?"
    elif prep.lower_ == "with" and any(t.tag_ in ("JJS", "RBS") for t in pobj.subtree):
        question = f"Which {_noun_words(noun)} has {obj}?"
    else:
        return None
    cover = (noun.left_edge.i, pobj.right_edge.i + 1)
    return _replace_by_head(doc, cover, noun, question, depth)


def _contact_hops(doc: Any, ents: list[tuple[int, int]]) -> list[_Hop]:
    """Unmarked relative clauses the parser misses: 'the country Signmark is from'.

    A common noun right before a name, then a verb group that strands a preposition
    ('is from', 'played for') or is passive ('was born'), reads as a relative clause.
    """
    hops = []
    for s, e in ents:
        span = doc.char_span(s, e, alignment_mode="expand")
        if span is None or span.start < 2 or span.end + 1 >= len(doc):
            continue
        noun, verb = doc[span.start - 1], doc[span.end]
        if noun.pos_ != "NOUN" or doc[span.start - 2].lower_ != "the" or span.root.pos_ != "PROPN":
            continue
        if verb.pos_ != "AUX" and verb.tag_ not in _DO:
            continue
        end, stranded = span.end + 1, False
        while end < len(doc) and doc[end].pos_ != "PUNCT" and not stranded:
            nxt = doc[end + 1] if end + 1 < len(doc) else None
            stranded = doc[end].pos_ == "ADP" and (nxt is None or nxt.pos_ in ("PUNCT", "ADP"))
            end += 1
        rest = doc[span.end + 1 : end]
        if not stranded and not (verb.pos_ == "AUX" and rest and rest[0].tag_ == "VBN"):
            continue
        lead = "Where" if not stranded and noun.lower_ in _PLACES else f"Which {noun.text}"
        if verb.pos_ == "AUX":
            question = f"{lead} {verb.lower_} {span.text} {rest.text}?"
        else:
            question = f"{lead} {_DO[verb.tag_]} {span.text} {verb.lemma_} {rest.text}?"
        cover = (span.start - 2, end)
        depth = sum(1 for _ in noun.ancestors)
        hops.append(_replace_by_head(doc, cover, noun, question, depth))
    return hops


def _antecedent(doc: Any, first: Any, head: Any) -> Any:
    """The noun a relative clause modifies: the one right before it, else the parser's head.

    The small parser often hangs 'where ...' on an earlier noun ('the name of the
    waterfall in the country where ...'); the noun just before the clause is a safer bet.
    """
    before = doc[first.i - 1] if first.i > 0 else None
    return before if before is not None and before.pos_ in ("NOUN", "PROPN") else head


def _titled(tok: Any) -> bool:
    """Whether a clause is written in title case, as in a name ('The Girl Who Kicked ...')."""
    return any(t.is_title for t in tok.subtree if t.pos_ in ("VERB", "AUX"))


def _of_head(head: Any) -> Any:
    """The noun 'X of Y' is about: 'place of birth of Z' is about 'place', not 'birth'."""
    while (
        head.dep_ == "pobj"
        and head.head.lower_ == "of"
        and head.head.head.pos_ == "NOUN"
        and not any(c.dep_ in ("det", "poss") for c in head.children)
    ):
        head = head.head.head
    return head


def _is_relational(head: Any, pobj: Any, ents: list[tuple[int, int]]) -> bool:
    """Whether 'head of pobj' asks for a relation ('the author of Brand'), not a name."""
    if head.lower_ in _GENERIC_OF or not _names_something(pobj.subtree):
        return False
    if any(c.dep_ == "det" and c.lower_ in ("a", "an") for c in head.children):
        return False
    if head.pos_ == "PROPN" and pobj.pos_ == "PROPN":
        return False
    return not _same_entity(head, pobj, ents)


def _replace_by_head(
    doc: Any, cover: tuple[int, int], head: Any, question: str, depth: int
) -> _Hop:
    """A hop whose outer text keeps the head noun phrase ('the city where ...' -> 'the city')."""
    span = doc[cover[0] : cover[1]]
    base = doc[cover[0] : head.i + 1].text
    return _Hop(cover, (span.start_char, span.end_char), base, _question(question), depth)


def _same_entity(a: Any, b: Any, ents: list[tuple[int, int]]) -> bool:
    """Whether ``a`` and ``b`` sit inside one entity name (a title, not a construction)."""
    return any(s <= a.idx < e and s <= b.idx < e for s, e in ents)


def _names_something(tokens: Iterable[Any]) -> bool:
    """Whether some token is a name: a proper noun, an entity, or a capitalised word inside."""
    return any(
        t.pos_ == "PROPN" or t.ent_type_ not in ("", *_NOT_NAMES) or (t.is_title and t.i > 0)
        for t in tokens
    )


def _outside_has_content(doc: Any, cover: tuple[int, int]) -> bool:
    """Whether the question says something beyond the covered phrase ('Who is X of Y?' not)."""
    return any(
        not (cover[0] <= t.i < cover[1])
        and t.pos_ not in _FUNCTION_POS
        and t.tag_ not in _WH_TAGS
        and not t.is_stop
        for t in doc
    )


def _wh(noun: Any) -> str:
    return "Who" if noun.lower_ in _PERSON_NOUNS else "What"


def _be(noun: Any) -> str:
    return "are" if noun.tag_ in ("NNS", "NNPS") else "is"


def _noun_words(head: Any) -> str:
    """The head noun with its left modifiers, without determiners ('main director')."""
    span = head.doc[head.left_edge.i : head.i + 1]
    toks = [t for t in span if t.dep_ not in ("det", "poss", "case")]
    return " ".join(t.text for t in toks) or head.text


def _lower_det(span: Any) -> str:
    text = span.text
    return text[0].lower() + text[1:] if span[0].pos_ == "DET" else text


def _clause_question(verb: Any, head: Any) -> str | None:
    """A relative clause as a question: 'the city where X was born' -> 'Where was X born?'."""
    toks = sorted(verb.subtree, key=lambda t: t.i)
    first = toks[0]
    who = head.lower_ in _PERSON_NOUNS or first.lower_ in ("who", "whom")
    which = "Who" if who else f"Which {_noun_words(head)}"
    if first.dep_ == "prep" and len(toks) > 1 and toks[1].tag_ in ("WDT", "WP"):
        if toks[1].lower_ == "whom":
            return f"{first.text.capitalize()} whom {_invert(toks[2:], verb)}"
        return f"{first.text.capitalize()} which {_noun_words(head)} {_invert(toks[2:], verb)}"
    if first.tag_ == "WRB":
        return f"{first.text.capitalize()} {_invert(toks[1:], verb)}"
    if first.tag_ == "WP$":
        return f"Which {_noun_words(head)}'s {_render(toks[1:])}"
    if first.tag_ in ("WDT", "WP") or first.lower_ == "that":
        if first.dep_.startswith("nsubj"):
            return f"{which} {_render(toks[1:])}"
        return f"{which} {_invert(toks[1:], verb)}"
    return f"{which} {_invert(toks, verb)}"


def _acl_question(verb: Any, head: Any) -> str | None:
    """A participle modifier as a question: 'the country containing X' -> 'Which country ...'."""
    toks = sorted(verb.subtree, key=lambda t: t.i)
    if verb.tag_ not in ("VBN", "VBG") or toks[0].i != verb.i or not _names_something(toks):
        return None
    which = "Who" if head.lower_ in _PERSON_NOUNS else f"Which {_noun_words(head)}"
    if verb.tag_ == "VBN":
        return f"{which} {_be(head)} {_render(toks)}"
    plural = head.tag_ in ("NNS", "NNPS")
    return f"{which} {verb.lemma_ if plural else _third_person(verb.lemma_)} {_render(toks[1:])}"


def _third_person(lemma: str) -> str:
    if lemma == "be":
        return "is"
    if re.search(r"[^aeiou]y$", lemma):
        return lemma[:-1] + "ies"
    return lemma + ("es" if re.search(r"(s|sh|ch|x|z|o)$", lemma) else "s")


def _invert(toks: list[Any], verb: Any) -> str:
    """A declarative clause in question order: 'X was born' -> 'was X born'."""
    ids = {t.i for t in toks}
    subjects = [c for c in verb.children if c.dep_ in ("nsubj", "nsubjpass", "expl")]
    subj = next((c for c in subjects if c.i in ids), None)
    if subj is None:
        return _render(toks)
    subj_ids = {t.i for t in subj.subtree}
    auxes = [c for c in verb.children if c.dep_ in ("aux", "auxpass") and c.i > subj.right_edge.i]
    swap: dict[int, str] = {}
    if auxes:
        lead = auxes[0]
    elif verb.pos_ == "AUX" or verb.lemma_ == "be":
        lead = verb
    elif verb.tag_ in _DO:
        lead, swap = None, {verb.i: verb.lemma_}
    else:
        return _render(toks)
    first = lead.text.lower() if lead is not None else _DO[verb.tag_]
    rest = [t for t in toks if t.i not in subj_ids and (lead is None or t.i != lead.i)]
    return f"{first} {_render(list(subj.subtree))} {_render(rest, swap)}"


def _render(toks: list[Any], swap: dict[int, str] | None = None) -> str:
    """Tokens back to text, keeping their spacing; ``swap`` replaces some token texts."""
    swap = swap or {}
    return "".join(swap.get(t.i, t.text) + t.whitespace_ for t in toks).strip()


def _question(text: str) -> str:
    """Tidy spacing and punctuation; capitalised, ending in '?'."""
    text = re.sub(r"\s+([?,.!])", r"\1", " ".join(text.split())).strip(" ,;:")
    text = re.sub(r"(\s+(and|or|but))+$", "", text.rstrip("?.! ,")).rstrip(" ,")
    if text.count('"') % 2:
        last = text.rindex('"')
        opening = last == 0 or text[last - 1] == " "
        text = text + '"' if opening else text[:last] + text[last + 1 :]
    text += "?"
    return text[:1].upper() + text[1:]


def _option_questions(doc: Any, nlp: Any) -> list[str]:
    """One question per option of a comparison ('A or B?') or of 'both A and B' / 'Are A and B'."""
    cc = next((t for t in doc if t.pos_ == "CCONJ" and t.lower_ in ("or", "and")), None)
    both = next((t for t in doc if t.lower_ in ("both", "either")), None)
    if cc is None or (cc.lower_ == "and" and both is None and doc[0].pos_ != "AUX"):
        return []
    tail = doc[cc.i + 1 :].text.rstrip(" ?")
    stem_end = _comparison_boundary(doc, cc)
    if cc.lower_ == "or" and stem_end is not None and "," not in tail and doc[0].tag_ in _WH_TAGS:
        first = doc[stem_end : cc.i].text.strip(" ,:")
        stem = doc[:stem_end].text.strip(" ,:")
        return _dedupe(_compare_question(stem, opt, nlp) for opt in (first, tail) if opt)
    ents = [(s, e) for s, e, _ in find_entities(doc)]
    left, right = _nominal_run(doc, cc, -1, ents), _nominal_run(doc, cc, 1, ents)
    if both is not None and both.i < cc.i and "," not in doc[both.i : cc.i].text:
        left = (both.i + 1, cc.i)
    if left is None or right is None:
        return []
    out = []
    for start, end in (left, right):
        swap = {i: "" for i in range(left[0], right[1])}
        swap.update({t.i: "" for t in doc if t.lower_ in ("both", "either")})
        swap[left[0]] = doc[start:end].text
        if doc[0].lower_ in _SINGULAR:
            swap[0] = _SINGULAR[doc[0].lower_].capitalize()
            swap.update({t.i: t.lemma_ for t in doc if t.tag_ == "NNS" and t.i >= right[1]})
        out.append(_question(_render(list(doc), swap)))
    return _dedupe(out)


def _comparison_boundary(doc: Any, cc: Any) -> int | None:
    """Where the first option starts: after the last comma or comparative before ``cc``."""
    best = None
    for tok in doc[: cc.i]:
        if tok.text == "," or tok.tag_ in _COMPARATIVE or tok.lower_ in _TIME_WORDS:
            skip = tok.lower_ in ("more", "most", "less", "least") and tok.i + 1 < cc.i
            best = tok.i + (2 if skip else 1)
    return best if best is not None and best < cc.i else None


def _compare_question(stem: str, option: str, nlp: Any) -> str:
    """A comparison's stem asked of one option: ('Who was born first', A) -> 'When was A born?'."""
    sdoc = nlp(stem)
    aux = next((t for t in sdoc if t.pos_ == "AUX"), None)
    verb = next((t for t in sdoc if t.pos_ == "VERB"), None)
    comps = [t for t in sdoc if t.tag_ in _COMPARATIVE or t.lower_ in _TIME_WORDS]
    comp = comps[0] if comps else None
    be = _SINGULAR.get(aux.lower_, aux.lower_) if aux is not None else "is"
    if comp is not None and comp.lower_ in _AGE_WORDS:
        return f"When was {option} born?"
    if comp is not None and comp.lower_ in _TIME_WORDS and verb is not None:
        if verb.lemma_ in ("come", "happen", "occur"):
            return f"When was {option}?"
        if aux is not None and aux.lemma_ == "be":
            return f"When {be} {option} {verb.text}?"
        return f"When did {option} {verb.lemma_}?"
    if comp is not None and comp.pos_ in ("ADJ", "ADV"):
        more = comp.lower_ in ("more", "most", "less", "least") and comp.i + 1 < len(sdoc)
        adj = sdoc[comp.i + 1].text if more else comp.lemma_
        rest = sdoc[comp.i + (2 if more else 1) :].text
        return _question(f"How {adj} {be} {option} {rest}")
    if aux is not None and sdoc[0].tag_ in _WH_TAGS:
        return _question(f"{be.capitalize()} {option} {sdoc[aux.i + 1 :].text}")
    return _question(f"{stem} {option}")


def _nominal_run(
    doc: Any, cc: Any, step: int, ents: list[tuple[int, int]]
) -> tuple[int, int] | None:
    """The noun phrase right before (step -1) or after (step 1) ``cc``, as a token range."""
    near = doc[cc.i + step] if 0 <= cc.i + step < len(doc) else None
    for s, e in ents:
        if near is not None and s <= near.idx < e:
            span = doc.char_span(s, e, alignment_mode="expand")
            return (span.start, span.end)
    i, edge = cc.i + step, cc.i
    while 0 <= i < len(doc) and doc[i].lower_ not in ("both", "either", "and", "or"):
        tok = doc[i]
        in_name = any(s <= tok.idx < e for s, e in ents)
        titled = tok.is_title and tok.pos_ not in ("AUX", "VERB")
        nominal = in_name or titled or tok.pos_ in _NOMINAL_POS or tok.tag_ == "-RRB-"
        if not nominal or tok.tag_ in _WH_TAGS:
            break
        edge, i = i, i + step
    if edge == cc.i:
        return None
    start, end = (edge, cc.i) if step < 0 else (cc.i + 1, edge + 1)
    while start < end and doc[start].pos_ == "PART":
        start += 1
    has_noun = any(t.pos_ in ("NOUN", "PROPN") for t in doc[start:end])
    return (start, end) if has_noun else None
