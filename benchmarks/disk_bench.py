"""Where a built graph's bytes go: each part of its newest version, in bytes and bytes
per passage (a passage: a stored document, as in the JSON benchmark corpora).

    python benchmarks/disk_bench.py graphs/2wiki [--out disk.json]

SQLite tables are counted with their indexes and full-text shadow tables; vectors by
kind; serving structures by their prefix (bm25, ann, relations, walk, ...).
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import sys
from pathlib import Path


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("graph", type=Path, help="a folder graph")
    ap.add_argument("--out", type=Path, help="write the figures as JSON here")
    args = ap.parse_args()

    from kgrag.bench.disk import version_folder, where_bytes

    found = where_bytes(args.graph)
    con = sqlite3.connect(f"file:{version_folder(args.graph) / 'graph.sqlite'}?mode=ro", uri=True)
    passages = con.execute("SELECT COUNT(*) FROM documents").fetchone()[0]
    con.close()
    found["passages"] = passages
    found["bytes_per_passage"] = round(found["bytes"] / max(1, passages))
    print(
        f"{args.graph} {found['version']}: {found['bytes']:,} bytes, {passages:,} passages, "
        f"{found['bytes_per_passage']:,} bytes a passage"
    )
    print("| part | bytes | bytes / passage | share |\n|---|---|---|---|")
    for part, size in found["parts"].items():
        share = 100 * size / found["bytes"]
        print(f"| {part} | {size:,} | {size / max(1, passages):,.0f} | {share:.1f}% |")
    if args.out:
        args.out.write_text(json.dumps(found, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
