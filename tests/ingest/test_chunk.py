"""Sentence splitting and sentence-aligned chunking."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from ingest.chunk import chunk_documents, split_sentences
from ingest.load import load_paths
from kgrag.errors import InvalidParams
from kgrag.ids import content_id
from kgrag.text.tokens import count_tokens
from kgrag.types import Document


def sentences(text: str) -> list[str]:
    return [text[s:e] for s, e in split_sentences(text)]


def doc(
    text: str,
    title: str = "Doc",
    meta: dict[str, Any] | None = None,
    sections: tuple[tuple[int, tuple[str, ...]], ...] = (),
) -> Document:
    doc_id = content_id("document", title, text)
    return Document(id=doc_id, title=title, text=text, meta=meta or {}, sections=sections)


def numbered(n: int) -> str:
    """``n`` sentences of 6 tokens each: "Sentence number 3 is here."."""
    return " ".join(f"Sentence number {i} is here." for i in range(n))


# --- tokens and sentences ---------------------------------------------------


def test_count_tokens_counts_words_and_punctuation() -> None:
    assert count_tokens("Hello, world!") == 4
    assert count_tokens("it's 3.14") == 6
    assert count_tokens("   ") == 0


def test_split_sentences_basic() -> None:
    assert sentences("One fish. Two fish! Red fish? Blue fish.") == [
        "One fish.",
        "Two fish!",
        "Red fish?",
        "Blue fish.",
    ]


def test_split_sentences_keeps_abbreviations_initials_and_decimals() -> None:
    text = (
        "Mr. Smith met Dr. Jones at St. Paul's on Jan. 5 in the U.S. with Prof. Lee. "
        "J. R. R. Tolkien and George W. Bush paid 3.14 dollars, e.g. cheap, i.e. fine, etc. "
        "Acme Inc. agreed vs. Foo Ltd. on it. The end."
    )
    assert sentences(text) == [
        "Mr. Smith met Dr. Jones at St. Paul's on Jan. 5 in the U.S. with Prof. Lee.",
        "J. R. R. Tolkien and George W. Bush paid 3.14 dollars, e.g. cheap, i.e. fine, etc. "
        "Acme Inc. agreed vs. Foo Ltd. on it.",
        "The end.",
    ]


def test_split_sentences_needs_a_capital_digit_or_quote_next() -> None:
    assert sentences('It ended. then nothing. 42 came next. "Quoted," he said.') == [
        "It ended. then nothing.",
        "42 came next.",
        '"Quoted," he said.',
    ]


def test_split_sentences_closing_quotes_and_brackets_stay_with_the_sentence() -> None:
    assert sentences('She said "Stop." Then (he left.) Done.') == [
        'She said "Stop."',
        "Then (he left.)",
        "Done.",
    ]


def test_split_sentences_at_paragraphs_and_list_items() -> None:
    text = "A heading without a period\n\nBody text runs\non the next line.\n- item one\n- item two"
    assert sentences(text) == [
        "A heading without a period",
        "Body text runs\non the next line.",
        "- item one",
        "- item two",
    ]


def test_split_sentences_spans_cover_all_visible_text() -> None:
    text = "  Lead space. Mid   gap!\n\n\tTabbed? yes.  "
    spans = split_sentences(text)
    assert all(not text[s].isspace() and not text[e - 1].isspace() for s, e in spans)
    covered = "".join(text[s:e] for s, e in spans)
    assert re.sub(r"\s", "", covered) == re.sub(r"\s", "", text)
    assert spans == sorted(spans)


# --- windows ----------------------------------------------------------------


def test_short_document_is_one_chunk_of_the_stripped_text() -> None:
    d = doc("\n  A short note. Just two sentences.  \n")
    [chunk] = chunk_documents([d], max_tokens=50, overlap_tokens=10)
    assert chunk.text == "A short note. Just two sentences."
    assert (chunk.start, chunk.end) == (3, 36)
    assert chunk.index == 0 and chunk.context == "Doc" and chunk.doc_id == d.id
    assert chunk.tokens == count_tokens(chunk.text) == 8
    assert chunk.id == content_id("chunk", d.id, chunk.text, "3")


def test_windows_fit_are_exact_slices_and_overlap_trailing_sentences() -> None:
    d = doc(numbered(20), meta={"source": "n.txt"})
    chunks = chunk_documents([d], max_tokens=20, overlap_tokens=7)
    assert len(chunks) > 3
    assert [c.index for c in chunks] == list(range(len(chunks)))
    for c in chunks:
        assert c.text == d.text[c.start : c.end]
        assert c.tokens == count_tokens(c.text) <= 20
        assert c.meta == {"source": "n.txt", "chunk_type": "text", "parent_path": []}
    for prev, nxt in zip(chunks, chunks[1:], strict=False):
        prev_sents = sentences(prev.text)
        nxt_sents = sentences(nxt.text)
        # 7 overlap tokens hold exactly one 6-token sentence.
        assert nxt_sents[0] == prev_sents[-1]
        assert nxt_sents[1] not in prev_sents
        assert nxt.start > prev.start and nxt.end > prev.end
    assert chunks[0].start == 0 and chunks[-1].end == len(d.text)


def test_zero_overlap_chunks_tile_the_text() -> None:
    d = doc(numbered(10))
    chunks = chunk_documents([d], max_tokens=12, overlap_tokens=0)
    assert [sentences(c.text) for c in chunks] == [
        sentences(numbered(10))[i : i + 2] for i in range(0, 10, 2)
    ]


def test_overlap_never_repeats_a_whole_window() -> None:
    # Each window holds one 6-token sentence; the overlap budget could hold it
    # too, but repeating it all would stall, so windows must still advance.
    d = doc(numbered(4))
    chunks = chunk_documents([d], max_tokens=8, overlap_tokens=7)
    assert [c.text for c in chunks] == sentences(d.text)


def test_overlap_is_cut_to_leave_room_for_new_text() -> None:
    short = "Aa bb. Cc dd. "  # two 3-token sentences
    long_sentence = "Ee " + "ff " * 6 + "gg."  # 9 tokens
    d = doc(short + long_sentence)
    chunks = chunk_documents([d], max_tokens=10, overlap_tokens=6)
    # Carrying "Cc dd." (3) plus the 9-token sentence would pass 10 tokens, so
    # the overlap is dropped rather than emitting a window with nothing new.
    assert [c.text for c in chunks] == ["Aa bb. Cc dd.", long_sentence]


def test_long_sentence_is_cut_at_token_boundaries() -> None:
    words = " ".join(f"W{i}" for i in range(25))
    d = doc(f"Short one. {words} end. Tail here.")
    chunks = chunk_documents([d], max_tokens=10, overlap_tokens=0)
    assert all(c.tokens <= 10 for c in chunks)
    assert [c.tokens for c in chunks] == [3, 10, 10, 10]
    assert chunks[1].text == " ".join(f"W{i}" for i in range(10))
    assert chunks[3].text == "W20 W21 W22 W23 W24 end. Tail here."
    assert "".join(c.text for c in chunks).replace(" ", "") == d.text.replace(" ", "")


def test_chunks_never_cross_markdown_sections(tmp_path: Path) -> None:
    md = (
        "Intro before any heading.\n\n"
        "# Manual\n"
        "Welcome text.\n"
        "## Install\n" + numbered(6) + "\n"
        "## Usage\n"
        "Run it. Then stop.\n"
    )
    f = tmp_path / "manual.md"
    f.write_text(md, encoding="utf-8")
    [d] = load_paths([f]).documents
    chunks = chunk_documents([d], max_tokens=15, overlap_tokens=6)
    starts = [o for o, _ in d.sections]
    for c in chunks:
        assert c.text == d.text[c.start : c.end]
        assert not any(c.start < s < c.end for s in starts), c.text
    contexts = {c.context for c in chunks}
    assert contexts == {"Manual", "Manual > Install", "Manual > Usage"}
    install = [c for c in chunks if c.context == "Manual > Install"]
    assert install[0].text.startswith("Install\nSentence number 0")
    assert len(install) > 1
    assert chunks[0].text == "Intro before any heading." and chunks[0].context == "Manual"
    assert chunks[-1].text == "Usage\nRun it. Then stop."


def test_context_joins_title_and_section_path() -> None:
    text = "Top\nFirst part.\nSub\nSecond part."
    d = doc(text, title="Book", sections=((0, ("Top",)), (16, ("Top", "Sub"))))
    assert [c.context for c in chunk_documents([d], max_tokens=50, overlap_tokens=0)] == [
        "Book > Top",
        "Book > Top > Sub",
    ]


def test_chunking_is_deterministic_and_ids_unique() -> None:
    docs = [doc(numbered(30), title="A"), doc(numbered(30), title="B")]
    first = chunk_documents(docs, max_tokens=25, overlap_tokens=8)
    second = chunk_documents(list(docs), max_tokens=25, overlap_tokens=8)
    assert first == second
    assert len({c.id for c in first}) == len(first)
    assert {c.doc_id for c in first} == {d.id for d in docs}


def test_repeated_text_at_different_offsets_gets_different_ids() -> None:
    d = doc("Same words here.\n\nSame words here.")
    chunks = chunk_documents([d], max_tokens=4, overlap_tokens=0)
    assert [c.text for c in chunks] == ["Same words here.", "Same words here."]
    assert chunks[0].id != chunks[1].id


@pytest.mark.parametrize(("max_tokens", "overlap"), [(0, 0), (10, 10), (10, -1)])
def test_bad_window_sizes_are_rejected(max_tokens: int, overlap: int) -> None:
    with pytest.raises(InvalidParams):
        chunk_documents([doc("Text.")], max_tokens=max_tokens, overlap_tokens=overlap)
