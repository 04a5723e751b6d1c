"""Load source files into :class:`~kgrag.types.Document` records.

Accepted inputs are ``.txt`` and ``.md`` files (one document each), ``.json``
files (a HippoRAG ``[{title, text}]`` corpus, a HotpotQA ``{title: [sentences]}``
corpus, or ``{id, text, meta?, title?}`` records) and ``.jsonl`` files (one
record per line), and documents in their own formats (PDF, Word, PowerPoint,
HTML, spreadsheets, CSV, images: :mod:`ingest.documents`), one document each.
Directories are walked recursively in sorted order.

A bad file never stops a load: it becomes one :class:`~kgrag.errors.InputError`
naming the file and saying what is wrong, and every other file still loads.
Document ids are content hashes (or the record's own id), so loading the same
file twice gives identical documents, and a document seen before is dropped.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from kgrag.errors import InputError
from kgrag.ids import content_id
from kgrag.types import Document

from .documents import FORMATS, read_file

SUPPORTED = (".txt", ".md", ".json", ".jsonl", *FORMATS)
_EXPECTED = "(expected " + ", ".join(SUPPORTED) + ")"
_BINARY_PROBE = 8192
#: files that hold many documents, each identified by its own record
_COLLECTIONS = (".json", ".jsonl")
_BOM = "\ufeff"
_RECORD_KEYS = frozenset({"id", "title", "text"})
LAYOUT_ERROR = (
    "unrecognised JSON layout: expected a list of {title, text} or {id, text} records, "
    "or a {title: [sentences]} object"
)
LINE_LAYOUT_ERROR = "unrecognised JSON layout: expected a {title, text} or {id, text} record"

_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_ATX = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$")


@dataclass(frozen=True, slots=True)
class LoadResult:
    """What a load produced: the documents, one error per bad file, and the
    files inside walked directories that were passed over for their extension."""

    documents: list[Document]
    errors: list[InputError]
    skipped: list[str]
    #: parts of files read only in part (a scanned page without OCR, a cut sheet)
    warnings: list[InputError] = field(default_factory=list)
    #: the folders walked, as the path prefixes their files' documents carry
    folders: list[str] = field(default_factory=list)
    #: the paths (as documents carry them) of files that were found but failed to load
    failed: list[str] = field(default_factory=list)

    def gone(self, stored: Sequence[Document]) -> list[str]:
        """Ids of ``stored`` documents read from a file under one of the folders walked
        whose file is no longer there (a file that failed to load is not gone)."""
        here = {str(d.meta.get("path")) for d in self.documents} | set(self.failed)
        out = []
        for d in stored:
            path = d.meta.get("path")
            if (
                isinstance(path, str)
                and path not in here
                and any(path.startswith(folder + "/") for folder in self.folders)
            ):
                out.append(d.id)
        return out


PageProgress = Callable[[str, int, int], None]


def load_paths(paths: Sequence[str | Path], pages: PageProgress | None = None) -> LoadResult:
    """Load every file named or found under ``paths``.

    Errors are collected rather than raised so one broken file cannot hide the
    rest of a corpus. Documents whose id was already loaded are dropped (the
    first one wins), which makes re-loading a file or an overlapping path a no-op.
    """
    found = find_files(paths)
    return found.result([read_file_at(path, key, pages) for path, key in found.files])


@dataclass(slots=True)
class FoundFiles:
    """The files under some paths, each once with its key, and what was passed over."""

    files: list[tuple[Path, str]]
    errors: list[InputError]
    skipped: list[str]
    folders: list[str]

    def result(self, reads: Sequence[FileRead]) -> LoadResult:
        """The load of these files from what reading each gave (in file order)."""
        documents: list[Document] = []
        errors, warnings, failed = list(self.errors), [], []
        seen_ids: set[str] = set()
        for read in reads:
            warnings.extend(read.warnings)
            if read.error is not None:
                errors.append(read.error)
                failed.append(read.key)
            for doc in read.documents:
                if doc.id not in seen_ids:
                    seen_ids.add(doc.id)
                    documents.append(doc)
        return LoadResult(documents, errors, list(self.skipped), warnings, self.folders, failed)


@dataclass(frozen=True, slots=True)
class FileRead:
    """What reading one file gave: its documents and warnings, or its error."""

    key: str
    documents: list[Document]
    warnings: list[InputError]
    error: InputError | None = None


def find_files(paths: Sequence[str | Path]) -> FoundFiles:
    """The loadable files named or found under ``paths``, in order, each once."""
    errors: list[InputError] = []
    skipped: list[str] = []
    seen: set[Path] = set()
    files: list[tuple[Path, str]] = []
    for path, root in _files(paths, errors, skipped):
        real = path.resolve()
        if real not in seen:
            seen.add(real)
            files.append((path, file_key(path, root)))
    folders = [file_key(Path(p)) for p in paths if Path(p).is_dir()]
    return FoundFiles(files, errors, skipped, folders)


def read_file_at(path: Path, key: str, pages: PageProgress | None = None) -> FileRead:
    """Read one file (``key``: its name in the graph); a bad file gives its error."""
    warnings: list[InputError] = []
    try:
        loaded = _load_file(path, warnings, pages)
    except InputError as exc:
        return FileRead(key, [], warnings, exc)
    if path.suffix.lower() not in _COLLECTIONS:
        loaded = [_from_file(doc, key) for doc in loaded]
    return FileRead(key, loaded, warnings)


def file_key(path: Path, root: Path | None = None) -> str:
    """How a file (or folder) is named in the graph: its path from the folder that
    holds the ingest root, so ``docs/a/b.pdf`` ingested as ``docs/`` is
    ``docs/a/b.pdf`` wherever the command runs (and ``docs/b.pdf`` given alone is the
    same document as found in ``docs/``)."""
    base = (root if root is not None else path).resolve().parent
    return path.resolve().relative_to(base).as_posix()


def _from_file(doc: Document, key: str) -> Document:
    """A document read from a file, identified by the file's path: an edited file
    replaces what it held before instead of adding a second document."""
    return replace(doc, id=content_id("document", "file", key), meta=doc.meta | {"path": key})


# --- finding files ----------------------------------------------------------


def _files(
    paths: Sequence[str | Path], errors: list[InputError], skipped: list[str]
) -> Iterator[tuple[Path, Path]]:
    """Yield the loadable files under ``paths`` in order, each with its ingest root
    (the folder walked, or the folder a file given alone is in); record the others."""
    for given in paths:
        path = Path(given)
        if path.is_dir():
            yield from ((found, path) for found in _walk(path, skipped, set()))
        elif not path.exists():
            errors.append(InputError(path.as_posix(), "no such file or directory"))
        elif not path.is_file():
            errors.append(InputError(path.as_posix(), "not a regular file"))
        elif path.suffix.lower() not in SUPPORTED:
            errors.append(InputError(path.as_posix(), _unsupported(path.suffix)))
        else:
            yield path, path.parent


def _walk(directory: Path, skipped: list[str], visited: set[Path]) -> Iterator[Path]:
    """Walk ``directory`` depth-first in name order, skipping hidden entries.

    ``visited`` holds resolved directories so a symlink loop ends the walk.
    """
    real = directory.resolve()
    if real in visited:
        return
    visited.add(real)
    for entry in sorted(directory.iterdir(), key=lambda p: p.name):
        if entry.name.startswith("."):
            continue
        if entry.is_dir():
            yield from _walk(entry, skipped, visited)
        elif entry.is_file():
            if entry.suffix.lower() in SUPPORTED:
                yield entry
            else:
                skipped.append(entry.as_posix())


def _unsupported(suffix: str) -> str:
    if not suffix:
        return f"unsupported file type: no extension {_EXPECTED}"
    return f"unsupported file type '{suffix}' {_EXPECTED}"


# --- reading ----------------------------------------------------------------


def _load_file(
    path: Path, warnings: list[InputError], pages: PageProgress | None = None
) -> list[Document]:
    """Documents of one file; raises InputError if any part of it is bad."""
    uri = path.as_posix()
    if path.suffix.lower() in FORMATS:
        tell = None if pages is None else lambda done, total: pages(uri, done, total)
        read = read_file(path, uri, tell)
        warnings.extend(InputError(uri, w) for w in read.warnings)
        return [read.document]
    text = _read_text(path, uri)
    suffix = path.suffix.lower()
    if suffix == ".txt":
        return [_document(path.stem, text, uri, {"source": path.name})]
    if suffix == ".md":
        return [_markdown_document(path, text, uri)]
    if suffix == ".json":
        return _json_documents(_parse_json(text, uri), path.name, uri)
    return _jsonl_documents(text, path.name, uri)


def _read_text(path: Path, uri: str) -> str:
    """The file's text: checked as bytes first, BOM stripped, newlines made ``\\n``."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise InputError(uri, (exc.strerror or str(exc)).lower()) from None
    if not data.strip():
        raise InputError(uri, "empty file")
    if b"\0" in data[:_BINARY_PROBE]:
        raise InputError(uri, "binary file")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        bad = data[exc.start]
        raise InputError(uri, f"not valid UTF-8 (byte 0x{bad:02x} at offset {exc.start})") from None
    text = text.removeprefix(_BOM).replace("\r\n", "\n").replace("\r", "\n")
    if not text.strip():
        raise InputError(uri, "empty file")
    return text


def _document(
    title: str,
    text: str,
    uri: str,
    meta: dict[str, Any],
    sections: tuple[tuple[int, tuple[str, ...]], ...] = (),
) -> Document:
    """A document whose id is the hash of its title and text."""
    doc_id = content_id("document", title, text)
    return Document(id=doc_id, title=title, text=text, uri=uri, meta=meta, sections=sections)


# --- markdown ---------------------------------------------------------------


def _markdown_document(path: Path, text: str, uri: str) -> Document:
    """One document whose heading lines lose their ``#`` marks and become sections."""
    body, headings = _parse_markdown(text)
    title = next((t for level, _, t in headings if level == 1), path.stem)
    sections: list[tuple[int, tuple[str, ...]]] = []
    stack: list[tuple[int, str]] = []
    for level, offset, heading in headings:
        while stack and stack[-1][0] >= level:
            stack.pop()
        stack.append((level, heading))
        sections.append((offset, tuple(t for _, t in stack)))
    return _document(title, body, uri, {"source": path.name}, tuple(sections))


def _parse_markdown(text: str) -> tuple[str, list[tuple[int, int, str]]]:
    """The text with ATX heading lines reduced to their titles, and the
    headings as (level, offset in that text, title). Fenced code is left alone."""
    out: list[str] = []
    headings: list[tuple[int, int, str]] = []
    fence: tuple[str, int] | None = None
    offset = 0
    for line in text.split("\n"):
        fence_match = _FENCE.match(line)
        if fence is not None:
            if _closes(fence, fence_match, line):
                fence = None
        elif fence_match:
            marks = fence_match.group(1)
            fence = (marks[0], len(marks))
        else:
            heading = _ATX.match(line)
            title = (heading.group(2) or "").strip() if heading else ""
            if heading and title:
                headings.append((len(heading.group(1)), offset, title))
                line = title
        out.append(line)
        offset += len(line) + 1
    return "\n".join(out), headings


def _closes(fence: tuple[str, int], match: re.Match[str] | None, line: str) -> bool:
    """Whether ``line`` closes the open code fence."""
    if match is None:
        return False
    marks = match.group(1)
    return marks[0] == fence[0] and len(marks) >= fence[1] and not line[match.end() :].strip()


# --- JSON and JSONL ---------------------------------------------------------


def _parse_json(text: str, uri: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        reason = f"invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}"
        raise InputError(uri, reason) from None
    except (ValueError, RecursionError) as exc:
        raise InputError(uri, f"invalid JSON: {exc}") from None


def _json_documents(obj: Any, source: str, uri: str) -> list[Document]:
    """Documents of a parsed ``.json`` file in any of the accepted layouts."""
    if _is_hotpot(obj):
        return [_hotpot_document(i, t, s, source, uri) for i, (t, s) in enumerate(obj.items())]
    if isinstance(obj, dict) and _RECORD_KEYS & obj.keys():
        records: list[Any] = [obj]
    elif isinstance(obj, list):
        records = obj
    else:
        raise InputError(uri, "no records" if obj == {} else LAYOUT_ERROR)
    if not records:
        raise InputError(uri, "no records")
    docs: list[Document] = []
    for i, record in enumerate(records):
        if not isinstance(record, dict) or not _RECORD_KEYS & record.keys():
            raise InputError(uri, LAYOUT_ERROR)
        docs.append(_record_document(record, f"record {i}", source, uri, i))
    return docs


def _jsonl_documents(text: str, source: str, uri: str) -> list[Document]:
    """Documents of a ``.jsonl`` file; errors name the 1-based line."""
    docs: list[Document] = []
    for lineno, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        label = f"line {lineno}"
        try:
            record = json.loads(line)
        except ValueError as exc:
            msg = exc.msg if isinstance(exc, json.JSONDecodeError) else str(exc)
            raise InputError(uri, f"{label}: invalid JSON: {msg}") from None
        if not isinstance(record, dict) or not _RECORD_KEYS & record.keys():
            raise InputError(uri, f"{label}: {LINE_LAYOUT_ERROR}")
        docs.append(_record_document(record, label, source, uri, len(docs)))
    return docs


def _is_hotpot(obj: Any) -> bool:
    """A non-empty ``{title: [sentence, ...]}`` object."""
    return (
        isinstance(obj, dict)
        and bool(obj)
        and all(
            isinstance(sents, list) and all(isinstance(s, str) for s in sents)
            for sents in obj.values()
        )
    )


def _hotpot_document(
    index: int, title: str, sentences: list[str], source: str, uri: str
) -> Document:
    """HotpotQA sentences carry their own leading spaces, so they join with ``""``."""
    text = "".join(sentences)
    if not text.strip():
        raise InputError(uri, f"record {index}: 'text' must be a non-empty string")
    return _document(title, text, f"{uri}#{index}", {"source": source})


def _record_document(
    record: dict[str, Any], label: str, source: str, file_uri: str, index: int
) -> Document:
    """A document from a ``{title, text}`` or ``{id, text, meta?, title?}`` record.

    ``label`` ("record 3", "line 4") says where the record is in error messages.
    """
    uri = f"{file_uri}#{index}"

    def bad(reason: str) -> InputError:
        return InputError(file_uri, f"{label}: {reason}")

    text = record.get("text")
    if not isinstance(text, str) or not text.strip():
        raise bad("'text' must be a non-empty string")
    raw_id = record.get("id")
    if raw_id is not None and (
        isinstance(raw_id, bool) or not isinstance(raw_id, (str, int)) or str(raw_id) == ""
    ):
        raise bad("'id' must be a non-empty string or an integer")
    title = record.get("title")
    if title is not None and not isinstance(title, str):
        raise bad("'title' must be a string")
    if raw_id is None and title is None:
        raise bad("needs an 'id' or a 'title'")
    meta = record.get("meta")
    if meta is not None and not isinstance(meta, dict):
        raise bad("'meta' must be an object")
    meta = {**(meta or {}), "source": source}
    if raw_id is None:
        return _document(title or "", text, uri, meta)
    sid = str(raw_id)
    doc_id = sid if sid.startswith("d:") else "d:" + sid
    return Document(id=doc_id, title=title or sid, text=text, uri=uri, meta=meta)
