"""What the framework retrievers share: one search over an engine, and a hit's metadata.

A retriever runs one of four searches for a query: ``retrieve`` (the RCP
``retrieve`` method) or the graph ops ``local``, ``global`` and ``drift``. Its
documents keep what a reader checks an answer against: the hit's id, scores,
unit and level, its citation and its provenance (the passages it rests on and,
for graph searches, the relations that lead there).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from ..engine import Engine
from ..errors import InvalidParams

Op = Literal["retrieve", "local", "global", "drift"]
OPS: tuple[str, ...] = ("retrieve", "local", "global", "drift")
#: hit fields copied into a document's metadata, when the hit has them
METADATA = ("id", "score", "confidence", "unit", "level", "citation", "provenance")


_R = TypeVar("_R", bound="OwnsEngine")


class OwnsEngine:
    """``from_graph`` and ``close`` for a retriever over an engine it may have opened
    itself (both framework retrievers take the engine as ``engine=``)."""

    if TYPE_CHECKING:
        engine: Engine
        _owns_engine: bool

        def __init__(self, *args: Any, **kwargs: Any) -> None: ...

    @classmethod
    def from_graph(cls: type[_R], path: str | Path, **options: Any) -> _R:
        """A retriever over the graph folder ``path``, which :meth:`close` closes."""
        engine = open_graph(path)
        try:
            retriever = cls(engine=engine, **options)
        except BaseException:
            engine.close()
            raise
        retriever._owns_engine = True
        return retriever

    def close(self) -> None:
        """Close the engine when :meth:`from_graph` opened it."""
        if self._owns_engine:
            self.engine.close()
            self._owns_engine = False


def open_graph(path: str | Path) -> Engine:
    """The engine of the graph folder (or Neo4j URI) ``path``."""
    from ..engine import open as open_engine

    return open_engine(path)


def check_op(op: str) -> str:
    """``op`` when it is a search a retriever runs; else InvalidParams naming the choices."""
    if op not in OPS:
        raise InvalidParams(f"op must be one of {', '.join(OPS)}; got {op!r}", field="op")
    return op


def search(
    engine: Engine, query: str, *, op: str, k: int, params: Mapping[str, Any] | None = None
) -> list[dict[str, Any]]:
    """The hits of one search. ``params`` are further engine params (``mode``,
    ``filter``, ``unit``, ...); ``query``, ``k`` and ``op`` always win over them.
    Local search returns passages (unit ``chunk``) unless ``params`` names units."""
    check_op(op)
    extra = dict(params or {})
    if op == "retrieve":
        return list(engine.retrieve({**extra, "query": query, "k": k})["hits"])
    if op == "local":
        extra.setdefault("unit", "chunk")
    return list(engine.graph({**extra, "op": op, "query": query, "k": k})["hits"])


def hit_metadata(hit: Mapping[str, Any]) -> dict[str, Any]:
    """A document's metadata for ``hit``: its id, score, confidence, unit, level,
    citation and provenance, the title it is cited by, and its stored ``meta``."""
    metadata = {key: hit[key] for key in METADATA if key in hit}
    title = (hit.get("citation") or {}).get("title") or (hit.get("meta") or {}).get("title")
    if title:
        metadata["title"] = title
    if hit.get("meta"):
        metadata["meta"] = dict(hit["meta"])
    return metadata
