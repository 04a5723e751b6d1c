"""The engine facade: the one door the CLI, the server and the adapters use.

:mod:`.facade` opens a graph and answers every RCP/1 method on it; :mod:`.graph`
is the ``graph`` method, :mod:`.tools` the tool methods beside ``retrieve``, and
:mod:`.export` writes a stored graph for other tools.
"""

from .facade import GRAPH_OPS, Engine, open

__all__ = ["GRAPH_OPS", "Engine", "open"]
