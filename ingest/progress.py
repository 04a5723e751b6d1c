"""Per-stage progress bars and timings for the ingest pipeline."""

from __future__ import annotations

import os
import resource
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from tqdm import tqdm


class Stages:
    """Times named stages; shows a tqdm bar per stage on stderr when ``show``."""

    def __init__(self, show: bool) -> None:
        self.show = show
        self.seconds: dict[str, float] = {}
        #: per stage, the resident set at its end and the process's peak so far, MiB
        self.memory_mib: dict[str, tuple[float, float]] = {}

    @contextmanager
    def stage(self, name: str, total: int | None = None) -> Iterator[Callable[[int], None]]:
        bar = tqdm(
            total=total,
            desc=f"{name:<12}",
            unit="it",
            file=sys.stderr,
            disable=not self.show,
            leave=True,
            dynamic_ncols=True,
        )
        start = time.perf_counter()
        try:
            yield bar.update
        finally:
            self.seconds[name] = self.seconds.get(name, 0.0) + time.perf_counter() - start
            self.memory_mib[name] = (resident_mib(), peak_mib())
            if total is not None and bar.n < total:
                bar.update(total - bar.n)
            bar.close()


_HIGHEST = [0.0]  # the highest resident set read here, MiB


def resident_mib() -> float:
    """This process's resident set now, MiB (0 where /proc is missing)."""
    try:
        with open("/proc/self/statm") as f:
            pages = int(f.read().split()[1])
    except (OSError, IndexError, ValueError):
        return 0.0
    mib = pages * os.sysconf("SC_PAGE_SIZE") / 2**20
    _HIGHEST[0] = max(_HIGHEST[0], mib)
    return mib


def peak_mib() -> float:
    """This process's peak resident set so far, MiB: the kernel's mark (Linux reports
    KiB), or the highest resident set read here where that is higher. Linux moves its
    mark when pages are unmapped, not when an allocator hands them back with
    ``madvise``, so a high point let go that way can be missing from it."""
    kernel = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return max(kernel, resident_mib(), _HIGHEST[0])


class PageBars:
    """A bar per long file while it is read (``progress(uri, done, total)``), for
    parses that take a while: a PDF of many pages shows its pages go by."""

    #: files with fewer pages than this get no bar of their own
    MIN_PAGES = 20

    def __init__(self, show: bool) -> None:
        self.show = show
        self.bar: tqdm | None = None
        self.uri = ""

    def __call__(self, uri: str, done: int, total: int) -> None:
        if not self.show or total < self.MIN_PAGES:
            return
        if self.bar is None or uri != self.uri:
            self.close()
            name = uri.rsplit("/", 1)[-1][:24]
            self.bar = tqdm(
                total=total, desc=f"  {name}", unit="page", file=sys.stderr, leave=False
            )
            self.uri = uri
        self.bar.update(done - self.bar.n)
        if done >= total:
            self.close()

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None
