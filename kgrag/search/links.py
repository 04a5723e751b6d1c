"""Title links: a passage that names another document's title points at it.

Wikipedia-like corpora link pages by name: the passage about a film names
its director, and the director has a page of their own. A title link from
passage *a* to passage *b* says that *a*'s text contains *b*'s document title
(a trailing parenthetical such as "(film)" dropped, case folded, on token
boundaries). Titles named by more than ``max_in`` passages are too common
to say anything and give no links. Local search follows these links from
its best passage to the passages it names: the bridge hop of a multi-hop
question.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import scipy.sparse as sp

from kgrag.store import GraphReader
from kgrag.text.keys import title_key
from kgrag.text.tokens import JOINED_TOKEN

__all__ = ["StoreLinks", "TitleLinks", "key_text", "text_key", "title_key"]


@dataclass(frozen=True, slots=True)
class TitleLinks:
    """``matrix[a, b]`` is 1 when chunk row ``a`` names the title of chunk row ``b``."""

    matrix: sp.csr_matrix
    titles: list[str]  # the document title of each row
    max_in: int

    def targets(self, row: int) -> np.ndarray:
        """Rows that ``row`` links to."""
        start, end = self.matrix.indptr[row], self.matrix.indptr[row + 1]
        return np.asarray(self.matrix.indices[start:end])


class StoreLinks:
    """A store's title links seen as :class:`TitleLinks`: the targets of a chunk row
    named by at most ``max_in`` passages."""

    def __init__(self, reader: GraphReader, max_in: int) -> None:
        self.reader, self.max_in = reader, max_in

    def targets(self, row: int) -> np.ndarray:
        adj = self.reader.adjacency("links", np.array([row]))
        return adj.indices[adj.data <= self.max_in]


def key_text(tokens: Sequence[str]) -> str:
    """Case-folded tokens as one string padded by spaces, so that one key occurring in
    another is ``key_text(a) in key_text(b)`` on token boundaries ("" for none)."""
    return f" {' '.join(tokens)} " if tokens else ""


def text_key(text: str) -> str:
    """:func:`key_text` of all of ``text``'s tokens, case folded."""
    return key_text([t.casefold() for t in JOINED_TOKEN.findall(text)])


@lru_cache(maxsize=1 << 16)
def title_text(title: str) -> str:
    """A document title's key as :func:`key_text` (matched against :func:`text_key`;
    kept: a search asks for the same candidates' titles several times)."""
    return key_text(title_key(title))


def names(query_key: str, title_text: str) -> bool:
    """Whether a query (its :func:`text_key`) names a title (its :func:`title_text`)."""
    return bool(title_text) and title_text in query_key
