"""LlamaIndex: a kgrag graph as a ``BaseRetriever`` (the ``llamaindex`` extra).

    from kgrag.adapters.llamaindex import KgragRetriever

    retriever = KgragRetriever.from_graph("graphs/demo", op="local", k=5)
    for found in retriever.retrieve("Where was Marie Curie born?"):
        print(found.score, found.node.metadata["title"], found.node.get_content())

Each hit becomes a ``NodeWithScore`` over a ``TextNode`` with the hit's id and
text and the metadata of :func:`kgrag.adapters.base.hit_metadata`; a model
prompted with the node sees its title and citation, not the scores and
provenance. This module never reaches LlamaIndex's tokenizers or NLTK data, so
it tries no download. The async path runs the engine call on a worker thread.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from ..engine import Engine
from ..errors import InvalidParams
from .base import OwnsEngine, check_op, hit_metadata, search

try:
    from llama_index.core.callbacks import CallbackManager
    from llama_index.core.retrievers import BaseRetriever
    from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode
except ImportError as exc:
    raise ImportError(
        "kgrag.adapters.llamaindex needs llama-index-core: "
        f"pip install 'kgrag[llamaindex]' ({exc})",
        name=exc.name,
    ) from exc

#: metadata a prompt or an embedding of the node leaves out
_HIDDEN = ["id", "score", "confidence", "unit", "level", "provenance", "meta"]


class KgragRetriever(OwnsEngine, BaseRetriever):
    """Nodes from one kgrag search per query.

    ``op`` picks the search: ``retrieve`` (hybrid dense + BM25 by default),
    ``local`` (HippoRAG-style graph search; passages unless ``params`` names
    units), ``global`` (community reports) or ``drift``; ``k`` hits per query;
    ``params`` are further engine params, e.g. ``{"mode": "dense"}``.
    """

    def __init__(
        self,
        engine: Engine,
        *,
        op: str = "retrieve",
        k: int = 5,
        params: Mapping[str, Any] | None = None,
        callback_manager: CallbackManager | None = None,
    ) -> None:
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise InvalidParams(f"k must be a positive integer; got {k!r}", field="k")
        self.engine = engine
        self.op = check_op(op)
        self.k = k
        self.params = dict(params or {})
        self._owns_engine = False
        super().__init__(callback_manager=callback_manager)

    def _nodes(self, query: str) -> list[NodeWithScore]:
        hits = search(self.engine, query, op=self.op, k=self.k, params=self.params)
        return [
            NodeWithScore(
                node=TextNode(
                    id_=hit["id"],
                    text=hit.get("text", ""),
                    metadata=hit_metadata(hit),
                    excluded_llm_metadata_keys=list(_HIDDEN),
                    excluded_embed_metadata_keys=list(_HIDDEN),
                ),
                score=hit.get("score"),
            )
            for hit in hits
        ]

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return self._nodes(query_bundle.query_str)

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return await asyncio.to_thread(self._nodes, query_bundle.query_str)
