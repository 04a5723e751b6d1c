"""Shared fixtures: real models, a real graph built once per session."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(__file__).parent / "data"
#: the shared multi-hop QA data beside the repository (tests using it skip without it)
BENCH = Path(__file__).resolve().parents[2] / "shared" / "bench"
SCIENCE = DATA / "science.json"


def small_config():
    """Settings that give several community and tree levels on a dozen passages."""
    from kgrag.config import load_config

    return load_config(
        communities={"max_size": 6},
        raptor={"top_size": 2, "max_cluster": 4},
        extract={"n_process": 1},
    )


@pytest.fixture(scope="session")
def science_graph(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The science corpus built into a graph folder (read-only for tests)."""
    from ingest import ingest_paths

    root = tmp_path_factory.mktemp("graphs") / "science"
    report = ingest_paths([SCIENCE], root, small_config())
    assert report.changed and not report.errors
    return root


@pytest.fixture(scope="session")
def science_reader(science_graph: Path):
    from kgrag.store import open_store

    with open_store(science_graph).reader() as reader:
        yield reader


@pytest.fixture(scope="session")
def launcher():
    """The project's Neo4j launcher (``neo4j/launcher.py``, a developer script beside
    the Java launcher it runs, not part of the installed package)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("launcher", ROOT / "neo4j" / "launcher.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def neo4j_uri(tmp_path_factory: pytest.TempPathFactory, launcher):
    """A real Neo4j 5 Community server for the session (the project's launcher, Bolt on
    127.0.0.1, authentication off); its Bolt URI."""
    home = tmp_path_factory.mktemp("neo4j")
    proc, uri = launcher.start(home, heap_mib=768)
    yield uri
    proc.terminate()
    try:
        proc.wait(timeout=60)
    except Exception:  # noqa: BLE001 - a server that will not stop is killed
        proc.kill()
        proc.wait()


def copy_into_neo4j(graph: Path, location: str) -> str:
    """The current version of the graph folder ``graph`` copied to the Neo4j graph
    ``location`` (a URI with the graph's name): the same records, rows and vectors."""
    from kgrag.store import copy_graph, open_store

    target = open_store(location)
    with open_store(graph).reader() as reader:
        copy_graph(reader, target)
    target.close()
    return location


@pytest.fixture(scope="session")
def science_neo4j(science_graph: Path, neo4j_uri: str) -> str:
    """The science graph folder copied into Neo4j."""
    return copy_into_neo4j(science_graph, f"{neo4j_uri}/science")
