"""Passage recall on multi-hop QA sets, scored exactly as HippoRAG 2 scores it.

A passage's key is ``title + "\\n" + text``. Gold passages: MuSiQue's
``is_supporting`` paragraphs; for HotpotQA and 2Wiki the context paragraphs
whose title is in ``supporting_facts`` (sentences joined with "" for HotpotQA,
" " for 2Wiki). Recall@k of a question = |gold ∩ top-k distinct retrieved
passages| / |gold|; the figure is the mean over questions.
"""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kgrag.errors import InputError, InvalidParams


@dataclass(frozen=True, slots=True)
class Question:
    id: str
    text: str
    gold: frozenset[str]  # passage keys


def load_questions(path: str | Path) -> list[Question]:
    """Questions with gold passage keys from a MuSiQue, HotpotQA or 2Wiki file."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise InputError(str(path), f"cannot read questions: {exc}") from exc
    if not isinstance(data, list):
        raise InputError(str(path), "expected a list of questions")
    return [_question(q, i, str(path)) for i, q in enumerate(data)]


def _question(q: dict[str, Any], index: int, path: str) -> Question:
    qid = str(q.get("id") or q.get("_id") or index)
    if "paragraphs" in q:  # MuSiQue
        gold = {
            f"{p['title']}\n{p['paragraph_text']}"
            for p in q["paragraphs"]
            if p.get("is_supporting")
        }
    elif "supporting_facts" in q and "context" in q:  # HotpotQA, 2Wiki
        joiner = " " if "evidences" in q else ""
        titles = {t for t, _ in q["supporting_facts"]}
        gold = {f"{t}\n{joiner.join(sents)}" for t, sents in q["context"] if t in titles}
    else:
        raise InputError(path, f"question {index}: neither MuSiQue nor HotpotQA/2Wiki layout")
    return Question(qid, q["question"], frozenset(gold))


def recall_at(ranked_keys: Sequence[str], gold: frozenset[str], k: int) -> float:
    """|gold ∩ first k distinct keys| / |gold|."""
    distinct = list(dict.fromkeys(ranked_keys))[:k]
    return len(gold.intersection(distinct)) / len(gold) if gold else 0.0


def evaluate(
    questions: Sequence[Question],
    search: Callable[[str, int], list[str]],
    ks: Sequence[int] = (2, 5),
) -> dict[str, Any]:
    """Mean Recall@k for each k; ``search(question, n)`` returns ranked passage keys."""
    depth = max(ks)
    per_k: dict[int, list[float]] = {k: [] for k in ks}
    latencies = []
    for q in questions:
        started = time.perf_counter()
        keys = search(q.text, depth)
        latencies.append((time.perf_counter() - started) * 1000)
        for k in ks:
            per_k[k].append(recall_at(keys, q.gold, k))
    return {
        "questions": len(questions),
        **{f"R@{k}": round(100 * statistics.fmean(v), 2) if v else 0.0 for k, v in per_k.items()},
        "p50_ms": round(statistics.median(latencies), 1) if latencies else 0.0,
    }


def chunk_searcher(engine: Any, params: dict[str, Any]) -> Callable[[str, int], list[str]]:
    """A ``search`` over an engine: retrieve chunks, map them to passage keys.

    ``params["mode"]`` ``local`` or ``drift`` runs that graph op instead of ``retrieve``.
    """
    docs = {d.id: f"{d.title}\n{d.text}" for d in engine.reader.documents()}
    doc_of = {c.id: c.doc_id for c in engine.reader.chunks()}

    def search(question: str, n: int) -> list[str]:
        if params.get("mode") in ("local", "drift"):
            op = {"op": params["mode"], "query": question, "k": n * 3, "unit": "chunk"}
            hits = [h for h in engine.graph(params | op)["hits"] if h["unit"] == "chunk"]
        else:
            hits = engine.retrieve(params | {"query": question, "k": n * 3})["hits"]
        return [docs[doc_of[h["id"]]] for h in hits]

    return search


PLOT_FORMATS = (".png", ".svg", ".pdf")


def check_plot_path(path: str | Path) -> None:
    """Fail before any work when ``path`` cannot take a plot."""
    out = Path(path)
    if out.suffix.lower() not in PLOT_FORMATS:
        raise InvalidParams(
            f"--plot wants a {', '.join(PLOT_FORMATS)} file, got {str(out)!r}", field="plot"
        )
    if not out.parent.is_dir():
        raise InvalidParams(f"--plot: no folder {str(out.parent)!r}", field="plot")
    _pyplot()


def plot_recall(
    rows: Sequence[dict[str, Any]], ks: Sequence[int], path: str | Path, title: str = ""
) -> None:
    """Recall@k per mode as grouped bars, one group per mode, one bar per k."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(max(4.0, 1.4 * len(rows) + 1.5), 3.6))
    width = 0.8 / max(len(ks), 1)
    for j, k in enumerate(ks):
        values = [float(r[f"R@{k}"]) for r in rows]
        xs = [i + (j - (len(ks) - 1) / 2) * width for i in range(len(rows))]
        bars = ax.bar(xs, values, width, label=f"R@{k}")
        ax.bar_label(bars, fmt="%.1f", fontsize=8, padding=2)
    ax.set_xticks(range(len(rows)), [str(r["mode"]) for r in rows])
    ax.set_ylim(0, 105)
    ax.set_ylabel("Recall@k (%)")
    questions = rows[0]["questions"] if rows else 0
    ax.set_title(f"{title} ({questions} questions)" if title else f"{questions} questions")
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def _pyplot() -> Any:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise InvalidParams(
            "--plot needs matplotlib: pip install 'kgrag[bench]'", field="plot"
        ) from exc
    return plt
