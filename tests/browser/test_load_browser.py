"""Several people on the Reliability page at once, in real browsers: each sees the same numbers, the
expanders below the chart are drawn only when opened, and what one person opens or changes does not
reach the other. (How long the page takes under load is measured by benchmarks/bench_load.py.)"""

from __future__ import annotations

from pathlib import Path

import pytest

import pbr_core

pytestmark = pytest.mark.browser

TIMEOUT_MS = 90_000
ROOT = Path(__file__).resolve().parents[2]
CLASSWISE = "Classwise ECE (every class, not only the predicted one)"
SETTLED = """() => {
  const app = document.querySelector('[data-testid="stApp"]');
  return !!app && app.getAttribute('data-test-script-state') === 'notRunning'
    && !document.querySelector('[data-testid="stStatusWidget"]')
    && !!document.querySelector('.js-plotly-plot .main-svg');
}"""


def _settled(page) -> None:
    page.wait_for_function(SETTLED, timeout=TIMEOUT_MS)
    exc = page.locator('[data-testid="stException"]')
    assert exc.count() == 0, exc.first.inner_text()


def _card(page, label: str) -> str:
    card = page.locator('[data-testid="stMetric"]').filter(has_text=label).first
    card.wait_for(timeout=TIMEOUT_MS)
    return card.locator('[data-testid="stMetricValue"]').inner_text().strip()


def test_two_sessions_at_once_see_the_same_numbers_and_open_expanders_on_their_own(browser, app_url):
    preds = pbr_core.load_predictions(ROOT / "sample_data" / "cifar100_densenet121.npz")
    b = pbr_core.optimal_n_bins(preds.n)
    ece = f"{pbr_core.ece(preds.probs, preds.labels, b):.4f}"
    classwise = f"{pbr_core.classwise_ece(preds.probs, preds.labels, b):.4f}"

    contexts = [browser.new_context(viewport={"width": 1400, "height": 1000}) for _ in range(2)]
    try:
        pages = [c.new_page() for c in contexts]
        for pg in pages:  # both start before either has finished
            pg.goto(f"{app_url}/reliability", wait_until="commit")
        for pg in pages:
            _settled(pg)
            assert _card(pg, "ECE") == ece
            # Collapsed: the expanders are there, their tables are not (neither drawn nor sent).
            pg.get_by_text(CLASSWISE).first.wait_for(timeout=TIMEOUT_MS)
            assert pg.locator('[data-testid="stDataFrame"]').count() == 0
            assert "Classwise ECE (mean over classes)" not in pg.locator('[data-testid="stMain"]').inner_text()

        first, second = pages
        first.get_by_text(CLASSWISE).first.click()
        assert _card(first, "Classwise ECE (mean over classes)") == classwise
        first.locator('[data-testid="stDataFrame"]').first.wait_for(timeout=TIMEOUT_MS)
        _settled(first)

        # The other session is untouched: still collapsed, same numbers after a rerun of its own.
        second.get_by_text("Smoothed curve with its band").first.click()
        _settled(second)
        assert _card(second, "ECE") == ece
        assert second.locator('[data-testid="stDataFrame"]').count() == 0
        assert "Classwise ECE (mean over classes)" not in second.locator('[data-testid="stMain"]').inner_text()
    finally:
        for c in contexts:
            c.close()
