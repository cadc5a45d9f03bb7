"""Dashboard tests: the repository root must be importable as in `streamlit run dashboard/app.py`."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


@pytest.fixture(scope="session", autouse=True)
def _project_folder():
    """Run from the repository root, as `streamlit run dashboard/app.py` is: Streamlit reads the
    project's .streamlit/config.toml from the working folder (AppTest does not read the copy beside
    the app), and without its safety settings the app refuses to open (dashboard/serving.py)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(ROOT)
        yield


@pytest.fixture
def at():
    """The dashboard as a new browser session opens it (AppTest), its first run done without error.

    Test modules that need another start (a sample chosen, another page) define their own ``at``.
    """
    from streamlit.testing.v1 import AppTest

    app = AppTest.from_file(str(ROOT / "dashboard" / "app.py"), default_timeout=60)
    app.run()
    assert not app.exception, app.exception
    return app
