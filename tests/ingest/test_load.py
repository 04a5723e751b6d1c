"""Loading real files from disk: every format, directory walks, and bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ingest.load import LAYOUT_ERROR, load_paths
from kgrag.ids import content_id


def write(path: Path, content: str | bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")
    return path


def write_json(path: Path, obj: object) -> Path:
    return write(path, json.dumps(obj))


# --- formats ----------------------------------------------------------------


def test_txt_is_one_document_titled_by_stem(tmp_path: Path) -> None:
    f = write(tmp_path / "alan_turing.txt", "Alan Turing was a mathematician.\n")
    result = load_paths([f])
    assert result.errors == [] and result.skipped == []
    [doc] = result.documents
    assert doc.title == "alan_turing"
    assert doc.text == "Alan Turing was a mathematician.\n"
    assert doc.uri == f.as_posix()
    assert doc.meta == {"source": "alan_turing.txt", "path": f"{tmp_path.name}/alan_turing.txt"}
    assert doc.id == content_id("document", "file", f"{tmp_path.name}/alan_turing.txt")
    assert doc.sections == ()


def test_utf8_bom_is_stripped(tmp_path: Path) -> None:
    f = write(tmp_path / "bom.txt", "\ufeffCafé au lait.".encode())
    [doc] = load_paths([f]).documents
    assert doc.text == "Café au lait."


def test_markdown_title_and_section_paths(tmp_path: Path) -> None:
    md = (
        "Preface line.\n"
        "# Guide\n"
        "Intro text.\n"
        "## Install\n"
        "Run pip.\n"
        "#### Deep ####\n"
        "Skipped a level.\n"
        "```\n"
        "# not a heading\n"
        "```\n"
        "## Use\n"
        "Call it.\n"
        "# Appendix\n"
        "More.\n"
    )
    [doc] = load_paths([write(tmp_path / "guide.md", md)]).documents
    assert doc.title == "Guide"
    paths = [p for _, p in doc.sections]
    assert paths == [
        ("Guide",),
        ("Guide", "Install"),
        ("Guide", "Install", "Deep"),
        ("Guide", "Use"),
        ("Appendix",),
    ]
    offsets = [o for o, _ in doc.sections]
    assert offsets == sorted(offsets)
    for offset, path in doc.sections:
        assert doc.text[offset:].startswith(path[-1] + "\n")
    assert "# not a heading" in doc.text  # fenced code kept verbatim
    assert "#### Deep" not in doc.text and "Deep ####" not in doc.text


def test_markdown_without_level_one_heading_uses_stem(tmp_path: Path) -> None:
    [doc] = load_paths([write(tmp_path / "notes.md", "## Part\nText.\n")]).documents
    assert doc.title == "notes"
    assert doc.sections == ((0, ("Part",)),)


def test_hipporag_list_of_title_text(tmp_path: Path) -> None:
    f = write_json(
        tmp_path / "corpus.json",
        [{"title": "Paris", "text": "Paris is in France."}, {"title": "Rome", "text": "Rome."}],
    )
    docs = load_paths([f]).documents
    assert [d.title for d in docs] == ["Paris", "Rome"]
    assert [d.uri for d in docs] == [f"{f.as_posix()}#0", f"{f.as_posix()}#1"]
    assert docs[0].id == content_id("document", "Paris", "Paris is in France.")
    assert all(d.meta == {"source": "corpus.json"} for d in docs)


def test_hotpotqa_sentences_join_without_separator(tmp_path: Path) -> None:
    f = write_json(
        tmp_path / "hotpot.json",
        {"Ada Lovelace": ["Ada Lovelace was a writer.", " She worked with Babbage."]},
    )
    [doc] = load_paths([f]).documents
    assert doc.title == "Ada Lovelace"
    assert doc.text == "Ada Lovelace was a writer. She worked with Babbage."


def test_records_with_ids_meta_and_titles(tmp_path: Path) -> None:
    f = write_json(
        tmp_path / "records.json",
        [
            {"id": 7, "text": "Seven.", "meta": {"lang": "en"}},
            {"id": "d:abc", "text": "Already prefixed.", "title": "Named"},
            {"id": "x", "text": "Empty title.", "title": ""},
        ],
    )
    docs = load_paths([f]).documents
    assert [d.id for d in docs] == ["d:7", "d:abc", "d:x"]
    assert [d.title for d in docs] == ["7", "Named", "x"]
    assert docs[0].meta == {"lang": "en", "source": "records.json"}


def test_single_record_object(tmp_path: Path) -> None:
    f = write_json(tmp_path / "one.json", {"id": "q1", "text": "Just one."})
    [doc] = load_paths([f]).documents
    assert (doc.id, doc.title, doc.uri) == ("d:q1", "q1", f"{f.as_posix()}#0")


def test_jsonl_records_skip_blank_lines(tmp_path: Path) -> None:
    lines = [
        json.dumps({"title": "A", "text": "Alpha."}),
        "",
        json.dumps({"id": 2, "text": "Beta.", "meta": {"k": 1}}),
    ]
    f = write(tmp_path / "data.jsonl", "\n".join(lines) + "\n")
    docs = load_paths([f]).documents
    assert [(d.title, d.text) for d in docs] == [("A", "Alpha."), ("2", "Beta.")]
    assert docs[1].id == "d:2" and docs[1].meta == {"k": 1, "source": "data.jsonl"}
    assert [d.uri for d in docs] == [f"{f.as_posix()}#0", f"{f.as_posix()}#1"]


# --- directories ------------------------------------------------------------


def test_directory_walk_is_recursive_sorted_and_skips_hidden(tmp_path: Path) -> None:
    write(tmp_path / "b.txt", "Bee.")
    write(tmp_path / "a" / "z.md", "# Zed\nZed text.")
    write(tmp_path / "a" / "y.txt", "Why.")
    write(tmp_path / ".hidden.txt", "Hidden.")
    write(tmp_path / ".git" / "inner.txt", "Hidden dir.")
    write(tmp_path / "a" / "paper.doc", b"\xd0\xcf\x11\xe0")
    write(tmp_path / "README", "no extension")
    result = load_paths([tmp_path])
    assert result.errors == []
    assert [d.title for d in result.documents] == ["y", "Zed", "b"]
    assert result.skipped == [
        (tmp_path / "README").as_posix(),
        (tmp_path / "a" / "paper.doc").as_posix(),
    ]


def test_explicit_unsupported_file_is_an_error(tmp_path: Path) -> None:
    f = write(tmp_path / "paper.doc", b"\xd0\xcf\x11\xe0")
    result = load_paths([f])
    assert result.documents == [] and result.skipped == []
    [err] = result.errors
    assert err.path == f.as_posix()
    assert err.reason == (
        "unsupported file type '.doc' (expected .txt, .md, .json, .jsonl, .pdf, .docx, .pptx,"
        " .xlsx, .csv, .html, .htm, .png, .jpg, .jpeg, .tif, .tiff)"
    )


# --- bad input --------------------------------------------------------------

BAD_FILES: list[tuple[str, bytes | str, str]] = [
    ("empty.txt", b"", "empty file"),
    ("blank.md", " \n\t\n", "empty file"),
    ("nul.txt", b"abc\x00def", "binary file"),
    ("latin1.txt", b"caf\xe9 ok", "not valid UTF-8 (byte 0xe9 at offset 3)"),
    ("broken.json", '[{"title": "A",\n "text": }]', "invalid JSON at line 2 column 10: "),
    ("broken.jsonl", '{"title": "A", "text": "ok"}\n{"title": ', "line 2: invalid JSON: "),
    ("shape.json", '{"a": 1}', LAYOUT_ERROR),
    ("numbers.json", "[1, 2]", LAYOUT_ERROR),
    ("scalar.json", '"just a string"', LAYOUT_ERROR),
    (
        "shape.jsonl",
        "[1]\n",
        "line 1: unrecognised JSON layout: expected a {title, text} or {id, text} record",
    ),
    (
        "notext.json",
        '[{"title": "A", "text": "ok"}, {"title": "B"}]',
        "record 1: 'text' must be a non-empty string",
    ),
    (
        "numtext.jsonl",
        '{"id": 1, "text": "ok"}\n\n{"id": 2, "text": 5}\n',
        "line 3: 'text' must be a non-empty string",
    ),
    (
        "badmeta.json",
        '[{"id": 1, "text": "ok", "meta": [1]}]',
        "record 0: 'meta' must be an object",
    ),
    ("badtitle.json", '[{"title": 3, "text": "ok"}]', "record 0: 'title' must be a string"),
    ("badid.json", '[{"id": true, "text": "ok"}]', "record 0: 'id' must be a non-empty string"),
    ("emptylist.json", "[]", "no records"),
]


@pytest.mark.parametrize(("name", "content", "reason"), BAD_FILES, ids=[b[0] for b in BAD_FILES])
def test_bad_file_is_one_error_and_neighbours_still_load(
    tmp_path: Path, name: str, content: bytes | str, reason: str
) -> None:
    bad = write(tmp_path / name, content)
    good = write(tmp_path / "good.txt", "Good text.")
    result = load_paths([bad, good])
    assert [d.text for d in result.documents] == ["Good text."]
    [err] = result.errors
    assert err.path == bad.as_posix()
    assert err.reason.startswith(reason)
    assert bad.as_posix() in str(err)


def test_missing_path_is_an_error(tmp_path: Path) -> None:
    good = write(tmp_path / "good.txt", "Good text.")
    missing = tmp_path / "nope.txt"
    result = load_paths([missing, good])
    [err] = result.errors
    assert (err.path, err.reason) == (missing.as_posix(), "no such file or directory")
    assert len(result.documents) == 1


def test_bad_files_inside_directory_do_not_stop_the_walk(tmp_path: Path) -> None:
    write(tmp_path / "a.txt", "First.")
    write(tmp_path / "b.json", "{oops")
    write(tmp_path / "c.txt", b"\xff\xfe")
    write(tmp_path / "d.md", "# Last\nText.")
    result = load_paths([tmp_path])
    assert [d.title for d in result.documents] == ["a", "Last"]
    assert sorted(Path(e.path).name for e in result.errors) == ["b.json", "c.txt"]


# --- ids and dedupe ---------------------------------------------------------


def test_same_file_twice_gives_identical_documents(tmp_path: Path) -> None:
    write(tmp_path / "x.md", "# X\n## Sub\nBody.")
    write_json(tmp_path / "y.json", [{"title": "Y", "text": "Why."}])
    first = load_paths([tmp_path]).documents
    second = load_paths([tmp_path]).documents
    assert first == second
    assert len(first) == 2


def test_duplicate_documents_are_dropped_first_wins(tmp_path: Path) -> None:
    a = write_json(tmp_path / "a.json", [{"title": "T", "text": "Same."}, {"id": 1, "text": "One"}])
    b = write(
        tmp_path / "b.jsonl", '{"title": "T", "text": "Same."}\n{"id": "d:1", "text": "Uno"}\n'
    )
    c = write(tmp_path / "T.txt", "Same.")  # a file is its own document, named by its path
    result = load_paths([a, b, c, a])
    assert result.errors == []
    assert [(d.id, d.text, d.uri) for d in result.documents] == [
        (content_id("document", "T", "Same."), "Same.", f"{a.as_posix()}#0"),
        ("d:1", "One", f"{a.as_posix()}#1"),
        (content_id("document", "file", f"{tmp_path.name}/T.txt"), "Same.", c.as_posix()),
    ]


def test_different_content_gives_different_ids(tmp_path: Path) -> None:
    a = write(tmp_path / "a" / "doc.txt", "One text.")
    b = write(tmp_path / "b" / "doc.txt", "Another text.")
    docs = load_paths([a, b]).documents
    assert len({d.id for d in docs}) == 2
