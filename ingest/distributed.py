"""Ingest on a Ray cluster: files are read and documents parsed on its workers.

``kgrag ingest PATH... --graph G --ray auto|ADDRESS`` runs the per-document stages
as Ray Data ``map_batches``: reading files as tasks, then chunk, extract and the
encoder's chunk pass (:mod:`ingest.parse`) over a pool of actors, each of which loads
spaCy and the encoder once. The global stages (resolve, communities, RAPTOR,
commit) run here, on the driver, over the gathered results. Documents are cut into
batches in id order and the batches joined in that order, so the graph is the one
one process builds: the same ids, entities, relations and communities, and vectors
within float tolerance (an encoder batch pads its texts to different lengths).

Files are read by path on the workers, so every node must see them at the same path
as the driver (one machine, or a shared filesystem). A parse worker that dies is
restarted and its batch run again, and a read task retried (Ray Data's defaults); an
error raised by the work itself, or a failure past the retries, raises before
anything is committed, so the version that was serving keeps serving.
"""

from __future__ import annotations

import logging
import os
import pickle
import socket
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from kgrag.config import Config
from kgrag.encoders import Encoder
from kgrag.errors import ClusterError, Unsupported
from kgrag.types import Document

from .load import LoadResult, find_files, read_file_at
from .parse import Flags, Parsed, build_encoder, parse_documents
from .progress import Stages

#: the most documents one parse call takes: a worker sorts a batch's chunks by length
#: before encoding, so that little of each encoder batch is padding, and a small batch
#: pads more (64 documents a call took twice the encoder time of 300 on 2Wiki)
MAX_BATCH = 1024


@dataclass(frozen=True, slots=True)
class RayOptions:
    """Where and how wide to run: ``address`` "auto" (the cluster this machine runs,
    else a new one here: :func:`running_cluster`), "local" (a new one here) or a
    cluster's address."""

    address: str = "auto"
    #: parse actors; None: as many as the cluster has CPUs for
    workers: int | None = None
    cpus_per_worker: float = 1.0
    #: documents per parse batch (the unit a dead worker's retry redoes); None: the
    #: documents shared evenly among the workers, at most :data:`MAX_BATCH` a batch
    docs_per_batch: int | None = None


def _import_ray() -> Any:
    try:
        import ray
        import ray.data  # noqa: F401
    except ImportError:
        raise Unsupported(
            "--ray needs Ray: pip install 'kgrag[ray]' (or ray[data]) on this machine "
            "and on the cluster's nodes"
        ) from None
    return ray


@contextmanager
def ray_session(options: RayOptions, progress: bool = False) -> Iterator[RaySession]:
    """A session on the cluster ``options`` names; a connection this opened is closed
    after. A process already connected to Ray uses that connection."""
    ray = _import_ray()
    if not progress:
        for name in ("ray", "ray.data"):
            logging.getLogger(name).setLevel(logging.WARNING)
    opened = False
    if not ray.is_initialized():
        _connect(ray, options, progress)
        opened = True
    session = RaySession(ray, options, progress)
    try:
        yield session
    finally:
        session.close()
        if opened:
            ray.shutdown()


def _connect(ray: Any, options: RayOptions, progress: bool) -> None:
    quiet: dict[str, Any] = {
        "include_dashboard": False,
        "log_to_driver": progress,
        "logging_level": logging.WARNING,
    }
    address = options.address
    try:
        if address == "local":
            ray.init(**quiet)
        elif address == "auto":
            running = running_cluster()
            if running:
                _reachable(running)
            ray.init(**({"address": running} if running else {}), **quiet)
        else:
            _reachable(address)
            ray.init(address=address, **quiet)
    except ClusterError:
        raise
    except Exception as exc:  # Ray raises ConnectionError, RuntimeError, ValueError...
        ray.shutdown()
        raise ClusterError(
            f"cannot reach the Ray cluster at {address!r}: {_first_line(exc)}", address=address
        ) from None


def running_cluster() -> str | None:
    """The address of the Ray cluster this machine runs, as Ray's own "auto" finds it
    (``RAY_ADDRESS``, else the file a head node leaves in Ray's temporary folder), if
    something answers there: Ray would retry a dead cluster's address for minutes."""
    address = os.environ.get("RAY_ADDRESS", "").strip()
    if address:
        return address  # asked for by name: an error if it does not answer
    temp = os.environ.get("RAY_TMPDIR") or tempfile.gettempdir()
    try:
        address = (Path(temp) / "ray" / "ray_current_cluster").read_text().strip()
    except OSError:
        return None
    try:
        _reachable(address, timeout=2.0)
    except ClusterError:
        return None  # left by a cluster that is gone
    return address


def _reachable(address: str, timeout: float = 5.0) -> None:
    """Raise a :class:`ClusterError` unless something listens at ``address``
    ("host:port" or "ray://host:port"): Ray itself retries an address that does not
    answer for minutes."""
    where = address.split("://", 1)[-1].rstrip("/")
    host, sep, port = where.rpartition(":")
    if not sep or not port.isdigit():
        raise ClusterError(
            f"--ray {address!r}: expected auto, local, HOST:PORT or ray://HOST:PORT",
            address=address,
        )
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=timeout).close()
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise ClusterError(
            f"cannot reach the Ray cluster at {address!r}: {reason.lower()}", address=address
        ) from None


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


class RaySession:
    """Reads files and parses documents on the cluster's workers."""

    def __init__(self, ray: Any, options: RayOptions, progress: bool) -> None:
        self.ray = ray
        self.options = options
        context = ray.data.DataContext.get_current()
        context.enable_progress_bars = progress
        context.execution_options.preserve_order = True
        cpus = float(ray.cluster_resources().get("CPU", 1.0))
        self.workers = options.workers or max(1, int(cpus // options.cpus_per_worker))
        #: seconds each parse worker spent on batches (its model loads left out)
        self.busy: dict[str, float] = {}
        self.actors: list[Any] = []  # encode actors, while the global stages run
        #: wall seconds the global stages waited on the encode actors
        self.encode_seconds = 0.0

    def load(self, paths: Sequence[str | Path]) -> LoadResult:
        """:func:`ingest.load.load_paths`, each file read on a worker (fewer files than
        two a worker are read here: starting the tasks would cost more)."""
        found = find_files(paths)
        if len(found.files) < 2 * self.workers:
            return found.result([read_file_at(path, key) for path, key in found.files])
        items = [{"path": str(p), "key": k} for p, k in found.files]
        ds = self.ray.data.from_items(items, override_num_blocks=min(len(items), 4 * self.workers))
        reads = ds.map_batches(
            _read_files,
            fn_kwargs={"cwd": os.getcwd()},
            batch_size=16,
            batch_format="pandas",
        )
        rows = self._gather(reads, "reading files")
        return found.result([pickle.loads(r["read"]) for r in rows])

    def parse(
        self, docs: Sequence[Document], c: Config, encoder: Encoder, stages: Stages, flags: Flags
    ) -> Parsed:
        """:func:`ingest.parse.parse_documents` over ``docs``, a batch per actor call."""
        size = self.options.docs_per_batch or min(MAX_BATCH, -(-len(docs) // self.workers))
        batches = [list(docs[i : i + size]) for i in range(0, len(docs), size)]
        if not batches:
            return parse_documents([], c, encoder, flags=flags)
        items = [{"index": i, "docs": pickle.dumps(b)} for i, b in enumerate(batches)]
        ds = self.ray.data.from_items(items, override_num_blocks=len(items))
        parsed = ds.map_batches(
            ParseWorker,
            fn_constructor_kwargs={
                "config": c.model_dump_json(),
                "flags": flags,
                "threads": max(1, int(self.options.cpus_per_worker)),
            },
            batch_size=1,
            batch_format="pandas",
            compute=self.ray.data.ActorPoolStrategy(
                size=min(self.workers, len(items)), max_tasks_in_flight_per_actor=1
            ),
            num_cpus=self.options.cpus_per_worker,
        )
        with stages.stage("parse", len(docs)) as tick:
            self._encode_actors(c)  # their model loads overlap the parse
            parts: dict[int, Parsed] = {}
            for row in self._gather(parsed, "parsing documents"):
                parts[int(row["index"])] = pickle.loads(row["parsed"])
                tick(len(batches[int(row["index"])]))
                name = str(row["worker"])
                self.busy[name] = self.busy.get(name, 0.0) + float(row["seconds"])
        return Parsed.join([parts[i] for i in range(len(batches))], encoder.dim)

    def encoder(self, local: Encoder, c: Config) -> Encoder:
        """An encoder whose calls are spread over encode actors on the cluster (for the
        global stages' texts: entity names, facts' predicates, reports, tree nodes);
        ``local`` answers what needs no model pass. The actors start at its first call
        and stop when a parse needs their CPUs, or at the session's end."""
        return PoolEncoder(lambda: self._encode_actors(c), local, self.workers, self)

    def _encode_actors(self, c: Config) -> list[Any]:
        """The encode actors, started on first use. They reserve no CPU, so they load
        their model while the parse actors work (the global stages they serve come
        after the parse); the scheduler spreads them over the nodes."""
        if not self.actors:
            remote = self.ray.remote(num_cpus=0)(EncodeWorker)
            self.actors = [
                remote.options(
                    max_restarts=-1, max_task_retries=-1, scheduling_strategy="SPREAD"
                ).remote(c.model_dump_json(), max(1, int(self.options.cpus_per_worker)))
                for _ in range(self.workers)
            ]
        return self.actors

    def close(self) -> None:
        """Let the encode actors go."""
        for actor in self.actors:
            self.ray.kill(actor)
        self.actors = []

    def _gather(self, ds: Any, doing: str) -> list[dict[str, Any]]:
        try:
            return list(ds.iter_rows())
        except Exception as exc:
            raise ClusterError(f"Ray failed while {doing}: {_first_line(exc)}") from None


def _read_files(batch: Any, cwd: str) -> Any:
    """Read a batch of files (a Ray Data task): their :class:`FileRead` s, pickled."""
    import pandas as pd

    os.chdir(cwd)  # paths are as the driver was given them
    pairs = zip(batch["path"], batch["key"], strict=True)
    reads = [pickle.dumps(read_file_at(Path(p), k)) for p, k in pairs]
    return pd.DataFrame({"read": reads})


class ParseWorker:
    """A Ray Data actor: spaCy and the encoder loaded once, then a batch of documents
    per call, parsed and encoded (:func:`ingest.parse.parse_documents`)."""

    def __init__(self, config: str, flags: Flags, threads: int) -> None:
        import torch

        from kgrag.text.nlp import load_spacy

        torch.set_num_threads(threads)
        self.config = Config.model_validate_json(config)
        self.flags: Flags = (bool(flags[0]), bool(flags[1]))
        self.encoder = build_encoder(self.config)
        load_spacy(self.config.models.spacy)
        self.name = f"{socket.gethostname()}:{os.getpid()}"

    def __call__(self, batch: Any) -> Any:
        import pandas as pd

        out, seconds = [], []
        for blob in batch["docs"]:
            start = time.perf_counter()
            docs = pickle.loads(blob)
            parsed = parse_documents(docs, self.config, self.encoder, flags=self.flags, n_process=1)
            out.append(pickle.dumps(parsed))
            seconds.append(time.perf_counter() - start)
        return pd.DataFrame(
            {
                "index": np.asarray(batch["index"]),
                "parsed": out,
                "seconds": seconds,
                "worker": [self.name] * len(out),
            }
        )


class EncodeWorker:
    """A Ray actor holding the encoder: texts (and spans) in, vectors out."""

    def __init__(self, config: str, threads: int) -> None:
        import torch

        os.environ["OMP_NUM_THREADS"] = str(threads)  # ONNX Runtime's threads too
        torch.set_num_threads(threads)
        self.encoder = build_encoder(Config.model_validate_json(config))

    def encode_spans(
        self, texts: list[str], spans: list[list[tuple[int, int]]]
    ) -> tuple[np.ndarray, list[np.ndarray]]:
        return self.encoder.encode_spans(texts, spans)


class PoolEncoder(Encoder):
    """An :class:`Encoder` whose calls are cut into one piece per actor of a pool and
    run at once; token counts come from the ``local`` encoder's tokenizer."""

    #: texts per piece an actor encodes in one call
    PIECE = 256

    def __init__(
        self, actors: Callable[[], list[Any]], local: Encoder, workers: int, session: RaySession
    ) -> None:
        self.ray = session.ray
        self.session = session
        self.actors = actors
        self.local = local
        self.model_id, self.dim = local.model_id, local.dim
        self.texts_per_call = self.PIECE * workers

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        return self.encode_spans(texts, [[] for _ in texts])[0]

    def encode_spans(
        self, texts: Sequence[str], spans: Sequence[Sequence[tuple[int, int]]]
    ) -> tuple[np.ndarray, list[np.ndarray]]:
        if not texts:
            return np.zeros((0, self.dim), np.float32), []
        start = time.perf_counter()
        actors = self.actors()
        size = -(-len(texts) // len(actors))
        futures = [
            actor.encode_spans.remote(
                list(texts[i : i + size]), [list(s) for s in spans[i : i + size]]
            )
            for actor, i in zip(actors, range(0, len(texts), size), strict=False)
        ]
        try:
            parts = self.ray.get(futures)
        except Exception as exc:
            raise ClusterError(f"Ray failed while encoding: {_first_line(exc)}") from None
        vectors = np.concatenate([p[0] for p in parts]).astype(np.float32, copy=False)
        self.session.encode_seconds += time.perf_counter() - start
        return vectors, [m for p in parts for m in p[1]]

    def token_counts(self, texts: Sequence[str]) -> np.ndarray:
        return self.local.token_counts(texts)
