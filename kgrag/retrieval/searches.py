"""The graph searches of one graph version, built on first use and shared by every
call on it: local search, the path finder, global search, the whole graph (for
``neighbors``) and the RAPTOR tree.

:func:`local_call` runs a local search and explains each passage it found with a
path from the query's entities; ``retrieve``'s units path and subgraph, the
``graph`` method's ``local`` op and ``memory/recall`` all start from one.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kgrag.config import RetrievalConfig
from kgrag.encoders import Encoder
from kgrag.store import GraphReader
from kgrag.threads import Pending, read_beside

if TYPE_CHECKING:
    import igraph as ig

    from kgrag.search.evidence import Reading
    from kgrag.search.global_search import GlobalSearch
    from kgrag.search.local import LocalResult, LocalSearch
    from kgrag.search.paths import Explanation, PathFinder
    from kgrag.search.tree import TreeSearch


class GraphSearches:
    """Each search of one version, built when first asked for (one at a time)."""

    def __init__(self, reader: GraphReader, encoder: Encoder, config: RetrievalConfig) -> None:
        self.reader, self.encoder, self.config = reader, encoder, config
        self._lock = threading.Lock()
        self._built: dict[str, Any] = {}

    def local(self) -> LocalSearch:
        return self._get("local")  # type: ignore[no-any-return]

    def paths(self) -> PathFinder:
        return self._get("paths")  # type: ignore[no-any-return]

    def global_search(self) -> GlobalSearch:
        return self._get("global")  # type: ignore[no-any-return]

    def whole_graph(self) -> ig.Graph:
        """Every entity, passage and edge: the neighbors op reads it all."""
        return self._get("full")  # type: ignore[no-any-return]

    def tree(self) -> TreeSearch:
        return self._get("tree")  # type: ignore[no-any-return]

    def _get(self, name: str) -> Any:
        with self._lock:
            return self._get_unlocked(name)

    def _get_unlocked(self, name: str) -> Any:
        if name not in self._built:
            self._built[name] = self._build(name)
        return self._built[name]

    def _build(self, name: str) -> Any:
        reader, encoder = self.reader, self.encoder
        if name == "local":
            from kgrag.search.local import LocalSearch

            return LocalSearch(reader, encoder, self.config.local)
        if name == "paths":
            from kgrag.search.paths import PathFinder

            return PathFinder(reader)
        if name == "full":
            return self._get_unlocked("local")._whole_graph()
        if name == "global":
            from kgrag.search.global_search import GlobalSearch

            return GlobalSearch(reader, encoder)
        if name == "tree":
            from kgrag.search.tree import TreeSearch

            return TreeSearch(reader)
        raise KeyError(name)


@dataclass(frozen=True, slots=True)
class LocalCall:
    """One local search with the provenance of its passages."""

    found: LocalResult
    explained: dict[str, Explanation]  # chunk id -> its explanation
    seeds: list[str]  # seed entities, best first
    reading: Reading  # what the search read of its passages
    records: Pending | None = None  # the passages' hit records being read beside

    def records_read(self) -> None:
        """Wait for the passages' records (read beside the explanation) to be in."""
        if self.records is not None:
            self.records.result()


def local_call(
    searches: GraphSearches,
    query: str,
    k: int,
    *,
    records: int = 0,
    read_records: Callable[[list[str]], None] | None = None,
    quotes: bool = False,
) -> LocalCall:
    """Local search and the explanation of each passage; with ``records``, the best
    that many passages go to ``read_records`` meanwhile (from a server: the round
    trips overlap the explanation's); with ``quotes``, the explanation reads the
    passages the quotes will (:meth:`PathFinder.explain`)."""
    from kgrag.search.evidence import Reading

    found = searches.local().search(query, k)
    seeds = path_sources(found)
    passages = [c for c, _ in found.passages]
    early = None
    if records and passages and read_records is not None:
        early = read_beside(searches.reader, read_records, passages[:records])
    reading = Reading(searches.reader, found.qvec)
    explained = searches.paths().explain(
        seeds, passages, found.via, qvec=found.qvec, reading=reading, quotes=quotes
    )
    return LocalCall(found, explained, seeds, reading, early)


def path_sources(found: LocalResult) -> list[str]:
    """Where a local search's provenance paths start: the entities the query names,
    best first, when it names any (a path from a concept the query's vector is merely
    near explains nothing); else every seed, heaviest first."""
    if found.named:
        return list(found.named)
    return sorted(found.seeds, key=lambda e: (-found.seeds[e], e))
