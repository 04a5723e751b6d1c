"""Fixtures of the adapter tests: one engine over the science graph, and no network."""

from __future__ import annotations

import json
import os
import socket
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import kgrag


@pytest.fixture(scope="session")
def science_engine(science_graph: Path) -> Iterator[kgrag.Engine]:
    with kgrag.open(science_graph) as engine:
        yield engine


@pytest.fixture
def offline(monkeypatch: pytest.MonkeyPatch) -> None:
    """Any attempt to open a network connection fails the test: nothing may download."""

    def refuse(self: socket.socket, address: Any) -> None:
        raise AssertionError(f"network connection attempted to {address!r}")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)


ROOT = Path(__file__).resolve().parents[3]


@dataclass(frozen=True)
class Mcp1:
    """A Python with the official MCP SDK's 1.x line first on its path (``.venv/mcp1``,
    made by ``make install`` with tests/make_mcp1_env.py), and :meth:`run`, which has
    tests/kgrag/adapters/mcp1_client.py carry out a plan under it."""

    python: Path
    run: Callable[[dict[str, Any]], dict[str, Any]]


@pytest.fixture(scope="session")
def mcp1() -> Mcp1:
    default = ROOT / ".venv" / "mcp1" / "bin" / "python"
    python = Path(os.environ.get("KGRAG_MCP1_PYTHON", default))
    if not python.exists():
        pytest.skip(f"no Python with the 1.x MCP SDK at {python} (make install makes it)")

    def run(plan: dict[str, Any]) -> dict[str, Any]:
        done = subprocess.run(
            [str(python), str(Path(__file__).with_name("mcp1_client.py"))],
            input=json.dumps(plan),
            capture_output=True,
            text=True,
            env=dict(os.environ, HF_HUB_OFFLINE="1"),
            timeout=300,
        )
        assert done.returncode == 0, done.stderr
        answer: dict[str, Any] = json.loads(done.stdout)
        assert answer["sdk"].startswith("1."), answer["sdk"]
        return answer

    return Mcp1(python, run)
