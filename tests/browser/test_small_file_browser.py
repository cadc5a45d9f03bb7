"""A small real file on the recalibration pages, in a real browser (issue 35).

504 rows laid out like the audit's election forecasts (a text id, p_dem, won), with the real
probabilities and outcomes of 504 random rows of the bundled KITTI random forest. Before the fix the
PBR page proposed n_re = 503 and reported a 1-row test part as "Test ECE 0.0000, accuracy 100 %",
Compare ran 10 folds of 1 test row each and named a best method, and the recalibrated CSV was
written as "0, 1, label".
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from browser_ui import TIMEOUT_MS, nav, no_exception, wait_idle

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def forecasts(tmp_path_factory) -> Path:
    frame = pd.read_csv(ROOT / "sample_data" / "kitti_random_forest.csv")
    rows = np.sort(np.random.default_rng(0).choice(len(frame), size=504, replace=False))
    path = tmp_path_factory.mktemp("small") / "forecasts_504.csv"
    pd.DataFrame({"race_id": [f"race {i}" for i in range(504)], "p_dem": frame["p_positive"].to_numpy()[rows],
                  "won": frame["label"].to_numpy()[rows]}).to_csv(path, index=False)
    return path


def _upload(page, app_url: str, path: Path) -> None:
    page.goto(app_url, wait_until="domcontentloaded")
    page.get_by_text("Bundled samples").wait_for(timeout=TIMEOUT_MS)
    wait_idle(page)
    page.locator('[data-testid="stFileUploader"] input[type="file"]').set_input_files(str(path))
    page.locator('[data-testid="stSidebar"]').get_by_text(path.name, exact=True).wait_for(timeout=TIMEOUT_MS)
    wait_idle(page)
    no_exception(page)


def _number(page, label: str, value: int) -> None:
    box = page.get_by_role("spinbutton", name=label).first
    box.fill(str(value))
    box.press("Enter")
    wait_idle(page)


def _main(page) -> str:
    return page.locator('[data-testid="stMain"]').inner_text()


def test_pbr_page_leaves_a_test_part_worth_measuring_and_refuses_one_row(page, app_url, forecasts):
    _upload(page, app_url, forecasts)
    nav(page, "PBR", "PBR recalibration")
    assert page.get_by_role("spinbutton", name="Recalibration rows n_re").first.input_value() == "252"
    assert "Fit on 252 rows, test on 252 rows." in _main(page)
    assert page.locator('[data-testid="stAlertContentError"]').count() == 0
    assert page.get_by_role("button", name="Run", exact=True).is_enabled()
    _number(page, "Recalibration rows n_re", 503)
    error = page.locator('[data-testid="stAlertContentError"]').first.inner_text()
    assert "A test set of 1 row is too small to say anything" in error
    assert "Lower n_re to at most 360, so that at least 144 rows are left to test on." in error
    assert page.get_by_role("button", name="Run", exact=True).is_disabled()
    no_exception(page)


def test_compare_with_three_folds_names_no_best_method(page, app_url, forecasts):
    _upload(page, app_url, forecasts)
    nav(page, "Compare", "Compare recalibrators")
    assert page.get_by_role("spinbutton", name="Recalibration rows n_re").first.input_value() == "252"
    select = page.locator('[data-testid="stMultiSelect"]').first
    select.get_by_role("button", name="Remove PBR").click()  # the GP fit: slow, not needed here
    wait_idle(page)
    _number(page, "Folds", 3)
    page.get_by_role("button", name="Run the comparison").click()
    page.get_by_text("Test metrics, mean ± std over folds").wait_for(timeout=TIMEOUT_MS)
    wait_idle(page)
    main = _main(page)
    assert "252 test rows per fold" in main
    assert "With 3 folds no difference between methods can be shown" in main
    assert "Green = best mean" not in main and "Each method against the uncalibrated model" not in main
    no_exception(page)


def test_fit_and_apply_download_keeps_the_files_column_names(page, app_url, forecasts):
    _upload(page, app_url, forecasts)
    nav(page, "Fit & apply", "Fit & apply")
    assert "checks on the 151 held-out rows" in _main(page)  # 30 %: 20 % would be 101 rows
    page.get_by_role("button", name="Fit", exact=True).click()
    page.get_by_text("Result: Temperature scaling").wait_for(timeout=TIMEOUT_MS)
    wait_idle(page)
    scope = page.locator(".st-key-ship_dl_predictions")
    with page.expect_download(timeout=TIMEOUT_MS) as info:
        scope.get_by_role("button", name="Calibrated predictions (CSV)").click()
    header = Path(info.value.path()).read_text().splitlines()[0]
    assert header == "race_id,p_dem,won,used_for_fit"
    no_exception(page)
