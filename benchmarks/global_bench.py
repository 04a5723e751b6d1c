"""Global-search quality on GraphRAG-Bench medical: do the top community
reports, their leaves and the global summary hold the evidence of the summary
questions, compared with dense chunks of the same size?

    python benchmarks/global_bench.py --write-corpus /tmp/medical_docs.json
    kgrag ingest /tmp/medical_docs.json --graph /tmp/graphs/medical --quiet
    python benchmarks/global_bench.py --graph /tmp/graphs/medical --drift --out global.json

kgrag's loader does not read ``medical_corpus.json`` as shipped (one object
``{"corpus_name", "context"}``, no ``text`` key); ``--write-corpus PATH`` writes
it as one ``[{"title", "text"}]`` record and exits.

Questions: those whose ``question_type`` mentions "summar" or "contextual"
(GraphRAG-Bench's "Contextual Summarize"). Their ``evidence`` is a "; "-joined
list of paraphrased statements, so verbatim matching almost never succeeds;
three measures are reported per pool, averaged over questions:

- strict: share of statements whose normalised text (lower-case words joined
  by one space) occurs verbatim in the normalised concatenated pool;
- tokens: share of the evidence's distinct content words (stop words and
  one-letter words dropped) present in the pool;
- stmt@0.8: share of statements with at least 80% of their content words in
  the pool.

Pools, for each level L (``--levels all``) or the default one: ``leaves@L`` the
union of the leaves of the top-k communities; ``dense=leaves@L`` as many top
dense chunks (equal budget); ``best{k}leaves@L`` the k leaves of ``leaves@L``
with the best dense cosine; ``reports@L`` the top-k report texts;
``summary@L`` the extractive summary; ``report-summary@L`` the summary drawn from
report sentences alone (the summary before the map-reduce over passages). Then
``dense``: the top-k chunks of ``retrieve`` in mode dense; ``dense-cut``: their text
cut to the default level summary's length; ``mmr-cut``: the sentences of the top 20
dense chunks picked by MMR against the question (lambda 0.7), cut to the same length;
``dense=reports``: the dense top-k text cut to the length of the default level's
``reports``; ``excerpts@L``: each top community's excerpt, its report for the question
(the map-reduce's picks from its passages, 150 words a community); ``dense=excerpts``:
the dense top-k text cut to their length; with ``--drift``, ``local`` (PPR) and
``drift`` top-k. The size column counts chunks, or words for text pools.

The questions are split once, with a fixed seed, into two halves: ``tune`` (the half
the summary's settings were chosen on) and ``test`` (never looked at while tuning).
Every figure is given for each half and for all.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import random
import re
import sys
import time
from pathlib import Path

import numpy as np

from kgrag.ids import sentence_id
from kgrag.search.drift import LocalFn, drift
from kgrag.search.global_search import GlobalSearch

#: the seed of the tune / test split of the questions (fixed once: do not change it)
SPLIT_SEED = 45
MMR_CHUNKS = 20
MMR_LAMBDA = 0.7

os.environ.setdefault("HF_HUB_OFFLINE", "1")

BENCH = Path(__file__).resolve().parents[2] / "shared" / "bench"
MEASURES = ("strict", "tokens", "stmt@0.8")
_WORD = re.compile(r"\w+")
_MARKER = re.compile(r" \[m:[0-9a-f]+\]")


def _words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def _content(text: str, stop: frozenset[str]) -> set[str]:
    return {w for w in _words(text) if len(w) > 1 and w not in stop}


def score_pool(statements: list[str], pool_text: str, stop: frozenset[str]) -> dict[str, float]:
    """The three measures of one question's evidence against one pool's text."""
    flat = " ".join(_words(pool_text))
    have = _content(pool_text, stop)
    stmts = [(" ".join(_words(s)), _content(s, stop)) for s in statements]
    wanted = set().union(*(words for _, words in stmts)) if stmts else set()
    strict = sum(bool(norm) and norm in flat for norm, _ in stmts) / max(1, len(stmts))
    tokens = len(wanted & have) / max(1, len(wanted))
    covered = sum(bool(w) and len(w & have) >= 0.8 * len(w) for _, w in stmts)
    return {"strict": strict, "tokens": tokens, "stmt@0.8": covered / max(1, len(stmts))}


def load_questions(bench: Path, limit: int | None) -> list[dict[str, str]]:
    rows = json.loads((bench / "graphrag_bench" / "medical_questions.json").read_text("utf-8"))
    wanted = [
        q
        for q in rows
        if any(t in str(q.get("question_type", "")).lower() for t in ("summar", "contextual"))
    ]
    return wanted[:limit] if limit else wanted


def write_corpus(bench: Path, out: Path) -> None:
    corpus = json.loads((bench / "graphrag_bench" / "medical_corpus.json").read_text("utf-8"))
    record = {"title": corpus["corpus_name"], "text": corpus["context"]}
    out.write_text(json.dumps([record]), encoding="utf-8")


def split_halves(n: int) -> list[str]:
    """``tune`` or ``test`` for each of ``n`` questions (half each, fixed seed)."""
    tune = set(random.Random(SPLIT_SEED).sample(range(n), n // 2))
    return ["tune" if i in tune else "test" for i in range(n)]


def _level_pools(
    gs: GlobalSearch, old: GlobalSearch, question: str, level: int, k: int, dense: Dense
) -> dict[str, list[str] | str]:
    """The pools global search at ``level`` gives one question, and the dense
    pool of the same size."""
    res = gs.search(question, k, level)
    before = old.search(question, k, level)
    leaves = sorted({c for s in res.communities for c in s.leaves})
    return {
        f"leaves@{level}": leaves,
        f"dense=leaves@{level}": dense.top(len(leaves)),
        f"best{k}leaves@{level}": sorted(leaves, key=lambda c: (-dense.score(c), c))[:k],
        f"reports@{level}": "\n".join(s.summary for s in res.communities),
        f"excerpts@{level}": "\n".join(s.excerpt for s in res.communities),
        f"summary@{level}": _MARKER.sub("", res.summary),
        f"report-summary@{level}": _MARKER.sub("", before.summary),
    }


class Sentences:
    """Every stored sentence vector, for the MMR baseline."""

    def __init__(self, reader: object) -> None:
        ids, matrix = reader.vectors("sentences")  # type: ignore[attr-defined]
        self.row = {sid: i for i, sid in enumerate(ids)}
        self.matrix = np.asarray(matrix, dtype=np.float32)

    def mmr(self, reader: object, qvec: np.ndarray, chunks: list[str]) -> list[str]:
        """The sentences of ``chunks`` in the order MMR picks them against ``qvec``."""
        texts = reader.passage_texts(chunks)  # type: ignore[attr-defined]
        found: list[tuple[str, int]] = []
        for cid in chunks:
            passage = texts.get(cid)
            for s in passage.sentences if passage else ():
                row = self.row.get(sentence_id(cid, s.index))
                if row is not None:
                    found.append((" ".join(passage.text[s.start : s.end].split()), row))
        if not found:
            return []
        vecs = self.matrix[[row for _, row in found]]
        rel = vecs @ qvec
        picked: list[int] = []
        left = list(range(len(found)))
        while left:
            novelty = (vecs[left] @ vecs[picked].T).max(axis=1) if picked else 0.0
            score = MMR_LAMBDA * rel[left] - (1 - MMR_LAMBDA) * novelty
            picked.append(left.pop(int(np.argmax(score))))
        return [found[i][0] for i in picked]


class Dense:
    """Dense cosine of every chunk for one question."""

    def __init__(self, ids: list[str], scores: np.ndarray) -> None:
        self.ids, self.scores = ids, scores
        self.row = {cid: i for i, cid in enumerate(ids)}

    def score(self, cid: str) -> float:
        return float(self.scores[self.row[cid]])

    def top(self, n: int) -> list[str]:
        order = np.lexsort((np.arange(len(self.ids)), -self.scores))
        return [self.ids[i] for i in order[:n]]


def _drift_pools(gs: GlobalSearch, local: LocalFn, question: str, k: int) -> dict[str, list[str]]:
    """The top-k passages of the PPR local search alone and of DRIFT over it."""
    result = drift(question, global_search=gs, local=local, k=k)
    return {"local": [c for c, _ in local(question, k)], "drift": [c for c, _ in result.passages]}


def _tally(
    totals: dict[str, dict[str, float]],
    pools: dict[str, list[str] | str],
    statements: list[str],
    text: dict[str, str],
    stop: frozenset[str],
) -> None:
    for name, pool in pools.items():
        body = pool if isinstance(pool, str) else " ".join(text[c] for c in pool)
        row = totals.setdefault(name, dict.fromkeys((*MEASURES, "size"), 0.0))
        for m, v in score_pool(statements, body, stop).items():
            row[m] += v
        row["size"] += len(body.split()) if isinstance(pool, str) else len(pool)


def _cut(text: str, words: int) -> str:
    return " ".join(text.split()[:words])


def run(
    graph: Path, questions: list[dict[str, str]], k: int, levels: str, with_drift: bool
) -> dict[str, object]:
    """Per-pool measure means and mean sizes (chunks, or words for texts), for each half
    of the questions and for all."""
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

    import kgrag
    from kgrag.search.local import LocalSearch

    stop = frozenset(ENGLISH_STOP_WORDS)
    totals: dict[str, dict[str, dict[str, float]]] = {"tune": {}, "test": {}, "all": {}}
    halves = split_halves(len(questions))
    with kgrag.open(graph) as engine:
        reader, encoder = engine.reader, engine.encoder
        text = {c.id: c.text for c in reader.chunks()}
        ids, matrix = reader.vectors("chunks")
        gs = GlobalSearch(reader, encoder)
        before = dataclasses.replace(gs.settings, summary_from="reports")
        old = GlobalSearch(reader, encoder, before)
        sentences = Sentences(reader)
        default = gs.default_level()
        chosen = gs.levels() if levels == "all" else [default]
        if with_drift:
            ppr = LocalSearch(reader, encoder)
        started = time.perf_counter()
        for q, half in zip(questions, halves, strict=True):
            qvec = encoder.encode_one(q["question"])
            dense = Dense(ids, matrix @ qvec)
            pools: dict[str, list[str] | str] = {}
            for level in chosen:
                pools |= _level_pools(gs, old, q["question"], level, k, dense)
            hits = engine.retrieve({"query": q["question"], "k": k, "mode": "dense"})["hits"]
            pools["dense"] = [h["id"] for h in hits]
            words = len(str(pools[f"summary@{default}"]).split())
            dense_text = " ".join(text[c] for c in pools["dense"])
            pools["dense-cut"] = _cut(dense_text, words)
            mmr = sentences.mmr(reader, qvec, dense.top(MMR_CHUNKS))
            pools["mmr-cut"] = _cut(" ".join(mmr), words)
            pools["dense=reports"] = _cut(dense_text, len(str(pools[f"reports@{default}"]).split()))
            excerpts = len(str(pools[f"excerpts@{default}"]).split())
            pools["dense=excerpts"] = _cut(dense_text, excerpts)
            if with_drift:
                pools |= _drift_pools(gs, lambda t, n: ppr.search(t, n).passages, q["question"], k)
            statements = [s.strip() for s in q["evidence"].split(";") if s.strip()]
            _tally(totals[half], pools, statements, text, stop)
            _tally(totals["all"], pools, statements, text, stop)
        elapsed = time.perf_counter() - started
        per_level = {str(lv): len(reader.communities(lv)) for lv in gs.levels()}
    count = {"all": len(questions), "tune": halves.count("tune"), "test": halves.count("test")}
    return {
        "questions": len(questions),
        "split": {"seed": SPLIT_SEED, **count},
        "k": k,
        "default_level": default,
        "communities_per_level": per_level,
        "chunks": len(ids),
        "pools": {
            half: {
                name: {
                    m: round((100 if m != "size" else 1) * v / max(1, count[half]), 1)
                    for m, v in t.items()
                }
                for name, t in pools_of.items()
            }
            for half, pools_of in totals.items()
        },
        "seconds_per_question": round(elapsed / max(1, len(questions)), 2),
    }


def _pool_order(name: str) -> tuple[str, str]:
    kind, _, level = name.partition("@")
    return (level, kind)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--graph", help="graph folder built from the medical corpus")
    ap.add_argument("--bench", type=Path, default=BENCH, help="the shared bench folder")
    ap.add_argument("--limit", type=int, help="only the first N summary questions")
    ap.add_argument("--k", type=int, default=5, help="communities and chunks per pool")
    ap.add_argument("--levels", choices=("all", "default"), default="all")
    ap.add_argument("--drift", action="store_true", help="also score PPR local and DRIFT")
    ap.add_argument("--out", type=Path, help="write the figures as JSON here")
    ap.add_argument("--write-corpus", type=Path, help="write an ingestable corpus and exit")
    args = ap.parse_args()
    if args.write_corpus:
        write_corpus(args.bench, args.write_corpus)
        return 0
    if not args.graph:
        ap.error("--graph is required")
    questions = load_questions(args.bench, args.limit)
    started = time.perf_counter()
    figures = run(Path(args.graph), questions, args.k, args.levels, args.drift)
    figures["wall_s"] = round(time.perf_counter() - started, 1)
    columns = (*MEASURES, "size")
    halves: dict[str, dict[str, dict[str, float]]] = figures["pools"]  # type: ignore[assignment]
    for half, pools in halves.items():
        print(f"\n{half} ({figures['split'][half]} questions)")  # type: ignore[index]
        print(f"{'pool':<20}" + "".join(f"{m:>10}" for m in columns))
        for name, row in sorted(pools.items(), key=lambda nr: _pool_order(nr[0])):
            print(f"{name:<20}" + "".join(f"{row[m]:>10}" for m in columns))
    print(json.dumps({k: v for k, v in figures.items() if k != "pools"}))
    if args.out:
        args.out.write_text(json.dumps(figures, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
