"""Fixtures of the adapter tests: one engine over the science graph, and no network."""

from __future__ import annotations

import socket
from collections.abc import Iterator
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
