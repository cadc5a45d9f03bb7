"""Build the project's wheel from a copy of the working tree and install it into a folder: what
`pip install pbr-calib` gives a user (tests/test_packaging.py, tests/browser/test_dashboard_command_browser.py).

The build runs on a copy (pyproject.toml, setup.py, MANIFEST.in, README.md, pbr_core, dashboard,
sample_data) so that it never writes build/ or *.egg-info into the shared working tree, and without
build isolation (no network needed: the setuptools of this environment builds it; ~6 s).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: What a wheel build reads from the repository.
SOURCES = ("pyproject.toml", "setup.py", "MANIFEST.in", "README.md", "pbr_core", "dashboard", "sample_data")


def build_wheel(folder: Path) -> Path:
    """The wheel built from a copy of the repository's sources, in ``folder``; skips the test when
    this environment has no setuptools to build with."""
    pytest.importorskip("setuptools", reason="building the wheel needs setuptools")
    src = folder / "src"
    src.mkdir(parents=True)
    for name in SOURCES:
        path = ROOT / name
        if path.is_dir():
            shutil.copytree(path, src / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copy2(path, src / name)
    out = folder / "dist"
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index",
                           "-q", str(src), "-w", str(out)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (wheel,) = out.glob("pbr_calib-*.whl")
    return wheel


def install_wheel(wheel: Path, target: Path) -> Path:
    """``pip install --no-deps --target target wheel``: the package as a user's site-packages holds
    it (the dependencies are this environment's)."""
    done = subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-index", "--no-compile", "-q",
                           "--target", str(target), str(wheel)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return target
