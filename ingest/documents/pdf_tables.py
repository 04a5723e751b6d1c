"""Tables in PDF pages, by pdfplumber's table finder: it is the slow part of reading a
PDF, so it runs only on pages that draw enough lines to hold a ruled table."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from .model import TABLE, Block

#: a rule is a stroke at most this thick and at least this long, in points
RULE_THICKNESS = 2.5
RULE_LENGTH = 30.0
_SPACES = re.compile(r"\s+")


class TableFinder:
    """pdfplumber's table finder, opened on first use and only for pages that draw
    enough lines to hold a ruled table."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._pdf: Any = None

    def worth_asking(self, page: Any) -> bool:
        """Whether the page draws rules a table would: thin, long horizontal or
        vertical strokes, at least three horizontal ones or two each way (a plot's
        axes and ticks, or a lone underline, do not count)."""
        import pypdfium2.raw as raw

        across = down = 0
        for obj in page.get_objects(filter=(raw.FPDF_PAGEOBJ_PATH,), max_depth=2):
            left, bottom, right, top = obj.get_bounds()
            width, height = right - left, top - bottom
            if height <= RULE_THICKNESS and width >= RULE_LENGTH:
                across += 1
            elif width <= RULE_THICKNESS and height >= RULE_LENGTH:
                down += 1
            if across >= 3 or (across >= 2 and down >= 2):
                return True
        return False

    def find(self, index: int, page: Any) -> list[tuple[float, float, float, float, Block]]:
        """(top, bottom, x0, x1, table block) of each table of a page."""
        try:
            if self._pdf is None:
                import pdfplumber

                self._pdf = pdfplumber.open(self.path)
            plumb = self._pdf.pages[index]
            found = plumb.find_tables()
            out = []
            for table in found:
                rows = [[_cell(c) for c in row] for row in table.extract()]
                rows = [r for r in rows if any(r)]
                if len(rows) >= 2 and max(len(r) for r in rows) >= 2:
                    x0, top, x1, bottom = table.bbox
                    out.append((float(top), float(bottom), x0, x1, Block(TABLE, rows=rows)))
            plumb.close()  # its characters and layout: memory stays flat over a long file
            return out
        except Exception:  # noqa: BLE001 - the page's lines stay as text
            return []

    def close(self) -> None:
        if self._pdf is not None:
            self._pdf.close()


def _cell(value: Any) -> str:
    return _SPACES.sub(" ", str(value or "")).strip()
