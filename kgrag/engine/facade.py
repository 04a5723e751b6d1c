"""The engine facade: open a graph, retrieve from it.

The server and the CLI call this and nothing below it. ``retrieve`` takes the
RCP/1 ``retrieve`` params (spec §7.7) and returns the RCP result; a pinned
``indexVersion`` is served from that version or refused with -32010.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from kgrag.config import Config, RetrievalConfig
from kgrag.encoders import Encoder, load_encoder
from kgrag.engine.graph import OPS, GraphOps
from kgrag.errors import InvalidParams, NotFound, VersionGone
from kgrag.rcp.sessions import Sessions
from kgrag.retrieval.pipeline import Progress, Retriever
from kgrag.store import GraphReader, GraphStore, open_store
from kgrag.threads import give_back

#: graph ops offered (RCP/1 §7.9)
GRAPH_OPS = OPS
#: retrievers kept open for pinned older versions
_PINNED_CACHE = 4
#: seconds a pinned older version's retriever is kept without a call
_PINNED_IDLE = 60.0


class Engine:
    """Retrieval over one graph folder: its latest version, or a pinned older one."""

    def __init__(
        self,
        store: GraphStore,
        reader: GraphReader,
        encoder: Encoder,
        config: RetrievalConfig,
        *,
        build_config: Config | None = None,
    ) -> None:
        self.store = store
        self.build_config = build_config
        self.reader = reader
        self.encoder = encoder
        self.config = config
        self.sessions = Sessions()
        self._retrievers: dict[str, Retriever] = {}
        self._used: dict[str, float] = {}  # version -> when a call last asked for it
        self._lock = threading.Lock()
        self._feedback: Any = None
        #: unpinned calls serve the store's latest version (False: the one opened)
        self.follow_latest = True
        #: where writes run when not in this process (:meth:`write_apart`)
        self.writer: Any = None
        #: the location the engine was opened from (a folder or a Neo4j URI), when known
        self.location: str | None = None

    def write_apart(self) -> None:
        """Make ``add`` and ``delete`` run in a child process of their own
        (:class:`kgrag.engine.writer.WriterProcess`), as a server does: its memory and
        its interpreter stay its readers'. Needs the location the engine was opened from."""
        from kgrag.engine.writer import WriterProcess

        if self.location is None:
            raise InvalidParams("writes apart need an engine opened by location", field="graph")
        if self.writer is None:
            self.writer = WriterProcess(self.location, self.build_config or Config())

    @property
    def index_version(self) -> str:
        return self.reader.index_version

    @property
    def feedback_store(self) -> Any:
        """The graph's feedback (a SQLite file beside its versions), opened on first use."""
        with self._lock:
            return self._feedback_unlocked()

    def retriever(self, version: str | None = None) -> Retriever:
        """The retriever of ``version`` (the latest published one when None)."""
        with self._lock:
            version = version or self._latest()
            now = time.monotonic()
            self._forget_idle(now)
            self._used[version] = now
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
                    reader,
                    self.encoder,
                    self.config,
                    sessions=self.sessions,
                    feedback=self._feedback_unlocked(),
                )
            return self._retrievers[version]

    def _forget_idle(self, now: float) -> None:
        """Let go of older versions' retrievers no call has asked for in a while (lock
        held): a pinned version's memory is not kept for good. A call still on one keeps
        it (and its reader) until it ends, as after a publish."""
        current = self.reader.index_version
        idle = [
            v
            for v in self._retrievers
            if v != current and now - self._used.get(v, 0.0) > _PINNED_IDLE
        ]
        for v in idle:
            del self._retrievers[v]
        for v in [v for v in self._used if v not in self._retrievers and v != current]:
            del self._used[v]
        if idle:
            give_back()

    def _feedback_unlocked(self) -> Any:
        if self._feedback is None:
            from kgrag.rcp.feedback import FeedbackStore

            self._feedback = FeedbackStore(self.store.root)
        return self._feedback

    def _latest(self) -> str:
        """The version unpinned calls serve; follows the store's latest (lock held)."""
        if self.follow_latest:
            current = self.store.current()
            if current and current != self.reader.index_version:  # a writer published since
                # the version unpinned calls served until now is let go: calls still on
                # it keep their retriever until they end; a pinned call opens it again
                self._retrievers.pop(self.reader.index_version, None)
                self.reader = self.store.reader(current)
        return self.reader.index_version

    def _pinned(self, params: Any) -> Retriever:
        """The retriever of the call's ``indexVersion`` (the latest when absent). A pinned
        call holds a lease on its version (:meth:`GraphStore.lease`): later writes keep
        it until the lease runs out; a version no longer stored is refused (-32010)."""
        version = params.get("indexVersion") if isinstance(params, dict) else None
        if not isinstance(version, str):
            return self.retriever(None)
        if not self.store.lease(version):
            with self._lock:  # calls still on it finish; its reader goes with the last
                self._retrievers.pop(version, None)
            raise VersionGone(f"indexVersion {version!r} is no longer stored", indexVersion=version)
        return self.retriever(version)

    def capabilities(self) -> dict[str, Any]:
        """The RCP/1 capabilities this graph offers (spec §6), transport aside."""
        from kgrag.engine import tools
        from kgrag.rcp.sessions import SESSION_TTL_SECONDS
        from kgrag.retrieval.filters import OPERATORS

        r = self.retriever()
        caps: dict[str, Any] = {
            "retrieve": r.capabilities() | {"modalities": ["text"]},
            "filter": {"fields": dict(r.fields), "operators": list(OPERATORS)},
            "graph": {"ops": list(GRAPH_OPS)},
            "embed": tools.embed_capability(r),
            "transform": tools.transform_capability(r),
            "index": {"writable": True, "chunking": True, "contextual": True},
            "session": {"dedup": True, "ttlSeconds": SESSION_TTL_SECONDS},
            "feedback": {},
            "memory": tools.memory_capability(),
            "pagination": {},
            "citations": {},
        }
        rerank = tools.rerank_capability(r)
        if rerank:
            caps["rerank"] = rerank
        return caps

    def retrieve(
        self, params: dict[str, Any], *, progress: Progress | None = None
    ) -> dict[str, Any]:
        """Run the RCP ``retrieve`` method; see :mod:`kgrag.retrieval.pipeline`.
        ``progress(stage, fraction, message, partial)`` hears of each stage."""
        return self._pinned(params).retrieve(params, progress=progress)

    def graph(self, params: dict[str, Any]) -> dict[str, Any]:
        """Run the RCP ``graph`` method (ops local, global, drift, communities, neighbors);
        see :mod:`kgrag.engine.graph`."""
        return GraphOps(self._pinned(params)).run(params)

    def chunks(self) -> list[dict[str, Any]]:
        """Every chunk of the latest version, hit-shaped (``id``, ``text``, ``meta``,
        ``citation``, ``chunk``), in store order; for callers that scope a corpus.
        The records are shared: read them, do not change them."""
        r = self.retriever()
        records = r.chunk_records
        if records is None:  # built once per version
            records = r.chunk_records = _records(r.sources["chunk"].items)
        return records

    def pages(self) -> list[dict[str, Any]]:
        """Every page (unit ``page``: a PDF page or slide) of the latest version,
        hit-shaped like :meth:`chunks`; built once per version, shared."""
        r = self.retriever()
        records = r.page_records
        if records is None:
            records = r.page_records = _records(r.sources["page"].items)
        return records

    def image(self, doc_id: str, number: int) -> tuple[bytes, str]:
        """The bytes and MIME type of picture ``number`` (1-based, its ``[Image N]``
        placeholder) of a document read from a file, in the latest version."""
        import base64

        found = self.retriever().reader.documents([doc_id])
        if not found:
            raise NotFound(f"no document {doc_id!r} in this graph")
        images = (found[0].meta.get("layout") or {}).get("images") or []
        if not 1 <= number <= len(images) or not images[number - 1].get("data"):
            raise NotFound(f"document {doc_id!r} has no picture {number}")
        image = images[number - 1]
        return base64.b64decode(image["data"]), str(image.get("mime") or "")

    def embed(self, params: dict[str, Any]) -> dict[str, Any]:
        """RCP ``embed`` (§7.3): one vector per input, as JSON or ``f32-base64``."""
        from kgrag.engine import tools

        return tools.embed(self.retriever(), params)

    def rerank(self, params: dict[str, Any]) -> dict[str, Any]:
        """RCP ``rerank`` (§7.6): a score per passage, and the order best-first."""
        from kgrag.engine import tools

        return tools.rerank(self.retriever(), params)

    def transform(self, params: dict[str, Any]) -> dict[str, Any]:
        """RCP ``query/transform`` (§7.8)."""
        from kgrag.engine import tools

        return tools.transform_query(self.retriever(), params)

    def memory_build(self, params: dict[str, Any]) -> dict[str, Any]:
        """RCP ``memory/build`` (§7.17): the graph is the memory; its id names the version."""
        from kgrag.engine import tools

        return tools.memory_build(self.retriever(), params)

    def memory_recall(self, params: dict[str, Any]) -> dict[str, Any]:
        """RCP ``memory/recall`` (§7.17): entry points (seed entities and facts) for a query."""
        from kgrag.engine import tools

        return tools.memory_recall(self.retriever(), params)

    def feedback(self, params: dict[str, Any]) -> dict[str, Any]:
        """RCP ``feedback`` (§7.16): signals are stored; hits flagged as poisoned or
        injected sink below the others in calls that start afterwards."""
        return self.feedback_store.record(params)

    def add(
        self, documents: Sequence[Any], *, chunk: bool = True, contextual: bool = False
    ) -> dict[str, Any]:
        """RCP ``index/add`` (§7.10): upsert ``{id?, text, meta?, title?}`` documents.

        Returns ``{"ids", "chunks", "indexVersion"}``, ids in input order. A
        document with an explicit id replaces the stored one of that id; one
        without gets a hash of its title and text. One new version is published
        (none when nothing changed); unpinned calls then serve it.
        """
        from ingest.incremental.update import apply_update, documents_from_params

        docs = documents_from_params(documents)
        try:
            if self.writer is not None:
                result = self.writer.call("add", add=docs, split=chunk, contextual=contextual)
            else:
                result = apply_update(
                    self.store,
                    self._build_config(),
                    self.encoder,
                    add=docs,
                    split=chunk,
                    contextual=contextual,
                )
        finally:
            give_back()  # the update held the whole graph: its pages go back to the system
        with self._lock:
            self._latest()
        return {"ids": result.ids, "chunks": result.chunks, "indexVersion": result.index_version}

    def delete(self, ids: Sequence[str]) -> dict[str, Any]:
        """RCP ``index/delete`` (§7.11): remove documents by id; absent ids are ignored.

        Returns ``{"deleted", "indexVersion"}``; a repeat deletes 0 and publishes nothing.
        """
        from ingest.incremental.update import apply_update

        if not isinstance(ids, (list, tuple)) or not all(isinstance(i, str) for i in ids):
            raise InvalidParams("ids must be an array of strings", field="ids")

        try:
            if self.writer is not None:
                result = self.writer.call("delete", delete=list(ids))
            else:
                result = apply_update(self.store, self._build_config(), self.encoder, delete=ids)
        finally:
            give_back()
        with self._lock:
            self._latest()
        return {"deleted": result.deleted, "indexVersion": result.index_version}

    def _build_config(self) -> Config:
        """The settings the graph was built with (from its manifest)."""
        from kgrag.engine.writer import write_config

        return write_config(self.store.manifest(), self.build_config or Config())

    def query(
        self, text: str, *, k: int = 5, unit: str = "chunk", mode: str = "hybrid"
    ) -> list[dict[str, Any]]:
        """Shorthand: the hits of ``retrieve`` for one text query."""
        return self.retrieve({"query": text, "k": k, "unit": unit, "mode": mode})["hits"]

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()  # after the write in progress, if any
        with self._lock:
            for r in self._retrievers.values():
                if r.reader is not self.reader:
                    r.reader.close()
            self._retrievers.clear()
            if self._feedback is not None:
                self._feedback.close()
        self.reader.close()
        self.store.close()

    def __enter__(self) -> Engine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open(  # noqa: A001 - the public name is kgrag.open
    path: str | Path, *, index_version: str | None = None, config: Config | None = None
) -> Engine:
    """Open the graph folder ``path`` (its latest version unless ``index_version``)."""
    config = config or Config()
    store = open_store(
        path,
        **config.store.model_dump(),
    )
    reader = store.reader(index_version)
    models = reader.manifest.get("models", {})
    encoder = load_encoder(
        models.get("embedding", config.models.embedding),
        config.models.batch_size,
        config.models.device,
        config.models.runtime,
    )
    engine = Engine(store, reader, encoder, config.retrieval, build_config=config)
    engine.follow_latest = index_version is None
    engine.location = str(path)
    return engine


def _records(items: Any) -> list[dict[str, Any]]:
    return [
        {
            "id": it.id,
            "text": it.text,
            "meta": dict(it.meta),
            "citation": dict(it.citation),
            "chunk": dict(it.chunk or {}),
        }
        for it in items
    ]
