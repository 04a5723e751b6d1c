"""The named spans of a query, found without a model: entity names by lookup,
other capitalised runs as candidates for embedding match.

Local search links the spans of a query to entities. Running spaCy's tagger,
parser and NER over every query would cost a large share of a local search; yet
most spans a query names are entity names the graph already holds.
:class:`NameIndex` finds them directly: the longest run of query tokens (case
folded) that equals an entity's name, scanning left to right, is a *known* span,
provided it has a capital letter or a digit (so "sky" in a question does not link
to the concept "sky") and is not a lone stop word. A run of capitalised words
outside the known spans ("Aschenbrodel", "Hotel Ritz"; inner "of", "the", "de" ...
allowed) is an *unknown* span: the caller links it by embedding. This links as
well as spaCy did (docs/benchmarks.md).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from spacy.lang.en.stop_words import STOP_WORDS

from kgrag.text.keys import MAX_NAME_TOKENS, SKIP_TYPES, name_key
from kgrag.text.tokens import TOKEN

_MAX_TOKENS = MAX_NAME_TOKENS  # longer names are not looked up
#: lower-case words allowed inside a capitalised run when a capitalised word follows
_CONNECTORS = frozenset(
    {"of", "the", "and", "&", "-", "de", "del", "der", "di", "du", "da", "la", "le", "van", "von"}
)
__all__ = ["SKIP_TYPES", "NameIndex", "QuerySpans"]


@dataclass(frozen=True, slots=True)
class QuerySpans:
    known: list[tuple[int, int, int]]  # entity row, start char, end char
    unknown: list[tuple[int, int]]  # start char, end char


class NameIndex:
    """Entity names keyed by their case-folded tokens, for query span lookup: a table
    of its own, or a store's name lookup (:meth:`from_lookup`)."""

    def __init__(self, names: Iterable[tuple[int, str, str]] = ()) -> None:
        """``names``: (entity row, name, type); the lowest row wins a shared name."""
        self._rows: dict[str, int] = {}
        for row, name, kind in names:
            key = name_key(name)
            if kind in SKIP_TYPES or not key or len(_key(name)) > _MAX_TOKENS:
                continue
            if row < self._rows.get(key, row + 1):
                self._rows[key] = row
        self._lookup: Callable[[Sequence[str]], dict[str, int]] = self._own

    @classmethod
    def from_lookup(cls, lookup: Callable[[Sequence[str]], dict[str, int]]) -> NameIndex:
        """Names answered by ``lookup`` (name keys -> entity rows), e.g. a store's."""
        index = cls()
        index._lookup = lookup
        return index

    def _own(self, keys: Sequence[str]) -> dict[str, int]:
        return {k: self._rows[k] for k in keys if k in self._rows}

    def __len__(self) -> int:
        return len(self._rows)

    def spans(self, query: str) -> QuerySpans:
        tokens = [(m.group(), m.start(), m.end()) for m in TOKEN.finditer(query)]
        folded = [t.casefold() for t, _, _ in tokens]
        candidates = [
            " ".join(folded[i : i + n])
            for i in range(len(tokens))
            for n in range(1, min(_MAX_TOKENS, len(tokens) - i) + 1)
        ]
        rows = self._lookup(candidates)  # one lookup for every run of tokens
        known: list[tuple[int, int, int]] = []
        covered = [False] * len(tokens)
        i = 0
        while i < len(tokens):
            n = self._longest(query, tokens, folded, i, rows)
            if n:
                row = rows[" ".join(folded[i : i + n])]
                known.append((row, tokens[i][1], tokens[i + n - 1][2]))
                covered[i : i + n] = [True] * n
                i += n
            else:
                i += 1
        return QuerySpans(known, _capitalised_runs(tokens, folded, covered))

    def _longest(
        self,
        query: str,
        tokens: list[tuple[str, int, int]],
        folded: list[str],
        i: int,
        rows: dict[str, int],
    ) -> int:
        """Tokens in the longest known name starting at token ``i`` (0 if none)."""
        for n in range(min(_MAX_TOKENS, len(tokens) - i), 0, -1):
            if " ".join(folded[i : i + n]) not in rows:
                continue
            text = query[tokens[i][1] : tokens[i + n - 1][2]]
            if n == 1 and folded[i] in STOP_WORDS:
                continue
            if any(c.isupper() or c.isdigit() for c in text):
                return n
        return 0


def _key(name: str) -> tuple[str, ...]:
    return tuple(t.casefold() for t in TOKEN.findall(name))


def _capital(token: str, folded: str) -> bool:
    return token[:1].isupper() and folded not in STOP_WORDS


def _capitalised_runs(
    tokens: list[tuple[str, int, int]], folded: list[str], covered: list[bool]
) -> list[tuple[int, int]]:
    """Runs of capitalised non-stop words outside ``covered`` tokens, joined across
    a connector ("Bank of England")."""
    runs = []
    i = 0
    while i < len(tokens):
        if covered[i] or not _capital(tokens[i][0], folded[i]):
            i += 1
            continue
        j = i + 1
        while j < len(tokens) and not covered[j]:
            if _capital(tokens[j][0], folded[j]):
                j += 1
            elif (
                folded[j] in _CONNECTORS
                and j + 1 < len(tokens)
                and not covered[j + 1]
                and _capital(tokens[j + 1][0], folded[j + 1])
            ):
                j += 2
            else:
                break
        runs.append((tokens[i][1], tokens[j - 1][2]))
        i = j
    return runs
