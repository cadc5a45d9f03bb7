"""The dashboard's import direction (docs/architecture.md, "Import direction inside the dashboard"):
its modules in layers, each importing only its own layer or those below, with no cycle, counting the
imports inside functions too (issue 36). Read from the source as tests/test_imports.py reads pbr_core."""

from __future__ import annotations

import pytest

from test_imports import ROOT, find_cycle, import_graph

#: Lowest first; the architecture document lists the same.
LAYERS: list[set[str]] = [
    {"dashboard", "texts", "figures", "figures_corp", "fit_estimate", "settings_ui", "report_markdown", "serving",
     "memory", "load_cache", "local_server", "sections"},
    {"state", "runs", "sessions"},
    {"compute", "figures_recal", "jobs"},
    {"tables"},
    {"report"},
    {"audit"},
    {"recal_ui"},
    {"app", "views.*", "sections.*"},  # the pages and the sections they draw
]


def _layer(module: str) -> int:
    name = module.removeprefix("dashboard.") if module != "dashboard" else module
    for i, layer in enumerate(LAYERS):
        if name in layer or any(p.endswith(".*") and name.startswith(p[:-1]) for p in layer):
            return i
    raise AssertionError(f"{module} is in no layer: add it to LAYERS and to docs/architecture.md")


@pytest.fixture(scope="module")
def graph() -> dict[str, set[str]]:
    return import_graph(ROOT, "dashboard", deferred=True)


def test_the_dashboards_graph_is_read(graph) -> None:
    assert "dashboard.texts" in graph["dashboard.tables"]
    assert "dashboard.runs" in graph["dashboard.jobs"]
    assert "dashboard.sections.sweep" in graph["dashboard.views.compare"]


def test_no_cycle_in_the_dashboard(graph) -> None:
    cycle = find_cycle(graph)
    assert cycle is None, "import cycle in the dashboard: " + " -> ".join(cycle)


def test_every_module_imports_only_its_layer_or_below(graph) -> None:
    upward = [f"{a} -> {b}" for a, targets in graph.items() for b in targets if _layer(b) > _layer(a)]
    assert not upward, f"imports that go up the dashboard's layers: {upward}"


def test_the_architecture_document_lists_the_same_layers() -> None:
    """docs/architecture.md names the layers in the same order (the pages and sections as `views/`,
    `sections/`)."""
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    para = text[text.index("Import direction inside the dashboard"):]
    para = para[:para.index("\n\n")]
    steps = [step for step in para.split("←")]
    assert len(steps) == len(LAYERS)
    for step, layer in zip(steps, LAYERS):
        names = {n.removesuffix(".*") for n in layer} - {"dashboard", "sections"} | ({"sections"} if "sections.*" in layer else set())
        missing = [n for n in names if f"`{n}" not in step]
        assert not missing, f"docs/architecture.md's layer {step.strip()[:40]!r}... lacks {missing}"
