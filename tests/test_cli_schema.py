"""``pbr-calib evaluate --format json`` against its JSON Schema (pbr_core/schemas/evaluate.schema.json):
real outputs validate, in memory and streamed, with every option that adds fields; a renamed or
unknown field anywhere fails; the schema's row fields are the library's table columns (issue 38)."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

jsonschema = pytest.importorskip("jsonschema", reason="the test extra's jsonschema (pip install -e '.[test]')")

from pbr_core.cli import main  # noqa: E402
from pbr_core.schemas import EVALUATE_SCHEMA, evaluate_schema  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "sample_data"


@pytest.fixture(scope="module")
def validator():
    schema = evaluate_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def _errors(validator, output: dict) -> list[str]:
    return [f"{'/'.join(map(str, e.absolute_path))}: {e.message[:300]}" for e in validator.iter_errors(output)]


@pytest.fixture(scope="module")
def outputs(tmp_path_factory) -> dict[str, dict]:
    """Real outputs of every shape (module scope: each command runs once)."""
    import contextlib
    import io

    def run(*argv) -> dict:
        buf, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(err):
            code = main([str(a) for a in argv] + ["--format", "json"])
        assert code in (0, 5), err.getvalue()
        return json.loads(buf.getvalue())

    kitti = SAMPLE / "kitti_random_forest.csv"
    adult = SAMPLE / "adult_gradient_boosting.csv.gz"
    return {
        "binary": run("evaluate", kitti),
        "binary, every option": run("evaluate", kitti, "--n-bins", "10", "--curve", "--libraries",
                                    "--fail-above", "0.07", "--require-below", "0.05"),
        "multiclass logits (NPZ, no column roles)": run("evaluate", SAMPLE / "cifar10_resnet110.npz"),
        "top label": run("evaluate", SAMPLE / "cifar10_resnet110_toplabel.csv", "--n-bins", "15"),
        "by two columns, gates": run("evaluate", adult, "--by", "sex", "--by", "race", "--max-group-gap", "0.01",
                                     "--fail-above", "0.5"),
        "by predicted class, gap gate": run("evaluate", kitti, "--by", "predicted class", "--max-group-gap", "0"),
        "slices": run("evaluate", adult, "--find-slices"),
        "streamed": run("evaluate", kitti, "--stream", "--quiet", "--n-bins", "10", "--curve", "--fail-above", "0.5"),
        "streamed, by and slices": run("evaluate", adult, "--stream", "--quiet", "--by", "sex", "--find-slices",
                                       "--max-group-gap", "0.5"),
    }


def test_real_outputs_validate(validator, outputs):
    for name, output in outputs.items():
        assert _errors(validator, output) == [], name
    # The shapes the fixture meant to cover are there.
    assert "gates" in outputs["by predicted class, gap gate"]
    assert [(g["gate"], g["status"]) for g in outputs["binary, every option"]["gates"]] == [
        ("fail_above", "undecided"), ("require_below", "failed")]
    assert outputs["slices"]["slices"]["rows"], "no slice row was validated"
    assert outputs["streamed, by and slices"]["groups"]["rows"]


@pytest.mark.parametrize("path", [
    ("ece",), ("corp_brier_mcb",), ("notes",),
    ("groups", "largest_gap", "gap"), ("groups", "rows", 0, "ece_corrected"), ("groups", "statements", "groups"),
    ("gates", 0, "status"), ("slices", "rows", 0, "held_up"), ("slices", "columns", 0, "cut"),
    ("libraries", 0, "convention"), ("slices", "diagrams", "*", 0, "accuracy"),
])
def test_a_renamed_field_fails(validator, outputs, path):
    """Renaming a field anywhere (top level, group rows, the gap, gates, slices, libraries,
    reliability bins) makes the output invalid: a program reading it learns at once."""
    source = next(o for o in outputs.values() if _has(o, path))
    output = copy.deepcopy(source)
    parent = output
    for key in path[:-1]:
        parent = parent[next(iter(parent))] if key == "*" else parent[key]
    parent[f"{path[-1]}_renamed"] = parent.pop(path[-1])
    assert _errors(validator, output), f"renaming {'/'.join(map(str, path))} still validates"


def _has(output, path) -> bool:
    node = output
    for key in path:
        if key == "*":
            if not isinstance(node, dict) or not node:
                return False
            node = node[next(iter(node))]
            continue
        try:
            node = node[key]
        except (KeyError, IndexError, TypeError):
            return False
    return True


def test_wrong_types_fail(validator, outputs):
    output = copy.deepcopy(outputs["binary"])
    output["ece"] = "0.07"
    assert _errors(validator, output)
    output = copy.deepcopy(outputs["by two columns, gates"])
    output["gates"][0]["status"] = "ok"
    assert _errors(validator, output)


def test_schema_rows_are_the_library_tables():
    """The row fields of the schema are the tables' own columns, so that a column added to or
    renamed in the library fails here before it reaches a user's CI."""
    from pbr_core import groups, slices
    from pbr_core.metrics import reliability_diagram

    defs = evaluate_schema()["$defs"]
    assert list(defs["group_row"]["properties"]) == groups.TABLE_COLUMNS
    assert list(defs["slice_row"]["properties"]) == slices.TABLE_COLUMNS
    for name in ("group_row", "slice_row", "largest_gap", "gate", "library", "groups", "slices", "bin"):
        assert defs[name]["additionalProperties"] is False and defs[name]["required"] == list(defs[name]["properties"])
    import numpy as np

    assert set(defs["bin"]["properties"]) >= set(reliability_diagram(np.array([0.2, 0.8]), np.array([0, 1]), n_bins=2))


def test_the_schema_ships_in_the_package():
    from importlib import resources

    path = resources.files("pbr_core.schemas").joinpath(EVALUATE_SCHEMA)
    assert path.is_file()
    assert json.loads(path.read_text())["title"] == "pbr-calib evaluate --format json"
    assert (ROOT / "pbr_core" / "schemas" / EVALUATE_SCHEMA).is_file()
