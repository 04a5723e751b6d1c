"""The old import path of :mod:`kgrag.bench.evaluation` (passage recall on multi-hop
QA sets), kept for scripts that import ``kgrag.evaluation``."""

from kgrag.bench.evaluation import (
    Question,
    chunk_searcher,
    evaluate,
    load_questions,
    plot_recall,
    recall_at,
)

__all__ = ["Question", "chunk_searcher", "evaluate", "load_questions", "plot_recall", "recall_at"]
