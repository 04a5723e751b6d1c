"""Measurements behind ``kgrag bench``: ingest, query latency and HTTP throughput.

Each measurement is a plain function that returns JSON-ready figures; the
command (:mod:`kgrag.cli.bench`) runs them in one process and
:mod:`kgrag.bench.report` writes them out. Every figure is measured against a
baseline taken in the same run on the same machine: ingest against bare
encoding of the same passages, each query mode against query encoding plus one
numpy dot, HTTP against the same calls made in-process.
"""

from __future__ import annotations

import http.client
import itertools
import json
import os
import platform
import re
import resource
import statistics
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import numpy as np

from kgrag.config import Config
from kgrag.errors import InputError, KgragError

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def sig(value: float, digits: int = 4) -> float:
    """``value`` to ``digits`` significant figures (a small positive figure stays positive)."""
    return float(f"{value:.{digits}g}")


def machine() -> dict[str, Any]:
    """Where the figures were measured: platform, CPUs, RAM, torch threads, kgrag version."""
    import torch

    from kgrag import __version__

    return {
        "platform": platform.platform(),
        "python": platform.python_version(),
        "cpus": os.cpu_count() or 0,
        "ram_gib": _total_ram_gib(),
        "torch_threads": torch.get_num_threads(),
        "kgrag": __version__,
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }


def _total_ram_gib() -> float | None:
    try:
        text = Path("/proc/meminfo").read_text(encoding="ascii")
    except OSError:
        return None
    found = re.search(r"^MemTotal:\s+(\d+)\s+kB", text, re.MULTILINE)
    return round(int(found[1]) / 2**20, 1) if found else None


def _dir_size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def measure_ingest(corpus: Path, graph: Path, config: Any, *, progress: bool) -> dict[str, Any]:
    """Build ``graph`` from ``corpus``; per-stage seconds against bare encoding.

    The bare side encodes every passage as ``title\\ntext`` with the same model on
    sentence-transformers (torch) after a warm-up, which is what a plain dense index
    costs; the ingest runs the configured runtime."""
    from kgrag.encoders import load_encoder
    from kgrag.engine import ingest, load_documents

    loaded = load_documents([corpus])
    if loaded.errors:
        raise loaded.errors[0]
    if not loaded.documents:
        raise InputError(str(corpus), "no passages to ingest")
    texts = [f"{d.title}\n{d.text}" for d in loaded.documents]
    models = config.models
    encoder = load_encoder(models.embedding, models.batch_size, models.device, "torch")
    encoder.encode(texts[:64])  # warm-up: neither side pays first-call costs
    started = time.perf_counter()
    encoder.encode(texts)
    bare = time.perf_counter() - started

    started = time.perf_counter()
    report = ingest([corpus], graph, config, progress=progress)
    total = time.perf_counter() - started
    if report.errors:
        raise report.errors[0]
    if not report.changed:
        raise KgragError(f"{graph}: the ingest published nothing (the graph already held it)")
    disk = _dir_size(graph)
    return {
        "corpus": str(corpus),
        "graph": str(graph),
        "passages": len(texts),
        "stages_s": {name: sig(s) for name, s in report.seconds.items()},
        # resident MiB at each stage's end, and the process's peak by then
        "stages_mib": {name: [sig(r), sig(p)] for name, (r, p) in report.memory_mib.items()},
        "total_s": sig(total),
        "bare_encode_s": sig(bare),
        "ratio": sig(total / bare, 3),
        # at least each stage's peak: those count resident sets the kernel's mark can miss
        "peak_rss_mib": sig(
            max([_peak_rss_mib(resource.RUSAGE_SELF), *(p for _r, p in report.memory_mib.values())])
        ),
        "peak_rss_children_mib": sig(_peak_rss_mib(resource.RUSAGE_CHILDREN)),
        "disk_bytes": disk,
        "disk_bytes_per_passage": round(disk / len(texts)),
        "counts": dict(report.counts),
    }


def _peak_rss_mib(who: int) -> float:
    return resource.getrusage(who).ru_maxrss / 1024  # Linux reports KiB


def read_questions(path: Path) -> list[str]:
    """The ``question`` texts of a JSON list of objects (MuSiQue, HotpotQA, 2Wiki files)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise InputError(str(path), f"cannot read questions: {exc}") from exc
    if not isinstance(data, list) or not data:
        raise InputError(str(path), "expected a non-empty JSON list of questions")
    questions = []
    for i, item in enumerate(data):
        text = item.get("question") if isinstance(item, dict) else None
        if not isinstance(text, str) or not text.strip():
            raise InputError(str(path), f'item {i} has no "question" text')
        questions.append(text)
    return questions


def default_queries(engine: Any, n: int = 30) -> list[str]:
    """The first sentence of each of the graph's first ``n`` chunks."""
    chunk_ids, _ = engine.reader.vectors("chunks")
    queries = []
    for chunk in engine.reader.chunks(chunk_ids[:n]):
        first = _SENTENCE_END.split(chunk.text.strip(), maxsplit=1)[0][:300]
        if first:
            queries.append(first)
    if not queries:
        raise KgragError("the graph holds no chunk text to query with; pass --questions")
    return queries


def query_modes(engine: Any, k: int) -> dict[str, Callable[[str], Any]]:
    """Each measured mode as a one-question call; the first is the bare baseline
    (sentence-transformers on torch, whatever runtime the engine's encoder is on)."""
    from kgrag.encoders import load_encoder

    ids, matrix = engine.reader.vectors("chunks")
    top_k = min(k, len(ids))
    models = (engine.build_config or Config()).models
    plain = load_encoder(engine.encoder.model_id, models.batch_size, models.device, "torch")

    def bare(q: str) -> list[str]:
        scores = matrix @ plain.encode_one(q)
        top = np.argpartition(-scores, top_k - 1)[:top_k]
        return [ids[i] for i in top[np.argsort(-scores[top])]]

    def retrieve(mode: str) -> Callable[[str], Any]:
        return lambda q: engine.retrieve({"query": q, "k": k, "mode": mode})

    return {
        "bare encode + dot": bare,
        "retrieve dense": retrieve("dense"),
        "retrieve sparse": retrieve("sparse"),
        "retrieve hybrid": retrieve("hybrid"),
        "graph local (chunk)": lambda q: engine.graph(
            {"op": "local", "query": q, "k": k, "unit": "chunk"}
        ),
        "graph global": lambda q: engine.graph({"op": "global", "query": q, "k": 5}),
        "graph drift": lambda q: engine.graph({"op": "drift", "query": q, "k": k}),
    }


def measure_queries(
    engine: Any,
    questions: Sequence[str],
    *,
    repeat: int,
    k: int,
    modes: dict[str, Callable[[str], Any]] | None = None,
) -> dict[str, Any]:
    """p50 / p95 per mode (``query_modes`` unless given; the bare baseline first),
    questions interleaved across modes, after one warm-up each. ``first_p50_ms`` is the
    p50 of the first round alone: every question asked for the first time, so a mode
    that caches per question (global's relation vectors) is not flattered by repeats."""
    started = time.perf_counter()
    modes = modes if modes is not None else query_modes(engine, k)
    for fn in modes.values():  # builds the searches, loads spaCy
        fn(questions[0])
    setup = time.perf_counter() - started
    times: dict[str, list[float]] = {name: [] for name in modes}
    for _ in range(repeat):
        for q in questions:
            for name, fn in modes.items():
                t = time.perf_counter()
                fn(q)
                times[name].append((time.perf_counter() - t) * 1000)
    base = statistics.median(times["bare encode + dot"])
    rows = []
    for name, ts in times.items():
        p50 = statistics.median(ts)
        rows.append(
            {
                "mode": name,
                "p50_ms": sig(p50),
                "p95_ms": sig(float(np.percentile(ts, 95))),
                "ratio_p50": sig(p50 / base, 3),
                "first_p50_ms": sig(statistics.median(ts[: len(questions)])),
            }
        )
    counts = engine.reader.counts()
    return {
        "chunks": counts.get("chunks", 0),
        "entities": counts.get("entities", 0),
        "questions": len(questions),
        "repeat": repeat,
        "k": k,
        "setup_s": sig(setup),
        "rows": rows,
    }


class HttpClient:
    """Keep-alive connections, one per thread, to the server's shared RCP session."""

    def __init__(self, url: str) -> None:
        parts = urlsplit(url)
        self.host, self.port = parts.hostname or "127.0.0.1", parts.port or 80
        self.local = threading.local()
        self.ids = itertools.count(1)
        self.lock = threading.Lock()
        self.opened: list[http.client.HTTPConnection] = []

    def call(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        conn = getattr(self.local, "conn", None)
        if conn is None:
            conn = self.local.conn = http.client.HTTPConnection(self.host, self.port, timeout=300)
            with self.lock:
                self.opened.append(conn)
        body = json.dumps(
            {"jsonrpc": "2.0", "id": next(self.ids), "method": method, "params": params}
        )
        conn.request("POST", f"/rcp/{method}", body, {"Content-Type": "application/json"})
        answer = json.loads(conn.getresponse().read())
        if "error" in answer:
            raise KgragError(f"HTTP {method} failed: {answer['error']}")
        return dict(answer["result"])

    def close(self) -> None:
        with self.lock:
            for conn in self.opened:
                conn.close()
            self.opened.clear()


def timed_run(calls: Sequence[Callable[[], Any]], concurrency: int) -> dict[str, float]:
    """Run ``calls`` on ``concurrency`` threads: qps, p50 and p95 in ms."""
    latencies: list[float] = []
    lock = threading.Lock()

    def timed(fn: Callable[[], Any]) -> None:
        start = time.perf_counter()
        fn()
        with lock:
            latencies.append((time.perf_counter() - start) * 1000)

    started = time.perf_counter()
    with ThreadPoolExecutor(concurrency) as pool:
        list(pool.map(timed, calls))
    wall = time.perf_counter() - started
    latencies.sort()
    return {
        "qps": sig(len(calls) / wall),
        "p50_ms": sig(statistics.median(latencies)),
        "p95_ms": sig(latencies[int(0.95 * (len(latencies) - 1))]),
    }


def measure_http(
    graph: Path, questions: Sequence[str], *, levels: Sequence[int], repeat: int, k: int
) -> dict[str, Any]:
    """``retrieve`` hybrid over HTTP (in-process server, loopback) against direct calls.

    Both sides call the same engine, so the ratio HTTP qps / in-process qps is
    what the protocol and the transport cost."""
    from kgrag.server import Graphs, Running, create_app

    jobs = [{"query": q, "k": k, "mode": "hybrid"} for q in questions] * repeat
    rows = []
    graphs = Graphs.open([str(graph)], writable=False)
    try:
        engine = graphs.get()
        with Running(create_app(graphs)) as running:
            client = HttpClient(running.url)
            try:
                client.call(
                    "initialize",
                    {"protocolVersion": 1, "client": {"name": "kgrag-bench", "version": "1"}},
                )
                for c in levels:
                    sides: dict[str, Callable[[dict[str, Any]], Any]] = {
                        "in-process": engine.retrieve,
                        "http": lambda p: client.call("retrieve", p),
                    }
                    row: dict[str, Any] = {"op": "retrieve hybrid", "concurrency": c}
                    for side, fn in sides.items():
                        calls = [lambda p=p, fn=fn: fn(p) for p in jobs]
                        timed_run(calls[: max(c, 8)], c)  # warm-up
                        row[side] = timed_run(calls, c)
                    row["ratio_qps"] = sig(row["http"]["qps"] / row["in-process"]["qps"], 3)
                    rows.append(row)
            finally:
                client.close()
    finally:
        graphs.close()
    return {"requests": len(jobs), "k": k, "rows": rows}
