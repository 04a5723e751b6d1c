"""A built graph against its copy in the current store format, recall and bytes of
both in one run: vectors as int8 codes against float32, or (``--compose-facts``)
facts stored as the parts they are composed of against stored rows.

    python benchmarks/coded_bench.py --graph graphs/musique100 \\
        --questions ../shared/bench/musique/musique100.json --out /tmp/musique100.coded

``--graph`` is a folder graph: one whose vectors are all float32 (built before the
coded format, or by ``git stash``'d code) for the first comparison; the copy holds the
same records, so the two differ only in the vectors' format
(:mod:`kgrag.store.vectors`, :mod:`kgrag.store.composed`). With ``--compose-facts``
the parts are made from the graph's records by its own encoder, as a build makes
them. Reported per mode (dense, hybrid, local, drift): R@2 and R@5 of each and the
difference; then the bytes of each version and per passage. With ``--latency N``, the
p50 ms of graph local, global and DRIFT and of retrieve over community reports for N
questions, both graphs open in one process and asked in turn (after a warm-up
question), so machine load falls on both alike.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

MODES = {
    "dense": {"mode": "dense"},
    "hybrid": {"mode": "hybrid"},
    "local": {"mode": "local"},
    "drift": {"mode": "drift"},
}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--graph", type=Path, required=True, help="a folder graph")
    ap.add_argument("--questions", type=Path, required=True)
    ap.add_argument("--out", type=Path, required=True, help="where the coded copy goes")
    ap.add_argument("--modes", default=",".join(MODES))
    ap.add_argument("--limit", type=int, default=0)
    ap.add_argument("--latency", type=int, default=0, help="questions to time per op")
    ap.add_argument("--json", type=Path, help="also write the figures here")
    ap.add_argument(
        "--perturb-facts",
        type=int,
        metavar="SEED",
        help="move the copy's fact rows by random noise of norm 0.012 (what composing "
        "them moves them by), to see how far recall moves with a change of that size",
    )
    ap.add_argument(
        "--compose-facts",
        action="store_true",
        help="store the copy's facts as the parts a build composes them from",
    )
    args = ap.parse_args()

    import kgrag
    from kgrag.bench.disk import where_bytes
    from kgrag.bench.evaluation import chunk_searcher, evaluate, load_questions
    from kgrag.store import copy_graph, open_store

    if not (args.out / "manifest.json").exists():
        with open_store(args.graph).reader() as reader:
            parts = _fact_parts(reader) if args.compose_facts else None
            copy_graph(reader, open_store(args.out), fact_parts=parts)
        if args.perturb_facts is not None:
            _perturb_facts(args.out, args.perturb_facts)
    questions = load_questions(args.questions)
    if args.limit:
        questions = questions[: args.limit]
    rows = []
    graphs = {"graph": args.graph, "copy": args.out}
    for mode in [m for m in args.modes.split(",") if m]:
        got = {}
        for name, graph in graphs.items():
            with kgrag.open(graph) as engine:
                got[name] = evaluate(questions, chunk_searcher(engine, MODES[mode]), (2, 5))
        a, b = got["graph"], got["copy"]
        rows.append({"mode": mode, "graph": a, "copy": b})
        print(
            f"{mode:7s} R@2 {a['R@2']:6.2f} -> {b['R@2']:6.2f} ({b['R@2'] - a['R@2']:+.2f})  "
            f"R@5 {a['R@5']:6.2f} -> {b['R@5']:6.2f} ({b['R@5'] - a['R@5']:+.2f})",
            flush=True,
        )
    latency = _latency(graphs, questions[: args.latency]) if args.latency else {}
    with kgrag.open(args.graph) as engine:
        passages = len(engine.reader.documents())
    sizes = {name: where_bytes(graph)["bytes"] for name, graph in graphs.items()}
    for name, size in sizes.items():
        print(f"{name:10s} {size:,} bytes, {size / passages:,.0f} a passage")
    if args.json:
        out = {
            "graph": str(args.graph),
            "passages": passages,
            "recall": rows,
            "bytes": sizes,
            "latency_p50_ms": latency,
        }
        args.json.write_text(json.dumps(out, indent=2))
    return 0


def _perturb_facts(graph: Path, seed: int, size: float = 0.012) -> None:
    """Add Gaussian noise of norm ``size`` to each stored fact row of ``graph``'s
    version, made unit again and coded (the version's files are rewritten in place:
    its facts must be rows, not parts). Composed facts lie at cosine ~0.99993 to the
    coded rows of the build that composed them from float32 entity vectors, a
    distance of ~0.012."""
    import glob

    import numpy as np

    from kgrag.store.vectors import dequantize, quantize

    (folder,) = glob.glob(str(graph / "versions" / "v*" / "vectors"))
    codes, scale = np.load(f"{folder}/facts.q8.npy"), np.load(f"{folder}/facts.scale.npy")
    rows = dequantize(codes, scale)
    noise = np.random.default_rng(seed).normal(scale=size / np.sqrt(rows.shape[1]), size=rows.shape)
    moved = rows + noise.astype(np.float32)
    moved /= np.linalg.norm(moved, axis=1, keepdims=True)
    codes, scale = quantize(moved)
    np.save(f"{folder}/facts.q8.npy", codes)
    np.save(f"{folder}/facts.scale.npy", scale)
    cosine = float((dequantize(codes, scale) * rows).sum(axis=1).mean())
    print(f"facts moved to a mean cosine of {cosine:.6f}", flush=True)


def _fact_parts(reader: Any) -> tuple[list[str], Any]:
    """The parts of the graph's facts, made from its records as a build makes them
    (``ingest.embed.fact_parts``, with the graph's own encoder settings), in the
    order of its stored fact rows."""
    from ingest import embed
    from ingest.embed import batched
    from ingest.parse import build_encoder
    from kgrag.config import load_config

    config = load_config(**reader.manifest.get("config", {}))
    encoder = build_encoder(config)
    fact_ids = list(reader.vectors("facts")[0])
    by_id = {r.id: r for r in embed.facts(reader.relations(fact_ids))}
    entity_ids = list(reader.vectors("entities")[0])
    names = {e: n for e, n in reader.entity_names(entity_ids).items()}
    facts = [by_id[i] for i in fact_ids]
    encode = batched(encoder, lambda _n: None)
    dim = int(reader.vectors("entities")[1].shape[1])
    parts = embed.fact_parts(encode, encoder.token_counts, facts, names, entity_ids, dim)
    return fact_ids, parts


OPS = {
    "local": lambda e, q: e.graph({"op": "local", "query": q, "k": 10}),
    "global": lambda e, q: e.graph({"op": "global", "query": q, "k": 10}),
    "drift": lambda e, q: e.graph({"op": "drift", "query": q, "k": 10}),
    "retrieve community": lambda e, q: e.retrieve({"query": q, "k": 10, "unit": "community"}),
}


def _latency(graphs: dict[str, Path], questions: list) -> dict[str, dict[str, float]]:
    import statistics
    import time

    import kgrag

    engines = {name: kgrag.open(graph) for name, graph in graphs.items()}
    times: dict[str, dict[str, list[float]]] = {n: {op: [] for op in OPS} for n in engines}
    try:
        for i, q in enumerate(questions[:1] + questions):  # the first is a warm-up
            for op, call in OPS.items():
                for name, engine in engines.items():
                    started = time.perf_counter()
                    call(engine, q.text)
                    if i:
                        times[name][op].append((time.perf_counter() - started) * 1000)
    finally:
        for engine in engines.values():
            engine.close()
    p50 = {
        n: {op: round(statistics.median(t), 2) for op, t in ops.items()} for n, ops in times.items()
    }
    for op in OPS:
        a, b = (p50[n][op] for n in graphs)
        print(f"{op:20s} p50 {a:8.2f} ms -> {b:8.2f} ms ({b / a:.2f}x)", flush=True)
    return p50


if __name__ == "__main__":
    sys.exit(main())
