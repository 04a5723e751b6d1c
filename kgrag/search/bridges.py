"""The bridge hop of local search: from its best passages to the passages they name
by title (:mod:`kgrag.search.links`).

A multi-hop question names one page (a film) and asks about another (its
director's page), which the first names by title. :func:`bridge` raises the
passages the best passages name to just below the passage that names them;
:func:`named_bridges` brings the passages named by the candidates whose title the
query names into the reranked candidates, whatever their own score: the
director's page of a film the question names, for each film it names.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from kgrag.search.links import StoreLinks, names, text_key, title_text
from kgrag.search.ranking import top_k
from kgrag.store import GraphReader

_STEP = 1e-6  # bridge targets sit this far apart below the passage that names them


def bridge(
    score: np.ndarray,
    dense: np.ndarray,
    links: StoreLinks,
    *,
    bridge_from: int,
    bridge_weight: float,
) -> tuple[np.ndarray, dict[int, int]]:
    """Raise the passages the best ``bridge_from`` passages name by title to just below
    the passage that names them (in their own order: ``bridge_weight`` x (1 + their
    dense score) on ``score`` scaled to a maximum of 1); remember who named them
    (rows)."""
    if not len(score) or bridge_from <= 0 or bridge_weight <= 0:
        return score, {}
    top = float(score.max())
    score = score / top if top > 0 else score
    out, via = score.copy(), {}
    for row, named_score in top_k(score, bridge_from):
        targets = links.targets(row)
        raised = score[targets] + bridge_weight * (1.0 + dense[targets])
        order = np.lexsort((targets, -raised))
        ceiling = named_score - _STEP * (1 + np.arange(len(targets)))
        capped = np.empty(len(targets))
        capped[order] = np.minimum(raised[order], ceiling)
        better = capped > out[targets]
        out[targets[better]] = capped[better]
        via.update({int(t): row for t in targets[better]})
    return out, via


def named_bridges(
    reader: GraphReader,
    titles: Callable[[Sequence[int]], list[str]],
    query: str,
    score: np.ndarray,
    top: list[tuple[int, float]],
    via: dict[int, int],
    *,
    bridge_named: int,
    bridge_from: int,
    link_max_in: int,
    bridge_extra: int,
) -> list[tuple[int, float]]:
    """``top`` and after it the passages named by title from the best ``bridge_named``
    candidates that the query names by title (and from the best ``bridge_from``), best
    namer first, at most ``bridge_extra``; each one's namer goes into ``via``.
    ``titles``: the document title of chunk rows."""
    look = [row for row, _ in top[:bridge_named]]
    if not look:
        return top
    query_key = text_key(query)
    namers = [
        row
        for i, (row, title) in enumerate(zip(look, titles(look), strict=True))
        if i < bridge_from or names(query_key, title_text(title))
    ]
    links = reader.adjacency("links", np.array(namers, dtype=np.int64))
    have = {row for row, _ in top}
    extra: list[tuple[int, float]] = []
    for i, row in enumerate(namers):
        targets = links.indices[links.indptr[i] : links.indptr[i + 1]]
        in_degree = links.data[links.indptr[i] : links.indptr[i + 1]]
        for target in targets[in_degree <= link_max_in].tolist():
            if target not in have and len(extra) < bridge_extra:
                have.add(target)
                extra.append((target, float(score[target])))
                via.setdefault(target, row)
    return top + extra
