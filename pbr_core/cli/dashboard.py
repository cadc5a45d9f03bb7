"""``pbr-calib dashboard``: start the Streamlit dashboard that ships in the package.

The app is the ``dashboard`` package installed beside ``pbr_core`` (a clone's ``dashboard/``
folder, or the wheel's copy), started as ``streamlit run dashboard/app.py`` would be: its serving
settings are ``dashboard/.streamlit/config.toml`` beside the app, which Streamlit reads whatever
folder it is started from (:mod:`dashboard.serving` checks at every run that they took effect), and
its bundled samples are found by :func:`dashboard.state.sample_dir` in a clone and in a wheel.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

from pbr_core.cli._common import CLIError, EXIT_BAD_INPUT, EXIT_OK, EXIT_USAGE, shown_path

__all__ = ["app_path", "cmd_dashboard", "streamlit_command"]


def app_path() -> Path:
    """The dashboard's ``app.py``: the ``dashboard`` package importable beside ``pbr_core``.

    Raises CLIError when it is missing (a ``pbr_core`` copied without it) or when the ``dashboard``
    found is another project's package of that name (no ``app.py`` with the project's ``serving``
    module beside it)."""
    import importlib.util

    try:
        spec = importlib.util.find_spec("dashboard")
    except (ImportError, ValueError):
        spec = None
    folder = Path(next(iter(spec.submodule_search_locations))) if spec and spec.submodule_search_locations else None
    if folder is None or not (folder / "app.py").is_file() or not (folder / "serving.py").is_file():
        found = f" (found another package named dashboard at {shown_path(folder)})" if folder else ""
        raise CLIError("the pbr-calib dashboard is not installed with this pbr_core" + found + "; install the "
                       "pbr-calib package (pip install pbr-calib), or run from a clone of the repository",
                       EXIT_BAD_INPUT)
    return folder / "app.py"


def streamlit_command(app: Path, port: int) -> list[str]:
    """``python -m streamlit run app.py`` on ``port``, headless (the settings file says so too)."""
    return [sys.executable, "-m", "streamlit", "run", str(app), "--server.port", str(port),
            "--server.headless", "true"]


def cmd_dashboard(args: argparse.Namespace) -> int:
    """Run the dashboard in the foreground until it is stopped (Ctrl-C); returns Streamlit's exit code.

    On POSIX the process becomes Streamlit (``os.execve``): a service manager or a test that stops
    ``pbr-calib dashboard`` stops the server itself, with no orphan left behind."""
    app = app_path()
    env = dict(os.environ)
    if args.data_root is not None:
        root = Path(args.data_root).expanduser()
        if not root.is_dir():
            raise CLIError(f"--data-root {shown_path(root)}: not a folder on this machine", EXIT_USAGE)
        # The app reads the folder from the environment (dashboard.state.server_data_root); absolute,
        # so that it means the same folder whatever the server's working folder.
        env["PBR_CALIB_DATA_ROOT"] = str(root.resolve())
    import importlib.util

    # Looked up, not imported: pbr_core never imports Streamlit (the server process does).
    if importlib.util.find_spec("streamlit") is None:
        raise CLIError("the dashboard needs Streamlit, which is not installed; pip install pbr-calib installs it",
                       EXIT_USAGE)
    # The dashboard imports `dashboard.*` and `pbr_core`: make sure the folder holding both is on the
    # server's path (a clone run without an install of `dashboard`; harmless for a wheel's site-packages).
    top = str(app.parent.parent)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (top, env.get("PYTHONPATH", "")) if p)
    command = streamlit_command(app, args.port)
    print(f"pbr-calib: starting the dashboard on http://localhost:{args.port} (Ctrl-C stops it)", file=sys.stderr)
    sys.stderr.flush()
    sys.stdout.flush()
    if os.name == "posix":
        os.execve(sys.executable, command, env)
        return EXIT_OK  # not reached: execve does not return (unless replaced, as in the tests)
    return subprocess.call(command, env=env)
