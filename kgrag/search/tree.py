"""RAPTOR retrieval over a summary tree: collapsed tree and tree traversal.

Both strategies score every node by cosine to the query (rows are unit
vectors, so a dot product). The pool is the tree nodes of every level plus the
leaf chunks (level 0).

- **Collapsed tree** (Sarthi et al. 2024, §3): one pool, best first, until
  ``k`` hits or the token budget (packed as ``retrieve`` packs: stop at the
  first hit that overflows, but always answer at least one).
- **Tree traversal**: keep the best ``beam`` nodes of the top layer, then the
  best ``beam`` of their children, layer by layer down to level 1; every chunk
  under the chosen level-1 nodes is a leaf candidate. The chosen summary nodes
  and the leaf candidates are then ranked together by cosine (interleaved by
  score) and the first ``k`` returned, so ``k`` bounds the answer as it does
  for ``retrieve``; the route each hit came by is its ``path``.

Nodes with no parent (the top layer; orphans of an incrementally repaired
tree) are roots: traversal considers them at their own level, so a graph
without a tree degrades to plain chunk top-k. A single-child node repeats its
child's text and leaves; of such copies only the finest level is returned.
Ties are broken by id, so the same query gives the same hits.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass

import numpy as np

from kgrag.errors import InvalidParams
from kgrag.store import GraphReader
from kgrag.text.tokens import count_tokens


@dataclass(frozen=True, slots=True)
class TreeHit:
    """One ranked node of the tree (``unit`` "tree-node") or leaf chunk ("chunk")."""

    id: str
    unit: str
    level: int
    score: float  # cosine to the query
    leaves: tuple[str, ...]  # chunk ids under it (itself for a chunk)
    path: tuple[str, ...]  # ids from a root down to this hit (the hit last)


class TreeSearch:
    """The RAPTOR tree of one graph version, loaded once and read-only after."""

    def __init__(self, reader: GraphReader) -> None:
        nodes = {t.id: t for t in reader.tree_nodes()}
        chunks = {c.id: c for c in reader.chunks()}
        node_ids, node_matrix = reader.vectors("tree_nodes")
        chunk_ids, chunk_matrix = reader.vectors("chunks")
        node_rows = [i for i, n in enumerate(node_ids) if n in nodes]
        chunk_rows = [i for i, c in enumerate(chunk_ids) if c in chunks]
        self.ids = [node_ids[i] for i in node_rows] + [chunk_ids[i] for i in chunk_rows]
        parts = [np.asarray(chunk_matrix, dtype=np.float32)[chunk_rows]]
        if node_rows:
            parts.insert(0, np.asarray(node_matrix, dtype=np.float32)[node_rows])
        self.matrix = np.ascontiguousarray(np.vstack(parts))
        self.row = {id_: i for i, id_ in enumerate(self.ids)}
        records = [nodes[node_ids[i]] for i in node_rows]
        self.levels = np.array([t.level for t in records] + [0] * len(chunk_rows), dtype=np.int64)
        self.leaves = [t.leaves for t in records] + [(c,) for c in self.ids[len(records) :]]
        texts = [t.summary for t in records] + [chunks[c].text for c in self.ids[len(records) :]]
        self.tokens = np.array([count_tokens(t) for t in texts], dtype=np.int64)
        self.children = {t.id: tuple(c for c in t.children if c in self.row) for t in records}
        self.parents = _parents(self.children)
        self.roots = [r for r, id_ in enumerate(self.ids) if id_ not in self.parents]
        self.layers = sorted({t.level for t in records}, reverse=True)  # top first
        self.id_rank = np.empty(len(self.ids), dtype=np.int64)
        self.id_rank[sorted(range(len(self.ids)), key=self.ids.__getitem__)] = np.arange(
            len(self.ids)
        )
        self.copies = _copy_groups(texts, self.leaves, self.levels, self.ids)
        for array in (self.matrix, self.levels, self.tokens, self.id_rank):
            array.setflags(write=False)

    def collapsed(
        self,
        qvec: np.ndarray,
        k: int,
        *,
        token_budget: int | None = None,
        levels: Collection[int] | None = None,
    ) -> list[TreeHit]:
        """Best nodes of all levels (or of ``levels``; 0 = chunks) in one pool."""
        _check_positive(k, "k")
        if token_budget is not None:
            _check_positive(token_budget, "tokenBudget")
        allowed = self._level_mask(levels)
        scores = self._scores(qvec)
        keep = allowed & ~self._shadowed(allowed)
        order = self._ranked(np.flatnonzero(keep), scores)[:k]
        n = _pack(self.tokens[order], token_budget)
        return [self._hit(int(r), scores, self._best_path(int(r), scores)) for r in order[:n]]

    def traverse(self, qvec: np.ndarray, k: int, *, beam: int = 3) -> list[TreeHit]:
        """Top-down beam search; the chosen nodes of every layer and the leaf
        chunks under them, ranked together by cosine, first ``k``."""
        _check_positive(k, "k")
        _check_positive(beam, "beam")
        scores = self._scores(qvec)
        pending: dict[int, tuple[str, ...]] = {r: (self.ids[r],) for r in self.roots}
        chosen: dict[int, tuple[str, ...]] = {}
        for level in self.layers:
            layer = self._ranked(np.array([r for r in pending if self.levels[r] == level]), scores)
            for r in layer[:beam]:
                row = int(r)
                chosen[row] = pending[row]
                for child in self.children[self.ids[row]]:
                    pending.setdefault(self.row[child], pending[row] + (child,))
        chosen.update((r, p) for r, p in pending.items() if self.levels[r] == 0)
        mask = np.zeros(len(self.ids), dtype=bool)
        mask[list(chosen)] = True
        mask &= ~self._shadowed(mask)
        order = self._ranked(np.flatnonzero(mask), scores)[:k]
        return [self._hit(int(r), scores, chosen[int(r)]) for r in order]

    def _scores(self, qvec: np.ndarray) -> np.ndarray:
        q = np.asarray(qvec, dtype=np.float32).reshape(-1)
        if q.shape[0] != self.matrix.shape[1]:
            raise InvalidParams(
                f"query vector has {q.shape[0]} dimensions, the graph {self.matrix.shape[1]}",
                field="query",
            )
        return self.matrix @ q

    def _ranked(self, rows: np.ndarray, scores: np.ndarray) -> np.ndarray:
        """``rows`` by score descending, then id."""
        rows = rows.astype(np.int64)
        return rows[np.lexsort((self.id_rank[rows], -scores[rows]))]

    def _level_mask(self, levels: Collection[int] | None) -> np.ndarray:
        if levels is None:
            return np.ones(len(self.ids), dtype=bool)
        wanted = list(levels)
        if any(isinstance(x, bool) or not isinstance(x, int | np.integer) or x < 0 for x in wanted):
            raise InvalidParams("levels must be integers >= 0 (0 = chunks)", field="levels")
        return np.isin(self.levels, np.array(wanted, dtype=np.int64))

    def _shadowed(self, present: np.ndarray) -> np.ndarray:
        """Rows among ``present`` that copy a finer present row (same text, same leaves)."""
        out = np.zeros(len(self.ids), dtype=bool)
        for group in self.copies:
            rows = [r for r in group if present[r]]
            out[rows[1:]] = True
        return out

    def _best_path(self, row: int, scores: np.ndarray) -> tuple[str, ...]:
        """Route from a root down to ``row``, climbing to the best-scoring parent."""
        path = [self.ids[row]]
        while parents := self.parents.get(path[-1]):
            path.append(min(parents, key=lambda p: (-scores[self.row[p]], p)))
        return tuple(reversed(path))

    def _hit(self, row: int, scores: np.ndarray, path: tuple[str, ...]) -> TreeHit:
        level = int(self.levels[row])
        unit = "chunk" if level == 0 else "tree-node"
        return TreeHit(
            self.ids[row], unit, level, float(scores[row]), tuple(self.leaves[row]), path
        )


def _check_positive(value: int, field: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 1:
        raise InvalidParams(f"{field} must be an integer >= 1, got {value!r}", field=field)


def _pack(tokens: np.ndarray, budget: int | None) -> int:
    """How many ranked hits fit in ``budget`` tokens (at least one)."""
    if budget is None or len(tokens) == 0:
        return len(tokens)
    used = np.cumsum(tokens)
    return max(1, int(np.searchsorted(used, budget, side="right")))


def _parents(children: dict[str, tuple[str, ...]]) -> dict[str, list[str]]:
    parents: dict[str, list[str]] = {}
    for parent, kids in sorted(children.items()):
        for child in kids:
            parents.setdefault(child, []).append(parent)
    return parents


def _copy_groups(
    texts: Iterable[str], leaves: list[tuple[str, ...]], levels: np.ndarray, ids: list[str]
) -> list[list[int]]:
    """Rows sharing text and leaves, finest level (then id) first; only groups of two or more."""
    groups: dict[tuple[str, tuple[str, ...]], list[int]] = {}
    for row, text in enumerate(texts):
        groups.setdefault((" ".join(text.split()), tuple(sorted(leaves[row]))), []).append(row)
    return [
        sorted(rows, key=lambda r: (int(levels[r]), ids[r]))
        for rows in groups.values()
        if len(rows) > 1
    ]
