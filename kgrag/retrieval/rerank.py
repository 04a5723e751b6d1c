"""The rerank stage: rescore a short list of retrieved passages against the query.

Two RCP/1 ``rerank`` methods:

- ``"cross-encoder"`` reads query and passage together through a local
  sentence-transformers CrossEncoder and returns its raw logit, so scores of
  one model are comparable across calls.
- ``"colbert"`` is late interaction (ColBERT MaxSim) over the configured
  bi-encoder's token embeddings: no second model, scores in [-1, 1].

Models load only from local files; nothing is ever downloaded.
"""

from __future__ import annotations

import json
import os
from abc import ABC, abstractmethod
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import ModelError, Unsupported

if TYPE_CHECKING:
    from ..encoders.onnx import OnnxEncoder
    from ..encoders.sentence import SentenceTransformerEncoder

    TokenEncoder = SentenceTransformerEncoder | OnnxEncoder

METHODS = ("colbert", "cross-encoder")


class Reranker(ABC):
    """Scores passages against one query; higher is more relevant, same input same output."""

    #: the RCP ``rerank.method`` this implements
    method: str
    #: the model it scores with (a name or a path)
    model_id: str

    @abstractmethod
    def score(self, query: str, passages: Sequence[str]) -> np.ndarray:
        """Return a float64 array with one score per passage, in input order."""


def _offline_env() -> None:
    """Keep the Hugging Face hub offline and quiet before a model loads."""
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")


def _never_downloads(model: str, reason: object) -> ModelError:
    return ModelError(
        f"cannot load cross-encoder model {model!r} from local files ({reason}); "
        "kgrag never downloads models: give a local directory or an installed model package",
        model=model,
    )


class CrossEncoderReranker(Reranker):
    """A sentence-transformers CrossEncoder loaded from a local directory or model package."""

    method = "cross-encoder"

    def __init__(
        self, model: str, *, device: str = "cpu", batch_size: int = 32, max_length: int = 256
    ) -> None:
        self.model_id = model
        self.batch_size = batch_size
        self.model = _load_cross_encoder(model, device=device, max_length=max_length)

    def score(self, query: str, passages: Sequence[str]) -> np.ndarray:
        if not passages:
            return np.zeros(0, dtype=np.float64)
        scores = self.model.predict(
            [(query, passage) for passage in passages],
            batch_size=self.batch_size,
            show_progress_bar=False,
            convert_to_numpy=True,
        )
        return np.asarray(scores, dtype=np.float64).reshape(len(passages))


def _load_cross_encoder(model: str, *, device: str, max_length: int) -> Any:
    """Load a CrossEncoder with identity activation, or raise ModelError saying why."""
    from ..encoders.sentence import resolve_model_path

    _offline_env()
    try:
        path = resolve_model_path(model)
    except Exception as exc:  # ModelError, or an import error for odd names such as "./x"
        reason = "neither a local directory nor an installed package carrying a model"
        raise _never_downloads(model, reason) from exc
    _check_trained_head(model, _saved_architectures(path))
    try:
        import torch
        from sentence_transformers import CrossEncoder

        encoder = CrossEncoder(
            str(path),
            device=device,
            max_length=max_length,
            local_files_only=True,
            activation_fn=torch.nn.Identity(),
        )
    except Exception as exc:  # the libraries raise many unrelated types
        raise _never_downloads(model, exc) from exc
    return encoder


def _check_trained_head(model: str, architectures: Sequence[str] | None) -> None:
    """Refuse a bi-encoder: CrossEncoder would bolt an untrained, random head onto it."""
    if architectures and not any(a.endswith("ForSequenceClassification") for a in architectures):
        reason = f"it is a {architectures[0]}, not a trained sequence-classification model"
        raise _never_downloads(model, reason)


def _saved_architectures(path: Path) -> list[str] | None:
    """The ``architectures`` a model directory's config.json declares, if it has one."""
    try:
        return json.loads((path / "config.json").read_text(encoding="utf-8")).get("architectures")
    except (OSError, ValueError, AttributeError):
        return None


class ColbertReranker(Reranker):
    """ColBERT MaxSim over the token embeddings of the configured bi-encoder."""

    method = "colbert"

    def __init__(self, encoder: TokenEncoder) -> None:
        self.encoder = encoder
        self.model_id = encoder.model_id
        tokenizer = encoder.tokenizer
        self._special = np.asarray(sorted(set(tokenizer.all_special_ids)), dtype=np.int64)

    def score(self, query: str, passages: Sequence[str]) -> np.ndarray:
        """Mean over query tokens of the best cosine with any passage token."""
        if not passages:
            return np.zeros(0, dtype=np.float64)
        (q,) = self._token_vectors([query])
        if len(q) == 0:
            return np.zeros(len(passages), dtype=np.float64)
        scores = np.zeros(len(passages), dtype=np.float64)
        for i, p in enumerate(self._token_vectors(passages)):
            if len(p):
                scores[i] = float((q @ p.T).max(axis=1).mean())
        return scores

    def _token_vectors(self, texts: Sequence[str]) -> list[np.ndarray]:
        """Per text, the unit vectors of its real tokens (no padding, no [CLS]/[SEP])."""
        out = []
        for ids, tokens in self.encoder.token_embeddings(texts):
            vectors = np.asarray(tokens, dtype=np.float64)[~np.isin(ids, self._special)]
            norms = np.linalg.norm(vectors, axis=1, keepdims=True)
            norms[norms == 0] = 1.0
            out.append(vectors / norms)
        return out


@lru_cache(maxsize=8)
def _cached_cross_encoder(model: str) -> CrossEncoderReranker:
    return CrossEncoderReranker(model)


@lru_cache(maxsize=8)
def _cached_colbert(encoder: TokenEncoder) -> ColbertReranker:
    return ColbertReranker(encoder)


def load_reranker(method: str, *, cross_encoder_model: str | None, encoder: Any) -> Reranker:
    """The reranker for RCP ``rerank.method``, loaded once per process per model."""

    if method == "cross-encoder":
        if not cross_encoder_model:
            raise Unsupported(
                "rerank method 'cross-encoder' needs a configured cross-encoder model",
                option="rerank.method",
            )
        return _cached_cross_encoder(cross_encoder_model)
    if method == "colbert":
        if not _has_tokens(encoder):
            raise Unsupported(
                "rerank method 'colbert' needs a transformer encoder's token vectors",
                option="rerank.method",
            )
        return _cached_colbert(encoder)
    raise Unsupported(
        f"unknown rerank method {method!r}; this engine offers {', '.join(METHODS)}",
        option="rerank.method",
    )


def _has_tokens(encoder: Any) -> bool:
    """Whether ``encoder`` gives its token vectors (what ColBERT scoring reads)."""
    from ..encoders.onnx import OnnxEncoder
    from ..encoders.sentence import SentenceTransformerEncoder

    return isinstance(encoder, (SentenceTransformerEncoder, OnnxEncoder))


@lru_cache(maxsize=8)
def _cross_encoder_loads(model: str) -> bool:
    try:
        _cached_cross_encoder(model)
    except ModelError:
        return False
    return True


def available_methods(cross_encoder_model: str | None, encoder: Any) -> list[str]:
    """The rerank methods that really load here, sorted; a failed model is tried only once."""
    methods = []
    if _has_tokens(encoder):
        methods.append("colbert")
    if cross_encoder_model and _cross_encoder_loads(cross_encoder_model):
        methods.append("cross-encoder")
    return sorted(methods)
