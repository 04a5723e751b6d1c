"""Fit local search's rerank model and write it as kgrag/graph/rerank_model.py.

    python benchmarks/fit_rerank.py \\
        --fit /tmp/graphs/musique100 ../shared/bench/musique/musique100.json \\
        --fit /tmp/graphs/hotpotqa100 ../shared/bench/hotpotqa/hotpotqa100.json \\
        --check /tmp/graphs/2wiki ../benchmarks/data/2wiki_heldout.json \\
        --out kgrag/graph/rerank_model.py

Each graph is built from its set's corpus (``kgrag ingest``). For every question,
local search's best ``--depth`` passages before reranking and their features
(:data:`kgrag.search.local_rerank.FEATURES`) are read through
:meth:`LocalSearch.candidates`; a passage is a positive when it is one of the
question's gold passages. A logistic regression (L2, ``--C``) is fitted on the
standardised features of the ``--fit`` sets together.

``--long GRAPH`` fits the long-document model instead
(kgrag/graph/rerank_model_long.py, ``--out``), on GraphRAG-Bench medical alone, and
gives its figures per question type with the diversification local search applies
to such candidates (``--diversity``):

    python benchmarks/fit_rerank.py --long /tmp/graphs/medical \\
        --out kgrag/graph/rerank_model_long.py

``--fit-medical`` / ``--check-medical GRAPH`` add GraphRAG-Bench medical (a graph of
``global_bench.py --write-corpus``): there a positive is a candidate holding 80% of
the content words of one of the question's evidence statements, and the figure is
``medical_local.py``'s share of the evidence's content words in the top 2 / 5. Each
fit set weighs alike, whatever its number of questions.

Printed per set: Recall@2/5 of local search's own order and of the reranked
order with the fitted model (in-sample for ``--fit`` sets; held out for the
``--check`` sets, which no fit saw); for a ``--fit`` set also a 5-fold
cross-validation by question (each fold reranked by a model fitted on the
other folds and the other ``--fit`` sets), the estimate for questions of that
kind that the model never saw.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from kgrag.search.local_rerank import RerankModel

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from kgrag.search.local import LocalSettings  # noqa: E402


@dataclass
class Question:
    x: np.ndarray  # candidate features, best first
    keys: list[str]  # candidate passage keys
    gold: frozenset[str]  # the keys of its evidence passages
    set: str  # the name of its set
    #: the figure of an order of keys at 2 and at 5 (None: recall of ``gold``)
    measure: Callable[[list[str]], tuple[float, float]] | None = None
    kind: str = ""  # its question type, where figures are given per type
    #: for the long-document model: the candidates' document titles and chunk vectors,
    #: which its diversification reads
    titles: list[str] | None = None
    vectors: np.ndarray | None = None

    @property
    def y(self) -> np.ndarray:
        return np.array([k in self.gold for k in self.keys])

    def figures(self, keys: list[str]) -> tuple[float, float]:
        from kgrag.bench.evaluation import recall_at

        if self.measure is not None:
            return self.measure(keys)
        return recall_at(keys, self.gold, 2), recall_at(keys, self.gold, 5)


def read_set(graph: str, questions: str, depth: int) -> list[Question]:
    import kgrag
    from kgrag.bench.evaluation import load_questions
    from kgrag.search.local import LocalSearch
    from kgrag.search.local_rerank import long_document
    from kgrag.threads import serve_queries

    serve_queries()
    out = []
    with kgrag.open(graph) as engine:
        reader = engine.reader
        local = LocalSearch(reader, engine.encoder, LocalSettings(rerank_depth=depth))
        documents = reader.documents()
        docs = {d.id: f"{d.title}\n{d.text}" for d in documents}
        title = {d.id: d.title for d in documents}
        doc_of = {c.id: c.doc_id for c in reader.chunks()}
        for q in load_questions(questions):
            found, _, x = local.candidates(q.text, depth)
            keys = [docs[doc_of[cid]] for cid, _ in found.passages]
            titles = [title[doc_of[cid]] for cid, _ in found.passages]
            out.append(Question(x, keys, q.gold, Path(questions).stem, titles=titles))
    long = sum(long_document(q.titles or [], LocalSettings().long_share) for q in out)
    name = Path(questions).stem
    print(f"{name}: {long} of {len(out)} questions take the long-document model", flush=True)
    return out


def read_medical(graph: str, depth: int, per_type: int | None) -> list[Question]:
    """GraphRAG-Bench medical's Fact Retrieval and Complex Reasoning questions (the
    first ``per_type`` of each): a candidate is a positive when its text holds at
    least 80% of the content words of one of the question's evidence statements;
    the figure of an order is ``benchmarks/medical_local.py``'s, the share of the
    evidence's content words in the top 2 / top 5 chunks."""
    import json

    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

    import kgrag
    from kgrag.search.local import LocalSearch
    from kgrag.threads import serve_queries

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from global_bench import BENCH, _content, score_pool
    from medical_local import TYPES

    serve_queries()
    stop = frozenset(ENGLISH_STOP_WORDS)
    rows = json.loads((BENCH / "graphrag_bench" / "medical_questions.json").read_text("utf-8"))
    out = []
    with kgrag.open(graph) as engine:
        reader = engine.reader
        local = LocalSearch(reader, engine.encoder, LocalSettings(rerank_depth=depth))
        chunks = reader.chunks()
        text = {c.id: c.text for c in chunks}
        doc_title = {d.id: d.title for d in reader.documents()}
        title = {c.id: doc_title[c.doc_id] for c in chunks}
        matrix = reader.matrix("chunks")
        for qtype in TYPES:
            for q in [q for q in rows if q.get("question_type") == qtype][:per_type]:
                statements = [s.strip() for s in str(q["evidence"]).split(";") if s.strip()]
                wanted = [w for w in (_content(s, stop) for s in statements) if w]
                found, cand_rows, x = local.candidates(q["question"], depth)
                keys = [cid for cid, _ in found.passages]
                gold = frozenset(
                    k
                    for k in keys
                    if any(len(w & _content(text[k], stop)) >= 0.8 * len(w) for w in wanted)
                )

                def measure(order: list[str], st: list[str] = statements) -> tuple[float, float]:
                    return tuple(  # type: ignore[return-value]
                        score_pool(st, " ".join(text[k] for k in order[:n]), stop)["tokens"]
                        for n in (2, 5)
                    )

                vectors = np.asarray(matrix[np.asarray(cand_rows, dtype=np.int64)])
                titles = [title[k] for k in keys]
                out.append(Question(x, keys, gold, "medical", measure, qtype, titles, vectors))
    return out


def fit(questions: list[Question], c: float) -> RerankModel:
    """Fitted on ``questions``; the candidates of each question weigh 1 / (the number
    of questions of its set among them), so that every set counts alike."""
    from sklearn.linear_model import LogisticRegression

    from kgrag.search.local_rerank import FEATURES, RerankModel

    x = np.vstack([q.x for q in questions])
    y = np.concatenate([q.y for q in questions])
    per_set = Counter(q.set for q in questions)
    w = np.concatenate([np.full(len(q.keys), 1.0 / per_set[q.set]) for q in questions])
    mean, scale = x.mean(axis=0), x.std(axis=0)
    scale[scale == 0] = 1.0
    lr = LogisticRegression(C=c, max_iter=5000).fit(
        (x - mean) / scale, y, sample_weight=w * len(w) / w.sum()
    )
    return RerankModel(
        FEATURES,
        tuple(float(v) for v in mean),
        tuple(float(v) for v in scale),
        tuple(float(v) for v in lr.coef_[0]),
        float(lr.intercept_[0]),
    )


def recall(
    questions: list[Question], model: RerankModel | None, diversity: float = 0.0
) -> tuple[float, float]:
    """Mean Recall@2 and @5, reranked by ``model`` (None: local search's own order);
    with ``diversity``, the top 5 diversified within documents as local search
    orders long-document candidates (:func:`kgrag.search.local_rerank.diversified`)."""
    from kgrag.search.local_rerank import diversified

    r2, r5 = [], []
    for q in questions:
        order = list(range(len(q.keys)))
        if model is not None and len(order):
            prob = model.scores(q.x)
            if diversity > 0 and q.vectors is not None and q.titles is not None:
                order = diversified(prob, q.vectors, q.titles, diversity, 5)
            else:
                order.sort(key=lambda i: (-prob[i], i))
        at2, at5 = q.figures([q.keys[i] for i in order])
        r2.append(at2)
        r5.append(at5)
    return round(100 * float(np.mean(r2)), 2), round(100 * float(np.mean(r5)), 2)


def cross_validated(
    questions: list[Question], others: list[Question], c: float, folds: int = 5
) -> tuple[float, float]:
    """Recall with each fold of ``questions`` reranked by a model fitted on the other
    folds and ``others`` (the other fit sets), as the shipped model is fitted on all
    fit sets: the mean over folds."""
    parts = [questions[i::folds] for i in range(folds)]
    scores = [
        recall(parts[i], fit([q for j, p in enumerate(parts) if j != i for q in p] + others, c))
        for i in range(folds)
    ]
    return (
        round(float(np.mean([s[0] for s in scores])), 2),
        round(float(np.mean([s[1] for s in scores])), 2),
    )


def module_text(
    model: RerankModel,
    meta: dict[str, object],
    figures: dict[str, str],
    name: str = "MODEL",
    what: str = "The fitted rerank model of local search (:mod:`kgrag.search.local_rerank`).",
    measured: str = "Recall@2 / Recall@5",
) -> str:
    def floats(values: tuple[float, ...]) -> str:
        return "".join(
            f"        {v!r},  # {n}\n" for n, v in zip(model.features, values, strict=True)
        )

    from kgrag.search.local_rerank import FEATURES

    n = len(model.features)
    if model.features == FEATURES:
        weighs = "FEATURES"
    elif model.features == FEATURES[:n]:
        weighs = f"FEATURES[:{n}]"  # fitted before the later features were
    else:
        weighs = repr(model.features)
    fit = "\n".join(f"    {k}: {v}" for k, v in meta.items())
    lines = "\n".join(f"    {label}: {row}" for label, row in figures.items())
    return f'''"""{what}

Written by benchmarks/fit_rerank.py; do not edit by hand.

{fit}

{measured} as the fit measured them:

{lines}
"""

from .rerank import FEATURES, RerankModel

{name} = RerankModel(
    features={weighs},
    mean=(
{floats(model.mean)}    ),
    scale=(
{floats(model.scale)}    ),
    weights=(
{floats(model.weights)}    ),
    intercept={model.intercept!r},
)
'''


def fit_long(args: argparse.Namespace) -> int:
    """The long-document model: fitted on GraphRAG-Bench medical alone, its figures
    per question type with the diversification local search applies."""
    from kgrag.search.local_rerank import long_document

    questions = read_medical(args.long, args.depth, args.medical_per_type)
    routed = sum(long_document(q.titles or [], args.long_share) for q in questions)
    print(f"{routed} of {len(questions)} questions take the long-document model", flush=True)
    model = fit(questions, args.C)
    figures: dict[str, str] = {}
    for kind in dict.fromkeys(q.kind for q in questions):
        qs = [q for q in questions if q.kind == kind]
        cv = _cross_validated_within(questions, kind, args.C, args.diversity)
        lines = [
            f"{len(qs)} questions",
            "local {} / {}".format(*recall(qs, None)),
            "reranked {} / {}".format(*recall(qs, model)),
            "reranked and diversified {} / {} (in-sample)".format(
                *recall(qs, model, args.diversity)
            ),
            "{} / {} (5-fold CV)".format(*cv),
        ]
        figures[f"medical {kind}"] = ";\n        ".join(lines)
        print(f"medical {kind}: {figures[f'medical {kind}']}", flush=True)
    meta: dict[str, object] = {
        "fitted on": "GraphRAG-Bench medical (Fact Retrieval, Complex Reasoning)",
        "candidates per question (depth)": args.depth,
        "C (inverse L2 strength)": args.C,
        "diversity (LocalSettings.long_diversity)": args.diversity,
    }
    if args.out:
        text = module_text(
            model,
            meta,
            figures,
            "LONG_MODEL",
            "Local search's rerank model for candidates from long documents.\n\n"
            "Which queries it reranks: :func:`kgrag.search.local_rerank.long_document`.",
            "The share of the evidence's content words in the top 2 / top 5",
        )
        args.out.write_text(text, encoding="utf-8")
    return 0


def _cross_validated_within(
    questions: list[Question], kind: str, c: float, diversity: float, folds: int = 5
) -> tuple[float, float]:
    """The questions of ``kind`` reranked by models fitted without their fold (folds
    cut over all questions, so each model is fitted as the shipped one is, on every
    type but for one fold): the mean over the folds."""
    parts = [questions[i::folds] for i in range(folds)]
    scores = []
    for i in range(folds):
        held = [q for q in parts[i] if q.kind == kind]
        if held:
            model = fit([q for j, p in enumerate(parts) if j != i for q in p], c)
            scores.append((len(held), recall(held, model, diversity)))
    n = sum(w for w, _ in scores)
    return (
        round(sum(w * s[0] for w, s in scores) / n, 2),
        round(sum(w * s[1] for w, s in scores) / n, 2),
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--fit", nargs=2, action="append", metavar=("GRAPH", "QUESTIONS"), default=[])
    ap.add_argument("--check", nargs=2, action="append", metavar=("GRAPH", "QUESTIONS"), default=[])
    ap.add_argument("--fit-medical", metavar="GRAPH", help="fit on GraphRAG-Bench medical too")
    ap.add_argument("--check-medical", metavar="GRAPH", help="check on GraphRAG-Bench medical")
    ap.add_argument("--medical-per-type", type=int, help="only the first N medical questions")
    ap.add_argument("--depth", type=int, default=50, help="candidates reranked per question")
    ap.add_argument("--C", type=float, default=0.1, help="inverse L2 strength")
    ap.add_argument("--out", type=Path, help="write the model module here")
    ap.add_argument(
        "--long",
        metavar="GRAPH",
        help="fit the long-document model on GraphRAG-Bench medical alone (its graph)",
    )
    ap.add_argument(
        "--diversity",
        type=float,
        default=LocalSettings().long_diversity,
        help="the long-document top 5's diversification, as local search's",
    )
    ap.add_argument(
        "--long-share",
        type=float,
        default=LocalSettings().long_share,
        help="candidates sharing a title that route a query to the long-document model",
    )
    args = ap.parse_args()
    if args.long:
        if args.fit or args.check or args.fit_medical or args.check_medical:
            ap.error("--long fits on medical alone: no --fit, --check or --*-medical")
        return fit_long(args)
    if not args.fit:
        ap.error("give at least one --fit GRAPH QUESTIONS")
    if args.fit_medical and args.check_medical:
        ap.error("--fit-medical and --check-medical: one or the other")
    sets = {Path(q).stem: read_set(g, q, args.depth) for g, q in [*args.fit, *args.check]}
    fitted = [Path(q).stem for _, q in args.fit]
    medical = args.fit_medical or args.check_medical
    if medical:
        sets["medical"] = read_medical(medical, args.depth, args.medical_per_type)
        fitted += ["medical"] if args.fit_medical else []
    model = fit([q for name in fitted for q in sets[name]], args.C)
    figures: dict[str, str] = {}
    for name, qs in sets.items():
        lines = [f"{len(qs)} questions", "local {} / {}".format(*recall(qs, None))]
        if name in fitted:
            others = [q for other in fitted if other != name for q in sets[other]]
            lines.append("reranked {} / {} (in-sample)".format(*recall(qs, model)))
            lines.append("{} / {} (5-fold CV)".format(*cross_validated(qs, others, args.C)))
        else:
            lines.append("reranked {} / {} (held out)".format(*recall(qs, model)))
        figures[name] = ";\n        ".join(lines)
        print(f"{name}: {figures[name]}", flush=True)
    meta: dict[str, object] = {
        "fitted on": ", ".join(fitted),
        "checked on": ", ".join(n for n in sets if n not in fitted) or "-",
        "candidates per question (depth)": args.depth,
        "C (inverse L2 strength)": args.C,
    }
    if args.out:
        args.out.write_text(module_text(model, meta, figures), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
