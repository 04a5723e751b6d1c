"""Thread pools for query serving: numpy's BLAS pool, and the reads a search overlaps.

A query runs the encoder on torch's thread pool and then a few matrix-vector
products on numpy's BLAS pool. With both pools sized to the machine, BLAS
worker threads still spin after their short products while torch's threads
want the same cores, and the next encoding slows down. Query-serving commands
(``serve``, ``query``, ``eval``, the query sections of ``bench``) therefore run
numpy's BLAS on one thread; ingest keeps the default (its matrix products are
large). docs/benchmarks.md has the latencies it saves.

A search on a server-backed store starts some reads before it needs them
(:func:`read_beside`), so their round trips overlap the rest of its work.

The allocator: a serving process caps glibc's malloc arenas (:func:`serve_queries`), and
whatever has just let go of a whole graph's records (a build, a write, an older version)
hands the free pages back (:func:`give_back`).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Protocol

_limits: Any = None


#: malloc arenas of a serving process unless MALLOC_ARENA_MAX says otherwise
SERVING_ARENAS = 2
_M_ARENA_MAX = -8  # glibc's mallopt parameter


def serve_queries(blas_threads: int = 1, arenas: int = SERVING_ARENAS) -> None:
    """Size numpy's BLAS pool for query serving, for the rest of the process, and (on
    glibc, unless ``MALLOC_ARENA_MAX`` is set) cap the allocator's arenas: a server's
    many threads otherwise each get an arena of their own, whose freed pages stay
    resident (docs/benchmarks.md, "Serving under sustained load")."""
    global _limits
    from threadpoolctl import threadpool_limits

    _limits = threadpool_limits(limits=blas_threads, user_api="blas")
    if arenas > 0 and "MALLOC_ARENA_MAX" not in os.environ:
        with contextlib.suppress(OSError, AttributeError):  # not glibc: its allocator decides
            ctypes.CDLL("libc.so.6").mallopt(_M_ARENA_MAX, arenas)


# -- reads that overlap ---------------------------------------------------------------

#: the threads that run a search's reads beside one another (server-backed stores)
_READS = ThreadPoolExecutor(max_workers=4, thread_name_prefix="kgrag-read")


class Pending(Protocol):
    """A read started by :func:`read_beside`; ``result()`` waits for it."""

    def result(self) -> Any: ...


class ConcurrentReads(Protocol):
    """A reader that says whether its reads may overlap (a store on a server does)."""

    @property
    def concurrent_reads(self) -> bool: ...


class DeferredRead:
    """A read done when its result is asked for (a reader in this process)."""

    def __init__(self, fn: Callable[..., Any], args: tuple[Any, ...]) -> None:
        self.fn, self.args = fn, args

    def result(self) -> Any:
        return self.fn(*self.args)


def read_beside(reader: ConcurrentReads, fn: Callable[..., Any], *args: Any) -> Pending:
    """``fn(*args)`` started now, beside the search's other reads, where the reader
    reads from a server (``reader.concurrent_reads``: the server works on both at once
    and the round trips overlap); otherwise done when asked for."""
    if reader.concurrent_reads:
        return _READS.submit(fn, *args)
    return DeferredRead(fn, args)


def give_back() -> None:
    """Hand the allocator's free pages back to the system (glibc's ``malloc_trim``;
    nothing elsewhere). Freeing the raw extraction of a large corpus leaves most of the
    heap's pages free but kept: at 2,500 passages, 232 of the build's 506 MiB above the
    models when the entity names are encoded (docs/benchmarks.md, "Memory of a build")."""
    trim = _malloc_trim()
    if trim is not None:
        trim(0)


def _malloc_trim() -> Callable[[int], int] | None:
    if not _TRIM:
        try:
            libc = ctypes.CDLL("libc.so.6")
            _TRIM.append(libc.malloc_trim)
        except (OSError, AttributeError):  # not glibc
            _TRIM.append(None)
    return _TRIM[0]


_TRIM: list[Any] = []
