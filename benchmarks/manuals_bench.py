"""Page recall on real PDF manuals: kgrag's hybrid retrieve and local search against
one chunk per ``pdftotext`` page ranked by dense MiniLM and by BM25, in the same run;
and the whole ingest of the manuals against bare encoding of their text.

    kgrag ingest /usr/share/doc/gnuplot/gnuplot.pdf --graph graphs/manuals-dev
    python benchmarks/manuals_bench.py --graph graphs/manuals-dev \\
        --questions benchmarks/data/manuals_dev.json --pdf /usr/share/doc/gnuplot/gnuplot.pdf

A question's gold is one or more (file, page) pairs; a ranking's pages are those of its
hits in order (a chunk over a page break gives both pages), distinct; page R@k is the
share of gold pages in the first k. ``--ingest`` also times a fresh build of the PDFs
into a temporary folder and bare encoding of their ``pdftotext`` pages.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
_WORD = re.compile(r"[a-z0-9]+")
#: words per piece of bare encoding (about 200 words fill MiniLM's 256 word pieces)
PIECE_WORDS = 150


def pdftotext_pages(pdf: Path) -> list[str]:
    """The text of every page of ``pdf`` by ``pdftotext -layout`` (pages split at \\f)."""
    out = subprocess.run(
        ["pdftotext", "-layout", str(pdf), "-"], check=True, capture_output=True, text=True
    ).stdout
    pages = out.split("\f")
    return pages[:-1] if pages and not pages[-1].strip() else pages


class BM25:
    """Okapi BM25 (k1 1.5, b 0.75) over lower-cased words less English stop words."""

    def __init__(self, texts: list[str]) -> None:
        from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

        self.stop = ENGLISH_STOP_WORDS
        self.docs = [Counter(self._words(t)) for t in texts]
        self.lengths = [sum(d.values()) for d in self.docs]
        self.avg = statistics.fmean(self.lengths) if self.lengths else 0.0
        df: Counter[str] = Counter()
        for d in self.docs:
            df.update(d.keys())
        n = len(self.docs)
        self.idf = {w: math.log(1 + (n - f + 0.5) / (f + 0.5)) for w, f in df.items()}

    def _words(self, text: str) -> list[str]:
        return [w for w in _WORD.findall(text.lower()) if w not in self.stop]

    def rank(self, query: str) -> list[int]:
        words = self._words(query)
        scores = []
        for i, d in enumerate(self.docs):
            s = 0.0
            for w in words:
                tf = d.get(w, 0)
                if tf:
                    norm = tf + 1.5 * (1 - 0.75 + 0.75 * self.lengths[i] / self.avg)
                    s += self.idf[w] * tf * 2.5 / norm
            scores.append(s)
        return sorted(range(len(self.docs)), key=lambda i: (-scores[i], i))


def page_recall(ranked: list[tuple[str, int]], gold: set[tuple[str, int]], k: int) -> float:
    top = list(dict.fromkeys(ranked))[:k]
    return len(gold.intersection(top)) / len(gold)


def hit_pages(hit: dict[str, Any]) -> list[tuple[str, int]]:
    meta = hit.get("meta") or {}
    if "page" not in meta:
        return []
    first, last = meta.get("pages") or (meta["page"], meta["page"])
    return [(str(meta["source"]), p) for p in range(int(first), int(last) + 1)]


def run(graph: str, questions: list[dict[str, Any]], pdfs: list[Path], ks: list[int]) -> dict:
    import kgrag

    pages = {pdf.name: pdftotext_pages(pdf) for pdf in pdfs}
    keys = [(name, i + 1) for name, texts in pages.items() for i in range(len(texts))]
    texts = [pages[name][i - 1] for name, i in keys]
    rankings: dict[str, list[list[tuple[str, int]]]] = {}
    with kgrag.open(graph) as engine:
        vectors = engine.retriever().encoder.encode(texts)
        bm25 = BM25(texts)
        for q in questions:
            text = q["question"]
            qv = engine.retriever().encoder.encode([text])[0]
            dense = sorted(range(len(keys)), key=lambda i: -float(vectors[i] @ qv))
            rankings.setdefault("pdftotext pages + dense MiniLM", []).append(
                [keys[i] for i in dense[:50]]
            )
            rankings.setdefault("pdftotext pages + BM25", []).append(
                [keys[i] for i in bm25.rank(text)[:50]]
            )
            hybrid = engine.retrieve({"query": text, "k": 30, "mode": "hybrid"})["hits"]
            rankings.setdefault("kgrag retrieve hybrid (chunks)", []).append(
                [p for h in hybrid for p in hit_pages(h)]
            )
            unit = engine.retrieve({"query": text, "k": 10, "unit": "page"})["hits"]
            rankings.setdefault("kgrag retrieve unit page", []).append(
                [p for h in unit for p in hit_pages(h)]
            )
            local = engine.graph({"op": "local", "query": text, "k": 30, "unit": "chunk"})
            rankings.setdefault("kgrag graph local (chunks)", []).append(
                [p for h in local["hits"] if h["unit"] == "chunk" for p in hit_pages(h)]
            )
    out: dict[str, Any] = {"questions": len(questions), "pages": len(keys)}
    kinds = sorted({q["kind"] for q in questions})
    for name, ranked in rankings.items():
        row: dict[str, Any] = {}
        for k in ks:
            per = [page_recall(r, _gold(q), k) for r, q in zip(ranked, questions, strict=True)]
            row[f"R@{k}"] = round(100 * statistics.fmean(per), 2)
            for kind in kinds:
                sub = [p for p, q in zip(per, questions, strict=True) if q["kind"] == kind]
                row[f"{kind} R@{k}"] = round(100 * statistics.fmean(sub), 2)
        out[name] = row
    return out


def _gold(q: dict[str, Any]) -> set[tuple[str, int]]:
    return {(q["file"], int(p)) for p in q["pages"]}


def time_ingest(pdfs: list[Path]) -> dict[str, Any]:
    """A fresh build of the PDFs against bare encoding of their pdftotext pages."""
    from ingest import ingest_paths
    from kgrag.config import Config
    from kgrag.encoders import load_encoder

    with tempfile.TemporaryDirectory() as tmp:
        started = time.perf_counter()
        report = ingest_paths(pdfs, Path(tmp) / "g", Config())
        build = time.perf_counter() - started
    m = Config().models
    encoder = load_encoder(m.embedding, m.batch_size, m.device, m.runtime)
    words = [w for pdf in pdfs for t in pdftotext_pages(pdf) for w in t.split()]
    # the same text in pieces the model reads whole (it cuts a page at 256 word pieces)
    texts = [" ".join(words[i : i + PIECE_WORDS]) for i in range(0, len(words), PIECE_WORDS)]
    encoder.encode(texts[:8])  # the model loaded before timing
    started = time.perf_counter()
    encoder.encode(texts)
    bare = time.perf_counter() - started
    return {
        "build s": round(build, 1),
        "stages s": {k: round(v, 1) for k, v in report.seconds.items()},
        "bare encoding of the text s": round(bare, 1),
        "pieces": len(texts),
        "ratio": round(build / bare, 2),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--graph", required=True)
    ap.add_argument("--questions", type=Path, required=True)
    ap.add_argument("--pdf", type=Path, action="append", required=True)
    ap.add_argument("--ks", default="1,5")
    ap.add_argument("--ingest", action="store_true", help="also time a fresh build")
    args = ap.parse_args()
    questions = json.loads(args.questions.read_text(encoding="utf-8"))["questions"]
    out = run(args.graph, questions, args.pdf, [int(k) for k in args.ks.split(",")])
    if args.ingest:
        out["ingest"] = time_ingest(args.pdf)
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
