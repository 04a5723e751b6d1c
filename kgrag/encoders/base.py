"""The encoder interface: texts in, L2-normalised float32 vectors out."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence

import numpy as np


class Encoder(ABC):
    """Turns texts into unit vectors. Batch-first; one call per batch of texts."""

    #: identity recorded in a graph's manifest (a model name or path)
    model_id: str
    #: vector dimension
    dim: int

    @abstractmethod
    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """Return a (len(texts), dim) float32 array of unit vectors."""

    def encode_one(self, text: str) -> np.ndarray:
        """Return one text's vector."""
        return self.encode([text])[0]

    def encode_with_spans(
        self, text: str, spans: Sequence[tuple[int, int]]
    ) -> tuple[np.ndarray, np.ndarray]:
        """``text``'s vector and a vector for each character span of it."""
        vectors, span_vectors = self.encode_spans([text], [spans])
        return vectors[0], span_vectors[0]

    def encode_spans(
        self, texts: Sequence[str], spans: Sequence[Sequence[tuple[int, int]]]
    ) -> tuple[np.ndarray, list[np.ndarray]]:
        """Each text's vector and, for each text, a (len(spans[i]), dim) matrix with a
        vector per character span of it (here: the spans encoded on their own, in the
        same call; a mean-pooling model reads them off the text's own token vectors)."""
        if len(spans) != len(texts):
            raise ValueError(f"{len(texts)} texts but {len(spans)} span lists")
        parts = [t[a:b] for t, ss in zip(texts, spans, strict=True) for a, b in ss]
        vectors = self.encode([*texts, *parts])
        out, row = [], len(texts)
        for ss in spans:
            out.append(vectors[row : row + len(ss)])
            row += len(ss)
        return vectors[: len(texts)], out

    def token_counts(self, texts: Sequence[str]) -> np.ndarray:
        """How many tokens the model sees in each text, special tokens left out
        (here: words; a model with a tokenizer counts its own)."""
        return np.array([max(1, len(t.split())) for t in texts], dtype=np.float32)


def normalise(vectors: np.ndarray) -> np.ndarray:
    """Scale rows to unit length (zero rows stay zero), as float32."""
    vectors = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return vectors / norms
