"""Fixtures of the server tests: real graphs, real pipes, a real HTTP server on loopback."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from stdio_pipe import Pipe

from kgrag.server import Graphs


@pytest.fixture(scope="session")
def served_copy(science_graph: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the science graph the server tests may write to."""
    root = tmp_path_factory.mktemp("served") / "science"
    shutil.copytree(science_graph, root)
    return root


@pytest.fixture(scope="session")
def graphs(served_copy: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Graphs]:
    """Two graphs served at once: ``science`` (the default) and ``second``, a copy."""
    second = tmp_path_factory.mktemp("served") / "second"
    shutil.copytree(served_copy, second)
    g = Graphs.open([f"science={served_copy}", f"second={second}"])
    yield g
    g.close()


@pytest.fixture
def pipe(graphs: Graphs) -> Iterator[Pipe]:
    p = Pipe(graphs)
    yield p
    p.close()
