"""The repository itself: no absolute path of a machine in a tracked file."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: a home or workspace folder of a machine (home, root, work, Users at the root)
MACHINE_PATH = re.compile(r"(?<![\w.~-])/(?:" + "|".join(["home", "root", "work", "Users"]) + r")/")


def test_no_tracked_file_names_a_machine_path():
    listed = subprocess.run(
        ["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    found = []
    for name in listed:
        path = ROOT / name
        if not path.is_file() or path.stat().st_size > 2_000_000:
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue  # binary
        found += [f"{name}: {m.group(0)}" for m in MACHINE_PATH.finditer(text)]
    assert not found, found


def test_a_plain_install_brings_the_spacy_pipeline_ingest_needs():
    """``pip install kgrag`` then ``kgrag ingest`` works: the English pipeline is a
    dependency, not an extra (pyproject.toml, read as pip reads it)."""
    import tomllib

    from kgrag.text.nlp import AUTO_PIPELINES

    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    names = {re.split(r"[<>=!~ \[;]", d, maxsplit=1)[0].lower() for d in project["dependencies"]}
    pipelines = {p.replace("_", "-") for p in AUTO_PIPELINES}
    assert names & pipelines, (names, pipelines)
