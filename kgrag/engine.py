"""The engine facade: open a graph, retrieve from it.

The server and the CLI call this and nothing below it. ``retrieve`` takes the
RCP/1 ``retrieve`` params (spec §7.7) and returns the RCP result; a pinned
``indexVersion`` is served from that version or refused with -32010.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from .config import Config, RetrievalConfig
from .encoders import Encoder, load_encoder
from .retrieval.graph_ops import OPS
from .retrieval.pipeline import Retriever
from .retrieval.state import Sessions
from .store import GraphReader, GraphStore, open_store

#: graph ops offered (RCP/1 §7.9)
GRAPH_OPS = OPS
#: retrievers kept open for pinned older versions
_PINNED_CACHE = 4


class Engine:
    """Retrieval over one graph folder: its latest version, or a pinned older one."""

    def __init__(
        self, store: GraphStore, reader: GraphReader, encoder: Encoder, config: RetrievalConfig
    ) -> None:
        self.store = store
        self.reader = reader
        self.encoder = encoder
        self.config = config
        self.sessions = Sessions()
        self._retrievers: dict[str, Retriever] = {}
        self._lock = threading.Lock()

    @property
    def index_version(self) -> str:
        return self.reader.index_version

    def retriever(self, version: str | None = None) -> Retriever:
        """The retriever of ``version`` (the opened one when None)."""
        version = version or self.reader.index_version
        with self._lock:
            if version not in self._retrievers:
                reader = (
                    self.reader
                    if version == self.reader.index_version
                    else self.store.reader(version)
                )
                if len(self._retrievers) >= _PINNED_CACHE:
                    old = next(v for v in self._retrievers if v != self.reader.index_version)
                    self._retrievers.pop(old).reader.close()
                self._retrievers[version] = Retriever(
                    reader, self.encoder, self.config, sessions=self.sessions
                )
            return self._retrievers[version]

    def retrieve(self, params: dict[str, Any]) -> dict[str, Any]:
        """Run the RCP ``retrieve`` method; see :mod:`kgrag.retrieval.pipeline`."""
        version = params.get("indexVersion") if isinstance(params, dict) else None
        return self.retriever(version if isinstance(version, str) else None).retrieve(params)

    def graph(self, params: dict[str, Any]) -> dict[str, Any]:
        """Run the RCP ``graph`` method (ops local, global, drift, communities, neighbors);
        see :mod:`kgrag.retrieval.graph_ops`."""
        version = params.get("indexVersion") if isinstance(params, dict) else None
        return self.retriever(version if isinstance(version, str) else None).graph_ops.run(params)

    def query(
        self, text: str, *, k: int = 5, unit: str = "chunk", mode: str = "hybrid"
    ) -> list[dict[str, Any]]:
        """Shorthand: the hits of ``retrieve`` for one text query."""
        return self.retrieve({"query": text, "k": k, "unit": unit, "mode": mode})["hits"]

    def close(self) -> None:
        with self._lock:
            for r in self._retrievers.values():
                if r.reader is not self.reader:
                    r.reader.close()
            self._retrievers.clear()
        self.reader.close()

    def __enter__(self) -> Engine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open(  # noqa: A001 - the public name is kgrag.open
    path: str | Path, *, index_version: str | None = None, config: Config | None = None
) -> Engine:
    """Open the graph folder ``path`` (its latest version unless ``index_version``)."""
    config = config or Config()
    store = open_store(path, keep_versions=config.store.keep_versions)
    reader = store.reader(index_version)
    models = reader.manifest.get("models", {})
    encoder = load_encoder(
        models.get("embedding", config.models.embedding),
        config.models.batch_size,
        config.models.device,
    )
    return Engine(store, reader, encoder, config.retrieval)
