"""LangChain: a kgrag graph as a ``BaseRetriever`` (the ``langchain`` extra).

    from kgrag.adapters.langchain import KgragRetriever

    retriever = KgragRetriever.from_graph("graphs/demo", op="local", k=5)
    for doc in retriever.invoke("Where was Marie Curie born?"):
        print(doc.metadata["title"], doc.metadata["score"], doc.page_content)

Each hit becomes a ``Document`` whose ``page_content`` is the hit's text and
whose metadata carries its id, score, confidence, unit, level, citation and
provenance (:func:`kgrag.adapters.base.hit_metadata`). The async path runs
the engine call on a worker thread.
"""

from __future__ import annotations

import asyncio
from typing import Any

from pydantic import Field, PrivateAttr

from ..engine import Engine
from .base import Op, OwnsEngine, hit_metadata, search

try:
    from langchain_core.callbacks import (
        AsyncCallbackManagerForRetrieverRun,
        CallbackManagerForRetrieverRun,
    )
    from langchain_core.documents import Document
    from langchain_core.retrievers import BaseRetriever
except ImportError as exc:
    raise ImportError(
        f"kgrag.adapters.langchain needs langchain-core: pip install 'kgrag[langchain]' ({exc})",
        name=exc.name,
    ) from exc


class KgragRetriever(OwnsEngine, BaseRetriever):
    """Documents from one kgrag search per query.

    ``op`` picks the search: ``retrieve`` (hybrid dense + BM25 by default),
    ``local`` (HippoRAG-style graph search; passages unless ``params`` names
    units), ``global`` (community reports) or ``drift``. ``params`` are further
    engine params, e.g. ``{"mode": "dense", "filter": {...}}`` for retrieve or
    ``{"level": 0}`` for global.
    """

    engine: Engine
    op: Op = "retrieve"
    k: int = Field(5, ge=1, description="hits per query (per unit for local searches)")
    params: dict[str, Any] = Field(default_factory=dict, description="further engine params")
    _owns_engine: bool = PrivateAttr(default=False)

    def _documents(self, query: str) -> list[Document]:
        hits = search(self.engine, query, op=self.op, k=self.k, params=self.params)
        return [
            Document(id=hit["id"], page_content=hit.get("text", ""), metadata=hit_metadata(hit))
            for hit in hits
        ]

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun
    ) -> list[Document]:
        return self._documents(query)

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun
    ) -> list[Document]:
        return await asyncio.to_thread(self._documents, query)
