"""A build's memory over time, stage by stage.

    python benchmarks/memory_bench.py CORPUS --graph G [--out timeline.json] [--every 0.5]

Ingests CORPUS into G (which should not exist yet: a graph that already holds the
corpus builds nothing) while a thread samples this process's resident set every
``--every`` seconds with the stage running, then prints each stage's highest sample
and the process's peak (``ru_maxrss``). The chunk pass and the global texts' encoding
are both called "embed" by the pipeline; they are told apart here by whether resolve
has run. spaCy's parse workers are processes of their own and are not counted.
docs/benchmarks.md ("Memory of a build") has the figures.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import ingest.progress as progress
from ingest.pipeline import ingest_paths
from ingest.progress import peak_mib, resident_mib


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("corpus", type=Path)
    ap.add_argument("--graph", type=Path, required=True)
    ap.add_argument("--out", type=Path, help="write the timeline here (JSON)")
    ap.add_argument("--every", type=float, default=0.5, help="seconds between samples")
    args = ap.parse_args()
    if (args.graph / "manifest.json").exists():
        print(f"{args.graph}: already a graph; give a new folder", file=sys.stderr)
        return 2

    current = ["start"]
    seen: set[str] = set()
    timeline: list[tuple[float, str, float]] = []
    stage = progress.Stages.stage

    @contextmanager
    def named(self: progress.Stages, name: str, total: int | None = None) -> Iterator[Any]:
        if name == "embed":
            name_shown = "embed (global texts)" if "resolve" in seen else "embed (chunk pass)"
        else:
            name_shown = name
        seen.add(name)
        current[0] = name_shown
        with stage(self, name, total) as tick:
            yield tick

    progress.Stages.stage = named  # type: ignore[method-assign]
    started = time.perf_counter()
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            timeline.append((time.perf_counter() - started, current[0], resident_mib()))
            done.wait(args.every)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        report = ingest_paths([args.corpus], args.graph)
    finally:
        done.set()
        sampler.join()
        progress.Stages.stage = stage  # type: ignore[method-assign]
    highest: dict[str, float] = {}
    for _t, name, rss in timeline:
        highest[name] = max(highest.get(name, 0.0), rss)
    print(report.summary())
    print("\n| stage | highest resident MiB |\n|---|---|")
    for name, rss in highest.items():
        print(f"| {name} | {rss:,.0f} |")
    print(f"| process peak (ru_maxrss) | {peak_mib():,.0f} |")
    if args.out:
        figures = {
            "seconds": report.seconds,
            "counts": report.counts,
            "highest_mib": highest,
            "peak_mib": peak_mib(),
            "timeline": timeline,
        }
        args.out.write_text(json.dumps(figures, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
