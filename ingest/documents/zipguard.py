"""Refuse an Office file before a library unzips it: not a zip, encrypted, or a zip bomb.

python-docx, python-pptx and openpyxl read their parts through :mod:`zipfile`, which
never inflates a member past its declared size; so the declared sizes in the central
directory bound what opening the file can cost, and checking them first is enough.
"""

from __future__ import annotations

import zipfile
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from kgrag.errors import InputError

from .model import MAX_UNZIPPED_BYTES

#: a member this large that compresses this well is a bomb, whatever the total
BOMB_RATIO = 1000
BOMB_MEMBER_BYTES = 50 * 1024 * 1024
#: the signature of an OLE compound file: a legacy .doc/.xls/.ppt, or an encrypted OOXML
_OLE_MAGIC = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"
_ENCRYPTED_MARK = "EncryptedPackage".encode("utf-16-le")
_OLE_PROBE = 1024 * 1024


def size_text(n: int) -> str:
    """``n`` bytes as a short figure a reader takes in at a glance (``3.2 GB``, ``600 MB``)."""
    for unit, scale in (("GB", 1024**3), ("MB", 1024**2), ("KB", 1024)):
        if n >= scale:
            value = n / scale
            figure = f"{value:.1f}" if value < 10 else f"{value:.0f}"
            return f"{figure.removesuffix('.0')} {unit}"
    return f"{n} bytes"


def check_zip(path: Path, uri: str, kind: str = "") -> None:
    """Raise :class:`InputError` unless ``path`` is a zip that is safe to open.

    ``kind`` names the expected format in the message (``.docx``; the file's own
    extension when empty). Refused: an empty file, a file that is not a zip (with a
    word on an encrypted or legacy Office file, which are OLE files, not zips), an
    encrypted member, members whose declared sizes add up to more than
    :data:`~ingest.documents.model.MAX_UNZIPPED_BYTES`, and a member over
    :data:`BOMB_MEMBER_BYTES` compressed more than :data:`BOMB_RATIO` to one.
    """
    kind = kind or path.suffix.lower() or "Office"
    try:
        if path.stat().st_size == 0:
            raise InputError(uri, "empty file")
        with zipfile.ZipFile(path) as archive:
            members = archive.infolist()
    except (zipfile.BadZipFile, EOFError, ValueError):
        raise InputError(uri, _not_zip_reason(path, kind)) from None
    except OSError as exc:
        raise InputError(uri, f"cannot read the file ({exc.strerror or exc})") from None
    total = 0
    for member in members:
        if member.flag_bits & 0x1:
            raise InputError(
                uri, f"not a readable {kind} file (member {member.filename!r} is encrypted)"
            )
        total += member.file_size
        ratio = member.file_size / max(member.compress_size, 1)
        if member.file_size > BOMB_MEMBER_BYTES and ratio > BOMB_RATIO:
            raise InputError(
                uri,
                f"member {member.filename!r} unzips to {size_text(member.file_size)} from "
                f"{size_text(member.compress_size)} (ratio {ratio:.0f}:1), a zip bomb",
            )
    if total > MAX_UNZIPPED_BYTES:
        raise InputError(
            uri,
            f"unzips to {size_text(total)}, over the {size_text(MAX_UNZIPPED_BYTES)} limit",
        )


#: what the Office libraries raise on a file that is a zip but not a sound document:
#: a missing part, malformed XML, a truncated member, a value out of range
BROKEN_FILE_ERRORS: tuple[type[BaseException], ...] = (
    KeyError,
    IndexError,
    ValueError,
    TypeError,
    AttributeError,
    NotImplementedError,
    RecursionError,
    SyntaxError,
    OSError,
    EOFError,
    zlib.error,
    zipfile.BadZipFile,
)


@contextmanager
def broken_file(uri: str, kind: str, *errors: type[BaseException]) -> Iterator[None]:
    """Turn a library's failure on a broken ``kind`` file into an :class:`InputError`.

    ``errors`` adds the library's own base errors to :data:`BROKEN_FILE_ERRORS`. The
    message keeps the library's words, which usually name the missing part.
    """
    try:
        yield
    except InputError:
        raise
    except (*BROKEN_FILE_ERRORS, *errors) as exc:
        detail = " ".join(str(exc.args[0] if exc.args else type(exc).__name__).split())
        detail = detail if len(detail) <= 200 else detail[:199] + "…"
        raise InputError(uri, f"not a valid {kind} file ({detail})") from None


def _not_zip_reason(path: Path, kind: str) -> str:
    """Why a file that should be a zip is not one, as precisely as its first bytes tell."""
    try:
        with path.open("rb") as f:
            head = f.read(_OLE_PROBE)
    except OSError:
        head = b""
    if head.startswith(_OLE_MAGIC) and _ENCRYPTED_MARK in head:
        return f"an encrypted (password-protected) {kind} file; save it without a password"
    if head.startswith(_OLE_MAGIC):
        return (
            f"not a valid {kind} file (not a zip archive but an OLE file: likely the legacy "
            "binary format, renamed)"
        )
    return f"not a valid {kind} file (not a zip archive)"
