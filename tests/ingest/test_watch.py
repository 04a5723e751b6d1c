"""Keeping a graph in step with a folder: each new, edited or removed file is one small
write with one line, a broken file loses nothing, and ``kgrag ingest --watch`` stops
cleanly on SIGTERM."""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

import kgrag
from ingest.watch import Change, watch
from kgrag.store import open_store
from tests.conftest import ROOT, small_config

FIRST = "# Harbour\n\nThe Tolvey lighthouse stands on the north pier of Carrow harbour.\n"
SECOND = "# Mill\n\nThe Brannock mill grinds oats beside the river Keld.\n"


def _next(changes: queue.Queue[Change], timeout: float = 120) -> Change:
    return changes.get(timeout=timeout)


def _top(graph: Path, query: str) -> str:
    with kgrag.open(graph) as engine:
        return engine.query(query, k=1)[0]["text"]


def _watching(folder: Path, graph: Path) -> tuple[queue.Queue[Change], Callable[[], None]]:
    """``folder`` (holding the first note) watched into ``graph`` on a thread: the
    changes it tells, and the call that stops it and waits for the thread."""
    folder.mkdir()
    (folder / "harbour.md").write_text(FIRST)
    changes: queue.Queue[Change] = queue.Queue()
    stop = threading.Event()
    thread = threading.Thread(
        target=watch,
        args=([folder], graph, small_config()),
        kwargs={"interval": 0.1, "on_change": changes.put, "stop": stop},
        daemon=True,
    )
    thread.start()

    def end() -> None:
        stop.set()
        thread.join(60)

    return changes, end


@pytest.fixture()
def watched(tmp_path: Path):
    folder, graph = tmp_path / "notes", tmp_path / "graph"
    changes, end = _watching(folder, graph)
    yield folder, graph, changes
    end()


def test_new_edited_broken_and_removed_files_each_become_one_write(watched):
    folder, graph, changes = watched
    synced = _next(changes)
    assert synced.kind == "synced" and synced.documents == 1 and synced.index_version
    (folder / "mill.md").write_text(SECOND)
    added = _next(changes)
    assert (added.kind, added.path, added.documents) == ("added", "notes/mill.md", 1)
    assert added.index_version == open_store(graph).current() != synced.index_version
    assert "Brannock mill" in _top(graph, "Which mill grinds oats?")

    (folder / "mill.md").write_text(SECOND.replace("oats", "barley"))
    updated = _next(changes)
    assert (updated.kind, updated.path) == ("updated", "notes/mill.md")
    assert "barley" in _top(graph, "Which mill grinds barley?")

    broken = folder / "ledger.json"
    broken.write_text('{"title": "Ledger", "text": ')
    error = _next(changes)
    assert error.kind == "error" and error.path == "notes/ledger.json" and "JSON" in error.reason
    assert "the graph keeps what it held" in str(error)
    version = open_store(graph).current()
    assert version == updated.index_version  # nothing written for it

    (folder / "harbour.md").unlink()
    removed = _next(changes)
    assert (removed.kind, removed.path, removed.deleted) == ("removed", "notes/harbour.md", 1)
    with open_store(graph).reader() as reader:
        paths = sorted(d.meta.get("path") for d in reader.documents())
    assert paths == ["notes/mill.md"]
    assert f"-> {removed.index_version} in" in str(removed)
    assert changes.empty()  # one line a change, nothing for the files left alone


def test_kgrag_ingest_watch_prints_a_line_per_change_and_stops_on_sigterm(tmp_path: Path):
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "harbour.md").write_text(FIRST)
    config = tmp_path / "config.json"
    config.write_text(json.dumps(small_config().model_dump(mode="json")))
    graph = tmp_path / "graph"
    proc = subprocess.Popen(
        [sys.executable, "-m", "kgrag", "ingest", str(folder), "--graph", str(graph)]
        + ["--watch", "--interval", "0.2", "--quiet", "--config", str(config)],
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env=os.environ | {"HF_HUB_OFFLINE": "1"},
    )
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()
        assert first.startswith("synced") and "1 document(s)" in first, first
        (folder / "mill.md").write_text(SECOND)
        line = proc.stdout.readline()
        assert line.startswith("added    notes/mill.md: 1 document(s) -> v000002"), line
        time.sleep(0.5)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()
    assert open_store(graph).current() == "v000002"


def test_a_write_that_finds_no_room_is_told_and_tried_again(tmp_path: Path):
    """On a tmpfs the test mounts and fills (root only): the change that cannot be
    written gets an error line, the graph keeps its version, and once there is room
    again the same change is written at the next look."""
    mount = tmp_path / "fs"
    mount.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=24m", "tmpfs", str(mount)]).returncode:
        pytest.skip("this machine does not let the test mount a tmpfs")
    folder, graph = tmp_path / "notes", mount / "graph"
    changes, end = _watching(folder, graph)
    try:
        synced = _next(changes)
        assert synced.kind == "synced"
        filler = mount / "filler"
        with open(filler, "wb") as f, pytest.raises(OSError):  # every byte left, taken
            while True:
                f.write(b"\0" * (1 << 20))
                f.flush()
        (folder / "mill.md").write_text(SECOND)
        error = _next(changes)
        assert error.kind == "error" and error.path == "notes/mill.md", error
        assert error.reason.startswith("the write failed") and "file system is full" in error.reason
        assert open_store(graph).current() == synced.index_version
        filler.unlink()
        while (change := _next(changes)).kind == "error":
            pass  # tried at each look until there was room
        assert (change.kind, change.path) == ("added", "notes/mill.md")
        assert open_store(graph).current() == change.index_version != synced.index_version
    finally:
        end()
        subprocess.run(["umount", "-l", str(mount)], check=False)
