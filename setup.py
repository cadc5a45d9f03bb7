"""Build step that pyproject.toml cannot say: the wheel's dashboard carries the bundled samples.

The samples live in ``sample_data/`` at the top of the repository (the README's examples, the
tests and the scripts name them there), which is no package. A wheel built from here copies them
into ``dashboard/sample_data/``, where :func:`dashboard.state.sample_dir` finds them once installed
(``pip install pbr-calib`` then ``pbr-calib dashboard``). An editable install (``pip install -e .``)
copies nothing: the app then reads ``sample_data/`` of the clone. Everything else is in pyproject.toml.
"""

from __future__ import annotations

from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent
SAMPLES = HERE / "sample_data"


class BuildWithSamples(build_py):
    """``build_py`` plus the sample files (and their SOURCES.md: origin and license) under dashboard/."""

    def run(self) -> None:
        super().run()
        if getattr(self, "editable_mode", False) or not SAMPLES.is_dir():
            return
        target = Path(self.build_lib) / "dashboard" / "sample_data"
        self.mkpath(str(target))
        for path in sorted(SAMPLES.iterdir()):
            if path.is_file() and not path.name.startswith("."):
                self.copy_file(str(path), str(target / path.name))


setup(cmdclass={"build_py": BuildWithSamples})
