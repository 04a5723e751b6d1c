"""The build's memory helpers (ingest/progress.py)."""

from __future__ import annotations

import platform

import pytest

from ingest.progress import peak_mib, resident_mib
from kgrag.threads import _malloc_trim, give_back


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="glibc's malloc_trim only")
def test_free_pages_are_handed_back_through_glibc():
    trim = _malloc_trim()
    assert trim is not None
    held = [bytes(200) for _ in range(200_000)]  # ~45 MB of small blocks
    del held
    assert trim(0) in (0, 1)  # glibc: 1 when it released memory
    give_back()


def test_the_peak_is_at_least_the_resident_set_read():
    now = resident_mib()
    assert now > 0
    assert peak_mib() >= now
