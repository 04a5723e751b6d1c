"""The engine facade: the one door the CLI, the server and the adapters use.

:mod:`.facade` opens a graph and answers every RCP/1 method on it; :mod:`.graph`
is the ``graph`` method, :mod:`.tools` the tool methods beside ``retrieve``,
:mod:`.admin` the calls on a whole graph (build, export, describe) and
:mod:`.export` writes a stored graph for other tools. The names below are what a
caller above the engine may use: the facade, and the vocabulary its params take.
"""

from kgrag.retrieval.graph_hits import LOCAL_UNITS, render_path
from kgrag.retrieval.plan import MODES as RETRIEVE_MODES
from kgrag.retrieval.transform import METHODS as TRANSFORM_METHODS
from kgrag.retrieval.units import UNITS
from kgrag.search.agentic import Exploration, explore

from .admin import (
    current_version,
    export_file,
    info,
    ingest,
    is_graph_uri,
    load_documents,
    uri_graph_name,
    watch,
)
from .facade import GRAPH_OPS, Engine, open
from .graph import MAX_DEPTH, MAX_HOPS

__all__ = [
    "GRAPH_OPS",
    "watch",
    "LOCAL_UNITS",
    "MAX_DEPTH",
    "MAX_HOPS",
    "RETRIEVE_MODES",
    "TRANSFORM_METHODS",
    "UNITS",
    "Engine",
    "Exploration",
    "current_version",
    "explore",
    "export_file",
    "info",
    "ingest",
    "is_graph_uri",
    "load_documents",
    "open",
    "render_path",
    "uri_graph_name",
]
