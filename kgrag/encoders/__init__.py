"""Text encoders. ``load_encoder`` builds the configured one."""

from __future__ import annotations

from functools import lru_cache

from .base import Encoder, normalise


@lru_cache(maxsize=4)
def load_encoder(name: str, batch_size: int = 64, device: str = "cpu") -> Encoder:
    """The sentence-transformers encoder ``name``, loaded once per process."""
    from .sentence import SentenceTransformerEncoder

    return SentenceTransformerEncoder(name, batch_size=batch_size, device=device)


__all__ = ["Encoder", "load_encoder", "normalise"]
