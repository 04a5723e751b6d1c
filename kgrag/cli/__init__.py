"""The ``kgrag`` command line: :mod:`.main` parses and dispatches; :mod:`.query`
prints graph ops for people, :mod:`.serve` runs the server, :mod:`.bench` measures."""

from .main import main

__all__ = ["main"]
