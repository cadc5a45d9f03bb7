"""Find the slices in a real browser (issue 39): a file built from the bundled Adult table with one
planted slice (women with a Bachelors degree, outcomes 15 points above the predictions), uploaded;
the Groups page's Find the slices names it, with its sentence, the guarantee and its diagram beside
the whole file's."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from browser_ui import nav, no_exception, wait_idle

pytestmark = pytest.mark.browser

TIMEOUT_MS = 90_000
ROOT = Path(__file__).resolve().parents[2]


def planted_frame() -> pd.DataFrame:
    df = pd.read_csv(ROOT / "sample_data" / "adult_gradient_boosting.csv.gz")
    planted = ((df["education"] == "Bachelors") & (df["sex"] == "Female")).to_numpy()
    p = df["p_gt50k"].to_numpy()
    q = np.where(planted, np.minimum(p + 0.15, 1.0), p)
    return df.assign(label=(np.random.default_rng(0).random(len(df)) < q).astype(int))


def test_find_the_slices_names_a_planted_slice(page, app_url, tmp_path):
    path = tmp_path / "planted_adult.csv"
    planted_frame().to_csv(path, index=False)
    page.goto(app_url, wait_until="domcontentloaded")
    page.get_by_text("Bundled samples").wait_for(timeout=TIMEOUT_MS)
    wait_idle(page)
    page.locator('[data-testid="stFileUploader"] input[type="file"]').set_input_files(str(path))
    page.get_by_text("Loaded: planted_adult.csv").wait_for(timeout=TIMEOUT_MS)
    wait_idle(page)
    nav(page, "Groups", "Groups")
    main = page.locator('[data-testid="stMain"]')
    button = main.get_by_role("button", name="Find the slices")
    button.scroll_into_view_if_needed()
    button.click()
    main.get_by_text("Predictions for education = Bachelors and sex = Female, on its").first.wait_for(timeout=TIMEOUT_MS)
    wait_idle(page)
    text = main.inner_text()
    # its figures are on its held-out rows, and the sentence says so
    after = text.split("Predictions for education = Bachelors and sex = Female, on its")[1]
    assert "held-out rows (of" in after[:60] and "points too low" in after[:120]
    assert "confirmed there" in text and "How the search is guarded" in text
    assert "names even one slice as miscalibrated when it is in fact calibrated is at most 5%" in text
    # the slice's diagram (its held-out rows) beside the whole file's
    main.get_by_text("The whole file").first.wait_for(timeout=TIMEOUT_MS)
    assert page.locator('[data-testid="stPlotlyChart"]').count() >= 4
    main.get_by_text("Does recalibration close the gap of").first.wait_for(timeout=TIMEOUT_MS)
    no_exception(page)
