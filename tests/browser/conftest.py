"""Real-browser fixtures: a live `streamlit run dashboard/app.py` server and headless Debian Chromium.

Playwright drives the system's `chromium` (Playwright's own browser download cannot work on the
machines this project is tested on). Without chromium or playwright the tests are skipped with a
reason, except in CI (env CI=true), where a missing browser is a failure.
"""

from __future__ import annotations

import os
import shutil

import pytest

from dashboard import local_server

CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def _unavailable(reason: str):
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"browser test prerequisites missing in CI: {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="session")
def app_url(tmp_path_factory):
    log = tmp_path_factory.mktemp("streamlit") / "server.log"
    try:
        proc, url = local_server.start(log, timeout=60)
    except RuntimeError as exc:
        pytest.fail(str(exc))
    yield url
    local_server.stop(proc, timeout=10)


@pytest.fixture(scope="session")
def browser():
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None:
        _unavailable("Debian's chromium is not installed (apt-get install -y chromium)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _unavailable("playwright is not installed (pip install -e '.[test]')")
    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=exe, headless=True, args=CHROMIUM_ARGS)
        yield b
        b.close()


@pytest.fixture
def page(browser):
    context = browser.new_context(viewport={"width": 1400, "height": 1000}, accept_downloads=True)
    pg = context.new_page()
    yield pg
    context.close()
