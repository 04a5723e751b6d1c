"""A local Neo4j for development and tests: the project's launcher
(``neo4j/src/main/java/kgrag/neo4j/Launcher.java``, built by ``make neo4j-build``)
runs Neo4j 5 Community with Bolt on 127.0.0.1 and authentication off.

    python neo4j/launcher.py start [HOME] [--port N]   # prints the URI last
    python neo4j/launcher.py stop [HOME]
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
BUILD = REPO / "neo4j" / "target"
HOME = REPO / "neo4j" / "data"  # git ignores it


def classpath() -> str:
    classes, lib = BUILD / "classes", BUILD / "lib"
    if not (classes / "kgrag" / "neo4j" / "Launcher.class").exists() or not lib.is_dir():
        raise RuntimeError("the Neo4j launcher is not built: run `make neo4j-build`")
    return f"{classes}{os.pathsep}{lib}{os.sep}*"


def start(
    home: Path = HOME,
    port: int = 0,
    heap_mib: int = 1024,
    timeout: float = 120.0,
    password: str | None = None,
) -> tuple[subprocess.Popen[bytes], str]:
    """Start a server on ``home`` in the background; (process, Bolt URI) once it answers.
    With ``password``, authentication is on and the user neo4j has that password."""
    env = {k: v for k, v in os.environ.items() if k != "KGRAG_NEO4J_AUTH_PASSWORD"}
    if password:
        env["KGRAG_NEO4J_AUTH_PASSWORD"] = password
    home.mkdir(parents=True, exist_ok=True)
    uri_file = home / "bolt.uri"
    uri_file.unlink(missing_ok=True)
    log = open(home / "neo4j.log", "ab")  # noqa: SIM115 - the child writes it
    proc = subprocess.Popen(
        [
            "java",
            f"-Xmx{heap_mib}m",
            "-XX:+UseSerialGC",
            "-cp",
            classpath(),
            "kgrag.neo4j.Launcher",
            str(home),
            str(port),
            "256",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        env=env,
    )
    log.close()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if uri_file.exists():
            (home / "neo4j.pid").write_text(f"{proc.pid}\n")
            return proc, uri_file.read_text().strip()
        if proc.poll() is not None:
            raise RuntimeError(f"Neo4j exited ({proc.returncode}); see {home / 'neo4j.log'}")
        time.sleep(0.2)
    proc.terminate()
    raise RuntimeError(f"Neo4j did not answer within {timeout:.0f} s; see {home / 'neo4j.log'}")


def stop(home: Path = HOME, timeout: float = 60.0) -> bool:
    """Stop the server started on ``home``; False if none was running."""
    pid_file = home / "neo4j.pid"
    if not pid_file.exists():
        return False
    pid = int(pid_file.read_text())
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        pid_file.unlink(missing_ok=True)
        return False
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if _exited(pid):
            break
        time.sleep(0.2)
    else:
        os.kill(pid, signal.SIGKILL)
    pid_file.unlink(missing_ok=True)
    return True


def _exited(pid: int) -> bool:
    """Whether ``pid`` has exited: gone, or a zombie that its parent (a test holding the
    server's ``Popen``, say) has not reaped yet, which signal 0 still reaches."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] == "Z"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="a local Neo4j for kgrag")
    ap.add_argument("action", choices=("start", "stop"))
    ap.add_argument("home", nargs="?", type=Path, default=HOME)
    ap.add_argument("--port", type=int, default=0, help="Bolt port (0: a free one)")
    args = ap.parse_args(argv)
    if args.action == "stop":
        print("stopped" if stop(args.home) else "no Neo4j was running there")
        return 0
    try:
        _, uri = start(args.home, args.port)
    except RuntimeError as exc:
        print(f"kgrag: error: {exc}", file=sys.stderr)
        return 1
    print(uri)
    return 0


if __name__ == "__main__":
    sys.exit(main())
