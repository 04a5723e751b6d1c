"""Word list numbering: the marker a list paragraph shows, as Word would draw it.

A numbered paragraph names a numbering instance (``w:numId``) and a level
(``w:ilvl``); the instance's abstract definition gives each level a format
(``decimal``, ``lowerLetter``, ``upperRoman``, ``bullet``, ...), a start value and
a level text such as ``%1.`` or ``%1.%2)``. Counters run per instance: a level counts
up, and every deeper level starts again. A bullet, or a format not known here, reads
``-``.
"""

from __future__ import annotations

import re
from typing import Any

W = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
NS = {"w": W}
_PLACE = re.compile(r"%([1-9])")
_ROMAN = (
    (1000, "m"), (900, "cm"), (500, "d"), (400, "cd"), (100, "c"), (90, "xc"),
    (50, "l"), (40, "xl"), (10, "x"), (9, "ix"), (5, "v"), (4, "iv"), (1, "i"),
)  # fmt: skip
BULLET = "-"


def _attr(el: Any, path: str) -> str | None:
    found = el.find(path, NS)
    return None if found is None else found.get(f"{{{W}}}val")


def _int(value: str | None, default: int) -> int:
    return int(value) if value is not None and value.lstrip("-").isdigit() else default


def roman(n: int) -> str:
    out = []
    for value, letters in _ROMAN:
        while n >= value:
            out.append(letters)
            n -= value
    return "".join(out)


def letters(n: int) -> str:
    """1 -> a, 26 -> z, 27 -> aa (Word repeats the letter)."""
    return chr(ord("a") + (n - 1) % 26) * ((n - 1) // 26 + 1) if n > 0 else str(n)


def number(value: int, fmt: str) -> str | None:
    """``value`` in the format ``fmt``; None for a bullet or an unknown format."""
    if fmt in ("decimal", "decimalZero"):
        return f"{value:02d}" if fmt == "decimalZero" and value < 10 else str(value)
    if fmt in ("lowerLetter", "upperLetter"):
        text = letters(value)
        return text.upper() if fmt == "upperLetter" else text
    if fmt in ("lowerRoman", "upperRoman") and value > 0:
        text = roman(value)
        return text.upper() if fmt == "upperRoman" else text
    return None


class Numbering:
    """The numbering definitions of one Word document and the running counters."""

    def __init__(self, document: Any) -> None:
        #: numId -> level -> (format, start, level text)
        self.levels: dict[str, dict[int, tuple[str, int, str]]] = {}
        self.counts: dict[str, dict[int, int]] = {}
        try:
            root = document.part.numbering_part.element
        except (KeyError, NotImplementedError, AttributeError):
            return  # no numbering part: every list reads as bullets
        abstract: dict[str, dict[int, tuple[str, int, str]]] = {}
        for definition in root.findall("w:abstractNum", NS):
            levels = {}
            for lvl in definition.findall("w:lvl", NS):
                levels[_int(lvl.get(f"{{{W}}}ilvl"), 0)] = (
                    _attr(lvl, "w:numFmt") or "decimal",
                    _int(_attr(lvl, "w:start"), 1),
                    _attr(lvl, "w:lvlText") or "",
                )
            abstract[definition.get(f"{{{W}}}abstractNumId", "")] = levels
        for num in root.findall("w:num", NS):
            self.levels[num.get(f"{{{W}}}numId", "")] = abstract.get(
                _attr(num, "w:abstractNumId") or "", {}
            )

    def marker(self, num_id: str | None, level: int) -> str:
        """The marker of the next paragraph of instance ``num_id`` at ``level``."""
        levels = self.levels.get(num_id or "", {})
        fmt, start, text = levels.get(level, ("bullet", 1, ""))
        if number(start, fmt) is None:
            return BULLET
        counts = self.counts.setdefault(num_id or "", {})
        counts[level] = counts.get(level, start - 1) + 1
        for deeper in [d for d in counts if d > level]:
            del counts[deeper]

        def value(match: re.Match[str]) -> str:
            at = int(match.group(1)) - 1
            lfmt, lstart, _ = levels.get(at, ("decimal", 1, ""))
            return number(counts.get(at, lstart), lfmt) or ""

        drawn = _PLACE.sub(value, text).strip() if text else f"{counts[level]}."
        return drawn or BULLET
