"""A write that finds no room, for real: a tmpfs the test mounts and fills, and the
process file-size limit. The write fails with one message naming the graph and the
space, the version before keeps serving, and the same write succeeds once there is
room again."""

from __future__ import annotations

import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from kgrag.server import Graphs, Running, create_app

INIT = {"protocolVersion": 1, "client": {"name": "t", "version": "1"}, "capabilities": {}}
DOC = {"id": "room-1", "text": "The probe Vela met the comet Tempel near Jupiter in 1990."}


def _size(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


@pytest.fixture
def small_fs(tmp_path: Path) -> Iterator[Path]:
    """A tmpfs of 1 MiB, mounted for the test (root only: elsewhere the file-size limit
    test below covers the same path)."""
    mount = tmp_path / "fs"
    mount.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mount)])
    if done.returncode != 0:
        pytest.skip("this machine does not let the test mount a tmpfs")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def post(base: str, path: str, method: str, params: dict[str, object]) -> dict[str, object]:
    import http.client

    host, port = base.removeprefix("http://").rsplit(":", 1)
    conn = http.client.HTTPConnection(host, int(port), timeout=300)
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    conn.request("POST", f"{path}/{method}", json.dumps(body).encode())
    out = json.loads(conn.getresponse().read())
    conn.close()
    return out


def test_a_full_file_system_fails_the_add_and_keeps_serving(science_graph: Path, small_fs: Path):
    graph = small_fs / "science"
    # the session's first build, one version: the served copy grows with the versions
    # other tests' writes leave in it, and would not fit the 1 MiB
    shutil.copytree(science_graph, graph)
    used = _size(graph)
    assert used < 1 << 20
    graphs = Graphs.open([f"science={graph}"], write_apart=True)  # as kgrag serve does
    try:
        with Running(create_app(graphs)) as running:
            path = f"/s/{uuid.uuid4().hex}/rcp"
            assert "result" in post(running.url, path, "initialize", INIT)
            before = post(running.url, path, "retrieve", {"query": "comet", "k": 3})
            version = before["result"]["indexVersion"]  # type: ignore[index]
            failed = post(running.url, path, "index/add", {"documents": [DOC]})
            message = failed["error"]["message"]  # type: ignore[index]
            assert f"graph {graph}" in message and "the file system is full" in message
            assert "MiB free on its file system" in message
            assert f"version {version} still serves" in message
            assert sorted(os.listdir(graph / "versions")) == [version]  # nothing half-written
            after = post(running.url, path, "retrieve", {"query": "comet", "k": 3})
            assert after["result"]["hits"] == before["result"]["hits"]  # type: ignore[index]
            assert after["result"]["indexVersion"] == version  # type: ignore[index]
            # room again: the same write goes through
            subprocess.run(["mount", "-o", "remount,size=16m", str(small_fs)], check=True)
            added = post(running.url, path, "index/add", {"documents": [DOC]})
            result = added["result"]
            assert result["ids"] == ["d:room-1"] and result["indexVersion"] != version  # type: ignore[index]
            found = post(running.url, path, "retrieve", {"query": "Vela Tempel comet", "k": 1})
            assert "Vela" in found["result"]["hits"][0]["text"]  # type: ignore[index]
    finally:
        graphs.close()


def _limited(limit: int) -> None:
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails, EFBIG
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, resource.RLIM_INFINITY))


def test_the_file_size_limit_fails_an_ingest_with_one_clear_line(
    science_graph: Path, tmp_path: Path
):
    graph = tmp_path / "science"
    shutil.copytree(science_graph, graph)
    source = tmp_path / "more.json"
    source.write_text(json.dumps([{"title": "Vela", "text": DOC["text"]}]), encoding="utf-8")
    manifest = (graph / "manifest.json").read_bytes()
    argv = [sys.executable, "-m", "kgrag", "ingest", str(source), "--graph", str(graph)]
    env = dict(os.environ, HF_HUB_OFFLINE="1")
    done = subprocess.run(
        [*argv, "--quiet"],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
        preexec_fn=lambda: _limited(64 * 1024),
    )
    assert done.returncode != 0
    errors = [line for line in done.stderr.splitlines() if "was not written" in line]
    assert len(errors) == 1, done.stderr[-3000:]
    assert f"graph {graph}" in errors[0] and "Free some space and try again" in errors[0]
    assert "Traceback" not in done.stderr
    assert (graph / "manifest.json").read_bytes() == manifest
    assert not [p for p in (graph / "versions").iterdir() if p.name.startswith(".tmp")]
    retry = subprocess.run([*argv, "--quiet"], capture_output=True, text=True, env=env, timeout=600)
    assert retry.returncode == 0, retry.stderr[-3000:]
    assert (graph / "manifest.json").read_bytes() != manifest
