"""Image files (.png, .jpg, .jpeg, .tif, .tiff): one image block per frame, its text
read by OCR when the ``ocr`` extra is installed.

A multi-page TIFF is paged, a frame a page. An image that decodes to more than
:data:`~ingest.documents.model.MAX_IMAGE_PIXELS` is refused before it is decoded.
"""

from __future__ import annotations

import io
import warnings as pywarnings
from pathlib import Path
from typing import Any

from kgrag.errors import InputError

from . import ocr
from .model import IMAGE, MAX_IMAGE_BYTES, MAX_IMAGE_PIXELS, MAX_PAGES, Block, Parsed

MIME = {".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg"}
MIME |= {".tif": "image/tiff", ".tiff": "image/tiff"}
#: the longest side of the copy kept for display when the file itself is too big
DISPLAY_SIDE = 1600


def read(path: Path, uri: str) -> Parsed:
    """The frames of an image file as image blocks."""
    from PIL import Image

    data = path.read_bytes()
    if not data:
        raise InputError(uri, "empty file")
    image = _open(data, uri)
    frames = getattr(image, "n_frames", 1)
    parsed = Parsed(paged=frames > 1, pages=frames if frames > 1 else 0)
    if frames > MAX_PAGES:
        parsed.warnings.append(f"{frames} frames: only the first {MAX_PAGES} were read")
    for index in range(min(frames, MAX_PAGES)):
        try:
            image.seek(index)
            frame = image.copy()
        except (OSError, ValueError, Image.DecompressionBombError) as exc:
            raise InputError(uri, f"cannot decode image frame {index + 1}: {exc}") from None
        block = Block(IMAGE, page=index + 1 if frames > 1 else 0, mime=MIME[path.suffix.lower()])
        block.data = data if frames == 1 and len(data) <= MAX_IMAGE_BYTES else _display(frame)
        if block.data is not data:
            block.mime = "image/png"
        block.ocr = _read(frame, index, frames, parsed.warnings)
        parsed.blocks.append(block)
    return parsed


def _open(data: bytes, uri: str) -> Any:
    from PIL import Image

    Image.MAX_IMAGE_PIXELS = MAX_IMAGE_PIXELS
    try:
        with pywarnings.catch_warnings():
            pywarnings.simplefilter("error", Image.DecompressionBombWarning)
            image = Image.open(io.BytesIO(data))
            width, height = image.size
            if width * height > MAX_IMAGE_PIXELS:
                raise Image.DecompressionBombError(f"Image size ({width * height} pixels)")
            image.load()
    except (Image.DecompressionBombError, Image.DecompressionBombWarning) as exc:
        raise InputError(
            uri, f"image too large to decode ({_size(exc)} pixels, limit {MAX_IMAGE_PIXELS:,})"
        ) from None
    except (OSError, ValueError, SyntaxError) as exc:
        raise InputError(uri, f"not a readable image ({exc})") from None
    return image


def _size(exc: BaseException) -> str:
    """The pixel count in Pillow's message ("Image size (N pixels) exceeds ...")."""
    text = str(exc)
    count = text.split("(")[1].split(" ")[0] if "(" in text else ""
    return f"{int(count):,}" if count.isdigit() else "?"


def _display(frame: Any) -> bytes:
    """A PNG copy of a frame, its longest side at most :data:`DISPLAY_SIDE`."""
    copy = frame.convert("RGB")
    copy.thumbnail((DISPLAY_SIDE, DISPLAY_SIDE))
    buffer = io.BytesIO()
    copy.save(buffer, format="PNG", optimize=True)
    return buffer.getvalue()


def _read(frame: Any, index: int, frames: int, warnings: list[str]) -> str:
    where = f"frame {index + 1}: " if frames > 1 else ""
    if not ocr.available():
        warnings.append(f"{where}no text read from the image: OCR is not installed ({ocr.HINT})")
        return ""
    text = ocr.read_text(frame)
    if not text.strip():
        warnings.append(f"{where}OCR found no text in the image")
    return text
