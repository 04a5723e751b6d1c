"""Whether local search's path hits can be checked by a person: triple recall and
stated-relation share on 2WikiMultiHopQA questions, which carry gold evidence
triples, with local search's chunk recall beside them.

    kgrag ingest ../shared/bench/2wikimultihopqa/2wiki_corpus.json --graph graphs/2wiki
    python benchmarks/path_quality.py --graph graphs/2wiki \\
        --questions ../shared/bench/2wikimultihopqa/2wiki_dev180.json [--k 5] [--out FILE]

- **triple recall**: the share of gold triples (subject, relation, object) whose
  subject and object are both named in the rendered text of one of the top ``--k``
  path hits (graph op ``local``, unit ``path``). A name counts when its normal form
  (lower case, accents and a trailing disambiguator such as "(film)" dropped,
  punctuation as spaces) occurs as whole words in the text's normal form.
- **stated-relation share**: the share of the edges of those path hits whose kind is
  ``relation`` (a stated SVO relation), against mentions, title links and
  co-occurrence.
- **chunk R@2 / R@5**: local search's passages against the gold passages, scored
  by ``kgrag.bench.evaluation`` as ``kgrag eval --modes local`` scores them.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
import unicodedata
from collections import defaultdict
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")

_DISAMBIGUATOR = re.compile(r"\s*\([^)]*\)\s*$")


def normal(text: str) -> str:
    """Lower case, no accents, punctuation as single spaces, padded with spaces."""
    text = unicodedata.normalize("NFKD", text)
    text = "".join(ch for ch in text if not unicodedata.combining(ch)).lower()
    return " " + " ".join(re.findall(r"[a-z0-9]+", text)) + " "


def names(text: str, name: str) -> bool:
    """Whether ``text`` (already :func:`normal`) names ``name``."""
    bare = normal(_DISAMBIGUATOR.sub("", name))
    return bare.strip() != "" and bare in text


def score_question(q: dict[str, Any], paths: list[dict[str, Any]]) -> tuple[int, int, int, int]:
    """(gold triples named, gold triples, stated-relation edges, edges) of one question."""
    texts = [normal(h.get("text", "")) for h in paths]
    found = sum(1 for s, _, o in q["evidences"] if any(names(t, s) and names(t, o) for t in texts))
    edges = [e for h in paths for e in h["provenance"]["edges"]]
    stated = sum(1 for e in edges if e["kind"] == "relation")
    return found, len(q["evidences"]), stated, len(edges)


def main() -> int:
    import kgrag
    from kgrag.bench.evaluation import chunk_searcher, load_questions, recall_at

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--graph", required=True, help="graph built from the 2Wiki corpus")
    ap.add_argument("--questions", required=True, help="2Wiki questions with evidences")
    ap.add_argument("--k", type=int, default=5)
    ap.add_argument("--limit", type=int, help="only the first N questions")
    ap.add_argument("--show", type=int, default=0, help="print the path hits of N questions")
    ap.add_argument("--out", type=Path, help="write the figures as JSON")
    args = ap.parse_args()
    questions = json.loads(Path(args.questions).read_text("utf-8"))[: args.limit]
    golds = load_questions(args.questions)[: args.limit]
    totals: dict[str, list[float]] = defaultdict(lambda: [0, 0, 0, 0, 0.0, 0.0, 0])
    started = time.perf_counter()
    with kgrag.open(args.graph) as engine:
        search = chunk_searcher(engine, {"mode": "local"})
        for i, (q, gold) in enumerate(zip(questions, golds, strict=True)):
            op = {"op": "local", "query": q["question"], "k": args.k, "unit": "path"}
            paths = engine.graph(op)["hits"][: args.k]
            found = search(q["question"], 5)
            recall = [recall_at(found, gold.gold, n) for n in (2, 5)]
            row = score_question(q, paths)
            for key in ("all", q["type"]):
                t = totals[key]
                for j in range(4):
                    t[j] += row[j]
                t[4] += recall[0]
                t[5] += recall[1]
                t[6] += 1
            if i < args.show:
                print(f"\n{q['question']}  gold: {q['evidences']}")
                for h in paths:
                    print("   ", h.get("text", "").replace("\n", "\n    "))
    report = {
        key: {
            "questions": int(t[6]),
            "triple_recall": round(100 * t[0] / max(t[1], 1), 1),
            "stated_share": round(100 * t[2] / max(t[3], 1), 1),
            "path_edges": int(t[3]),
            "chunk_r2": round(100 * t[4] / t[6], 1),
            "chunk_r5": round(100 * t[5] / t[6], 1),
        }
        for key, t in sorted(totals.items())
    }
    print(f"\n{'type':<18}{'n':>5}{'triple%':>9}{'stated%':>9}{'edges':>7}{'R@2':>7}{'R@5':>7}")
    for key, r in report.items():
        print(
            f"{key:<18}{r['questions']:>5}{r['triple_recall']:>9}{r['stated_share']:>9}"
            f"{r['path_edges']:>7}{r['chunk_r2']:>7}{r['chunk_r5']:>7}"
        )
    print(f"({time.perf_counter() - started:.0f} s)")
    if args.out:
        args.out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
