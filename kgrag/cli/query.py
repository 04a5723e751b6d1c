"""``kgrag query --op``: graph ops printed for people, paths drawn with their evidence."""

from __future__ import annotations

import argparse
import json
import textwrap
from typing import Any

from kgrag.engine import render_path


def run_op(engine: Any, args: argparse.Namespace, text: str) -> None:
    """Run ``args.op`` for ``text`` and print it (JSON lines with ``--json``)."""
    params: dict[str, Any] = {"op": args.op, "query": text, "k": args.k}
    if args.level is not None:
        params["level"] = args.level
    if args.op == "neighbors":
        params = {"op": "neighbors", "seedIds": _seeds(args, text), "hops": args.hops}
    if args.op == "local" and args.unit:
        params["unit"] = [u.strip() for u in args.unit.split(",") if u.strip()]
    if args.op == "drift":
        params["depth"] = args.depth
    if args.op == "communities":
        params.pop("query")
    result = engine.graph(params)
    if args.json:
        print(json.dumps(result | {"query": text}, ensure_ascii=False))
        return
    print(f"\n{args.op.upper()}: {text}   [indexVersion {engine.index_version}]")
    names = _names(engine, result)
    if result.get("citations"):  # a sentence a line, with the passage it quotes
        print("\nSummary:")
        for line in _cited(engine, result["citations"]):
            print(textwrap.fill(line, 100, initial_indent="  - ", subsequent_indent="    "))
    elif "summary" in result:
        print(
            "\nSummary:\n"
            + textwrap.fill(result["summary"], 100, initial_indent="  ", subsequent_indent="  ")
        )
    for c in result.get("communities", []):
        head = f"  [{c['id']} L{c['level']}]"
        score = f" score {c['score']:.3f}" if "score" in c else ""
        title = c.get("title") or c.get("summary", "").split("\n")[0]
        print(f"{head}{score}  {textwrap.shorten(title, 80)}")
    for f in result.get("followups", []):
        print(f"  follow-up: {f}")
    for rank, hit in enumerate(result.get("hits", []), 1):
        print(_hit(rank, hit, names, engine))
    for node in result.get("nodes", []):
        print(f"  {node['id']}  {node.get('label', '')}  score {node['score']:.3f}")
    for e in result.get("edges", [])[:50]:
        print("  " + render_path([{"kind": e.get("kind", "relation")} | e], names))


def _cited(engine: Any, citations: list[dict[str, str]]) -> list[str]:
    """Each summary sentence, the title of the passage it quotes and its community."""
    passages = sorted({c["passage"] for c in citations})
    titles = {c.id: c.context for c in engine.reader.chunks(passages)}
    return [
        f"{c['text']} — {titles.get(c['passage']) or c['passage']} [{c['community']}]"
        for c in citations
    ]


def _seeds(args: argparse.Namespace, text: str) -> list[str]:
    if args.seeds:
        return [s.strip() for s in args.seeds.split(",") if s.strip()]
    return [text]  # the text is taken as an entity id


def _names(engine: Any, result: dict[str, Any]) -> dict[str, str]:
    ids = {i for h in result.get("hits", []) for i in h.get("provenance", {}).get("nodes", [])}
    ids |= {
        e["evidence"]
        for h in result.get("hits", [])
        for e in h.get("provenance", {}).get("edges", [])
        if e.get("evidence")
    }
    ids |= {e[end] for e in result.get("edges", []) for end in ("src", "dst")}
    entity_ids = sorted(i for i in ids if i.startswith("e:"))
    names = {e.id: e.name for e in engine.reader.entities(entity_ids)}
    chunk_ids = sorted(i for i in ids if i.startswith("c:"))
    docs = {d.id: d.title for d in engine.reader.documents()}
    names |= {c.id: f"[{docs.get(c.doc_id, c.doc_id)}]" for c in engine.reader.chunks(chunk_ids)}
    return names


def _hit(rank: int, hit: dict[str, Any], names: dict[str, str], engine: Any) -> str:
    head = (
        f"{rank:>2}. [{hit['unit']} L{hit.get('level', 0)}] score {hit['score']:.3f}  {hit['id']}"
    )
    lines = [head, "      " + textwrap.shorten(hit.get("text", "").replace("\n", " | "), 160)]
    edges = hit.get("provenance", {}).get("edges", [])
    evidence = {e["evidence"] for e in edges if "evidence" in e and "quote" not in e}
    chunks = {c.id: c for c in engine.reader.chunks(sorted(evidence))}
    for e in edges:
        drawn = render_path([e], names)
        lines.append(f"      {drawn}")
        source = names.get(e.get("evidence", ""), e.get("evidence", ""))
        if e.get("quote"):
            lines.append(f"          “{textwrap.shorten(e['quote'], 110)}” {source}")
        elif (c := chunks.get(e.get("evidence", ""))) is not None and e["kind"] != "mention":
            lines.append(f"          evidence {source}: {textwrap.shorten(c.text, 90)}")
    return "\n".join(lines)
