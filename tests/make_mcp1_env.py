"""Make ``.venv/mcp1`` (or the folder named): a Python that sees every package of the
Python running this script, with the official MCP SDK's 1.x line in front of the 2.x
that the project installs. The tests run kgrag's MCP server, and a client, under each
major version with it. ``make install`` runs this; it needs pip's index (once)."""

from __future__ import annotations

import subprocess
import sys
import sysconfig
import venv
from pathlib import Path

SDK = "mcp>=1.10,<2"


def main(target: Path) -> None:
    base = sysconfig.get_path("purelib")
    venv.EnvBuilder(with_pip=False, clear=True).create(target)
    python = target / "bin" / "python"
    own = subprocess.check_output(
        [python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"], text=True
    ).strip()
    # processed at start-up after the folder's own packages: theirs come first
    (Path(own) / "_kgrag_base.pth").write_text(f"import site; site.addsitedir({base!r})\n")
    # pip (the base's) installs into this folder; it leaves the base's mcp 2.x alone
    done = subprocess.run(
        [python, "-m", "pip", "install", "-q", "--disable-pip-version-check", SDK],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        sys.exit(f"{target}: pip could not install {SDK}:\n{done.stdout}{done.stderr}")
    found = subprocess.check_output(
        [python, "-c", "from importlib.metadata import version; print(version('mcp'))"],
        text=True,
    ).strip()
    if not found.startswith("1."):
        sys.exit(f"{target}: mcp {found} is first on the path, not 1.x")
    print(f"{target}: mcp {found}")


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else ".venv/mcp1"))
