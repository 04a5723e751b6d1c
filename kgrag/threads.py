"""Thread pools for query serving.

A query runs the encoder on torch's thread pool and then a few matrix-vector
products on numpy's BLAS pool. With both pools sized to the machine, BLAS
worker threads still spin after their short products while torch's threads
want the same cores, and the next encoding slows down. Query-serving commands
(``serve``, ``query``, ``eval``, the query sections of ``bench``) therefore run
numpy's BLAS on one thread; ingest keeps the default (its matrix products are
large). On the 2Wiki graph on 2 cores this took bare query encoding + dot from
21.7 to 9.9 ms at p50, hybrid retrieve from 24.6 to 15.2 ms and local search
from 53.7 to 43.4 ms (one interleaved run each, ``kgrag bench`` query modes).
"""

from __future__ import annotations

from typing import Any

_limits: Any = None


def serve_queries(blas_threads: int = 1) -> None:
    """Size numpy's BLAS pool for query serving, for the rest of the process."""
    global _limits
    from threadpoolctl import threadpool_limits

    _limits = threadpool_limits(limits=blas_threads, user_api="blas")
