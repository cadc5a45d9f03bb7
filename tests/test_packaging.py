"""The wheel (`pip install pbr-calib`) holds the library, the CLI, the dashboard with its serving
settings, the bundled samples and the JSON Schema, and runs from an installed copy that is not the
clone: `pbr-calib dashboard` finds the app and its samples, `evaluate` validates against the
installed schema (issue 38)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from wheel_build import ROOT, build_wheel, install_wheel

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    return build_wheel(tmp_path_factory.mktemp("wheel"))


@pytest.fixture(scope="module")
def installed(wheel, tmp_path_factory) -> Path:
    return install_wheel(wheel, tmp_path_factory.mktemp("site"))


def test_the_wheel_holds_the_dashboard_the_samples_and_the_schema(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    expected = {"pbr_core/__init__.py", "pbr_core/cli/__init__.py", "pbr_core/cli/dashboard.py",
                "pbr_core/schemas/evaluate.schema.json", "dashboard/app.py", "dashboard/state.py",
                "dashboard/serving.py", "dashboard/texts.py", "dashboard/.streamlit/config.toml"}
    expected |= {f"dashboard/views/{p.name}" for p in (ROOT / "dashboard" / "views").glob("*.py")}
    expected |= {f"dashboard/sample_data/{p.name}" for p in (ROOT / "sample_data").iterdir() if p.is_file()}
    assert expected - names == set()
    assert not [n for n in names if "__pycache__" in n or n.startswith(("tests/", "sample_data/", "benchmarks/"))]
    # The samples are the repository's, byte for byte; the serving settings too.
    with zipfile.ZipFile(wheel) as z:
        assert z.read("dashboard/sample_data/kitti_random_forest.csv") == (ROOT / "sample_data" /
                                                                         "kitti_random_forest.csv").read_bytes()
        assert z.read("dashboard/.streamlit/config.toml") == (ROOT / "dashboard" / ".streamlit" /
                                                             "config.toml").read_bytes()
        meta = z.read(next(n for n in names if n.endswith(".dist-info/entry_points.txt"))).decode()
        requires = z.read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
    assert "pbr-calib = pbr_core.cli:main" in meta
    assert "Requires-Dist: streamlit" in requires and "jsonschema" in requires


def _run_installed(installed: Path, cwd: Path, *code: str) -> subprocess.CompletedProcess:
    """Python with only the installed copy of pbr_core / dashboard on its path (not the clone)."""
    env = {**os.environ, "PYTHONPATH": str(installed)}
    return subprocess.run([sys.executable, *code], cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


def test_the_installed_copy_finds_its_app_samples_and_schema(installed, tmp_path):
    probe = ("import json, dashboard.state as s, pbr_core, pbr_core.cli.dashboard as d, pbr_core.schemas as sc; "
             "print(json.dumps({'samples': str(s.SAMPLE_DIR), 'folder': s.sample_folder(), 'files': s.list_samples(), "
             "'app': str(d.app_path()), 'core': pbr_core.__file__, 'title': sc.evaluate_schema()['title']}))")
    done = _run_installed(installed, tmp_path, "-c", probe)
    assert done.returncode == 0, done.stderr[-3000:]
    got = json.loads(done.stdout.strip().splitlines()[-1])
    assert Path(got["samples"]) == installed / "dashboard" / "sample_data"
    # the Data page names the folder it reads, with its SOURCES.md (in a clone: sample_data)
    assert got["folder"] == "dashboard/sample_data" and (installed / got["folder"] / "SOURCES.md").is_file()
    assert got["files"][0] == "cifar100_densenet121.npz" and "kitti_random_forest.csv" in got["files"]
    assert Path(got["app"]) == installed / "dashboard" / "app.py"
    assert Path(got["core"]).is_relative_to(installed)
    assert got["title"] == "pbr-calib evaluate --format json"


def test_the_installed_cli_evaluates_a_bundled_sample_with_a_gate(installed, tmp_path):
    sample = installed / "dashboard" / "sample_data" / "kitti_random_forest.csv"
    done = _run_installed(installed, tmp_path, "-m", "pbr_core.cli", "evaluate", str(sample), "--fail-above", "0.05",
                          "--format", "json")
    assert done.returncode == 5, done.stderr[-3000:]
    assert json.loads(done.stdout)["gates"][0]["status"] == "failed"
    assert ("pbr-calib: calibration gate failed: the calibration error is above 0.05 beyond noise: ECE 0.0733"
            in done.stderr)


def test_the_sdist_carries_what_the_wheel_build_copies(wheel):
    """A wheel built from the source distribution (pip install pbr-calib without a wheel) gets the
    same samples, serving settings and schema: MANIFEST.in puts them in the sdist."""
    import tarfile

    src = wheel.parent.parent / "src"          # the copy build_wheel built from
    done = subprocess.run([sys.executable, "-c", "import sys; from setuptools import build_meta as b; "
                           "print(b.build_sdist(sys.argv[1]))", str(wheel.parent.parent / "sdist")],
                          cwd=src, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    (sdist,) = (wheel.parent.parent / "sdist").glob("pbr_calib-*.tar.gz")
    with tarfile.open(sdist) as tar:
        names = {n.split("/", 1)[1] for n in tar.getnames() if "/" in n}
    expected = {"setup.py", "pyproject.toml", "dashboard/.streamlit/config.toml", "pbr_core/schemas/evaluate.schema.json",
                *(f"sample_data/{p.name}" for p in (ROOT / "sample_data").iterdir() if p.is_file())}
    assert expected - names == set()
