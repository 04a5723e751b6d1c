"""Import paths users may hold from before the restructure still work, and name the
same objects as the new ones."""

from __future__ import annotations

import subprocess
import sys


def test_old_import_paths_name_the_new_objects():
    import kgrag.engine
    import kgrag.evaluation
    import kgrag.graph
    import kgrag.search
    import kgrag.store
    from kgrag.adapters.langchain import KgragRetriever as LangChainRetriever
    from kgrag.adapters.llamaindex import KgragRetriever as LlamaIndexRetriever
    from kgrag.bench import evaluation
    from kgrag.store.folder import SQLiteGraphStore
    from kgrag.store.neo4j import Neo4jGraphStore, is_uri

    assert kgrag.graph.LocalSearch is kgrag.search.LocalSearch
    assert kgrag.graph.build_graph is kgrag.search.build_graph
    assert kgrag.evaluation.recall_at is evaluation.recall_at
    assert kgrag.open is kgrag.engine.open and kgrag.Engine is kgrag.engine.Engine
    assert kgrag.store.SQLiteGraphStore is SQLiteGraphStore
    assert is_uri("bolt://127.0.0.1:7687/g") and Neo4jGraphStore.__name__ == "Neo4jGraphStore"
    assert LangChainRetriever.__module__ == "kgrag.adapters.langchain"
    assert LlamaIndexRetriever.__module__ == "kgrag.adapters.llamaindex"


def test_both_module_entry_points_run_the_command_line():
    for module in ("kgrag", "kgrag.cli"):
        done = subprocess.run(
            [sys.executable, "-m", module, "--help"], capture_output=True, text=True, timeout=120
        )
        assert done.returncode == 0, done.stderr
        assert "ingest" in done.stdout and "serve" in done.stdout
