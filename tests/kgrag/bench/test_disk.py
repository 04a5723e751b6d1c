"""Where a graph's bytes go: every byte of the version counted once, by part."""

from __future__ import annotations

from pathlib import Path

import pytest

from kgrag.bench.disk import where_bytes
from kgrag.errors import InputError


def test_every_byte_of_the_version_is_in_one_part(science_graph: Path) -> None:
    found = where_bytes(science_graph)
    folder = science_graph / "versions" / found["version"]
    on_disk = sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())
    assert found["bytes"] == on_disk == sum(found["parts"].values())
    parts = found["parts"]
    # a table with its indexes, a full-text table with its shadow tables, vectors by kind
    assert {"sqlite relations", "sqlite chunks_fts", "vectors chunks", "serving bm25"} <= set(parts)
    assert not any(p.endswith(("_data", "_idx", "_docsize")) for p in parts)
    assert list(parts.values()) == sorted(parts.values(), reverse=True)


def test_a_folder_that_is_no_graph_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="not a folder graph with a published version"):
        where_bytes(tmp_path)
