"""The house's import rules, read from the source with ``ast``: no import circle, no
import that runs up the layers, and the CLI, the server and the adapters reach the
engine through its facade only (docs/architecture.md draws the layers)."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: each unit's layer, bottom (0) to top; a module may import its own unit or a lower layer
LAYERS: dict[str, int] = {
    "kgrag.types": 0,
    "kgrag.ids": 0,
    "kgrag.errors": 0,
    "kgrag.config": 0,
    "kgrag.threads": 0,
    "kgrag.whole_graph": 0,
    "kgrag.text": 0,
    "kgrag.encoders": 0,
    "kgrag.store": 1,
    "kgrag.rcp": 1,
    "kgrag.search": 2,
    "ingest": 2,
    "kgrag.retrieval": 3,
    "kgrag.engine": 4,
    "kgrag.server": 5,
    "kgrag.adapters": 6,
    "kgrag.bench": 6,
    "kgrag.cli": 7,
    "kgrag.__main__": 8,
}
#: the root package re-exports the facade and is part of it; old import paths kept
#: for users are part of what they point at
ALIASES = {
    "kgrag": "kgrag.engine",
    "kgrag.graph": "kgrag.search",
    "kgrag.evaluation": "kgrag.bench",
}
#: the bottom layer's units may import one another (the graph must still be acyclic)
SHARED_LAYER = 0
#: above the engine, only these units below may be imported: the facade and what it
#: returns, the RCP models, and the bottom layer
FACADE_USERS = ("kgrag.server", "kgrag.adapters", "kgrag.cli")
FACADE_REACH = ("kgrag.engine", "kgrag.rcp", "kgrag.server", "kgrag.adapters", "kgrag.bench")


def unit_of(module: str) -> str:
    """The longest unit in :data:`LAYERS` that ``module`` is, or is under."""
    if module in ALIASES:
        return ALIASES[module]
    parts = module.split(".")
    for n in range(len(parts), 0, -1):
        name = ".".join(parts[:n])
        if name in LAYERS:
            return name
    raise AssertionError(f"{module} belongs to no layer: add its package to LAYERS")


def modules(root: Path, packages: tuple[str, ...] = ("kgrag", "ingest")) -> dict[str, Path]:
    """Every module of ``packages`` under ``root``, by dotted name (a package by its own)."""
    found: dict[str, Path] = {}
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


def imports(name: str, path: Path, known: dict[str, Path]) -> Iterator[tuple[str, int]]:
    """The known modules ``name`` imports (at the top or inside a function), with lines."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(tree):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                origin = ".".join(base + ([node.module] if node.module else []))
            else:
                origin = node.module or ""
            targets = [f"{origin}.{a.name}" for a in node.names] or [origin]
            targets = [t if t in known else origin for t in targets]
        for target in targets:
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target and target != name:
                yield target, node.lineno


def edges(root: Path) -> dict[str, dict[str, int]]:
    known = modules(root)
    graph: dict[str, dict[str, int]] = {m: {} for m in known}
    for name, path in known.items():
        for target, line in imports(name, path, known):
            graph[name].setdefault(target, line)
    return graph


def circles(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def wrong_way(graph: dict[str, dict[str, int]]) -> list[str]:
    """Imports that run up the layers, across units of one layer, or past the facade."""
    bad = []
    for source, targets in sorted(graph.items()):
        here = unit_of(source)
        for target, line in sorted(targets.items()):
            there = unit_of(target)
            if here == there:
                continue
            up, down = LAYERS[here], LAYERS[there]
            where = f"{source} (line {line}) imports {target}"
            if down > up or (down == up and up != SHARED_LAYER):
                bad.append(f"{where}: {there} is not below {here}")
            elif here in FACADE_USERS and down > SHARED_LAYER and there not in FACADE_REACH:
                bad.append(f"{where}: {here} reaches the engine through kgrag.engine only")
    return bad


def test_the_package_has_no_import_circle():
    graph = edges(ROOT)
    assert len(graph) > 80 and sum(map(len, graph.values())) > 300  # the tree was read
    assert circles(graph) == []


def test_no_import_runs_up_the_layers_or_past_the_facade():
    assert wrong_way(edges(ROOT)) == []


def test_every_module_has_a_layer():
    for name in edges(ROOT):
        unit_of(name)


def _write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


def test_the_checks_find_a_circle_an_upward_import_and_a_reach_past_the_facade(tmp_path):
    """The rules fail where they should: on a small tree with one fault of each kind."""
    _write(
        tmp_path,
        {
            "kgrag/__init__.py": "",
            "kgrag/store/__init__.py": "",
            "kgrag/store/base.py": "def f():\n    from kgrag.search.local import g\n",
            "kgrag/search/__init__.py": "",
            "kgrag/search/local.py": "from ..store.base import f\n",
            "kgrag/cli/__init__.py": "",
            "kgrag/cli/main.py": "from kgrag.search import local\nfrom kgrag.engine import x\n",
            "kgrag/engine/__init__.py": "x = 1\n",
            "ingest/__init__.py": "",
        },
    )
    graph = edges(tmp_path)
    assert graph["kgrag.search.local"] == {"kgrag.store.base": 1}
    assert circles(graph) == [["kgrag.search.local", "kgrag.store.base"]]
    bad = wrong_way(graph)
    assert any("kgrag.store.base (line 2) imports kgrag.search.local" in b for b in bad)
    assert any("kgrag.cli.main (line 1)" in b and "through kgrag.engine" in b for b in bad)
    assert not any("imports kgrag.engine:" in b for b in bad)
