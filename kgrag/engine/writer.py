"""Writes in a process of their own: ``index/add`` and ``index/delete`` for a server.

An incremental write reads the whole current version, merges and commits a new one:
while it runs it holds the graph's records in memory (gigabytes on a large graph) and
the interpreter's lock for seconds at a time. In the serving process the first would
leave the heap larger after every write, and the second would stall the reads beside
it. :class:`WriterProcess` runs each write in one long-lived child process
(``python -m kgrag.engine.writer``, started on the first write, with its own encoder
and spaCy pipeline, kept for the next write; pickled frames on two pipes of its own):
the server's memory stays that of its readers, and its reads keep their interpreter.
The child opens the same store; the store's writer lock, the atomic publish and the
engine's following of the latest version work as in one process.

A write that fails in the child raises the same error in the caller (a kgrag error
as itself; anything else as a :class:`~kgrag.errors.StoreError` naming it). A child
that dies mid-write (killed, out of memory) leaves the previous version, as a killed
build does, and is started again by the next write.
"""

from __future__ import annotations

import contextlib
import logging
import os
import pickle
import signal
import subprocess
import sys
import threading
import traceback
import weakref
from multiprocessing.connection import Connection
from typing import Any

from kgrag.config import Config
from kgrag.errors import KgragError, StoreError

__all__ = ["WriterProcess", "write_config"]

log = logging.getLogger("kgrag.writer")
#: seconds a closing writer gets to finish the write it is on before it is killed
CLOSE_WAIT = 600.0
#: seconds without a write after which the child stops (its memory goes back; the next
#: write starts another)
IDLE_STOP = 300.0


def write_config(manifest: dict[str, Any], base: Config) -> Config:
    """The settings a write uses: those the graph was built with (from its manifest),
    with the store settings of ``base``."""
    stored = manifest.get("versions", {}).get(manifest.get("indexVersion", ""), {})
    if "config" not in stored:
        return base
    return Config.model_validate(stored["config"]).model_copy(update={"store": base.store})


class WriterProcess:
    """One child process that makes a graph's writes, one at a time."""

    def __init__(self, location: str, config: Config, *, idle_stop: float = IDLE_STOP) -> None:
        self.location = location
        self.idle_stop = idle_stop
        self._config = config.model_dump_json()
        self._lock = threading.Lock()
        self._calls = 0
        self._idle: threading.Timer | None = None
        self._proc: Any = None
        self._conn: _Pipes | None = None
        self._finalizer: weakref.finalize[Any, Any] | None = None

    @property
    def pid(self) -> int | None:
        """The child's process id while it runs (None before the first write)."""
        proc = self._proc
        return proc.pid if proc is not None and proc.poll() is None else None

    def call(self, op: str, **kwargs: Any) -> Any:
        """Run ``apply_update(..., **kwargs)`` in the child (``op`` names it in errors)
        and return its :class:`~ingest.incremental.update.UpdateResult`."""
        with self._lock:
            self._calls += 1
            if self._proc is None or self._proc.poll() is not None:
                self._reap()
                self._start()
            assert self._conn is not None
            try:
                self._conn.send(kwargs)
                status, value = self._conn.recv()
            except (EOFError, OSError) as exc:
                code = self._reap()
                raise StoreError(
                    f"the writer process of {self.location} ended during an {op} "
                    f"(exit code {code}); the previous version is kept",
                    graph=self.location,
                ) from exc
            self._stop_when_idle(self._calls)
        if status == "error":
            raise value
        return value

    def _stop_when_idle(self, calls: int) -> None:
        """Stop the child ``idle_stop`` seconds from now unless a write comes first."""
        if self._idle is not None:
            self._idle.cancel()
        self._idle = threading.Timer(self.idle_stop, self._idle_now, args=(calls,))
        self._idle.daemon = True
        self._idle.start()

    def _idle_now(self, calls: int) -> None:
        with self._lock:
            if calls == self._calls:
                self._stop_child()

    def _stop_child(self) -> None:
        """Let the child finish and stop (lock held)."""
        if self._finalizer is not None:
            self._finalizer()
        self._proc = self._conn = self._finalizer = None

    def _start(self) -> None:
        down_r, down_w = os.pipe()  # to the child
        up_r, up_w = os.pipe()  # from it
        try:
            proc = subprocess.Popen(
                [sys.executable, "-m", "kgrag.engine.writer", str(down_r), str(up_w)],
                pass_fds=(down_r, up_w),
                stdin=subprocess.DEVNULL,
                stdout=sys.stderr.fileno(),  # never a stdio server's protocol stream
            )
        except BaseException:
            for fd in (down_w, up_r):
                os.close(fd)
            raise
        finally:
            os.close(down_r)
            os.close(up_w)
        self._proc, self._conn = proc, _Pipes(down_w, up_r)
        self._conn.send((self.location, self._config))
        # at exit (or when this object goes), the child finishes its write and stops
        self._finalizer = weakref.finalize(self, _stop, self._conn, proc, CLOSE_WAIT)

    def _reap(self) -> int | None:
        proc, self._proc = self._proc, None
        if self._finalizer is not None:
            self._finalizer.detach()
        if self._conn is not None:
            self._conn.close()
            self._conn = None
        if proc is None:
            return None
        try:
            return int(proc.wait(10))
        except subprocess.TimeoutExpired:
            proc.kill()
            return int(proc.wait(10))

    def close(self) -> None:
        """Let the write in progress finish (up to :data:`CLOSE_WAIT` s), then stop."""
        with self._lock:
            if self._idle is not None:
                self._idle.cancel()
            self._stop_child()


class _Pipes:
    """Pickled frames down one pipe and up another."""

    def __init__(self, down: int, up: int) -> None:
        self._down = Connection(down, readable=False)
        self._up = Connection(up, writable=False)

    def send(self, obj: Any) -> None:
        self._down.send(obj)

    def recv(self) -> Any:
        return self._up.recv()

    def close(self) -> None:
        self._down.close()
        self._up.close()


def _stop(conn: _Pipes, proc: subprocess.Popen[bytes], wait: float) -> None:
    with contextlib.suppress(OSError, ValueError):
        conn.send(None)
    try:
        proc.wait(wait)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(10)
    conn.close()


def _portable(exc: BaseException) -> KgragError:
    """``exc`` as the parent should raise it: a kgrag error itself when it pickles."""
    if isinstance(exc, KgragError):
        try:
            pickle.loads(pickle.dumps(exc))
            return exc
        except Exception:  # an unpicklable detail: the message still goes
            return type(exc)(exc.message) if type(exc) is not KgragError else StoreError(str(exc))
    return StoreError(f"the write failed: {type(exc).__name__}: {exc}")


def _serve(conn: _Pipes) -> None:
    """The child: apply each update it is sent until told to stop or the parent goes."""
    # Ctrl-C in a terminal reaches the whole process group: the server decides when
    # its writer stops (after the write in progress), as it does for SIGTERM
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    from ingest.incremental.update import apply_update
    from kgrag.encoders import load_encoder
    from kgrag.store import open_store
    from kgrag.threads import give_back

    location, config_json = conn.recv()
    base = Config.model_validate_json(config_json)
    store: Any = None  # opened by the first write, whose caller hears if it cannot be
    encoders: dict[str, Any] = {}
    try:
        while True:
            try:
                kwargs = conn.recv()
            except (EOFError, OSError):  # the server is gone
                return
            if kwargs is None:
                return
            try:
                if store is None:
                    store = open_store(location, **base.store.model_dump())
                manifest = store.manifest()
                config = write_config(manifest, base)
                model = manifest.get("models", {}).get("embedding", base.models.embedding)
                if model not in encoders:
                    models = base.models
                    encoders[model] = load_encoder(
                        model, models.batch_size, models.device, models.runtime
                    )
                result = apply_update(store, config, encoders[model], **kwargs)
                reply: tuple[str, Any] = ("ok", result)
            except BaseException as exc:  # every failure goes back to the caller
                if not isinstance(exc, KgragError):
                    log.error("write failed in pid %d:\n%s", os.getpid(), traceback.format_exc())
                reply = ("error", _portable(exc))
            finally:
                give_back()
            try:
                conn.send(reply)
            except OSError:  # the server is gone (what was written stays published)
                return
    finally:
        if store is not None:
            store.close()
        conn.close()


if __name__ == "__main__":
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    _serve(_Pipes(int(sys.argv[2]), int(sys.argv[1])))
