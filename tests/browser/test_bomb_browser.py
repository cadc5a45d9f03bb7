"""A row bomb uploaded in a real browser gets a message, and another person's session keeps working
(issue 34: a 2 MB .csv.gz of 1 GiB took the server from 1.1 GB to 11 GB, every session lost).

The server runs with its read limits scaled down 64 times through the administrator's environment
variables, so that the bomb is 9 KB expanding to 6 MB (1 million rows) and the test stays fast; the
memory at the issue's sizes is measured by benchmarks/bench_bombs.py.
"""

from __future__ import annotations

import urllib.request
from pathlib import Path

import pytest

import bombs
import pbr_core
from dashboard import local_server
from browser_ui import TIMEOUT_MS, no_exception, wait_idle

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[2]
SETTLED = """() => {
  const app = document.querySelector('[data-testid="stApp"]');
  return !!app && app.getAttribute('data-test-script-state') === 'notRunning'
    && !document.querySelector('[data-testid="stStatusWidget"]')
    && !!document.querySelector('.js-plotly-plot .main-svg');
}"""


@pytest.fixture(scope="module")
def small_limits_url(tmp_path_factory):
    log = tmp_path_factory.mktemp("streamlit_bombs") / "server.log"
    env = {"PBR_CALIB_MAX_READ_BYTES": "16MB", "PBR_CALIB_MAX_READ_MEMORY": "32MB", "PBR_CALIB_MAX_CELL_BYTES": "2KB",
           "PBR_CALIB_UPLOAD_STREAM_ROWS": "100000"}
    try:
        proc, url = local_server.start(log, env=env, timeout=60)
    except RuntimeError as exc:
        pytest.fail(str(exc))
    yield url
    local_server.stop(proc, timeout=10)


def _card(page, label: str) -> str:
    card = page.locator('[data-testid="stMetric"]').filter(has_text=label).first
    card.wait_for(timeout=TIMEOUT_MS)
    return card.locator('[data-testid="stMetricValue"]').inner_text().strip()


def test_a_row_bomb_gets_a_message_while_another_session_keeps_working(browser, small_limits_url, tmp_path):
    bomb = bombs.csv_gz_rows(tmp_path / "predictions.csv.gz", 1_000_000)
    assert bomb.stat().st_size < 16 * 1024
    preds = pbr_core.load_predictions(ROOT / "sample_data" / "cifar100_densenet121.npz")
    ece = f"{pbr_core.ece(preds.probs, preds.labels, pbr_core.optimal_n_bins(preds.n)):.4f}"

    contexts = [browser.new_context(viewport={"width": 1400, "height": 1000}) for _ in range(2)]
    try:
        uploader, other = (c.new_page() for c in contexts)
        other.goto(f"{small_limits_url}/reliability", wait_until="domcontentloaded")
        other.wait_for_function(SETTLED, timeout=TIMEOUT_MS)
        assert _card(other, "ECE") == ece

        uploader.goto(small_limits_url, wait_until="domcontentloaded")
        uploader.get_by_text("Bundled samples").wait_for(timeout=TIMEOUT_MS)
        wait_idle(uploader)
        uploader.locator('[data-testid="stFileUploader"] input[type="file"]').set_input_files(str(bomb))

        # While the upload is being read, the other person changes the number of bins and is served.
        slider = other.get_by_role("slider", name="Number of bins B").first
        slider.focus()
        slider.press("ArrowLeft")  # B = 21 (floor(10000^(1/3))) -> 20
        ece20 = f"{pbr_core.ece(preds.probs, preds.labels, 20):.4f}"
        other.locator('[data-testid="stMetric"]').filter(has_text="ECE").first.get_by_text(ece20).wait_for(
            timeout=TIMEOUT_MS)
        other.wait_for_function(SETTLED, timeout=TIMEOUT_MS)
        no_exception(other)

        error = uploader.locator('[data-testid="stAlertContentError"]').filter(has_text="predictions.csv.gz")
        error.first.wait_for(timeout=TIMEOUT_MS)
        text = error.first.inner_text()
        assert "it is too large to read in memory" in text and "1,000,000 data rows" in text
        assert "The bundled sample shown at start" in text  # a fresh session: the start-up sample stays (audit 8)
        wait_idle(uploader)
        no_exception(uploader)
        sidebar = uploader.locator('[data-testid="stSidebar"]').inner_text()
        assert "CIFAR-100" in sidebar and "predictions.csv.gz" not in sidebar  # the data before stays

        other.locator('[data-testid="stSidebarNav"]').get_by_text("Bins & bias", exact=True).click()
        other.get_by_role("heading", name="Bins & bias", level=1).wait_for(timeout=TIMEOUT_MS)
        other.wait_for_function(SETTLED, timeout=TIMEOUT_MS)
        no_exception(other)
        with urllib.request.urlopen(f"{small_limits_url}/_stcore/health", timeout=10) as r:
            assert r.status == 200
    finally:
        for c in contexts:
            c.close()
