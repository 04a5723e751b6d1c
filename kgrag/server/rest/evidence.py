"""The REST route's response: each hit as a result and a referenced chunk, and the
hits grouped into evidence blocks, one per file and section path.

A block starts with ``[E1] [§ source_file_name / parent_path]``. Its parts are
typed: text stays text; a table is a text part holding the table's HTML; a picture
is an image part (uri, MIME type, caption) where its ``[Image N]`` placeholder stood
in the text, or where the image chunk itself was found.
"""

from __future__ import annotations

import os
import re
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

if TYPE_CHECKING:
    from kgrag.server.rest.models import QueryBody

#: where a document's pictures are served (kgrag.server.rest.app)
IMAGES = "/v1/retrieval/images"
_PLACEHOLDER = re.compile(r"\[Image (\d+)(?::[^\]\n]*)?\]")


def doc_of(hit: dict[str, Any]) -> str:
    return str((hit.get("chunk") or {}).get("docId") or (hit.get("meta") or {}).get("docId", ""))


def section_of(hit: dict[str, Any]) -> str:
    """The section path of a hit: its headings (``meta.parent_path``) joined by " / ",
    else the "Title > Section" context of a chunk that has none."""
    parents = (hit.get("meta") or {}).get("parent_path")
    if isinstance(parents, list) and parents:
        return " / ".join(str(p) for p in parents)
    return str(
        (hit.get("chunk") or {}).get("context") or (hit.get("meta") or {}).get("section", "")
    )


def file_of(hit: dict[str, Any]) -> str:
    """The file a hit came from: its citation's path without a ``#page`` anchor, else
    its source name."""
    citation = hit.get("citation") or {}
    uri = str(citation.get("uri") or "").split("#", 1)[0]
    return uri or str(citation.get("source") or (hit.get("meta") or {}).get("source") or "")


def chunk_type_of(hit: dict[str, Any]) -> str:
    kind = (hit.get("meta") or {}).get("chunk_type", "text")
    return kind if kind in ("text", "image", "table", "page") else "text"


def response(
    namespace: str,
    body: QueryBody,
    routed: Any,  # kgrag.server.rest.route.Routed: router, hits, stop, failure, trace
    hits: list[dict[str, Any]],
    notes: list[str],
) -> dict[str, Any]:
    results, referenced, groups = _rows(namespace, hits)
    return {
        "namespace": namespace,
        "query": body.query,
        "router_used": routed.router,
        "evidence": _evidence(groups),
        "evidence_text": "",
        "answer_text": "",
        "referenced_chunks": referenced,
        "results": results,
        "stop_reason": routed.stop,
        "failure_reason": routed.failure,
        "decision_trace": routed.trace,
        "notes": notes,
        "conversation_id": body.conversation_id,
    }


def _names(hit: dict[str, Any]) -> tuple[str, str, str]:
    """(file path, source file name, section path) of a hit."""
    meta = hit.get("meta") or {}
    path = file_of(hit)
    name = os.path.basename(path) if path else ""
    name = name or str((hit.get("citation") or {}).get("title") or meta.get("title") or "")
    return path, name or doc_of(hit), section_of(hit)


def _pages(meta: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if "page" in meta:
        out["page"] = meta["page"]
    if "pages" in meta:
        out["pages"] = meta["pages"]
    return out


def _rows(
    namespace: str, hits: list[dict[str, Any]]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict[tuple[str, str], dict[str, Any]]]:
    """Each hit as a result and a referenced chunk, and the hits grouped by document
    and section (the evidence groups, in first-seen order)."""
    results, referenced = [], []
    groups: dict[tuple[str, str], dict[str, Any]] = {}
    for hit in hits:
        path, name, section = _names(hit)
        doc, kind = doc_of(hit), chunk_type_of(hit)
        pages = _pages(hit.get("meta") or {})
        source = {"document_id": doc, "source_file_name": name, "section_path": section} | pages
        results.append(
            {
                "chunk_id": hit["id"],
                "document_id": doc,
                "content": hit.get("text", ""),
                "chunk_type": kind,
                "score": hit["score"],
                "source": source,
            }
        )
        referenced.append(
            {
                "chunk_id": hit["id"],
                "document_id": doc,
                "chunk_type": kind,
                "section_path": section,
                "file_path": path,
            }
            | pages
        )
        group = groups.setdefault((doc, section), {"name": name, "parts": []})
        index = int((hit.get("chunk") or {}).get("index", 0))
        for part in _parts(namespace, hit, kind):
            group["parts"].append(
                {"chunk_id": hit["id"], "document_id": doc, "chunk_index": index} | part
            )
    return results, referenced, groups


def _parts(namespace: str, hit: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    """A hit's evidence parts: a table's HTML as text, an image chunk as an image
    part, and text with its placeholders turned into image parts where they stood."""
    meta = hit.get("meta") or {}
    text = str(hit.get("text", ""))
    doc = doc_of(hit)
    if kind == "table" and meta.get("html"):
        return [{"type": "text", "chunk_type": "table", "text": str(meta["html"])}]
    if kind == "image" and isinstance(meta.get("image"), dict):
        image = meta["image"]
        return [_image(namespace, doc, int(image.get("index", 0)) + 1, image, text)]
    parts: list[dict[str, Any]] = []
    at = 0
    for match in _PLACEHOLDER.finditer(text):
        if text[at : match.start()].strip():
            parts.append(
                {"type": "text", "chunk_type": kind, "text": text[at : match.start()].strip()}
            )
        caption = match.group(0)[len(f"[Image {match.group(1)}") :].strip(": ]")
        parts.append(_image(namespace, doc, int(match.group(1)), {"caption": caption}, ""))
        at = match.end()
    if text[at:].strip() or not parts:
        parts.append({"type": "text", "chunk_type": kind, "text": text[at:].strip()})
    return parts


def _image(
    namespace: str, doc: str, number: int, image: dict[str, Any], text: str
) -> dict[str, Any]:
    uri = f"{IMAGES}/{quote(doc.removeprefix('d:'))}/{number}?namespace={quote(namespace)}"
    part = {
        "type": "image",
        "chunk_type": "image",
        "uri": uri,
        "mime_type": image.get("mime") or None,
        "caption": image.get("caption") or image.get("alt") or "",
    }
    if text:
        part["text"] = text
    return part


def _evidence(groups: dict[tuple[str, str], dict[str, Any]]) -> list[dict[str, Any]]:
    """One labelled evidence block per group, its parts in chunk order."""
    evidence = []
    for n, ((doc, section), group) in enumerate(groups.items(), start=1):
        parts = sorted(group["parts"], key=lambda p: p["chunk_index"])
        header = (
            f"[E{n}] [§ {group['name']} / {section}]" if section else f"[E{n}] [§ {group['name']}]"
        )
        evidence.append(
            {
                "label": f"E{n}",
                "header": header,
                "document_id": doc,
                "source_file_name": group["name"],
                "parent_path": section,
                "text": "\n\n".join(p["text"] for p in parts if p["type"] == "text"),
                "parts": parts,
            }
        )
    return evidence
