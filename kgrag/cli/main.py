"""The ``kgrag`` command line: ingest, query, export, eval, delete, info, serve, bench.

Exit status: 0 success; 1 some input files failed (the rest went in);
2 a usage error or a failure that stopped the command.
"""

from __future__ import annotations

import argparse
import json
import sys
import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from kgrag.errors import InvalidParams, KgragError

EXIT_OK, EXIT_INPUT_FAILED, EXIT_ERROR = 0, 1, 2


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="kgrag", description="GraphRAG knowledge-graph retrieval, no LLM."
    )
    sub = p.add_subparsers(dest="command", required=True)
    _add_ingest(sub)
    _add_query(sub)
    _add_export(sub)
    _add_eval(sub)
    dl = sub.add_parser("delete", help="remove documents from a graph (publishes a new version)")
    dl.add_argument("ids", nargs="+", help="document ids (d:... or as given at ingest)")
    dl.add_argument("--graph", required=True)
    from kgrag.cli.serve import add_parser as add_serve

    add_serve(sub)
    from kgrag.cli.bench import add_parser as add_bench

    add_bench(sub)
    from kgrag.cli.token import add_parser as add_token

    add_token(sub)
    info = sub.add_parser("info", help="versions and counts of a graph")
    info.add_argument("--graph", required=True)
    return p


def _add_ingest(sub: Any) -> None:
    ing = sub.add_parser("ingest", help="build or extend a graph from files and folders")
    ing.add_argument(
        "paths",
        nargs="+",
        help="files or folders: .txt .md .json .jsonl .pdf .docx .pptx .xlsx .csv .html images",
    )
    ing.add_argument("--graph", required=True, help="graph folder, e.g. graphs/demo")
    ing.add_argument(
        "--prune",
        action="store_true",
        help="remove the documents of files no longer in the folders given",
    )
    ing.add_argument(
        "--watch",
        action="store_true",
        help="after the ingest, keep the graph in step with the paths: each new, edited "
        "or removed file becomes one small write, a line per change (Ctrl-C or SIGTERM stops)",
    )
    ing.add_argument(
        "--interval",
        type=float,
        default=1.0,
        metavar="SECONDS",
        help="with --watch: how often to look at the files (default 1)",
    )
    ing.add_argument("--config", help="JSON config file (see kgrag/config.py)")
    ing.add_argument("--quiet", action="store_true", help="no progress bars")
    ing.add_argument(
        "--ray",
        metavar="auto|local|ADDRESS",
        help="read and parse on a Ray cluster's workers (needs the ray extra): auto joins "
        "the cluster this machine runs or starts one here, local starts one here, "
        "ADDRESS (HOST:PORT or ray://HOST:PORT) joins that one",
    )
    ing.add_argument(
        "--ray-workers",
        type=int,
        metavar="N",
        help="parse actors on the cluster (default: one per CPU)",
    )


def _add_query(sub: Any) -> None:
    q = sub.add_parser("query", help="top hits for one or more questions")
    q.add_argument("text", nargs="+", help="the question(s)")
    q.add_argument("--graph", required=True)
    q.add_argument("-k", type=int, default=5, help="hits per unit")
    q.add_argument(
        "--unit",
        help="comma-separated units: chunk, document, community, tree-node, node, triplet, "
        "path, subgraph (default chunk; with --op local: chunk, node, triplet, path)",
    )
    q.add_argument("--mode", default="hybrid", choices=["dense", "sparse", "hybrid"])
    q.add_argument(
        "--op",
        choices=["local", "global", "drift", "communities", "neighbors"],
        help="run a graph op instead of retrieve (paths drawn with their evidence)",
    )
    q.add_argument("--level", type=int, help="community level (global, communities)")
    q.add_argument("--seeds", help="comma-separated entity ids (neighbors)")
    q.add_argument("--hops", type=int, default=1, help="neighbors: hops around the seeds")
    q.add_argument("--depth", type=int, default=1, help="drift: follow-up rounds")
    q.add_argument("--json", action="store_true", help="print hits as JSON lines")


def _add_export(sub: Any) -> None:
    ex = sub.add_parser("export", help="write the graph as GraphML or JSON")
    ex.add_argument("--graph", required=True)
    ex.add_argument("--format", required=True, choices=["graphml", "json"])
    ex.add_argument("--out", help="output file (default graph folder/graph.<format>)")


def _add_eval(sub: Any) -> None:
    ev = sub.add_parser("eval", help="passage recall on a multi-hop QA set (HippoRAG 2 scoring)")
    ev.add_argument("--graph", required=True, help="graph built from the set's corpus")
    ev.add_argument("--questions", required=True, help="MuSiQue, HotpotQA or 2Wiki questions file")
    ev.add_argument("--corpus", help="build the graph from this corpus first if it has no version")
    ev.add_argument(
        "--modes",
        default="dense,sparse,hybrid",
        help="comma-separated: dense, sparse, hybrid (retrieve), local and drift (graph ops)",
    )
    ev.add_argument("--k", default="2,5", help="comma-separated recall depths")
    ev.add_argument(
        "--params",
        default="{}",
        help='extra retrieve params as JSON, e.g. \'{"rerank": {"method": "colbert"}}\'',
    )
    ev.add_argument("--limit", type=int, help="only the first N questions")
    ev.add_argument(
        "--out",
        help="also write the figures as JSON here: a list of rows, one per mode, "
        '{"mode", "params", "questions", "R@<k>" for each --k (percent), "p50_ms"}',
    )
    ev.add_argument(
        "--plot",
        metavar="OUT.png",
        help="also draw Recall@k per mode (.png, .svg or .pdf; needs the bench extra)",
    )


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        return int(COMMANDS[args.command](args))
    except KgragError as exc:
        print(f"kgrag: error: {exc.message}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        return 130


def _ingest(args: argparse.Namespace) -> int:
    from kgrag.config import load_config
    from kgrag.engine import ingest

    config = load_config(args.config)
    if args.watch:
        return _watch(args, config)
    report = ingest(
        args.paths,
        args.graph,
        config,
        progress=not args.quiet,
        prune=args.prune,
        ray=args.ray,
        ray_workers=args.ray_workers,
    )
    for warning in report.warnings:
        print(f"kgrag: warning: {warning.path}: {warning.reason}", file=sys.stderr)
    for err in report.errors:
        print(f"kgrag: error: {err.path}: {err.reason}", file=sys.stderr)
    print(report.summary())
    return EXIT_INPUT_FAILED if report.errors else EXIT_OK


def _watch(args: argparse.Namespace, config: Any) -> int:
    """``kgrag ingest --watch``: a line per change on stdout until Ctrl-C or SIGTERM."""
    import contextlib
    import signal
    import threading

    from kgrag.engine import watch

    if args.ray is not None or args.ray_workers is not None:
        raise InvalidParams("--watch writes each change here; it takes no --ray", field="ray")
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    with contextlib.suppress(KeyboardInterrupt):  # Ctrl-C: stop between changes
        watch(
            args.paths,
            args.graph,
            config,
            interval=args.interval,
            on_change=lambda change: print(change, flush=True),
            stop=stop,
        )
    return EXIT_OK


def _query(args: argparse.Namespace) -> int:
    from kgrag.engine import open as open_engine
    from kgrag.threads import serve_queries

    serve_queries()

    units = [u.strip() for u in (args.unit or "chunk").split(",") if u.strip()]
    with open_engine(args.graph) as engine:
        if args.op:
            from kgrag.cli.query import run_op

            for text in args.text:
                run_op(engine, args, text)
            return EXIT_OK
        for text in args.text:
            hits = [
                h for unit in units for h in engine.query(text, k=args.k, unit=unit, mode=args.mode)
            ]
            if args.json:
                for hit in hits:
                    print(json.dumps(hit | {"query": text}, ensure_ascii=False))
                continue
            print(f"\nQ: {text}   [indexVersion {engine.index_version}]")
            leaves = {c.id: c for c in engine.reader.chunks(_all_leaves(hits))}
            for rank, hit in enumerate(hits, 1):
                print(_render(rank, hit, leaves))
    return EXIT_OK


def _all_leaves(hits: list[dict[str, Any]]) -> list[str]:
    return sorted({leaf for h in hits for leaf in h["provenance"]["leaves"][:3]})


def _render(rank: int, hit: dict[str, Any], leaves: dict[str, Any]) -> str:
    head = f"{rank:>2}. [{hit['unit']} L{hit['level']}] score {hit['score']:.3f}  {hit['id']}"
    body = textwrap.shorten(hit["text"].replace("\n", " | "), 200)
    lines = [head, f"      {body}"]
    ids = hit["provenance"]["leaves"]
    if hit["unit"] != "chunk":
        for leaf in ids[:3]:
            c = leaves[leaf]
            lines.append(f"      leaf {leaf}  ({c.context}) {textwrap.shorten(c.text, 90)}")
        if len(ids) > 3:
            lines.append(f"      ... {len(ids) - 3} more leaf passages")
    else:
        lines.append(f"      leaf {ids[0]}  ({hit['chunk']['context']}){_where(hit['meta'])}")
    return "\n".join(lines)


def _where(meta: dict[str, Any]) -> str:
    """Where a chunk read from a file sits: "  report.pdf p. 3, table" ("" for records)."""
    if not meta.get("source") or "chunk_type" not in meta:
        return ""
    first, last = meta.get("pages") or (meta.get("page"), meta.get("page"))
    page = "" if not first else f" p. {first}" if first == last else f" pp. {first}-{last}"
    kind = "" if meta["chunk_type"] == "text" else f", {meta['chunk_type']}"
    return f"  {meta['source']}{page}{kind}"


def _export(args: argparse.Namespace) -> int:
    from kgrag.engine import export_file

    out = Path(args.out) if args.out else Path(args.graph) / f"graph.{args.format}"
    counts = export_file(args.graph, args.format, out)
    print(f"wrote {out}: {counts['nodes']:,} nodes, {counts['edges']:,} edges")
    return EXIT_OK


def _eval(args: argparse.Namespace) -> int:
    from kgrag.bench.evaluation import (
        check_plot_path,
        chunk_searcher,
        evaluate,
        load_questions,
        plot_recall,
    )
    from kgrag.engine import current_version, ingest
    from kgrag.engine import open as open_engine

    if args.corpus and current_version(args.graph) is None:
        print(ingest([args.corpus], args.graph, progress=True).summary(), file=sys.stderr)
    from kgrag.threads import serve_queries

    serve_queries()
    try:
        extra = json.loads(args.params)
    except ValueError as exc:
        raise InvalidParams(f"--params is not JSON: {exc}", field="params") from exc
    if not isinstance(extra, dict):
        raise InvalidParams("--params must be a JSON object", field="params")
    if args.plot:
        check_plot_path(args.plot)
    questions = load_questions(args.questions)[: args.limit]
    ks = [int(k) for k in args.k.split(",")]
    rows = []
    with open_engine(args.graph) as engine:
        for mode in [m.strip() for m in args.modes.split(",") if m.strip()]:
            figures = evaluate(questions, chunk_searcher(engine, extra | {"mode": mode}), ks)
            rows.append({"mode": mode, "params": extra} | figures)
            print(" ".join(f"{k}={v}" for k, v in rows[-1].items()))
    if args.out:
        Path(args.out).write_text(json.dumps(rows, indent=2))
    if args.plot:
        plot_recall(rows, ks, args.plot, title=Path(args.questions).stem)
    return EXIT_OK


def _delete(args: argparse.Namespace) -> int:
    from kgrag.engine import open as open_engine

    with open_engine(args.graph) as engine:
        result = engine.delete(list(args.ids))
    print(f"deleted {result['deleted']} document(s); indexVersion {result['indexVersion']}")
    return EXIT_OK


def _info(args: argparse.Namespace) -> int:
    from kgrag.engine import info

    described = info(args.graph)
    if described is None:
        print(f"kgrag: error: {args.graph}: no graph here", file=sys.stderr)
        return EXIT_ERROR
    print(json.dumps(described, indent=2))
    return EXIT_OK


COMMANDS = {
    "ingest": _ingest,
    "query": _query,
    "export": _export,
    "eval": _eval,
    "delete": _delete,
    "info": _info,
    "serve": lambda args: _serve(args),
    "bench": lambda args: _bench(args),
    "token": lambda args: _token(args),
}


def _token(args: argparse.Namespace) -> int:
    from kgrag.cli.token import run

    return run(args)


def _serve(args: argparse.Namespace) -> int:
    from kgrag.cli.serve import run

    return run(args)


def _bench(args: argparse.Namespace) -> int:
    from kgrag.cli.bench import run

    return run(args)


if __name__ == "__main__":
    sys.exit(main())
