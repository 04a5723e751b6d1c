"""The same sentence-transformers model, run by ONNX Runtime.

A mean-pooling sentence-transformers model (Transformer, mean Pooling, optionally
Normalize: all-MiniLM-L6-v2 is one) is exported once to ONNX with the torch that
is installed, and cached: beside the model when its folder is writable, else under
``$XDG_CACHE_HOME/kgrag/onnx`` (``~/.cache/kgrag/onnx``). The export is keyed by
the model's files, torch's version and :data:`EXPORT_VERSION`, written atomically,
and checked against the torch model it came from before it is used (cosine >=
:data:`MIN_COSINE` on probe texts). Texts are tokenised by the model's own
tokenizer, batched by length (little padding), run through ONNX Runtime's CPU
kernels, and mean-pooled over their tokens as sentence-transformers pools them:
the same vectors, faster on the CPU than sentence-transformers (docs/benchmarks.md).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import threading
import uuid
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ModelError
from .base import Encoder, normalise
from .sentence import resolve_model_path

log = logging.getLogger(__name__)

#: bump when the exported graph changes (inputs, outputs, pooling)
EXPORT_VERSION = 1
#: an export whose vectors fall below this cosine to the torch model's is not used
MIN_COSINE = 0.9999
_PROBES = (
    "What nationality is the director of the film Ugly Duckling?",
    "Marie Curie was born in Warsaw in 1867 and later moved to Paris.",
    "a",
    "The quick brown fox jumps over the lazy dog. " * 40,  # past the length limit
)


class UnsupportedModel(ModelError):
    """The model is not one this runtime can run (it pools otherwise, or has other modules)."""


def model_layout(path: Path) -> tuple[int, bool]:
    """The max sequence length and whether vectors are normalised, for a model made of
    a Transformer, a mean Pooling and optionally a Normalize module; otherwise
    :class:`UnsupportedModel`."""
    try:
        modules = json.loads((path / "modules.json").read_text("utf-8"))
        kinds = [str(m["type"]).rsplit(".", 1)[-1] for m in modules]
        pooling = next(m for m in modules if str(m["type"]).endswith("Pooling"))
        pool = json.loads((path / pooling["path"] / "config.json").read_text("utf-8"))
    except (OSError, ValueError, KeyError, StopIteration) as exc:
        raise UnsupportedModel(f"{path}: not a sentence-transformers folder ({exc})") from exc
    mean = pool.get("pooling_mode") == "mean" or (
        bool(pool.get("pooling_mode_mean_tokens"))
        and not any(
            pool.get(k)
            for k in (
                "pooling_mode_cls_token",
                "pooling_mode_max_tokens",
                "pooling_mode_mean_sqrt_len_tokens",
            )
        )
    )
    if kinds[:2] != ["Transformer", "Pooling"] or kinds[2:] not in ([], ["Normalize"]) or not mean:
        raise UnsupportedModel(f"{path}: modules {kinds} with pooling {pool} are not mean pooling")
    try:
        config = json.loads((path / "sentence_bert_config.json").read_text("utf-8"))
    except (OSError, ValueError):
        config = {}
    return int(config.get("max_seq_length") or 512), kinds[2:] == ["Normalize"]


def export_key(path: Path) -> str:
    """What the export depends on: the model's files (names, sizes, times), torch's
    version and :data:`EXPORT_VERSION` (read from the package metadata: a cached export
    is used without importing torch)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        torch_version = version("torch")
    except PackageNotFoundError:
        torch_version = "none"
    h = hashlib.sha256(f"{EXPORT_VERSION} {torch_version}".encode())
    for f in sorted(p for p in path.rglob("*") if p.is_file() and "kgrag-onnx" not in p.parts):
        st = f.stat()
        h.update(f"{f.relative_to(path)} {st.st_size} {st.st_mtime_ns}\n".encode())
    return h.hexdigest()[:16]


def cache_folders(path: Path) -> list[Path]:
    """Where an export may live: beside the model, then the user's cache."""
    home = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return [path / "kgrag-onnx", home / "kgrag" / "onnx"]


def exported(path: Path) -> Path:
    """The ONNX file of the model at ``path``, exported and checked on first use."""
    key = export_key(path)
    name = f"model-{key}.onnx"
    folders = cache_folders(path)
    for folder in folders:
        if (folder / name).is_file():
            return folder / name
    errors = []
    for folder in folders:
        try:
            folder.mkdir(parents=True, exist_ok=True)
            tmp = folder / f".{name}.{os.getpid()}.{uuid.uuid4().hex[:8]}"
            try:
                _export(path, tmp)
                os.replace(tmp, folder / name)  # atomic: a reader sees all of it or none
            finally:
                tmp.unlink(missing_ok=True)
            log.info("exported %s to %s", path, folder / name)
            return folder / name
        except OSError as exc:
            errors.append(f"{folder}: {exc}")
    raise ModelError(f"cannot write an ONNX export of {path}: {'; '.join(errors)}")


def _export(path: Path, out: Path) -> None:
    """Export the model's transformer (eager attention: a graph without the fused
    kernels' shape-specialised masks) with token vectors and their masked mean as
    outputs, then check it against the torch model on :data:`_PROBES`."""
    from transformers import AutoModel, AutoTokenizer

    max_len, _ = model_layout(path)
    model = AutoModel.from_pretrained(str(path), local_files_only=True, attn_implementation="eager")
    model.eval()
    tokenizer = AutoTokenizer.from_pretrained(str(path), local_files_only=True)
    wrapped = _pooled(model).eval()
    _trace(wrapped, tokenizer, out)
    _check(path, wrapped, tokenizer, out, max_len)


def _pooled(model: Any) -> Any:
    """A torch module over ``model`` giving its token vectors and their masked mean."""
    import torch

    class Pooled(torch.nn.Module):
        def __init__(self, inner: Any) -> None:
            super().__init__()
            self.inner = inner

        def forward(self, input_ids: Any, attention_mask: Any) -> tuple[Any, Any]:
            tokens = self.inner(
                input_ids=input_ids,
                attention_mask=attention_mask,
                token_type_ids=torch.zeros_like(input_ids),
            ).last_hidden_state
            mask = attention_mask.unsqueeze(-1).to(tokens.dtype)
            pooled = (tokens * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
            return tokens, pooled

    return Pooled(model)


def _trace(wrapped: Any, tokenizer: Any, out: Path) -> None:
    """Write ``wrapped`` to ``out`` as ONNX, batch and length left free."""
    import torch

    sample = tokenizer(
        ["a short text", "a longer text of a few more words"], padding=True, return_tensors="pt"
    )
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")  # the tracer's notes on Python-side shape logic
        torch.onnx.export(
            wrapped,
            (sample["input_ids"], sample["attention_mask"]),
            str(out),
            input_names=["input_ids", "attention_mask"],
            output_names=["tokens", "pooled"],
            dynamic_axes={
                "input_ids": {0: "batch", 1: "length"},
                "attention_mask": {0: "batch", 1: "length"},
                "tokens": {0: "batch", 1: "length"},
                "pooled": {0: "batch"},
            },
            opset_version=17,
            dynamo=False,
        )


def _check(path: Path, wrapped: Any, tokenizer: Any, out: Path, max_len: int) -> None:
    """Refuse the export at ``out`` unless its vectors of :data:`_PROBES` are within
    :data:`MIN_COSINE` of the torch model's."""
    import torch

    probe = tokenizer(
        list(_PROBES), padding=True, truncation=True, max_length=max_len, return_tensors="pt"
    )
    with torch.no_grad():
        want = wrapped(probe["input_ids"], probe["attention_mask"])[1].numpy()
    session = _session(out, threads=1)
    got = session.run(
        ["pooled"],
        {k: probe[k].numpy().astype(np.int64) for k in ("input_ids", "attention_mask")},
    )[0]
    cos = (normalise(got) * normalise(want)).sum(axis=1)
    if float(cos.min()) < MIN_COSINE:
        raise ModelError(
            f"the ONNX export of {path} gives vectors at cosine {float(cos.min()):.6f} to the "
            f"torch model's (at least {MIN_COSINE} needed); set models.runtime to 'torch'"
        )


def _threads_asked() -> int:
    """The threads ``OMP_NUM_THREADS`` asks for, as torch and numpy's BLAS read it (a Ray
    worker gets its CPUs there); 0, one per physical core, when it is unset."""
    value = os.environ.get("OMP_NUM_THREADS", "")
    return int(value) if value.isdigit() else 0


def _session(path: Path, threads: int = 0) -> Any:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.intra_op_num_threads = threads  # 0: one per physical core
    options.inter_op_num_threads = 1
    # threads that spin between calls take the cores numpy's products want next
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    try:
        return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    except Exception as exc:  # onnxruntime raises its own untyped errors
        raise ModelError(f"{path}: ONNX Runtime cannot load it: {exc}") from exc


#: a call's texts hold at most this many tokens, padded (a text longer than it goes
#: alone). 64 passages of 256 tokens a call made attention tensors of ~200 MB each,
#: far past the caches: 1,200 2Wiki passages took 16.8 s at 64 a call and 14.1-14.5 s at
#: 512 tokens (sentence-transformers on torch, 32 a call: 14.0 s), and the arena peaked
#: ~600 MB above the start instead of ~130 (docs/benchmarks.md, "Memory of a build")
TOKENS_PER_CALL = 512


def _shrinking() -> Any:
    """Run options that hand the arena's free blocks back after each call. Without
    them ONNX Runtime keeps the arena its largest batch grew (~600 MiB for 64 texts of
    256 tokens) for the life of the process: through the whole of a build after its
    chunk pass. Query latency is unchanged (docs/benchmarks.md, "Memory of a build")."""
    import onnxruntime as ort

    options = ort.RunOptions()
    options.add_run_config_entry("memory.enable_memory_arena_shrinkage", "cpu:0")
    return options


class OnnxEncoder(Encoder):
    """A mean-pooling sentence-transformers model run by ONNX Runtime on the CPU."""

    def __init__(self, name: str, *, batch_size: int = 64) -> None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        from transformers import AutoTokenizer

        path = resolve_model_path(name)
        self.max_len, _ = model_layout(path)
        self.session = _session(exported(path), threads=_threads_asked())
        self.run_options = _shrinking()
        self.tokenizer = AutoTokenizer.from_pretrained(str(path), local_files_only=True)
        # a fast tokenizer sets its truncation and padding on each call, and a second
        # thread's call meanwhile fails ("Already borrowed"): a server's workers and a
        # write share this encoder, so calls take turns at the tokenizer (not the model)
        self._tokenizing = threading.Lock()
        self.model_id = name
        self.batch_size = batch_size
        self.tokens_per_call = TOKENS_PER_CALL
        self.dim = int(self._run(["a"], tokens=False)[1].shape[1])

    def _run(
        self, texts: Sequence[str], offsets: bool = False, tokens: bool = True
    ) -> tuple[Any, np.ndarray, Any]:
        """Token vectors (b, length, dim; None unless ``tokens``), pooled vectors
        (b, dim) and the tokenizer's output for one batch."""
        with self._tokenizing:
            enc = self.tokenizer(
                list(texts),
                padding=True,
                truncation=True,
                max_length=self.max_len,
                return_offsets_mapping=offsets,
                return_tensors="np",
            )
        feed = {k: np.asarray(enc[k], dtype=np.int64) for k in ("input_ids", "attention_mask")}
        if not tokens:  # the token vectors are not copied out
            return None, self.session.run(["pooled"], feed, self.run_options)[0], enc
        found, pooled = self.session.run(["tokens", "pooled"], feed, self.run_options)
        return found, pooled, enc

    def _batches(self, texts: Sequence[str]) -> list[list[int]]:
        """Indexes of ``texts`` in batches of similar length (longest first), each at most
        ``batch_size`` texts and, past its first text, ``tokens_per_call`` tokens padded."""
        order = sorted(range(len(texts)), key=lambda i: (-len(texts[i]), i))
        budget = self.tokens_per_call
        if budget <= 0:
            return [order[i : i + self.batch_size] for i in range(0, len(order), self.batch_size)]
        step = 4096  # texts tokenized at a time: the token lists of all would be large
        lengths = np.concatenate(
            [np.zeros(0)]
            + [
                self.token_counts([texts[i] for i in order[lo : lo + step]])
                for lo in range(0, len(order), step)
            ]
        ).astype(int)
        lengths += 2  # [CLS], [SEP]
        out: list[list[int]] = []
        width = 0  # the batch's longest text, as the model sees it: what it is padded to
        for i, n in zip(order, np.minimum(lengths, self.max_len).tolist(), strict=True):
            if (
                out
                and len(out[-1]) < self.batch_size
                and (len(out[-1]) + 1) * max(width, n) <= budget
            ):
                out[-1].append(i)
                width = max(width, n)
            else:
                out.append([i])
                width = n
        return out

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        # each distinct text once: a text repeated in a call (a community carried down a
        # level) gets one vector, not copies that padding made differ in the last bit
        unique = list(dict.fromkeys(texts))
        out = np.zeros((len(unique), self.dim), dtype=np.float32)
        for batch in self._batches(unique):
            out[batch] = self._run([unique[i] for i in batch], tokens=False)[1]
        if len(unique) < len(texts):
            at = {t: i for i, t in enumerate(unique)}
            out = out[[at[t] for t in texts]]
        return normalise(out)

    def encode_spans(
        self, texts: Sequence[str], spans: Sequence[Sequence[tuple[int, int]]]
    ) -> tuple[np.ndarray, list[np.ndarray]]:
        """One model pass: a span's vector is the mean of the token vectors inside it
        (read in the context of the whole text); a span no token lies in (past the
        length limit) is encoded on its own."""
        if len(spans) != len(texts):
            raise ValueError(f"{len(texts)} texts but {len(spans)} span lists")
        if not any(spans):
            return super().encode_spans(texts, spans)
        whole = np.zeros((len(texts), self.dim), dtype=np.float32)
        out: list[np.ndarray] = [np.zeros((len(s), self.dim), dtype=np.float32) for s in spans]
        apart: list[tuple[int, int, str]] = []
        for batch in self._batches(texts):
            tokens, pooled, enc = self._run([texts[i] for i in batch], offsets=True)
            whole[batch] = pooled
            for b, i in enumerate(batch):
                mask = np.asarray(enc["attention_mask"][b], dtype=bool)
                starts, ends = np.asarray(enc["offset_mapping"][b], dtype=np.int64)[mask].T
                m = tokens[b][mask]
                for j, (a, z) in enumerate(spans[i]):
                    inside = np.flatnonzero((ends > starts) & (starts < z) & (ends > a))
                    if len(inside):
                        out[i][j] = m[inside].mean(axis=0)
                    else:
                        apart.append((i, j, texts[i][a:z]))
        if apart:
            alone = self.encode([t for _, _, t in apart])
            for (i, j, _), vec in zip(apart, alone, strict=True):
                out[i][j] = vec
        return normalise(whole), [normalise(r) if len(r) else r for r in out]

    def token_embeddings(self, texts: Sequence[str]) -> list[tuple[np.ndarray, np.ndarray]]:
        """Per text, its token ids and their (unnormalised) vectors, padding left out."""
        found: list[tuple[np.ndarray, np.ndarray]] = [(np.zeros(0), np.zeros(0))] * len(texts)
        for batch in self._batches(texts):
            tokens, _, enc = self._run([texts[i] for i in batch])
            for b, i in enumerate(batch):
                mask = np.asarray(enc["attention_mask"][b], dtype=bool)
                found[i] = (np.asarray(enc["input_ids"][b])[mask], tokens[b][mask])
        return found

    def token_counts(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros(0, dtype=np.float32)
        with self._tokenizing:
            ids = self.tokenizer(list(texts), add_special_tokens=False)["input_ids"]
        return np.array([max(1, len(i)) for i in ids], dtype=np.float32)
