"""Fit the logistic calibration behind ``Hit.confidence`` and report how well it holds.

    python benchmarks/calibrate_confidence.py \\
        --set ../shared/bench/musique/musique100.json graphs/musique100 \\
        --set ../shared/bench/hotpotqa/hotpotqa100.json graphs/hotpotqa100

For every question, the top-50 dense chunks are labelled 1 when their passage
is gold. A logistic regression of the label on the query-chunk cosine gives
the slope and bias (config retrieval.confidence_slope / _bias). Each set is
also scored with a fit on the other sets (expected calibration error, ECE),
so the figure says how well the calibration carries to unseen data.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")


def labelled(questions_file: str, graph: str, depth: int) -> tuple[np.ndarray, np.ndarray]:
    import kgrag
    from kgrag.bench.evaluation import load_questions

    xs, ys = [], []
    with kgrag.open(graph) as engine:
        docs = {d.id: f"{d.title}\n{d.text}" for d in engine.reader.documents()}
        doc_of = {c.id: c.doc_id for c in engine.reader.chunks()}
        for q in load_questions(questions_file):
            for h in engine.retrieve({"query": q.text, "k": depth, "mode": "dense"})["hits"]:
                xs.append(h["scores"]["dense"])
                ys.append(docs[doc_of[h["id"]]] in q.gold)
    return np.array(xs), np.array(ys, dtype=float)


def fit(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    from sklearn.linear_model import LogisticRegression

    model = LogisticRegression(C=1e4).fit(x[:, None], y)
    return float(model.coef_[0][0]), float(model.intercept_[0])


def ece(x: np.ndarray, y: np.ndarray, slope: float, bias: float, bins: int = 10) -> float:
    p = 1 / (1 + np.exp(-(slope * x + bias)))
    edges = np.linspace(0, 1, bins + 1)
    total = 0.0
    for lo, hi in zip(edges[:-1], edges[1:], strict=True):
        m = (p >= lo) & (p < hi) if hi < 1 else (p >= lo)
        if m.any():
            total += m.mean() * abs(p[m].mean() - y[m].mean())
    return float(total)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument(
        "--set", nargs=2, action="append", metavar=("QUESTIONS", "GRAPH"), required=True
    )
    ap.add_argument("--depth", type=int, default=50)
    args = ap.parse_args()
    data = {q: labelled(q, g, args.depth) for q, g in args.set}
    report = {}
    for name, (x, y) in data.items():
        others = [v for k, v in data.items() if k != name] or [data[name]]
        ox, oy = np.concatenate([o[0] for o in others]), np.concatenate([o[1] for o in others])
        s, b = fit(ox, oy)
        report[name] = {
            "pairs": len(x),
            "positives": int(y.sum()),
            "ece_held_out": round(ece(x, y, s, b), 4),
        }
    x = np.concatenate([v[0] for v in data.values()])
    y = np.concatenate([v[1] for v in data.values()])
    slope, bias = fit(x, y)
    report["pooled"] = {
        "slope": round(slope, 3),
        "bias": round(bias, 3),
        "ece": round(ece(x, y, slope, bias), 4),
    }
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
