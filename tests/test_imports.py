"""The package has no import cycle (issue 11: "No import cycle in the package").

The graph is read from the source with :mod:`ast`, not from what Python happened to import: an edge
A -> B for every ``import`` / ``from ... import`` at module level of A (including those under
``if TYPE_CHECKING:`` or ``try:``, which still tie A to B in design, but not those inside a function
or class body, which run later) that names the pbr_core module B. ``from pkg import name`` is an
edge to ``pkg.name`` when that is a module, else to ``pkg``. Parent packages that Python imports
implicitly are not edges (importing ``pbr_core.gp.model`` runs ``pbr_core/__init__.py`` first, for
every module alike).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "pbr_core"


def _modules(root: Path, package: str) -> dict[str, Path]:
    """Dotted module name -> file, for every .py file of the package (``__init__`` as the package)."""
    out = {}
    for path in sorted((root / package).rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def _module_level(body: list[ast.stmt]):
    """Import statements run when the module is imported: the top level and the blocks of if / try /
    with / loops there, not function or class bodies."""
    for node in body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        else:
            for field in ("body", "orelse", "finalbody", "handlers"):
                for child in getattr(node, field, []) or []:
                    yield from _module_level([child] if isinstance(child, ast.stmt) else child.body)


def import_graph(root: Path = ROOT, package: str = PACKAGE) -> dict[str, set[str]]:
    """Module -> the package modules it imports at module level."""
    modules = _modules(root, package)
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        is_package = path.name == "__init__.py"
        edges: set[str] = set()
        for node in _module_level(ast.parse(path.read_text(encoding="utf-8"), str(path)).body):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                if node.level:
                    base = name.split(".") if is_package else name.split(".")[:-1]
                    base = base[: len(base) - (node.level - 1)]
                    source = ".".join(base + ([node.module] if node.module else []))
                else:
                    source = node.module or ""
                targets = [f"{source}.{alias.name}" if f"{source}.{alias.name}" in modules else source
                           for alias in node.names]
            for target in targets:
                # ``import pbr_core.gp.model`` names that module (the longest known prefix).
                while target and target not in modules:
                    target = target.rpartition(".")[0]
                if target and target != name:
                    edges.add(target)
        graph[name] = edges
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle as [a, b, ..., a], or None (depth-first search)."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        path.pop()
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state:
            found = visit(start)
            if found:
                return found
    return None


def test_the_graph_is_read_from_the_source() -> None:
    """The reader sees the imports it must see (or an empty graph would pass the next test)."""
    graph = import_graph()
    assert "pbr_core.gp.model" in graph["pbr_core.gp.predict"]
    assert "pbr_core.gp.training" in graph["pbr_core.gp.batch"]
    assert "pbr_core.metrics" in graph["pbr_core"]
    assert sum(len(v) for v in graph.values()) > 50


def test_find_cycle_finds_a_cycle() -> None:
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_a_type_checking_import_is_an_edge(tmp_path) -> None:
    """What made the cycle between gp.optimizers and gp.training: an import under TYPE_CHECKING."""
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.b import X\n")
    (pkg / "b.py").write_text("from . import a\n\ndef f():\n    from pkg import c\n")
    (pkg / "c.py").write_text("")
    graph = import_graph(tmp_path, "pkg")
    assert graph == {"pkg": set(), "pkg.a": {"pkg.b"}, "pkg.b": {"pkg.a"}, "pkg.c": set()}
    assert find_cycle(graph) == ["pkg.a", "pkg.b", "pkg.a"]


def test_pbr_core_has_no_import_cycle() -> None:
    cycle = find_cycle(import_graph())
    if cycle:
        pytest.fail("import cycle in pbr_core: " + " -> ".join(cycle))
