"""``kgrag token``: a new bearer token, its grant added to an access file.

    kgrag token --graph docs --graph wiki [--write] --access-file access.json

prints the token (once: the file keeps only its SHA-256 digest) and adds
``{"sha256", "graphs", "rights"}`` to the file, which a running ``kgrag serve
--access-file`` reads again within a second. The file is written whole to a
temporary file beside it and renamed, readable by its owner only.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import sys
from pathlib import Path
from typing import Any

from kgrag.errors import InvalidParams


def add_parser(sub: Any) -> None:
    t = sub.add_parser(
        "token", help="make a bearer token for some graphs and add its grant to an access file"
    )
    t.add_argument(
        "--graph",
        action="append",
        required=True,
        metavar="NAME",
        help="a graph the token reads (repeat for several; '*' for every graph)",
    )
    t.add_argument("--write", action="store_true", help="it may also add and delete documents")
    t.add_argument("--access-file", required=True, help="the access file (made when missing)")


def run(args: argparse.Namespace) -> int:
    from kgrag.server.access import digest, read_grants
    from kgrag.server.graphs import parse_spec

    graphs: Any = "*" if "*" in args.graph else sorted(set(args.graph))
    if graphs != "*":
        for name in graphs:
            parse_spec(f"{name}=.")  # the names a server accepts, or a clear error
    path = Path(args.access_file)
    entries: list[Any] = []
    if path.exists():
        read_grants(path)  # a broken file is refused, not overwritten
        entries = json.loads(path.read_text(encoding="utf-8"))
    token = secrets.token_urlsafe(32)
    rights = ["read", "write"] if args.write else ["read"]
    entries.append({"sha256": digest(token).hex(), "graphs": graphs, "rights": rights})
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            json.dump(entries, out, indent=1)
        os.replace(tmp, path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise InvalidParams(f"cannot write {path}: {exc}", field="access-file") from exc
    print(token)
    print(f"kgrag: added its grant to {path} ({', '.join(rights)} on {graphs})", file=sys.stderr)
    return 0
