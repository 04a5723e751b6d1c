"""Text encoders. ``load_encoder`` builds the configured one."""

from __future__ import annotations

import logging
from functools import lru_cache

from .base import Encoder, normalise

log = logging.getLogger(__name__)

RUNTIMES = ("onnx", "torch")


@lru_cache(maxsize=4)
def load_encoder(
    name: str, batch_size: int = 64, device: str = "cpu", runtime: str = "onnx"
) -> Encoder:
    """The sentence-transformers model ``name``, loaded once per process: run by ONNX
    Runtime (:mod:`kgrag.encoders.onnx`) when ``runtime`` is "onnx", the device is the
    CPU and the model pools by mean; else by sentence-transformers on torch."""
    from ..errors import InvalidParams
    from .sentence import SentenceTransformerEncoder

    if runtime not in RUNTIMES:
        raise InvalidParams(
            f"unknown encoder runtime {runtime!r}; known: {', '.join(RUNTIMES)}",
            field="models.runtime",
        )
    if runtime == "onnx" and device == "cpu":
        from .onnx import OnnxEncoder, UnsupportedModel

        try:
            return OnnxEncoder(name, batch_size=batch_size)
        except UnsupportedModel as exc:
            log.info("%s; running it on torch", exc)
    return SentenceTransformerEncoder(name, batch_size=batch_size, device=device)


__all__ = ["RUNTIMES", "Encoder", "load_encoder", "normalise"]
