"""``kgrag serve --http`` as its own process on loopback, for the tests that need a real one
(signals, the access file, MCP over HTTP, the explorer's page)."""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

#: the line ``kgrag serve --http`` writes once it listens; group 1 is its base URL
LISTENING = r"serving RCP/1 on (http://[\d.]+:\d+)/rcp"


@dataclass
class Served:
    """A started server: its process, base URL and every stderr line so far (a thread
    keeps reading them until the process ends)."""

    proc: subprocess.Popen[str]
    url: str
    lines: list[str] = field(default_factory=list)
    reader: threading.Thread | None = None

    @property
    def log(self) -> str:
        return "".join(self.lines)

    def stop(self, timeout: float = 60) -> int:
        """SIGTERM, then its exit status once it has ended and its stderr is read."""
        if self.proc.poll() is None:
            self.proc.terminate()
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        if self.reader is not None:
            self.reader.join(timeout=30)
        if self.proc.stderr is not None:
            self.proc.stderr.close()
        return self.proc.returncode


def start(
    *args: str,
    env: dict[str, str] | None = None,
    python: Path | str = sys.executable,
    listening: str = LISTENING,
) -> Served:
    """``python -m kgrag serve --http 127.0.0.1:0 *args``; returns once it listens (the
    first line matching ``listening``), or fails with everything it wrote."""
    proc = subprocess.Popen(
        [str(python), "-m", "kgrag", "serve", "--http", "127.0.0.1:0", *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=dict(os.environ if env is None else env, HF_HUB_OFFLINE="1"),
        text=True,
    )
    assert proc.stderr is not None
    lines: list[str] = []
    for line in proc.stderr:
        lines.append(line)
        found = re.search(listening, line)
        if found:
            reader = threading.Thread(target=lines.extend, args=(proc.stderr,), daemon=True)
            reader.start()
            return Served(proc, found[1], lines, reader)
    proc.wait(timeout=60)
    proc.stderr.close()
    raise AssertionError("kgrag serve did not start: " + "".join(lines))


@contextlib.contextmanager
def serving(*args: str, **how: object) -> Iterator[Served]:
    """:func:`start` for the ``with`` block, then :meth:`Served.stop`."""
    served = start(*args, **how)  # type: ignore[arg-type]
    try:
        yield served
    finally:
        served.stop()
