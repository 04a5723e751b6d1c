"""What serving a graph costs a fresh process, against a bare dense-search process.

    python benchmarks/serving_bench.py --graph G --questions Q [--n 100] [--out FILE]
        [--memory-limit MIB]

Two child processes, each started fresh (the graph's files may sit in the page
cache; nothing is dropped from it):

- bare: imports sentence-transformers, loads MiniLM from its package, loads the
  chunk vectors (``np.load``), encodes one question and takes its top 10 by a
  numpy dot; then answers the ``--n`` questions the same way.
- kgrag: ``kgrag.open(G)`` and one ``graph local`` (unit chunk); then the
  ``--n`` questions through ``retrieve`` hybrid, ``graph local`` and ``graph
  global``, interleaved.

With ``--memory-limit MIB`` the kgrag child runs once more inside a memory cgroup
of that size (a container's limit: its anonymous memory and the page cache it
reads are charged together and the kernel reclaims file pages to stay under it),
after the graph's files are dropped from the page cache.

Reported: seconds from process start to the first answer, p50 / p95 ms per op,
the peak RSS after the questions (``ru_maxrss``) and what is resident then, split
into private anonymous memory and mapped file pages (clean page cache the kernel
can drop and re-read: the ANN indexes, graph arrays and vectors a reader maps),
the first-answer gap
(kgrag - bare) and RSS ratio, and the bytes on disk per document of the graph's
current version. BLAS runs on one thread in both processes, torch on its default.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]

_COMMON = """
import json, os, resource, sys, time
T0 = float(sys.argv[1])
os.environ.setdefault("HF_HUB_OFFLINE", "1")
for v in ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):  # BLAS on one thread; torch as it is
    os.environ[v] = "1"
graph, questions_path, n = sys.argv[2], sys.argv[3], int(sys.argv[4])
questions = [q["question"] for q in json.load(open(questions_path))][:n]
def rss(): return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
def split():  # resident now: private anonymous memory, and mapped file pages (page cache)
    found = {}
    with open("/proc/self/smaps_rollup") as f:
        for line in f:
            part = line.split()
            if part[0] in ("Rss:", "Anonymous:"):
                found[part[0]] = int(part[1]) / 1024
    anon = found.get("Anonymous:", 0.0)
    return {"anon_mib": round(anon, 1), "file_mib": round(found.get("Rss:", 0.0) - anon, 1)}
def pct(xs, p):
    xs = sorted(xs); return round(xs[min(len(xs) - 1, int(p * len(xs)))] * 1000, 1)
"""

_BARE = (
    _COMMON
    + """
import numpy as np, torch

from sentence_transformers import SentenceTransformer
from kgrag.encoders.sentence import resolve_model_path
manifest = json.load(open(os.path.join(graph, "manifest.json")))
folder = os.path.join(graph, "versions", manifest["indexVersion"])
meta = manifest["versions"][manifest["indexVersion"]]
model = SentenceTransformer(str(resolve_model_path(meta["models"]["embedding"])), device="cpu")
matrix = np.load(os.path.join(folder, "vectors", "chunks.npy"))
def ask(q):
    v = model.encode([q], normalize_embeddings=True)[0]
    s = matrix @ v
    top = np.argpartition(-s, 9)[:10]
    return top[np.argsort(-s[top])]
ask(questions[0])
first = time.time() - T0
times = []
for q in questions:
    t = time.perf_counter(); ask(q); times.append(time.perf_counter() - t)
print(json.dumps({"first_answer_s": round(first, 2), "p50_ms": pct(times, 0.5),
                  "p95_ms": pct(times, 0.95), "peak_rss_mib": round(rss(), 1), **split()}))
"""
)

_KGRAG = (
    _COMMON
    + """
import kgrag
from kgrag.threads import serve_queries
serve_queries()
engine = kgrag.open(graph)
opened = time.time() - T0
engine.graph({"op": "local", "query": questions[0], "k": 10, "unit": "chunk"})
first = time.time() - T0
ops = {
    "retrieve hybrid": lambda q: engine.retrieve({"query": q, "k": 10, "mode": "hybrid"}),
    "graph local": lambda q: engine.graph({"op": "local", "query": q, "k": 10, "unit": "chunk"}),
    "graph global": lambda q: engine.graph({"op": "global", "query": q, "k": 5}),
}
times = {name: [] for name in ops}
first_global = None
for q in questions:
    for name, op in ops.items():
        t = time.perf_counter(); op(q); times[name].append(time.perf_counter() - t)
out = {"open_s": round(opened, 2), "first_answer_s": round(first, 2),
       "peak_rss_mib": round(rss(), 1), **split()}
for name, ts in times.items():
    out[name] = {"p50_ms": pct(ts, 0.5), "p95_ms": pct(ts, 0.95),
                 "first_ms": round(ts[0] * 1000, 1)}
print(json.dumps(out))
"""
)


def run_child(
    code: str, graph: str, questions: str, n: int, cgroup: Path | None = None
) -> dict[str, Any]:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    join = None
    if cgroup is not None:
        procs = cgroup / "cgroup.procs"

        def join() -> None:  # in the child, before it runs anything
            procs.write_text(str(os.getpid()))

    started = time.time()
    done = subprocess.run(
        [sys.executable, "-c", code, repr(started), graph, questions, str(n)],
        env=env,
        capture_output=True,
        text=True,
        check=False,
        preexec_fn=join,
    )
    if done.returncode != 0:
        raise SystemExit(f"child failed:\n{done.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def memory_cgroup(limit_mib: int) -> Path:
    """A new memory cgroup below this process's own, limited to ``limit_mib`` (v2's
    ``memory.max``, or v1's ``memory.limit_in_bytes``); SystemExit when none can be made."""
    lines = Path("/proc/self/cgroup").read_text().splitlines()
    v1 = [ln.split(":", 2)[2] for ln in lines if ln.split(":")[1] == "memory"]
    v2 = [ln.split(":", 2)[2] for ln in lines if ln.startswith("0::")]
    if v1:
        base, limit_file, root = Path("/sys/fs/cgroup/memory"), "memory.limit_in_bytes", v1[0]
    elif v2:
        base, limit_file, root = Path("/sys/fs/cgroup"), "memory.max", v2[0]
    else:
        raise SystemExit("--memory-limit: no memory cgroup controller on this machine")
    group = base / root.lstrip("/") / f"kgrag-bench-{os.getpid()}"
    try:
        group.mkdir()
        (group / limit_file).write_text(str(limit_mib * 2**20))
    except OSError as exc:
        raise SystemExit(f"--memory-limit: cannot make a memory cgroup at {group}: {exc}") from exc
    return group


def cgroup_peak_mib(group: Path) -> float | None:
    for name in ("memory.max_usage_in_bytes", "memory.peak"):
        if (group / name).exists():
            return round(int((group / name).read_text()) / 2**20, 1)
    return None


def evict(folder: Path) -> None:
    """Drop the files of ``folder`` from the page cache (their clean pages), so that a
    process started next reads what it needs and is charged for it."""
    for path in folder.rglob("*"):
        if path.is_file():
            fd = os.open(path, os.O_RDONLY)
            try:
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            finally:
                os.close(fd)


def disk_per_document(graph: Path) -> tuple[int, float]:
    manifest = json.loads((graph / "manifest.json").read_text())
    version = manifest["indexVersion"]
    folder = graph / "versions" / version
    size = sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())
    docs = manifest["versions"][version]["counts"]["documents"]
    return size, size / max(1, docs)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--graph", required=True)
    ap.add_argument("--questions", required=True)
    ap.add_argument("--n", type=int, default=100)
    ap.add_argument("--out")
    ap.add_argument(
        "--memory-limit",
        type=int,
        metavar="MIB",
        help="also run the kgrag process in a memory cgroup of this many MiB (anonymous "
        "memory and page cache together), from a cold page cache for the graph's files",
    )
    args = ap.parse_args()
    import kgrag

    kgrag.open(args.graph).close()  # a graph written before serving files: upgrade it first
    bare = run_child(_BARE, args.graph, args.questions, args.n)
    ours = run_child(_KGRAG, args.graph, args.questions, args.n)
    size, per_doc = disk_per_document(Path(args.graph))
    report = {
        "graph": args.graph,
        "bare": bare,
        "kgrag": ours,
        "first_answer_gap_s": round(ours["first_answer_s"] - bare["first_answer_s"], 2),
        "rss_ratio": round(ours["peak_rss_mib"] / bare["peak_rss_mib"], 2),
        "local_p50_over_bare": round(ours["graph local"]["p50_ms"] / bare["p50_ms"], 2),
        "disk_bytes": size,
        "disk_bytes_per_document": round(per_doc),
    }
    if args.memory_limit:
        group = memory_cgroup(args.memory_limit)
        try:
            manifest = json.loads((Path(args.graph) / "manifest.json").read_text())
            evict(Path(args.graph) / "versions" / manifest["indexVersion"])
            limited = run_child(_KGRAG, args.graph, args.questions, args.n, cgroup=group)
            limited["cgroup_peak_mib"] = cgroup_peak_mib(group)
        finally:
            group.rmdir()
        report["kgrag_memory_limited"] = {"limit_mib": args.memory_limit, **limited}
    print(json.dumps(report, indent=2))
    if args.out:
        Path(args.out).write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
