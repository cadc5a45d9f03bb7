"""The dashboard in a real browser: Streamlit server + headless Debian Chromium via Playwright.

What a person does first: open the app (the bundled sample loads), look at every page, upload their
own file. Each step checks that charts really render (plotly draws SVG) and that no exception box
or error is shown.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytestmark = pytest.mark.browser

TIMEOUT_MS = 60_000
ROOT = Path(__file__).resolve().parents[2]


def _wait_idle(page) -> None:
    """Wait until Streamlit has finished the current script run (the 'running' widget is gone)."""
    page.wait_for_selector('[data-testid="stApp"]', timeout=TIMEOUT_MS)
    page.wait_for_function(
        "() => !document.querySelector('[data-testid=\"stStatusWidget\"]')", timeout=TIMEOUT_MS
    )


def _assert_no_exception(page) -> None:
    exc = page.locator('[data-testid="stException"]')
    assert exc.count() == 0, exc.first.inner_text()


def _assert_plots_rendered(page, at_least: int = 1) -> None:
    page.wait_for_selector(".js-plotly-plot .main-svg", timeout=TIMEOUT_MS)
    charts = page.locator('[data-testid="stPlotlyChart"]')
    assert charts.count() >= at_least
    # Plotly drew real marks (bars/lines), not an empty frame.
    assert page.locator(".js-plotly-plot .trace").count() > 0


def _goto(page, url: str) -> None:
    page.goto(url, wait_until="domcontentloaded")
    _wait_idle(page)


def test_pages_render_on_bundled_sample(page, app_url):
    _goto(page, app_url)
    page.get_by_role("heading", name="Data").first.wait_for(timeout=TIMEOUT_MS)
    # The default sample is loaded on first start: its name shows in the sidebar and on the page
    # (waited for, not read at once: the page draws in steps on a busy machine).
    page.locator('[data-testid="stSidebar"]').get_by_text("CIFAR-100").first.wait_for(timeout=TIMEOUT_MS)
    page.locator('[data-testid="stMain"]').get_by_text("CIFAR-100").first.wait_for(timeout=TIMEOUT_MS)
    _wait_idle(page)
    _assert_no_exception(page)

    _goto(page, f"{app_url}/reliability")
    page.get_by_role("heading", name="Reliability").first.wait_for(timeout=TIMEOUT_MS)
    _assert_plots_rendered(page)
    assert "ECE" in page.locator('[data-testid="stMetric"]').first.inner_text() or \
        page.locator('[data-testid="stMetric"]').count() >= 4
    _assert_no_exception(page)

    _goto(page, f"{app_url}/bins")
    page.get_by_role("heading", name="Bins & bias").first.wait_for(timeout=TIMEOUT_MS)
    _assert_plots_rendered(page)
    _assert_no_exception(page)


def test_upload_a_file_then_see_it_everywhere(page, app_url, tmp_path: Path):
    # A real binary file of a real model (KITTI random forest), re-written as a user would upload it.
    src = Path(__file__).resolve().parents[2] / "sample_data" / "kitti_random_forest.csv"
    upload = tmp_path / "my_model_predictions.csv"
    upload.write_bytes(src.read_bytes())

    _goto(page, app_url)
    page.locator('[data-testid="stFileUploader"] input[type="file"]').set_input_files(str(upload))
    page.get_by_text("my_model_predictions.csv").first.wait_for(timeout=TIMEOUT_MS)
    _wait_idle(page)
    page.get_by_text("9,090").first.wait_for(timeout=TIMEOUT_MS)
    _assert_no_exception(page)

    # Navigate inside the same session (a new URL would start a new session with the default sample).
    page.locator('[data-testid="stSidebarNav"]').get_by_text("Reliability").click()
    page.get_by_role("heading", name="Reliability").first.wait_for(timeout=TIMEOUT_MS)
    _wait_idle(page)
    _assert_plots_rendered(page)
    assert "my_model_predictions.csv" in page.locator('[data-testid="stSidebar"]').inner_text()
    assert "9,090" in page.locator('[data-testid="stMain"]').inner_text()
    _assert_no_exception(page)


def test_bad_upload_shows_error_and_keeps_data(page, app_url, tmp_path: Path):
    bad = tmp_path / "broken.csv"
    rng = np.random.default_rng(0)
    p = rng.dirichlet(np.ones(3), size=20)
    lines = ["a,b,c,label"] + [f"{r[0]},{r[1]},{r[2]},{i % 3}" for i, r in enumerate(p)]
    lines[8] = "0.2,not-a-number,0.5,1"
    bad.write_text("\n".join(lines) + "\n")

    _goto(page, app_url)
    page.locator('[data-testid="stFileUploader"] input[type="file"]').set_input_files(str(bad))
    err = page.locator('[data-testid="stAlertContentError"]').first
    err.wait_for(timeout=TIMEOUT_MS)
    text = err.inner_text()
    assert "not-a-number" in text or "non-numeric" in text.lower() or "numeric" in text.lower()
    assert "b" in text  # the column is named
    _assert_no_exception(page)
    # The previously loaded sample is still there.
    page.locator('[data-testid="stSidebar"]').get_by_text("CIFAR-100").first.wait_for(timeout=TIMEOUT_MS)


def _replace_upload(page, path: Path) -> None:
    """Choose another file while one is in the uploader (no removal first), as a user does."""
    page.locator('[data-testid="stFileUploader"] input[type="file"]').set_input_files(str(path))
    page.wait_for_timeout(300)
    _wait_idle(page)
    page.wait_for_timeout(1200)  # the removal of the old file and the new upload are two requests
    _wait_idle(page)


def test_a_corrected_file_right_after_a_failed_one_is_loaded(page, app_url, tmp_path: Path):
    """After an error, choosing a corrected file (without removing the failed one) used to be lost in
    about 1 try in 4: the error box above the uploader disappeared when the failed file was removed,
    the uploader moved up, the browser re-created it, and the upload in flight vanished with it. A
    second error right after a first was swallowed the same way."""
    rows = ["a,b,c,label"] + [f"0.2,0.3,0.5,{i % 3}" for i in range(200)]
    good, bad, bad2 = tmp_path / "good.csv", tmp_path / "bad.csv", tmp_path / "bad2.csv"
    good.write_text("\n".join(rows) + "\n")
    bad.write_text("\n".join(rows[:5] + ["0.2,oops,0.5,1"] + rows[6:]) + "\n")
    bad2.write_text("\n".join(rows[:7] + ["0.2,0.3,0.5,9"] + rows[8:]) + "\n")
    _goto(page, app_url)
    page.locator('[data-testid="stSidebar"]').get_by_text("CIFAR-100").first.wait_for(timeout=TIMEOUT_MS)
    for attempt in range(4):
        page.locator('[data-testid="stFileUploader"] input[type="file"]').set_input_files(str(bad))
        page.get_by_text("Could not load").first.wait_for(timeout=TIMEOUT_MS)
        _wait_idle(page)
        # The uploader is the same element after the next file replaces the failed one (not re-created).
        page.evaluate("() => { window.__uploader = document.querySelector('[data-testid=\"stFileUploader\"]'); }")
        _replace_upload(page, bad2)
        assert page.evaluate("() => window.__uploader.isConnected"), f"the uploader was re-created (try {attempt})"
        main = page.locator('[data-testid="stMain"]').inner_text()
        assert "bad2.csv" in main and "outside the classes" in main, f"second error swallowed (try {attempt})"
        _replace_upload(page, good)
        main = page.locator('[data-testid="stMain"]').inner_text()
        assert "Loaded: good.csv" in main, f"the corrected file was ignored (try {attempt})"
        assert "Could not load" not in main  # the old failure message is gone
        _assert_no_exception(page)


def _outward_address() -> str | None:
    """This machine's address on its default network interface (no packet is sent), or None."""
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect(("192.0.2.1", 9))  # TEST-NET-1: only picks the route
            address = s.getsockname()[0]
        except OSError:
            return None
    return None if address.startswith("127.") else address


def test_the_server_answers_this_machine_only(app_url):
    """The app has no login: started with the README's command it must not listen on every interface."""
    import urllib.error
    import urllib.request

    port = int(app_url.rsplit(":", 1)[1])
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=5) as r:
        assert r.status == 200
    address = _outward_address()
    if address is None:
        pytest.skip("this machine has no network interface besides loopback")
    with pytest.raises(OSError):  # connection refused: nothing listens there
        urllib.request.urlopen(f"http://{address}:{port}/_stcore/health", timeout=5)


def test_audit_report_downloads_from_the_reliability_page(page, app_url, tmp_path: Path):
    """A plain audit ends in a report: on the Reliability page, at the B the user chose, the
    "Audit report (HTML)" download gives one self-contained file with the page's numbers, which opens
    in the browser with its charts drawn and nothing fetched from elsewhere."""
    import re

    _goto(page, f"{app_url}/reliability")
    page.get_by_role("heading", name="Reliability").first.wait_for(timeout=TIMEOUT_MS)
    _assert_plots_rendered(page)
    slider = page.get_by_role("slider", name="Number of bins B").first
    slider.focus()
    for _ in range(3):  # B = 21 (floor(10000^(1/3))) -> 18
        slider.press("ArrowLeft")
    # The page has redrawn at B = 18 when its ECE card shows pbr_core's ECE at 18 bins.
    import pbr_core

    preds = pbr_core.load_predictions(ROOT / "sample_data" / "cifar100_densenet121.npz")
    ece18 = f"{pbr_core.ece(preds.probs, preds.labels, 18):.4f}"
    page.locator('[data-testid="stMetric"]').filter(has_text="ECE").first.get_by_text(ece18).wait_for(timeout=TIMEOUT_MS)
    _wait_idle(page)
    page.wait_for_timeout(1500)  # a download armed by an earlier run is gone once the page has redrawn
    _wait_idle(page)
    interval = re.search(r"95% interval (\d\.\d{4}) – (\d\.\d{4})",
                         page.locator('[data-testid="stMain"]').inner_text()).groups()
    with page.expect_download(timeout=TIMEOUT_MS) as info:
        page.get_by_role("button", name="Audit report (HTML)").click()
    path = tmp_path / "audit.html"
    info.value.save_as(path)
    doc = path.read_text(encoding="utf-8")
    assert doc.startswith("<!DOCTYPE html>") and not re.search(r"<script[^>]*\bsrc=", doc)
    for part in ("cifar100_densenet121.npz", "10,000", "How the file was read", "B = 18 bins of equal width",
                 f"<td>{ece18}</td>", f"{interval[0]} – {interval[1]}", "Theorem 1 at B = 18", "Classwise ECE",
                 "Bins &amp; bias", "No recalibration has been run in this session yet."):
        assert part in doc, part
    # It opens offline: its three charts (reliability diagram, CORP diagram, ECE against B) draw, no script error.
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.route("http*://**", lambda route: route.abort())  # nothing may be fetched
    page.goto(path.as_uri(), wait_until="load")
    page.wait_for_selector(".js-plotly-plot .main-svg", timeout=TIMEOUT_MS)
    assert page.locator(".js-plotly-plot").count() == 3 and page.locator(".js-plotly-plot .trace").count() > 0
    assert errors == []
    assert page.get_by_role("heading", name="Calibration: the reliability diagram").count() == 1
