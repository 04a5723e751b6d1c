"""How much of a GraphRAG-Bench medical question's evidence the top chunks hold, by
retrieval mode: local search against hybrid and dense, off Wikipedia (one long
document, no titles to link).

    python benchmarks/global_bench.py --write-corpus /tmp/medical_docs.json
    kgrag ingest /tmp/medical_docs.json --graph /tmp/graphs/medical --quiet
    python benchmarks/medical_local.py --graph /tmp/graphs/medical [--k 5] [--mmr 0.5]
        [--out FILE]

Questions: those of ``--types`` (default "Fact Retrieval" and "Complex
Reasoning"). The measure is global_bench's ``tokens``: the share of the distinct
content words of the question's ``evidence`` (stop words and one-letter words
dropped) present in the text of the top ``--k`` chunks, averaged per type. ``--mmr
LAMBDA`` adds hybrid retrieval diversified by retrieve's MMR (``mmr: {lambda}``), the
comparison for local search, which diversifies the chunks of long documents.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent))

from global_bench import BENCH, score_pool  # noqa: E402

TYPES = ("Fact Retrieval", "Complex Reasoning")
MODES = ("dense", "hybrid", "local")


def main() -> int:
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

    import kgrag

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--graph", required=True, help="graph folder built from the medical corpus")
    ap.add_argument("--bench", type=Path, default=BENCH, help="the shared bench folder")
    ap.add_argument("--types", default=",".join(TYPES), help="comma-separated question types")
    ap.add_argument("--k", type=int, default=5)
    ap.add_argument("--limit", type=int, help="only the first N questions of each type")
    ap.add_argument("--mmr", type=float, help="also hybrid with retrieve's MMR at this lambda")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    modes = (*MODES, "hybrid_mmr") if args.mmr is not None else MODES
    stop = frozenset(ENGLISH_STOP_WORDS)
    types = [t.strip() for t in args.types.split(",") if t.strip()]
    rows = json.loads((args.bench / "graphrag_bench" / "medical_questions.json").read_text("utf-8"))
    report: dict[str, dict[str, float]] = {}
    with kgrag.open(args.graph) as engine:
        text = {c.id: c.text for c in engine.reader.chunks()}

        def top(mode: str, question: str) -> list[str]:
            if mode == "local":
                op = {"op": "local", "query": question, "k": args.k, "unit": "chunk"}
                return [h["id"] for h in engine.graph(op)["hits"] if h["unit"] == "chunk"]
            params: dict[str, object] = {"query": question, "k": args.k, "mode": mode}
            if mode == "hybrid_mmr":
                params.update(mode="hybrid", mmr={"lambda": args.mmr})
            return [h["id"] for h in engine.retrieve(params)["hits"]]

        for qtype in types:
            qs = [q for q in rows if q.get("question_type") == qtype][: args.limit or None]
            sums = dict.fromkeys(modes, 0.0)
            started = time.perf_counter()
            for q in qs:
                statements = [s.strip() for s in str(q["evidence"]).split(";") if s.strip()]
                for mode in modes:
                    body = " ".join(text[c] for c in top(mode, q["question"])[: args.k])
                    sums[mode] += score_pool(statements, body, stop)["tokens"]
            n = max(1, len(qs))
            report[qtype] = {
                "questions": len(qs),
                **{m: round(100 * v / n, 2) for m, v in sums.items()},
            }
            report[qtype]["seconds"] = round(time.perf_counter() - started, 1)
            print(qtype, report[qtype], flush=True)
    if args.out:
        args.out.write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
