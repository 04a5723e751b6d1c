"""Where a graph lives: a folder, or a graph in a Neo4j database named by a URI
(``neo4j://HOST:PORT/NAME[?database=DB]``, :class:`Location`)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

from kgrag.errors import InvalidParams

SCHEMES = ("neo4j", "neo4j+s", "neo4j+ssc", "bolt", "bolt+s", "bolt+ssc")
_URI = re.compile("^(?:" + "|".join(re.escape(s) for s in SCHEMES) + ")://", re.IGNORECASE)
_NAME = re.compile(r"^[A-Za-z0-9._-]{1,64}$")


def is_uri(location: str | Path) -> bool:
    """Whether a graph location names a Neo4j server rather than a folder."""
    return isinstance(location, str) and bool(_URI.match(location))


@dataclass(frozen=True, slots=True)
class Location:
    """A parsed ``scheme://host:port/NAME[?database=DB]``."""

    uri: str  # the server, without the graph name
    name: str
    database: str | None

    @classmethod
    def parse(cls, location: str) -> Location:
        parts = urlsplit(location)
        name = parts.path.strip("/")
        if parts.username or parts.password:
            raise InvalidParams(
                f"{_safe(location)}: credentials do not go in the URI; set "
                "KGRAG_NEO4J_USER and KGRAG_NEO4J_PASSWORD",
                field="graph",
            )
        if not parts.hostname:
            raise InvalidParams(f"{location}: no host in the Neo4j URI", field="graph")
        if not _NAME.match(name):
            raise InvalidParams(
                f"{location}: the path must be the graph's name (letters, digits, '.', '_', "
                "'-'; at most 64), as in neo4j://127.0.0.1:7687/NAME",
                field="graph",
            )
        query = parse_qs(parts.query, keep_blank_values=True)
        unknown = sorted(set(query) - {"database"})
        if unknown:
            raise InvalidParams(
                f"{location}: unknown URI option {unknown[0]!r} (known: database)", field="graph"
            )
        database = query.get("database", [None])[0] or None
        try:
            port = parts.port or 7687
        except ValueError as exc:
            raise InvalidParams(f"{location}: bad port: {exc}", field="graph") from exc
        return cls(f"{parts.scheme}://{parts.hostname}:{port}", name, database)


def _safe(location: str) -> str:
    return re.sub(r"//[^@/]*@", "//", location)
