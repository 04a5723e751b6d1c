"""A larger graph made of renamed copies of a built one: a simulation of serving
cost at scale, not of ingest.

    python benchmarks/replicate_graph.py --graph graphs/2wiki --copies 10 --out graphs/2wiki-x10

Every record of the graph's current version is written ``--copies`` times
through the store's writer (so the commit derives every serving file as an
ingest would): copy 0 as it is, copy c with ``~c`` appended to every id and
`` vc`` to every entity name and document title, so that each copy has its own
entities, names and titles. The vectors of copy c > 0 are the originals plus
Gaussian noise (``--noise`` per dimension, then renormalised: cosine ~0.93 to
the original at 0.02), so copies are near-duplicates rather than ties. Texts are
copied unchanged, so title links lead only into copy 0 (copies name copy 0's
titles, not their own).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def renamer(copy: int) -> Callable[[str], str]:
    return (lambda x: x) if copy == 0 else (lambda x: f"{x}~{copy}")


def _renamed(kind: str, record: Any, copy: int) -> Any:
    if copy == 0:
        return record
    r = renamer(copy)
    ids = lambda xs: tuple(r(x) for x in xs)  # noqa: E731
    suffix = f" v{copy}"
    if kind == "documents":
        return dataclasses.replace(record, id=r(record.id), title=record.title + suffix)
    if kind == "chunks":
        return dataclasses.replace(record, id=r(record.id), doc_id=r(record.doc_id))
    if kind == "sentences":
        return dataclasses.replace(
            record, chunk_id=r(record.chunk_id), entity_ids=ids(record.entity_ids)
        )
    if kind == "entities":
        return dataclasses.replace(
            record, id=r(record.id), name=record.name + suffix, chunk_ids=ids(record.chunk_ids)
        )
    if kind == "mentions":
        return dataclasses.replace(
            record, entity_id=r(record.entity_id), chunk_id=r(record.chunk_id)
        )
    if kind == "relations":
        return dataclasses.replace(
            record,
            id=r(record.id),
            src=r(record.src),
            dst=r(record.dst),
            evidence=ids(record.evidence),
        )
    if kind == "synonyms":
        return dataclasses.replace(record, src=r(record.src), dst=r(record.dst))
    if kind == "communities":
        return dataclasses.replace(
            record,
            id=r(record.id),
            parent=r(record.parent) if record.parent else record.parent,
            children=ids(record.children),
            members=ids(record.members),
            leaves=ids(record.leaves),
        )
    if kind == "tree_nodes":
        return dataclasses.replace(
            record, id=r(record.id), children=ids(record.children), leaves=ids(record.leaves)
        )
    raise ValueError(kind)


def main() -> int:
    from kgrag.store import RECORD_KINDS, VECTOR_KINDS, open_store

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--graph", required=True)
    ap.add_argument("--copies", type=int, default=10)
    ap.add_argument("--out", required=True)
    ap.add_argument("--noise", type=float, default=0.02)
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args()
    started = time.perf_counter()
    source = open_store(args.graph).reader()
    records = {
        "documents": source.documents(),
        "chunks": source.chunks(),
        "sentences": source.sentences(),
        "entities": source.entities(),
        "mentions": source.mentions(),
        "relations": source.relations(),
        "synonyms": source.synonyms(),
        "communities": source.communities(),
        "tree_nodes": source.tree_nodes(),
    }
    assert set(records) == set(RECORD_KINDS)
    rng = np.random.default_rng(args.seed)
    store = open_store(args.out)
    with store.writer() as writer:
        for kind, batch in records.items():
            # record by record, its copies together: a copy's ids sort next to the
            # original's, so the tables' keys arrive nearly in order
            stream: Iterator[Any] = (
                _renamed(kind, x, copy) for x in batch for copy in range(args.copies)
            )
            writer.add(kind, stream)
            print(
                f"{kind}: {len(batch):,} x {args.copies} ({time.perf_counter() - started:.0f} s)",
                flush=True,
            )
        for kind in VECTOR_KINDS:
            ids, matrix = source.vectors(kind)
            all_ids: list[str] = []
            for copy in range(args.copies):
                r = renamer(copy)
                if kind == "sentences":  # "<chunk id>#<index>": the chunk id is renamed
                    all_ids += [f"{r(i.rsplit('#', 1)[0])}#{i.rsplit('#', 1)[1]}" for i in ids]
                else:
                    all_ids += [r(i) for i in ids]
            n = len(ids)
            # where each copy's rows go: entity vectors stay in id order (vertex order)
            at = np.arange(len(all_ids))
            if kind == "entities":
                order = np.argsort(np.array(all_ids, dtype=object), kind="stable")
                at[order] = np.arange(len(all_ids))
                all_ids = [all_ids[i] for i in order]
            dim = matrix.shape[1] if matrix.ndim == 2 else 0
            fill = getattr(writer, "vectors_to_fill", None)  # the folder's: no copy in memory
            out = (
                fill(kind, all_ids, dim)
                if fill is not None
                else np.zeros((len(all_ids), dim), np.float32)
            )
            for copy in range(args.copies):
                part = np.asarray(matrix, dtype=np.float32)
                if copy:
                    noisy = part + rng.normal(0, args.noise, part.shape).astype(np.float32)
                    norms = np.linalg.norm(noisy, axis=1, keepdims=True)
                    part = (noisy / np.where(norms > 0, norms, 1)).astype(np.float32)
                out[at[copy * n : (copy + 1) * n]] = part
            if fill is None:
                writer.add_vectors(kind, all_ids, out)
            del out
            print(
                f"vectors {kind}: {len(all_ids):,} ({time.perf_counter() - started:.0f} s)",
                flush=True,
            )
        meta = dict(source.manifest)
        meta.pop("indexVersion", None)
        meta.pop("created", None)
        meta["counts"] = {k: len(v) * args.copies for k, v in records.items()}
        meta["replicated"] = {"from": str(args.graph), "copies": args.copies, "noise": args.noise}
        version = writer.commit(meta)
    print(f"{args.out} {version}: {time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
