"""``kgrag bench``: ingest, query latency and HTTP throughput, measured in one run."""

from __future__ import annotations

import argparse
import shlex
import shutil
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from kgrag.errors import InvalidParams, KgragError, StoreError

SECTIONS = ("ingest", "query", "http")


def add_parser(sub: Any) -> None:
    b = sub.add_parser(
        "bench",
        help="measure ingest, query latency and HTTP throughput; write a report with plots",
        description="Each figure comes with a baseline measured in the same run: ingest "
        "against bare encoding of the same passages, queries against encode + numpy dot, "
        "HTTP against in-process calls. Writes OUT/report.md, OUT/figures.json and PNG plots "
        "(plots need the bench extra: pip install 'kgrag[bench]').",
    )
    b.add_argument("--corpus", help="build a graph from this file first and time the ingest")
    b.add_argument(
        "--graph", help="a built graph to query (with --corpus: a new or empty folder to build)"
    )
    b.add_argument("--out", default="bench-report", help="report folder (default bench-report)")
    b.add_argument(
        "--questions",
        help='JSON list of {"question": ...} (default: first sentences of the first 30 chunks)',
    )
    b.add_argument("--repeat", type=int, default=3, help="passes over the questions")
    b.add_argument("--concurrency", default="1,4", help="comma-separated HTTP client threads")
    b.add_argument("--skip", default="", help="comma-separated sections: ingest, query, http")
    b.add_argument("-k", type=int, default=10, help="hits per call")
    b.add_argument("--config", help="JSON config file for the ingest (see kgrag/config.py)")
    b.add_argument("--threads", type=int, help="torch threads (default: torch's own choice)")
    b.add_argument("--quiet", action="store_true", help="no progress lines or bars")


def _sections(args: argparse.Namespace) -> list[str]:
    skip = {s.strip() for s in args.skip.split(",") if s.strip()}
    if skip - set(SECTIONS):
        unknown = ", ".join(sorted(skip - set(SECTIONS)))
        raise InvalidParams(f"--skip takes ingest, query, http; not {unknown}", field="skip")
    wanted = [s for s in SECTIONS if s not in skip]
    if not args.corpus and "ingest" in wanted:
        wanted.remove("ingest")
    if not wanted:
        raise InvalidParams("everything is skipped; nothing to measure", field="skip")
    return wanted


def _levels(text: str) -> list[int]:
    try:
        levels = [int(c) for c in text.split(",") if c.strip()]
    except ValueError:
        levels = []
    if not levels or min(levels) < 1:
        raise InvalidParams(
            f"--concurrency wants positive integers like 1,4; got {text!r}", field="concurrency"
        )
    return levels


def _check(args: argparse.Namespace, sections: list[str]) -> None:
    """Every usage problem before any model loads."""
    from kgrag.engine import current_version

    if args.repeat < 1 or args.k < 1:
        raise InvalidParams("--repeat and -k must be at least 1", field="repeat")
    if args.threads is not None and args.threads < 1:
        raise InvalidParams("--threads must be at least 1", field="threads")
    if args.corpus and not Path(args.corpus).exists():
        raise InvalidParams(f"--corpus {args.corpus}: no such file or folder", field="corpus")
    if "ingest" in sections:
        graph = Path(args.graph) if args.graph else None
        if graph is not None and graph.exists() and any(graph.iterdir()):
            raise InvalidParams(
                f"--graph {graph} is not empty; bench times a fresh build, so give a new or "
                "empty folder (or leave --graph out to build into a temporary one)",
                field="graph",
            )
    elif not args.graph:
        raise InvalidParams(
            "nothing to measure on: give --graph DIR (a built graph) or --corpus FILE "
            "(a corpus to build one from)",
            field="graph",
        )
    elif current_version(args.graph) is None:
        raise StoreError(
            f"--graph {args.graph}: no graph here (build one with `kgrag ingest`, or pass "
            "--corpus to build it within the bench)"
        )


def command_line(args: argparse.Namespace) -> str:
    """The ``kgrag bench`` command that repeats this run, every option spelled out."""
    words = ["kgrag", "bench"]
    for flag in ("corpus", "graph", "questions", "config"):
        if getattr(args, flag):
            words += [f"--{flag}", getattr(args, flag)]
    words += ["--out", args.out, "--repeat", str(args.repeat), "-k", str(args.k)]
    words += ["--concurrency", args.concurrency]
    if args.skip:
        words += ["--skip", args.skip]
    if args.threads:
        words += ["--threads", str(args.threads)]
    return shlex.join(words)


@contextmanager
def _stage(name: str, quiet: bool) -> Iterator[None]:
    if not quiet:
        print(f"kgrag bench: {name} ...", file=sys.stderr, flush=True)
    try:
        yield
    except KgragError as exc:
        raise KgragError(f"bench {name}: {exc.message}", **exc.data) from exc
    except Exception as exc:
        raise KgragError(f"bench {name} failed: {type(exc).__name__}: {exc}") from exc


def run(args: argparse.Namespace) -> int:
    from kgrag.bench import measure as bench
    from kgrag.bench.report import write_report

    sections = _sections(args)
    levels = _levels(args.concurrency)
    _check(args, sections)
    questions = bench.read_questions(Path(args.questions)) if args.questions else None
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    figures: dict[str, Any] = {"machine": bench.machine(), "command": command_line(args)}
    work = None if args.graph else Path(tempfile.mkdtemp(prefix="kgrag-bench-"))
    graph = Path(args.graph) if work is None else work / "graph"
    try:
        if "ingest" in sections:
            from kgrag.config import load_config

            with _stage("ingest", args.quiet):
                config = load_config(args.config)
                progress = not args.quiet and sys.stderr.isatty()
                figures["ingest"] = bench.measure_ingest(
                    Path(args.corpus), graph, config, progress=progress
                )
            if work is not None:
                figures["ingest"]["graph"] = "a temporary folder"
        if "query" in sections or "http" in sections:
            from kgrag.threads import serve_queries

            serve_queries()
        if not questions and ("query" in sections or "http" in sections):
            with _stage("questions", args.quiet):
                questions = _default_queries(graph)
        if "query" in sections:
            with _stage("query", args.quiet):
                figures["query"] = _queries(graph, questions or [], args)
        if "http" in sections:
            with _stage("http", args.quiet):
                figures["http"] = bench.measure_http(
                    graph, questions or [], levels=levels, repeat=args.repeat, k=args.k
                )
    finally:
        if work is not None:
            shutil.rmtree(work, ignore_errors=True)
    with _stage("report", args.quiet):
        path = write_report(figures, Path(args.out))
    print(path)
    return 0


def _default_queries(graph: Path) -> list[str]:
    from kgrag.bench import measure as bench
    from kgrag.engine import open as open_engine

    with open_engine(graph) as engine:
        return bench.default_queries(engine)


def _queries(graph: Path, questions: list[str], args: argparse.Namespace) -> dict[str, Any]:
    from kgrag.bench import measure as bench
    from kgrag.engine import open as open_engine

    with open_engine(graph) as engine:
        return {"graph": str(graph)} | bench.measure_queries(
            engine, questions, repeat=args.repeat, k=args.k
        )
