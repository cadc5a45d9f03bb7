"""Serving, on a live server (issue 34): started from another folder the dashboard keeps its safety
settings (it listens on this machine only and opens normally, which it refuses to do with Streamlit's
defaults), and a browser that reaches it under another name (DNS rebinding) gets a refusal."""

from __future__ import annotations

import shutil
import socket
from pathlib import Path

import pytest

from browser_ui import TIMEOUT_MS, wait_idle
from conftest import CHROMIUM_ARGS
from dashboard import local_server, texts

ROOT = Path(__file__).resolve().parents[2]


def _listening_addresses(port: int) -> set[str]:
    """The local addresses of the sockets listening on ``port`` (Linux /proc/net/tcp and tcp6)."""
    found = set()
    for table, width in (("/proc/net/tcp", 8), ("/proc/net/tcp6", 32)):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            local, state = line.split()[1], line.split()[3]
            address, hex_port = local.split(":")
            if state == "0A" and int(hex_port, 16) == port:  # 0A: LISTEN
                raw = bytes.fromhex(address)
                if width == 8:
                    found.add(socket.inet_ntop(socket.AF_INET, raw[::-1]))
                else:  # four little-endian 32-bit words
                    found.add(socket.inet_ntop(socket.AF_INET6, b"".join(raw[i:i + 4][::-1] for i in range(0, 16, 4))))
    return found


@pytest.fixture(scope="module")
def served_from_elsewhere(tmp_path_factory):
    """`streamlit run /abs/path/dashboard/app.py` started in an empty folder, with no settings on the
    command line but the port (and headless mode): what the issue did."""
    folder = tmp_path_factory.mktemp("elsewhere")
    proc, url = local_server.start(folder / "server.log", cwd=folder, flags=(), timeout=90)
    yield url
    local_server.stop(proc, timeout=10)


def test_started_from_another_folder_it_listens_on_this_machine_only_and_opens(served_from_elsewhere, page):
    port = int(served_from_elsewhere.rsplit(":", 1)[1])
    if not Path("/proc/net/tcp").exists():
        pytest.skip("needs Linux's /proc/net/tcp to see the listening address")
    addresses = _listening_addresses(port)
    assert addresses and addresses <= {"127.0.0.1", "::1"}, addresses  # before: 0.0.0.0 / :: (every interface)
    page.goto(served_from_elsewhere, wait_until="domcontentloaded")
    page.get_by_text("Bundled samples").wait_for(timeout=TIMEOUT_MS)  # not the refusal: the settings held
    wait_idle(page)
    assert page.get_by_text("started without its safety settings").count() == 0


def test_a_page_reaching_the_dashboard_under_another_name_is_refused(browser, app_url):
    """DNS rebinding: the attacker's name resolves to 127.0.0.1 (mapped here by Chromium's resolver
    rules); Streamlit's WebSocket accepts the connection, the app refuses to run."""
    port = app_url.rsplit(":", 1)[1]
    exe = shutil.which("chromium") or shutil.which("chromium-browser")  # as the browser fixture found it
    rebinding = browser.browser_type.launch(executable_path=exe, headless=True,
                                            args=[*CHROMIUM_ARGS, "--host-resolver-rules=MAP evil.example 127.0.0.1"])
    try:
        pg = rebinding.new_page()
        pg.goto(f"http://evil.example:{port}/", wait_until="domcontentloaded")
        refusal = texts.HOST_REFUSED.split(" *", 1)[0]  # "This dashboard does not answer to the address"
        pg.get_by_text(refusal).wait_for(timeout=TIMEOUT_MS)
        assert "evil.example" in pg.locator('[data-testid="stAlert"]').first.inner_text()
        assert pg.get_by_text("Bundled samples").count() == 0
        pg.goto(f"http://localhost:{port}/", wait_until="domcontentloaded")  # its own name still works
        pg.get_by_text("Bundled samples").wait_for(timeout=TIMEOUT_MS)
    finally:
        rebinding.close()
