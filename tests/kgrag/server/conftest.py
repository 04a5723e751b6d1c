"""Fixtures of the server tests: real graphs, real pipes, a real HTTP server on loopback.

Every server these tests start, in process or as a subprocess, holds each result to
its whole wire model (:mod:`kgrag.rcp.wire`): a result of the wrong shape fails the
call with -32603, and so the test that made it."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from stdio_pipe import Pipe

from kgrag.server import Graphs

os.environ["KGRAG_CHECK_RESULTS"] = "1"


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
