"""The old import path of :mod:`kgrag.search` (graph search), kept for code that
imports ``kgrag.graph``; new code imports :mod:`kgrag.search`."""

from kgrag.search import *  # noqa: F403
from kgrag.search import __all__  # noqa: F401
