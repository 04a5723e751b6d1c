"""kgrag: a GraphRAG knowledge-graph retrieval engine that needs no LLM.

import kgrag
with kgrag.open("graphs/demo") as engine:
    for hit in engine.query("Who directed the film?", k=5):
        print(hit["unit"], hit["level"], hit["score"], hit["provenance"]["leaves"])
"""

from .config import Config, load_config
from .engine import Engine, open
from .errors import (
    InputError,
    InvalidParams,
    KgragError,
    ModelError,
    NotFound,
    StoreError,
    Unsupported,
    VersionGone,
)

__version__ = "0.1.0"

__all__ = [
    "Config",
    "Engine",
    "InputError",
    "InvalidParams",
    "KgragError",
    "ModelError",
    "NotFound",
    "StoreError",
    "Unsupported",
    "VersionGone",
    "load_config",
    "open",
]
