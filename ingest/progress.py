"""Per-stage progress bars and timings for the ingest pipeline."""

from __future__ import annotations

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
            if total is not None and bar.n < total:
                bar.update(total - bar.n)
            bar.close()
