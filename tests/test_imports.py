"""The package has no import cycle (issue 11: "No import cycle in the package"), hidden ones included
(issue 36: "three pairs import each other inside functions").

The graph is read from the source with :mod:`ast`, not from what Python happened to import: an edge
A -> B for every ``import`` / ``from ... import`` in A that names the pbr_core module B, at module level
(including those under ``if TYPE_CHECKING:`` or ``try:``, which still tie A to B in design) and, in
the full graph, inside function and class bodies too. An import deferred to the function that needs
it (torch, scikit-learn, scipy.optimize, Dask, a heavy pbr_core module: what a process should not pay
for at import) is fine when it goes down the layering; one that goes up closes a cycle that Python
only hides by running it later, and the full graph finds it. ``from pkg import name`` is an edge to
``pkg.name`` when that is a module, else to ``pkg``. Parent packages that Python imports implicitly
are not edges (importing ``pbr_core.gp.model`` runs ``pbr_core/__init__.py`` first, for every module
alike).
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


#: Deferred imports that go up the layering on purpose, each with its reason; the test fails when one
#: is no longer there (so the list cannot go stale) and for any other cycle.
ALLOWED_UPWARD: dict[tuple[str, str], str] = {
    ("pbr_core.groups", "pbr_core.slices"):
        "groups.find_slices, the documented alias of slices.find_slices (README, pbr-calib's help), "
        "next to calibration_by_group; the slices are built on groups' tests",
}


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


def _every_import(tree: ast.Module):
    """Every import statement of the module, function and class bodies included."""
    return (node for node in ast.walk(tree) if isinstance(node, (ast.Import, ast.ImportFrom)))


def import_graph(root: Path = ROOT, package: str = PACKAGE, *, deferred: bool = False) -> dict[str, set[str]]:
    """Module -> the package modules it imports at module level (with ``deferred``, also inside
    function and class bodies)."""
    modules = _modules(root, package)
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        is_package = path.name == "__init__.py"
        edges: set[str] = set()
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        for node in (_every_import(tree) if deferred else _module_level(tree.body)):
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
    # the full graph adds b's import inside a function
    assert import_graph(tmp_path, "pkg", deferred=True)["pkg.b"] == {"pkg.a", "pkg.c"}


def test_a_cycle_through_a_function_is_found(tmp_path) -> None:
    """What hid loading._tables <-> _vectors and stream._run <-> _dask: each half inside a function."""
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "low.py").write_text("def f():\n    from pkg.high import g\n    return g()\n")
    (pkg / "high.py").write_text("from pkg import low\n\nclass C:\n    def m(self):\n        import pkg.low\n")
    assert find_cycle(import_graph(tmp_path, "pkg")) is None
    graph = import_graph(tmp_path, "pkg", deferred=True)
    assert graph["pkg.low"] == {"pkg.high"}
    assert find_cycle(graph) == ["pkg.high", "pkg.low", "pkg.high"]


def test_the_full_graph_sees_deferred_imports() -> None:
    """Deferred imports that go down are read (torch-free, Dask-free, scikit-learn-free imports)."""
    graph = import_graph(deferred=True)
    assert "pbr_core.stream._dask" in graph["pbr_core.stream._run"]
    assert "pbr_core.alpha_selection" in graph["pbr_core.recalibrators.pbr_cv"]
    assert "pbr_core.gp.batch" in graph["pbr_core.recalibrators.gp"]


def test_pbr_core_has_no_import_cycle() -> None:
    cycle = find_cycle(import_graph())
    if cycle:
        pytest.fail("import cycle in pbr_core: " + " -> ".join(cycle))


def test_pbr_core_has_no_hidden_import_cycle() -> None:
    """No cycle when the imports inside functions count too, but for :data:`ALLOWED_UPWARD`."""
    graph = import_graph(deferred=True)
    for (low, high), why in ALLOWED_UPWARD.items():
        assert high in graph[low], f"{low} no longer imports {high} ({why}): remove it from ALLOWED_UPWARD"
        graph[low] = graph[low] - {high}
    cycle = find_cycle(graph)
    if cycle:
        pytest.fail("import cycle in pbr_core through imports inside functions: " + " -> ".join(cycle)
                    + " (an import deferred for speed must go down the layering)")


def test_importing_pbr_core_does_not_import_plotly() -> None:
    """The figures (pbr_core.plot) import plotly on first use only: the CLI and `import pbr_core` do
    not pay for it (issue 38), and the figures still come from the package's namespace."""
    import subprocess
    import sys

    code = ("import sys, pbr_core; assert 'plotly' not in sys.modules, 'plotly imported'; "
            "assert 'pbr_core.plot' not in sys.modules; f = pbr_core.plot.reliability; "
            "assert 'plotly' in sys.modules and f.__module__ == 'pbr_core.plot._api'")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr


def test_a_fit_from_arrays_imports_neither_pandas_nor_scikit_learn() -> None:
    """The first fit of a process (issue 40) pays torch's and gpytorch's imports and no more: fitting PBR
    from arrays imports neither pandas (~0.4 CPU s) nor scikit-learn (~1 s) nor plotly nor scipy (~0.15 s,
    scipy.special: the classical recalibrators call it through pbr_core._special); the readers
    still come from the package's namespace (`pbr_core.load_predictions`)."""
    import subprocess
    import sys

    code = ("import sys, numpy as np; from pbr_core.recalibrators import PBR; "
            "rng = np.random.default_rng(0); z = rng.normal(size=(60, 3)); y = rng.integers(0, 3, 60); "
            "PBR(alpha=0.5, device='cpu', max_iter=5).fit(z, y); "
            "heavy = [m for m in ('pandas', 'sklearn', 'plotly', 'scipy') if m in sys.modules]; assert not heavy, heavy; "
            "import pbr_core; f = pbr_core.load_predictions; assert 'pandas' in sys.modules and "
            "f.__module__ == 'pbr_core.loading'")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr


def test_the_library_imports_neither_streamlit_nor_the_dashboard() -> None:
    """docs/architecture.md: pbr_core computes, no Streamlit, never imports dashboard (inside functions
    included). The command that starts the app (pbr_core.cli.dashboard) finds Streamlit and the
    dashboard with importlib.util.find_spec, without importing either."""
    allowed: dict[str, set[str]] = {}
    found = {}
    for name, path in _modules(ROOT, PACKAGE).items():
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        roots = set()
        for node in _every_import(tree):
            modules = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if not node.level else []
            roots |= {m.split(".")[0] for m in modules} & {"streamlit", "dashboard"}
        if roots - allowed.get(name, set()):
            found[name] = sorted(roots)
    assert not found, f"pbr_core modules that import the front end: {found}"


def test_the_deferred_scipy_functions_are_scipys() -> None:
    """pbr_core._special calls scipy.special's own functions (same numbers bit for bit, ``axis`` and
    ``out`` passed through); only the import waits for the first call."""
    import numpy as np
    import scipy.special as sp

    from pbr_core import _special

    x = np.random.default_rng(0).normal(scale=30.0, size=(50, 7))
    for name in ("softmax", "log_softmax"):
        for axis in (None, 0, 1):
            np.testing.assert_array_equal(getattr(_special, name)(x, axis=axis), getattr(sp, name)(x, axis=axis))
    for name in ("expit", "log_expit", "gammaln"):
        np.testing.assert_array_equal(getattr(_special, name)(x), getattr(sp, name)(x))
        out = np.empty_like(x)
        assert getattr(_special, name)(x, out=out) is out
        np.testing.assert_array_equal(out, getattr(sp, name)(x))
