"""Text encoders. ``load_encoder`` builds the configured one."""

from __future__ import annotations

import logging
from functools import lru_cache

from .base import Encoder, normalise

log = logging.getLogger(__name__)

RUNTIMES = ("onnx", "torch")


def resolve_device(device: str) -> str:
    """The torch device ``device`` names: "auto" is the first CUDA GPU where torch sees
    one, else Apple's GPU (MPS) where there is one, else the CPU; any other name is
    taken as it is ("cpu", "cuda", "cuda:1", "mps")."""
    if device != "auto":
        return device
    import torch

    if torch.cuda.is_available():
        return "cuda"
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        return "mps"
    return "cpu"


def load_encoder(
    name: str, batch_size: int = 64, device: str = "auto", runtime: str = "onnx"
) -> Encoder:
    """The sentence-transformers model ``name``, loaded once per process, on ``device``
    (:func:`resolve_device`): run by ONNX Runtime (:mod:`kgrag.encoders.onnx`) when
    ``runtime`` is "onnx", the device is the CPU and the model pools by mean; else by
    sentence-transformers on torch."""
    return _load(name, batch_size, resolve_device(device), runtime)


@lru_cache(maxsize=4)
def _load(name: str, batch_size: int, device: str, runtime: str) -> Encoder:
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


__all__ = ["RUNTIMES", "Encoder", "load_encoder", "normalise", "resolve_device"]
