"""`pbr-calib dashboard --port P` in a real browser, from the clone and from an installed wheel (issue 38).

Each test starts the command itself (not `streamlit run`), from a folder that is not the repository
(so the serving settings come from the config beside the app, as for a user of the wheel), waits for
Streamlit's health endpoint, and checks that the app loads the bundled default sample (CIFAR-100)
with no exception and without the unsafe-settings refusal. The wheel test runs with only the
installed copy of pbr_core and dashboard on the path: its samples come from the wheel.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from browser_ui import TIMEOUT_MS, no_exception, wait_idle
from wheel_build import build_wheel, install_wheel

from dashboard import local_server

pytestmark = [pytest.mark.browser]

ROOT = Path(__file__).resolve().parents[2]


def _start(command: list[str], cwd: Path, env: dict[str, str], log: Path, port: int,
           timeout: float = 120.0) -> subprocess.Popen:
    with open(log, "wb") as fh:
        proc = subprocess.Popen(command, cwd=cwd, env=env, stdout=fh, stderr=subprocess.STDOUT)
    try:
        local_server.wait_healthy(proc, f"http://127.0.0.1:{port}", log, timeout)
    except RuntimeError as exc:
        pytest.fail(f"pbr-calib dashboard did not start: {exc}")
    return proc


def _cmdline(proc: subprocess.Popen) -> list[str]:
    return Path(f"/proc/{proc.pid}/cmdline").read_bytes().decode(errors="replace").split("\0")


def _sees_the_default_sample(page, port: int) -> None:
    page.goto(f"http://localhost:{port}", wait_until="domcontentloaded")
    page.get_by_role("heading", name="Data").first.wait_for(timeout=TIMEOUT_MS)
    page.locator('[data-testid="stSidebar"]').get_by_text("CIFAR-100").first.wait_for(timeout=TIMEOUT_MS)
    page.get_by_text("Bundled samples").first.wait_for(timeout=TIMEOUT_MS)
    wait_idle(page)
    no_exception(page)


def test_pbr_calib_dashboard_from_the_clone(page, tmp_path):
    port = local_server.free_port()
    exe = shutil.which("pbr-calib")
    # The console script where it is installed, else the same entry point through python -m.
    command = [exe] if exe else [sys.executable, "-m", "pbr_core.cli"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = _start([*command, "dashboard", "--port", str(port), "--data-root", str(tmp_path)], tmp_path, env,
                  tmp_path / "server.log", port)
    try:
        _sees_the_default_sample(page, port)
        # The server is Streamlit itself (the command execs it): stopping it stops the dashboard.
        assert _cmdline(proc)[1:4] == ["-m", "streamlit", "run"]
        assert _cmdline(proc)[4] == str(ROOT / "dashboard" / "app.py")
    finally:
        local_server.stop(proc, timeout=10)
    assert proc.returncode is not None


def test_pbr_calib_dashboard_from_an_installed_wheel(page, tmp_path):
    site = install_wheel(build_wheel(tmp_path / "build"), tmp_path / "site")
    assert not (site / "sample_data").exists()           # the samples are the dashboard package's own copy
    port = local_server.free_port()
    work = tmp_path / "work"
    work.mkdir()
    env = {**os.environ, "PYTHONPATH": str(site)}
    proc = _start([sys.executable, "-m", "pbr_core.cli", "dashboard", "--port", str(port)], work, env,
                  tmp_path / "server.log", port)
    try:
        _sees_the_default_sample(page, port)
        assert _cmdline(proc)[4] == str(site / "dashboard" / "app.py")    # the wheel's app, not the clone's
    finally:
        local_server.stop(proc, timeout=10)
    assert "Traceback" not in (tmp_path / "server.log").read_text()
