"""Stopping long fits in a real browser: the Stop button, and a browser tab closed mid-fit.

Both start a PBR fit on the default sample (CIFAR-100, K = 100) with n_re = 9,800 rows (the 200 others test it: at least MIN_TEST_ROWS): its Monte
Carlo draws alone (10^8 numbers) take seconds, and the fit then runs for minutes on a CPU. Before
the fix the fit looked at Stop only every 10 optimiser iterations (after the draws and 10 warm-up
steps, i.e. many seconds here, and up to a minute in an L-BFGS line search), and the job of a
closed tab held the one-fit-at-a-time lock until Streamlit forgot the session (2 minutes or more).
"""

from __future__ import annotations

import time

import pytest
from browser_ui import wait_idle

pytestmark = [pytest.mark.browser]

TIMEOUT_MS = 90_000
#: How soon the page must show the stopped state after the click (the job stops within about a
#: second; the progress fragment polls every 0.5 s and then redraws the page).
STOPPED_WITHIN_MS = 5_000


def _number(page, label: str, value: int) -> None:
    box = page.get_by_role("spinbutton", name=label).first
    box.fill(str(value))
    box.press("Enter")
    wait_idle(page)


def _open_pbr(page, app_url: str, n_re: int, max_iter: int | None = None) -> None:
    """A new browser session on the PBR page (the default sample, CIFAR-100, loads by itself)."""
    page.goto(f"{app_url}/pbr", wait_until="domcontentloaded")
    page.get_by_role("heading", name="PBR recalibration", level=1).wait_for(timeout=TIMEOUT_MS)
    page.locator('[data-testid="stSidebar"]').get_by_text("CIFAR-100").first.wait_for(timeout=TIMEOUT_MS)
    wait_idle(page)
    _number(page, "Recalibration rows n_re", n_re)
    if max_iter is not None:
        page.get_by_text("Bound and fit settings").click()
        _number(page, "Max optimiser iterations (0 = default)", max_iter)


def _start_long_fit(page) -> None:
    page.get_by_role("button", name="Run", exact=True).click()
    page.get_by_role("button", name="Stop").wait_for(timeout=TIMEOUT_MS)


def test_stop_ends_a_long_pbr_fit_within_seconds(page, app_url):
    _open_pbr(page, app_url, n_re=9_800)
    _start_long_fit(page)
    page.wait_for_timeout(2_000)   # into the fit: drawing the Monte Carlo noise, or the warm-up
    clicked = time.monotonic()
    page.get_by_role("button", name="Stop").click()
    page.get_by_text("Stopped before anything finished").wait_for(timeout=STOPPED_WITHIN_MS)
    took = time.monotonic() - clicked
    wait_idle(page)
    assert page.locator('[data-testid="stException"]').count() == 0
    assert page.get_by_role("button", name="Run", exact=True).is_enabled(), f"stopped after {took:.1f} s"


def test_closing_the_tab_of_a_running_fit_frees_the_server_for_others(browser, app_url):
    """Session A starts a long fit and its tab is closed; session B's fit must then run within
    seconds, not wait minutes in line behind a fit nobody can see any more."""
    a = browser.new_context(viewport={"width": 1400, "height": 1000})
    page_a = a.new_page()
    _open_pbr(page_a, app_url, n_re=9_800)
    _start_long_fit(page_a)
    a.close()                                   # the tab of the running fit is closed
    closed = time.monotonic()
    b = browser.new_context(viewport={"width": 1400, "height": 1000})
    try:
        page_b = b.new_page()
        _open_pbr(page_b, app_url, n_re=9_800)
        page_b.get_by_role("button", name="Run", exact=True).click()
        # Running (its Stop button), not waiting in line (a Cancel button): A's job has seen the
        # closed tab (after a grace period of a few seconds for reconnects) and freed the lock.
        page_b.get_by_role("button", name="Stop").wait_for(timeout=30_000)
        running_after = time.monotonic() - closed
        assert page_b.locator('[data-testid="stException"]').count() == 0
        page_b.get_by_role("button", name="Stop").click()
        page_b.get_by_text("Stopped before anything finished").wait_for(timeout=TIMEOUT_MS)
        assert running_after < 30, running_after
    finally:
        b.close()
