"""Writes apart (kgrag/engine/writer.py): a real child process makes the engine's
writes, keeps them one at a time, survives being killed mid-write with the previous
version serving, and sends its errors back as the caller's."""

from __future__ import annotations

import os
import pickle
import shutil
import signal
import threading
import time
from pathlib import Path

import pytest

import kgrag
from kgrag.engine.writer import _portable
from kgrag.errors import InvalidParams, KgragError, StoreError

DOC = {
    "id": "apart-1",
    "title": "Vela Probe",
    "text": "The Vela probe met the comet Tempel over Lisbon in 1998. Ana Costa built it.",
}


@pytest.fixture
def engine(science_graph: Path, tmp_path: Path):
    folder = tmp_path / "science"
    shutil.copytree(science_graph, folder)
    with kgrag.open(folder) as engine:
        engine.write_apart()
        yield engine


def _exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _title(engine: kgrag.Engine, query: str) -> str:
    return str(engine.retrieve({"query": query, "k": 1})["hits"][0]["citation"]["title"])


def test_writes_run_in_one_child_and_the_engine_serves_them(engine: kgrag.Engine):
    assert engine.writer.pid is None  # nothing is started before the first write
    added = engine.add([DOC])
    assert added["ids"] == ["d:apart-1"] and added["indexVersion"] == engine.index_version
    pid = engine.writer.pid
    assert pid is not None and pid != os.getpid()
    assert _title(engine, "Vela probe comet Tempel Lisbon") == "Vela Probe"
    gone = engine.delete(["apart-1"])
    assert gone["deleted"] == 1 and engine.writer.pid == pid  # the same child, kept
    assert _title(engine, "Vela probe comet Tempel Lisbon") != "Vela Probe"
    engine.writer.idle_stop = 0.5  # an idle child stops, and gives its memory back
    assert engine.delete(["apart-1"]) == {"deleted": 0, "indexVersion": gone["indexVersion"]}
    deadline = time.monotonic() + 30
    while engine.writer.pid is not None and time.monotonic() < deadline:
        time.sleep(0.1)
    assert engine.writer.pid is None
    assert not _exists(pid)
    engine.writer.close()
    with pytest.raises(InvalidParams, match="documents\\[0\\].text"):  # checked before the child
        engine.add([{"text": ""}])


def test_a_writer_killed_mid_write_leaves_the_version_and_is_started_again(
    engine: kgrag.Engine,
):
    version = engine.index_version
    versions = sorted(os.listdir(engine.store.root / "versions"))
    failed: list[BaseException] = []

    def write() -> None:
        try:
            engine.add([DOC])
        except BaseException as exc:
            failed.append(exc)

    writing = threading.Thread(target=write)
    writing.start()
    deadline = time.monotonic() + 120
    while engine.writer.pid is None and time.monotonic() < deadline:
        time.sleep(0.05)
    pid = engine.writer.pid
    assert pid is not None
    time.sleep(1.0)
    os.kill(pid, signal.SIGKILL)
    writing.join(120)
    assert len(failed) == 1 and isinstance(failed[0], StoreError), failed
    assert "ended during an add" in failed[0].message and "previous version is kept" in str(
        failed[0]
    )
    assert engine.index_version == version
    assert sorted(os.listdir(engine.store.root / "versions")) == versions
    assert _title(engine, "Vela probe comet Tempel Lisbon") != "Vela Probe"
    added = engine.add([DOC])  # a new child makes it
    assert engine.writer.pid not in (None, pid)
    assert added["indexVersion"] != version
    assert _title(engine, "Vela probe comet Tempel Lisbon") == "Vela Probe"


def test_errors_cross_back_as_themselves_or_as_a_store_error():
    err = InvalidParams("bad thing", field="x")
    back = pickle.loads(pickle.dumps(_portable(err)))
    assert (
        type(back) is InvalidParams and back.message == "bad thing" and back.data == {"field": "x"}
    )
    unpicklable = StoreError("no room", graph=threading.Lock())
    back = pickle.loads(pickle.dumps(_portable(unpicklable)))
    assert type(back) is StoreError and back.message == "no room"
    other = _portable(ZeroDivisionError("division by zero"))
    assert isinstance(other, KgragError) and "ZeroDivisionError: division by zero" in other.message
