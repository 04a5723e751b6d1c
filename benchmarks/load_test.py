"""Sustained load with writes against `kgrag serve --http`, its own process on loopback.

    python benchmarks/load_test.py --graph G --questions benchmarks/data/2wiki_heldout.json \\
        [--clients 32] [--duration 600] [--write-every 3] [--out FILE]

``--clients`` asyncio clients (httpx, keep-alive) each ask, until ``--duration``
seconds have passed, a round of: retrieve hybrid, graph local, global and DRIFT over
RCP, the REST route's ``/v1/retrieval/query``, and the explorer's calls (``/health``,
a community page, the neighbours of a hit), with the questions of ``--questions``.
Beside them a writer adds a marked document every ``--write-every`` seconds and
deletes the one before (with ``--min-writes N``, writes and reads go on past the
duration until N writes have published, for short runs on a slow machine), and one
read in ten asks for the marked documents.

Reported: requests, throughput and p50 / p95 / p99 per op; failed requests (HTTP
status other than 200, a transport error, or a JSON-RPC error) by op and by kind; the
server's resident set at the start and the end (anonymous memory and file pages, the
page cache of the memory-mapped graph, apart), and that of its writer process (the
child that makes its writes; none with ``--writes-in-process``); and the versions:
every ``indexVersion`` an answer names must be one the writer was told of (or the one
served at the start), and every marked document among an answer's hits must be one that
version holds (hits from one version only). ``--graph`` may be a folder (it is written
to: give a copy) or a Neo4j URI. Exit status 1 when any request failed or any check
broke.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import random
import re
import statistics
import subprocess
import sys
import threading
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
MARK = "Oskar Brandvik"
MARKED = re.compile(r"^d:load-(\d+)$")


def start_server(
    graph: str, workers: int, log: Path, *flags: str
) -> tuple[subprocess.Popen[bytes], str]:
    cmd = [sys.executable, "-m", "kgrag", "serve", "--graph", f"g={graph}", "--http"]
    proc = subprocess.Popen(
        [*cmd, "127.0.0.1:0", "--workers", str(workers), "--no-explorer", *flags],
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
    )
    assert proc.stderr is not None
    out = open(log, "wb")  # noqa: SIM115 - the drain thread writes it until the end
    for raw in proc.stderr:
        out.write(raw)
        found = re.search(rb"serving RCP/1 on (http://[\d.]+:\d+)/rcp", raw)
        if found:

            def drain() -> None:
                assert proc.stderr is not None
                for line in proc.stderr:
                    out.write(line)
                out.close()

            threading.Thread(target=drain, daemon=True).start()
            return proc, found[1].decode()
    raise RuntimeError(f"kgrag serve did not start; see {log}")


def memory(pid: int) -> dict[str, int]:
    """Resident KiB of ``pid``: all, anonymous, file pages."""
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, rest = line.partition(":")
        if key in ("VmRSS", "RssAnon", "RssFile"):
            out[key] = int(rest.split()[0])
    return out


def writer_memory(pid: int) -> dict[str, int]:
    """:func:`memory` of the server's writer process (empty while it has none)."""
    import psutil

    for child in psutil.Process(pid).children():
        try:
            if "kgrag.engine.writer" in " ".join(child.cmdline()):
                return memory(child.pid)
        except (psutil.NoSuchProcess, FileNotFoundError):
            continue
    return {}


class Load:
    def __init__(self, base: str, questions: list[str], args: argparse.Namespace) -> None:
        self.base = base
        self.questions = questions
        self.args = args
        self.latency: dict[str, list[float]] = defaultdict(list)
        self.failures: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
        self.failure_samples: list[str] = []
        #: (indexVersion, marked doc ids among the hits) of every answer that names one
        self.seen: list[tuple[str, set[str]]] = []
        self.unversioned: dict[str, int] = defaultdict(int)
        #: the writer's log: (indexVersion, "add"/"delete", doc id)
        self.writes: list[tuple[str, str, str]] = []
        self.ids = itertools.count(1)
        #: the writer is still at work (past the deadline, until --min-writes are done and
        #: the write in flight has ended)
        self.writing = False

    def failed(self, op: str, kind: str, detail: str) -> None:
        self.failures[op][kind] += 1
        if len(self.failure_samples) < 20:
            self.failure_samples.append(f"{op}: {kind}: {detail[:300]}")

    async def rpc(
        self,
        client: Any,
        op: str,
        method: str,
        params: dict[str, Any],
        session: str = "",
        timeout: float | None = None,
    ) -> Any:
        body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
        path = f"/s/{session}/rcp/{method}" if session else f"/rcp/{method}"
        return await self.send(client, op, "POST", path, body, rpc=True, timeout=timeout)

    async def session(self, client: Any, key: str) -> str:
        """A session of its own for one client, initialized."""
        init = {
            "protocolVersion": 1,
            "client": {"name": "load", "version": "1"},
            "capabilities": {},
        }
        await self.rpc(client, "initialize", "initialize", init, key)
        return key

    async def send(
        self,
        client: Any,
        op: str,
        verb: str,
        path: str,
        body: Any = None,
        rpc: bool = False,
        timeout: float | None = None,
    ) -> Any:
        started = time.perf_counter()
        try:
            wait = timeout or self.args.timeout
            resp = await client.request(verb, self.base + path, json=body, timeout=wait)
        except Exception as exc:  # a transport error is a failed request
            self.failed(op, type(exc).__name__, str(exc))
            return None
        self.latency[op].append(time.perf_counter() - started)
        if resp.status_code != 200:
            self.failed(op, f"HTTP {resp.status_code}", resp.text)
            return None
        data = resp.json()
        if rpc:
            if "error" in data:
                self.failed(op, f"JSON-RPC {data['error'].get('code')}", json.dumps(data["error"]))
                return None
            data = data["result"]
        version = data.get("indexVersion") if isinstance(data, dict) else None
        if version is None:
            self.unversioned[op] += 1
        else:
            hits = data.get("hits") or data.get("results") or []
            marked = {
                str((h.get("meta") or {}).get("docId") or h.get("document_id"))
                for h in hits
                if isinstance(h, dict)
            }
            self.seen.append((version, {m for m in marked if MARKED.match(m)}))
        return data

    async def reader(self, client: Any, number: int, deadline: float) -> None:
        rng = random.Random(number)
        seed: str | None = None
        key = await self.session(client, f"reader-{number}-{rng.randrange(1 << 30)}")
        while time.monotonic() < deadline or self.short_of_writes():
            q = rng.choice(self.questions)
            if rng.random() < 0.1:
                q = f"Who is the lighthouse keeper {MARK}?"
            await self.rpc(client, "retrieve hybrid", "retrieve", {"query": q, "k": 10,
                           "mode": "hybrid"}, key)  # fmt: skip
            local = await self.rpc(client, "graph local", "graph", {"op": "local", "query": q,
                                   "k": 10}, key)  # fmt: skip
            await self.rpc(
                client, "graph global", "graph", {"op": "global", "query": q, "k": 5}, key
            )
            await self.rpc(client, "graph drift", "graph", {"op": "drift", "query": q, "k": 5}, key)
            await self.send(client, "rest v1", "POST", "/v1/retrieval/query",
                            {"query": q, "top_k": 5})  # fmt: skip
            await self.send(client, "explorer health", "GET", "/health")
            await self.rpc(client, "explorer communities", "graph", {"op": "communities",
                           "level": 1, "k": 20}, key)  # fmt: skip
            pinned = None
            if local and local.get("hits"):
                seed = str(local["hits"][0]["id"])
                pinned = local.get("indexVersion")
            if seed:
                # the ids come from an answer, so the neighbours are asked of its version
                # (a write since may have removed them from the latest)
                params = {"op": "neighbors", "seedIds": [seed], "hops": 1, "k": 30}
                if pinned:
                    params["indexVersion"] = pinned
                await self.rpc(client, "explorer neighbors", "graph", params, key)

    def short_of_writes(self) -> bool:
        """The writer is still at work and short of ``--min-writes``: reads go on."""
        return self.writing and len(self.writes) < self.args.min_writes

    async def writer(self, client: Any, deadline: float) -> None:
        key = await self.session(client, "writer")
        self.writing = True
        try:
            await self._write(client, key, deadline)
        finally:
            self.writing = False

    async def _write(self, client: Any, key: str, deadline: float) -> None:
        last: str | None = None
        rounds_after = 0  # rounds past the deadline, to reach --min-writes (bounded)
        while time.monotonic() < deadline or (
            len(self.writes) < self.args.min_writes and rounds_after < self.args.min_writes
        ):
            rounds_after += time.monotonic() >= deadline
            await asyncio.sleep(self.args.write_every)
            n = next(self.ids)
            doc = {
                "id": f"load-{n}",
                "title": f"Lighthouse keeper {n}",
                "text": f"{MARK} kept the Skarv lighthouse for {n} years and logged every ship.",
            }
            added = await self.rpc(
                client, "index/add", "index/add", {"documents": [doc]}, key, self.args.write_timeout
            )
            if added:
                self.writes.append((added["indexVersion"], "add", f"d:load-{n}"))
            if last is not None:
                gone = await self.rpc(
                    client,
                    "index/delete",
                    "index/delete",
                    {"ids": [last]},
                    key,
                    self.args.write_timeout,
                )
                if gone:
                    self.writes.append((gone["indexVersion"], "delete", last))
            last = f"d:load-{n}" if added else last

    def check_versions(self, first: str) -> list[str]:
        """What broke: versions nobody published, marked hits a version does not hold."""
        known = {first} | {v for v, _, _ in self.writes}
        held: dict[str, set[str]] = {first: set()}
        present: set[str] = set()
        for version, op, doc in sorted(self.writes):
            if op == "add":
                present.add(doc)
            else:
                present.discard(doc)
            held[version] = set(present)
        broken = []
        for version, marked in self.seen:
            if version not in known:
                broken.append(f"an answer names {version}, which no write published")
            elif not marked <= held[version]:
                broken.append(f"{version} answered {sorted(marked - held[version])}")
        return broken[:20]


async def run(args: argparse.Namespace, base: str, pid: int) -> dict[str, Any]:
    import httpx

    questions = [q["question"] for q in json.loads(Path(args.questions).read_text())]
    load = Load(base, questions, args)
    limits = httpx.Limits(
        max_connections=args.clients + 2, max_keepalive_connections=args.clients + 2
    )
    async with httpx.AsyncClient(timeout=args.timeout, limits=limits) as client:
        # warm up: every op once, then the resident set at the start
        warm = Load(base, questions[:2], args)
        await warm.reader(client, -1, time.monotonic() + 0.1)
        key = await load.session(client, "first")
        first = await load.rpc(client, "warm", "retrieve", {"query": questions[0], "k": 1}, key)
        load.latency.pop("warm", None)
        load.latency.pop("initialize", None)
        load.seen.clear()
        start_mem = memory(pid)
        samples = [start_mem]
        writer_samples = [writer_memory(pid)]
        timeline: list[tuple[float, int, int]] = [(0.0, start_mem["VmRSS"], start_mem["RssAnon"])]
        started = time.monotonic()
        deadline = started + args.duration

        async def sampler() -> None:
            while time.monotonic() < deadline:
                await asyncio.sleep(5)
                samples.append(memory(pid))
                writer_samples.append(writer_memory(pid))
                now = samples[-1]
                timeline.append(
                    (round(time.monotonic() - started, 1), now["VmRSS"], now["RssAnon"])
                )

        await asyncio.gather(
            sampler(),
            load.writer(client, deadline),
            *(load.reader(client, i, deadline) for i in range(args.clients)),
        )
        elapsed = time.monotonic() - started
        end_mem = memory(pid)
        writer_samples.append(writer_memory(pid))
    ops = {}
    for op, times in sorted(load.latency.items()):
        ms = sorted(t * 1000 for t in times)
        q = statistics.quantiles(ms, n=100, method="inclusive") if len(ms) > 1 else ms * 99
        ops[op] = {
            "requests": len(ms),
            "per_s": round(len(ms) / min(elapsed, args.duration), 2),
            "p50_ms": round(q[49], 1),
            "p95_ms": round(q[94], 1),
            "p99_ms": round(q[98], 1),
            "failed": dict(load.failures.get(op, {})),
            "without_version": load.unversioned.get(op, 0),
        }
    failed = sum(sum(kinds.values()) for kinds in load.failures.values())
    return {
        "clients": args.clients,
        "seconds": round(elapsed, 1),
        "requests": sum(o["requests"] for o in ops.values()) + failed,
        "failed": failed,
        "failure_samples": load.failure_samples,
        "ops": ops,
        "writes": len(load.writes),
        "versions_published": len({v for v, _, _ in load.writes}),
        "answers_checked": len(load.seen),
        "marked_hits": sum(len(m) for _, m in load.seen),
        "version_problems": load.check_versions(first["indexVersion"] if first else ""),
        "rss_kib": {
            "start": start_mem,
            "end": end_mem,
            "max": {k: max(s[k] for s in samples + [end_mem]) for k in start_mem},
            # a minute into the load (the clients' working set is in): from there on,
            # growth is what the load leaves behind
            "after_60s": next(
                ({"t": t, "VmRSS": rss, "RssAnon": anon} for t, rss, anon in timeline if t >= 60),
                None,
            ),
            "timeline": timeline,
        },
        "writer_rss_kib": {
            "end": writer_samples[-1],
            "max": {
                k: max(s.get(k, 0) for s in writer_samples) for k in ("VmRSS", "RssAnon", "RssFile")
            },
        },
    }


def table(result: dict[str, Any]) -> str:
    lines = [
        "| op | requests | per s | p50 ms | p95 ms | p99 ms | failed |",
        "|---|---|---|---|---|---|---|",
    ]
    for op, o in result["ops"].items():
        failed = sum(o["failed"].values())
        lines.append(
            f"| {op} | {o['requests']} | {o['per_s']} | {o['p50_ms']} | {o['p95_ms']} "
            f"| {o['p99_ms']} | {failed} |"
        )
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--graph", required=True, help="a graph folder (written to) or a Neo4j URI")
    ap.add_argument("--questions", required=True)
    ap.add_argument("--clients", type=int, default=32)
    ap.add_argument("--duration", type=float, default=600.0, help="seconds of load")
    ap.add_argument("--write-every", type=float, default=3.0, help="seconds between writes")
    ap.add_argument(
        "--min-writes",
        type=int,
        default=0,
        help="go on past --duration (reads too) until this many writes have published",
    )
    ap.add_argument("--workers", type=int, default=4, help="the server's worker threads")
    ap.add_argument("--timeout", type=float, default=120.0, help="a read's client timeout")
    ap.add_argument(
        "--write-timeout", type=float, default=1800.0, help="a write's client timeout (s)"
    )
    ap.add_argument("--out", help="write the result as JSON here (and the server log beside)")
    ap.add_argument(
        "--writes-in-process", action="store_true", help="the server's flag of that name"
    )
    args = ap.parse_args()
    log = Path(args.out).with_suffix(".server.log") if args.out else Path("load-server.log")
    flags = ["--writes-in-process"] if args.writes_in_process else []
    proc, base = start_server(args.graph, args.workers, log, *flags)
    try:
        result = asyncio.run(run(args, base, proc.pid))
    finally:
        proc.terminate()
        code = proc.wait(120)
    result["server_exit"] = code
    text = json.dumps(result, indent=1)
    if args.out:
        Path(args.out).write_text(text)
    print(text)
    print(table(result))
    bad = result["failed"] or result["version_problems"] or code != 0
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
