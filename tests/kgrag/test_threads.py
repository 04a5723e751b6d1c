"""Query-serving commands run numpy's BLAS on one thread."""

from __future__ import annotations

import json
import subprocess
import sys

SCRIPT = """
import json, numpy
from threadpoolctl import threadpool_info
before = [p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas"]
from kgrag.threads import serve_queries
serve_queries()
after = [p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas"]
print(json.dumps({"before": before, "after": after}))
"""


def test_serve_queries_limits_blas_for_the_process():
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT],
        capture_output=True,
        text=True,
        check=True,
        env={"PATH": "", "OPENBLAS_NUM_THREADS": "2"},
    )
    pools = json.loads(out.stdout)
    assert pools["before"] and all(n == 2 for n in pools["before"])
    assert all(n == 1 for n in pools["after"])
