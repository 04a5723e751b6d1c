"""Text read from pixels, for scanned PDF pages and image files.

Two engines, neither of which downloads anything: Tesseract (the ``tesseract``
program, e.g. Debian's ``tesseract-ocr``), used when it is on the PATH, and the
``kgrag[ocr]`` extra (rapidocr-onnxruntime: its models ship inside the wheel).
Tesseract comes first: on English text it keeps the spaces between words that
RapidOCR's models drop, in half the time (docs/benchmarks.md, "Reading documents").
``KGRAG_OCR`` picks one (``tesseract``, ``rapidocr``) or turns OCR ``off``. Without
either a scanned page or an image gives one warning naming it and no text.
"""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import threading
from functools import lru_cache
from typing import Any

HINT = "install Tesseract (apt-get install tesseract-ocr) or pip install 'kgrag[ocr]'"
_LOCK = threading.Lock()


@lru_cache(maxsize=1)
def _engine() -> Any:
    from rapidocr_onnxruntime import RapidOCR

    return RapidOCR()


#: seconds one page may take in Tesseract
TIMEOUT = 120


def engine() -> str:
    """The OCR engine to use here: ``tesseract``, ``rapidocr`` or ``""`` (none)."""
    wanted = os.environ.get("KGRAG_OCR", "").lower()
    if wanted in ("off", "0", "false", "no"):
        return ""
    if wanted in ("", "tesseract") and shutil.which("tesseract"):
        return "tesseract"
    if wanted in ("", "rapidocr"):
        try:
            import rapidocr_onnxruntime  # noqa: F401
        except ImportError:
            return ""
        return "rapidocr"
    return ""


def available() -> bool:
    """Whether OCR can run here."""
    return bool(engine())


def read_text(image: Any) -> str:
    """The text of a PIL image, lines in reading order, paragraphs apart."""
    if engine() == "tesseract":
        return _tesseract(image)
    return _rapidocr(image)


def _tesseract(image: Any) -> str:
    buffer = io.BytesIO()
    image.convert("RGB").save(buffer, format="PNG")
    try:
        done = subprocess.run(
            ["tesseract", "stdin", "stdout"],
            input=buffer.getvalue(),
            capture_output=True,
            timeout=TIMEOUT,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return ""
    text = done.stdout.decode("utf-8", "replace")
    return "\n".join(line.rstrip() for line in text.strip().splitlines())


def _rapidocr(image: Any) -> str:
    """RapidOCR's boxes grouped into lines (top to bottom, then left to right), blank
    lines between blocks set apart by more than a line's height."""
    import numpy as np

    rgb = np.asarray(image.convert("RGB"))
    with _LOCK:
        result, _ = _engine()(rgb)
    boxes = []
    for box, text, _score in result or []:
        ys = [p[1] for p in box]
        xs = [p[0] for p in box]
        boxes.append((min(ys), max(ys), min(xs), str(text)))
    return _layout(boxes)


def _layout(boxes: list[tuple[float, float, float, str]]) -> str:
    """Boxes (top, bottom, left, text) grouped into lines and paragraphs."""
    lines: list[list[tuple[float, float, float, str]]] = []
    for box in sorted(boxes):
        middle = (box[0] + box[1]) / 2
        if lines and lines[-1][0][0] <= middle <= lines[-1][0][1]:
            lines[-1].append(box)
        else:
            lines.append([box])
    out: list[str] = []
    previous_bottom = None
    for line in lines:
        top = min(b[0] for b in line)
        height = max(b[1] - b[0] for b in line)
        if previous_bottom is not None and top - previous_bottom > height:
            out.append("")
        out.append(" ".join(b[3] for b in sorted(line, key=lambda b: b[2])))
        previous_bottom = max(b[1] for b in line)
    return "\n".join(out).replace("\n\n\n", "\n\n")
