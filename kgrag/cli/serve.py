"""``kgrag serve``: the RCP/1 server over stdio or HTTP, for one or more graphs, or the
Model Context Protocol over stdio (``--mcp``, :mod:`kgrag.adapters.mcp`)."""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
from pathlib import Path
from typing import Any

from kgrag.errors import InvalidParams, Unsupported


def add_parser(sub: Any) -> None:
    s = sub.add_parser(
        "serve",
        help="serve graphs over RCP/1 (stdio, or HTTP with SSE) or MCP (stdio; HTTP at /mcp)",
        description="Bearer tokens come from the environment (KGRAG_TOKEN reads and writes; "
        "KGRAG_WRITE_TOKEN, when set, is needed for index/add and index/delete) or from "
        "--token-file / --write-token-file, never from the command line. Tokens scoped to "
        "graphs and rights come from an access file (--access-file or KGRAG_ACCESS_FILE): a "
        'JSON list of {"sha256": HEX, "graphs": [NAME, ...] or "*", "rights": ["read"] or '
        '["read", "write"]}, read again when it changes.',
    )
    s.add_argument(
        "--graph",
        action="append",
        required=True,
        metavar="[NAME=]DIR",
        help="a graph folder to serve (repeat for several; the first is the default)",
    )
    how = s.add_mutually_exclusive_group(required=True)
    how.add_argument("--stdio", action="store_true", help="NDJSON on stdin/stdout")
    how.add_argument("--http", metavar="HOST:PORT", help="HTTP on HOST:PORT (port 0: any free)")
    how.add_argument(
        "--mcp",
        action="store_true",
        help="Model Context Protocol tools on stdin/stdout, for agent hosts (the mcp extra)",
    )
    s.add_argument("--config", help="JSON config file (see kgrag/config.py)")
    s.add_argument(
        "--read-only",
        action="store_true",
        help="do not offer index/add, index/delete (MCP: add_documents, delete_documents)",
    )
    s.add_argument("--token-file", help="file holding the bearer token for every call")
    s.add_argument("--write-token-file", help="file holding the bearer token for writes")
    s.add_argument(
        "--access-file",
        help="JSON list of per-graph token grants (default: $KGRAG_ACCESS_FILE)",
    )
    s.add_argument(
        "--log-format",
        choices=["json", "text"],
        default="json",
        help="stderr log lines: JSON objects with request ids (default) or plain text",
    )
    s.add_argument("--rate-limit", type=float, help="requests per second per client address")
    s.add_argument("--max-body", type=int, default=8 << 20, help="largest request, in bytes")
    s.add_argument("--workers", type=int, default=4, help="engine worker threads")
    s.add_argument("--timeout", type=float, default=120.0, help="seconds before a read gives up")
    s.add_argument(
        "--body-timeout",
        type=float,
        default=30.0,
        help="seconds a client has to send its request body (else 408)",
    )
    s.add_argument(
        "--grace",
        type=float,
        default=30.0,
        help="seconds SIGTERM waits for requests in flight before it cancels them",
    )
    s.add_argument("--cors", action="append", metavar="ORIGIN", help="allow a browser origin")
    s.add_argument(
        "--no-explorer", action="store_true", help="do not serve the graph explorer page at /"
    )
    s.add_argument(
        "--writes-in-process",
        action="store_true",
        help="make index/add and index/delete in the serving process, not in a child "
        "process of their own (the default keeps the server's memory its readers')",
    )
    s.add_argument(
        "--no-mcp",
        action="store_true",
        help="with --http, do not serve MCP's streamable HTTP transport at /mcp",
    )


def _secret(path: str | None, env: str) -> str | None:
    if path:
        try:
            value = Path(path).read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise InvalidParams(f"cannot read {path}: {exc}", field="token") from exc
        if not value:
            raise InvalidParams(f"{path} is empty", field="token")
        return value
    return os.environ.get(env) or None


def _address(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not host:
        raise InvalidParams(f"--http wants HOST:PORT, got {text!r}", field="http")
    return host.strip("[]"), int(port)


def run(args: argparse.Namespace) -> int:
    from kgrag.config import load_config
    from kgrag.server.protocol import Limits

    handler = logging.StreamHandler(sys.stderr)
    if args.log_format == "json":
        from kgrag.server.ops import JsonFormatter

        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logging.basicConfig(level=logging.INFO, handlers=[handler])
    if args.workers < 1 or args.max_body < 1024 or min(args.timeout, args.body_timeout) <= 0:
        raise InvalidParams(
            "--workers >= 1, --max-body >= 1024, --timeout > 0 and --body-timeout > 0",
            field="limits",
        )
    if args.grace < 0:
        raise InvalidParams("--grace must be 0 or more seconds", field="grace")
    if args.rate_limit is not None and args.rate_limit <= 0:
        raise InvalidParams("--rate-limit must be positive", field="rate-limit")
    from kgrag.threads import serve_queries

    serve_queries()
    limits = Limits(
        workers=args.workers,
        timeout=args.timeout,
        max_body=args.max_body,
        body_timeout=args.body_timeout,
    )
    config = load_config(args.config)
    if args.mcp:
        return _serve_mcp(args, config)
    if args.stdio:
        from kgrag.server.stdio import protected_stdout, serve_stdio

        out = protected_stdout()  # before any model loads and prints
        graphs = _open(args, config)
        try:
            serve_stdio(graphs, limits=limits, stdout=out)
        finally:
            graphs.close()
        return 0
    return _serve_http(args, config, limits)


def _open(args: argparse.Namespace, config: Any) -> Any:
    from kgrag.server.graphs import Graphs

    return Graphs.open(
        args.graph,
        config=config,
        writable=not args.read_only,
        write_apart=not args.writes_in_process,
    )


def _serve_mcp(args: argparse.Namespace, config: Any) -> int:
    try:
        from kgrag.adapters.mcp import serve_mcp
    except ImportError as exc:
        raise Unsupported(str(exc), option="mcp") from exc
    from kgrag.server.stdio import protected_stdout

    out = protected_stdout()  # before any model loads and prints
    graphs = _open(args, config)
    try:
        serve_mcp(graphs, writable=not args.read_only, workers=args.workers, stdout=out)
    finally:
        graphs.close()
    return 0


def _serve_http(args: argparse.Namespace, config: Any, limits: Any) -> int:
    import uvicorn

    from kgrag.server.explorer import explorer_routes
    from kgrag.server.http import Access, create_app, listen

    host, port = _address(args.http)
    access = Access(
        _secret(args.token_file, "KGRAG_TOKEN"),
        _secret(args.write_token_file, "KGRAG_WRITE_TOKEN"),
        file=args.access_file or os.environ.get("KGRAG_ACCESS_FILE") or None,
    )
    graphs = _open(args, config)
    try:
        routes = [] if args.no_explorer else explorer_routes()
        mcp = _mcp_http(args, graphs, host)
        app = create_app(
            graphs,
            limits=limits,
            access=access,
            rate=args.rate_limit,
            cors=args.cors,
            routes=routes + (mcp.routes() if mcp else []),
            lifespans=[mcp.lifespan] if mcp else [],
        )
        sock, url = listen(host, port)
        explorer = "" if args.no_explorer else f"; the explorer on {url}/"
        also = f"; MCP on {url}/mcp" if mcp else ""
        print(
            f"kgrag: serving RCP/1 on {url}/rcp "
            f"(graphs: {', '.join(graphs.names)}; default {graphs.default}){also}{explorer}",
            file=sys.stderr,
            flush=True,
        )
        server = uvicorn.Server(
            uvicorn.Config(
                app,
                log_level="warning",
                access_log=False,
                lifespan="on",
                timeout_graceful_shutdown=args.grace,
            )
        )
        # On SIGTERM or SIGINT uvicorn stops taking connections, waits up to --grace for
        # those in flight, runs the app's shutdown (engine calls finish), then raises
        # the signal again under the handler it found: these, so the exit is a clean 0.
        previous = {sig: signal.signal(sig, _stopped) for sig in (signal.SIGTERM, signal.SIGINT)}
        try:
            server.run(sockets=[sock])
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
        logging.getLogger("kgrag.server").info("stopped")
    finally:
        graphs.close()
    return 0


def _mcp_http(args: argparse.Namespace, graphs: Any, host: str) -> Any:
    """``/mcp`` when the mcp package is installed and not turned off (else None)."""
    if args.no_mcp:
        return None
    try:
        from kgrag.adapters.mcp_http import McpHttp
    except ImportError as exc:
        logging.getLogger("kgrag.server").info("no /mcp: %s", exc)
        return None
    return McpHttp(graphs, writable=not args.read_only, workers=args.workers, host=host)


def _stopped(signum: int, frame: Any) -> None:
    """The signal uvicorn raises again once it has shut down: already handled."""
