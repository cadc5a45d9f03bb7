"""``pbr-calib dashboard [--port N] [--data-root DIR]``: what it starts and what it refuses, without
starting a server (tests/browser/test_dashboard_command_browser.py starts it in a browser)."""

from __future__ import annotations

import os
import re
import shlex
import sys
from pathlib import Path

import pytest

from pbr_core.cli import EXIT_BAD_INPUT, EXIT_USAGE, build_parser, main
from pbr_core.cli import dashboard as cli_dashboard

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def execs(monkeypatch) -> list[tuple[str, list[str], dict[str, str]]]:
    """Record the os.execve that would replace the process by Streamlit, instead of running it."""
    calls: list = []

    def no_server(*args, **kwargs):
        raise AssertionError("subprocess.call: a server would have started")

    monkeypatch.setattr(cli_dashboard.subprocess, "call", no_server)
    monkeypatch.setattr(cli_dashboard.os, "execve", lambda path, argv, env: calls.append((path, argv, env)))
    monkeypatch.setattr(cli_dashboard.os, "name", "posix")
    return calls


def test_it_runs_the_packaged_app_with_streamlit_on_the_port(execs, capsys, monkeypatch):
    monkeypatch.delenv("PBR_CALIB_DATA_ROOT", raising=False)
    assert main(["dashboard", "--port", "8765"]) == 0
    (path, argv, env), = execs
    assert path == sys.executable
    assert argv == [sys.executable, "-m", "streamlit", "run", str(ROOT / "dashboard" / "app.py"), "--server.port",
                    "8765", "--server.headless", "true"]
    assert "PBR_CALIB_DATA_ROOT" not in env
    assert env["PYTHONPATH"].split(os.pathsep)[0] == str(ROOT)
    assert "http://localhost:8765" in capsys.readouterr().err


def test_data_root_becomes_the_apps_data_folder(execs, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "logs").mkdir()
    main(["dashboard", "--data-root", "logs"])
    (_, argv, env), = execs
    assert env["PBR_CALIB_DATA_ROOT"] == str((tmp_path / "logs").resolve())     # absolute
    assert argv[argv.index("--server.port") + 1] == "8501"


@pytest.mark.parametrize("argv, code, words", [
    (["--data-root", "/no/such/folder"], EXIT_USAGE, "--data-root /no/such/folder: not a folder on this machine"),
    (["--port", "0"], EXIT_USAGE, "expected a positive integer"),
    (["--port", "65536"], EXIT_USAGE, "expected a port number from 1 to 65535"),
])
def test_bad_options_are_refused(execs, capsys, argv, code, words):
    assert main(["dashboard", *argv]) == code
    assert words in capsys.readouterr().err and not execs


def test_a_missing_or_foreign_dashboard_package_is_named(execs, capsys, monkeypatch, tmp_path):
    foreign = tmp_path / "dashboard"
    foreign.mkdir()
    (foreign / "__init__.py").write_text("")

    class Spec:
        submodule_search_locations = [str(foreign)]

    import importlib.util

    monkeypatch.setattr(importlib.util, "find_spec", lambda name: Spec() if name == "dashboard" else None)
    assert main(["dashboard"]) == EXIT_BAD_INPUT
    err = capsys.readouterr().err
    assert "the pbr-calib dashboard is not installed with this pbr_core (found another package named dashboard" in err
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    assert main(["dashboard"]) == EXIT_BAD_INPUT and not execs


def test_the_readme_dashboard_commands_parse():
    text = (ROOT / "README.md").read_text()
    lines = [line.split("#", 1)[0].strip() for line in text.splitlines() if line.startswith("pbr-calib dashboard")]
    assert len(lines) >= 2
    for line in lines:
        args = build_parser().parse_args(shlex.split(line)[1:])
        assert args.command == "dashboard"
    assert re.search(r"`pip install pbr-calib`", text)
