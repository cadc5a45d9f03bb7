"""Start and stop the dashboard (or another Streamlit script) as a local server process.

For the real-browser tests and the load and memory benchmarks, which drive a live server: a free
port on 127.0.0.1, ``streamlit run`` headless, and a wait for Streamlit's health endpoint. Not
imported by the app itself.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Mapping, Sequence

__all__ = ["free_port", "start", "stop", "process_children", "process_tree", "ROOT"]

#: The repository root (the folder holding ``dashboard/``).
ROOT = Path(__file__).resolve().parents[1]


def free_port() -> int:
    """A TCP port nobody listens on right now (the OS picks it)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(log: Path, *, app: Path | None = None, env: Mapping[str, str] | None = None,
          timeout: float = 120.0, cwd: Path | None = None,
          flags: Sequence[str] = ("--browser.gatherUsageStats", "false")) -> tuple[subprocess.Popen, str]:
    """``streamlit run`` the dashboard (or ``app``, from its own folder) on a free port.

    Output goes to ``log``. Extra environment variables in ``env`` are added to this process's.
    ``cwd`` is the folder it is started from (default: the repository root, or ``app``'s folder);
    ``flags`` are more command-line options (``()``: only the port and headless mode, so that the
    settings come from the config files alone).
    Returns (process, base URL) once ``/_stcore/health`` answers 200.

    Raises
    ------
    RuntimeError
        The server exited or did not answer within ``timeout`` seconds; the message ends with the
        last 3,000 characters of its log.
    """
    port = free_port()
    script, folder = (ROOT / "dashboard" / "app.py", ROOT) if app is None else (app, app.parent)
    with open(log, "wb") as fh:
        proc = subprocess.Popen(
            [sys.executable, "-m", "streamlit", "run", str(script), "--server.headless", "true",
             "--server.port", str(port), *flags],
            cwd=folder if cwd is None else cwd, stdout=fh, stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})},
        )
    url = f"http://127.0.0.1:{port}"
    wait_healthy(proc, url, log, timeout)
    return proc, url


def wait_healthy(proc: subprocess.Popen, url: str, log: Path, timeout: float = 120.0) -> None:
    """Wait until the Streamlit server ``proc`` answers 200 on ``<url>/_stcore/health``.

    Raises
    ------
    RuntimeError
        The server exited or did not answer within ``timeout`` seconds (it is killed); the message
        ends with the last 3,000 characters of its ``log``.
    """
    deadline = time.time() + timeout
    while True:
        try:
            with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        if proc.poll() is not None or time.time() > deadline:
            proc.kill()
            raise RuntimeError(f"streamlit did not start; log:\n{Path(log).read_text()[-3000:]}")
        time.sleep(0.5)


def stop(proc: subprocess.Popen, timeout: float = 20.0) -> None:
    """Terminate the server, killing it if it has not exited after ``timeout`` seconds."""
    proc.terminate()
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def process_children() -> dict[int, list[int]]:
    """{parent pid: child pids} of every process, from Linux's ``/proc`` (empty elsewhere)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc") if os.path.isdir("/proc") else []:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(entry))
    return children


def process_tree(pid: int, children: dict[int, list[int]] | None = None) -> list[int]:
    """``pid`` and all its descendants (the server and, e.g., the processes it started)."""
    children = process_children() if children is None else children
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(children.get(p, []))
    return out
