"""Issue 35 in a real browser: outcome columns with ordinary names (`won`, `diagnosis`) load, with the
decision in the notes, and two that could each be the label are asked about; the report renders the
pages' Markdown and, downloaded from another page, keeps the Groups section the user set up."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from browser_ui import TIMEOUT_MS, load_sample, nav, no_exception, wait_idle

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[2]
LESIONS = ["akiec", "bcc", "bkl", "df", "mel", "nv", "vasc", "other"]


def _upload(page, app_url: str, path: Path) -> None:
    page.goto(app_url, wait_until="domcontentloaded")
    page.get_by_text("Bundled samples").wait_for(timeout=TIMEOUT_MS)
    wait_idle(page)
    page.locator('[data-testid="stFileUploader"] input[type="file"]').set_input_files(str(path))


def test_outcomes_named_won_and_diagnosis_are_found_by_their_values(page, app_url, tmp_path):
    kitti = pd.read_csv(ROOT / "sample_data" / "kitti_random_forest.csv")
    won = tmp_path / "forecasts.csv"
    kitti.rename(columns={"label": "won", "p_positive": "p_dem"}).assign(
        race_id=[f"race-{i}" for i in range(len(kitti))]).to_csv(won, index=False)
    _upload(page, app_url, won)
    page.get_by_text("Loaded: forecasts.csv").wait_for(timeout=TIMEOUT_MS)
    wait_idle(page)
    main = page.locator('[data-testid="stMain"]')
    text = main.inner_text()
    assert "Could not load" not in text
    assert "Label column: 'won' (not named as a label, taken for its values" in text
    no_exception(page)

    k8 = pd.read_csv(ROOT / "sample_data" / "kitti_multiclass_random_forest.csv")
    lesions = k8.rename(columns={f"class_{k}": n for k, n in enumerate(LESIONS)})
    lesions["diagnosis"] = np.array(LESIONS)[lesions.pop("label").to_numpy()]
    path = tmp_path / "skin.csv"
    lesions.to_csv(path, index=False)
    page.locator('[data-testid="stFileUploader"] input[type="file"]').set_input_files(str(path))
    page.get_by_text("Loaded: skin.csv").wait_for(timeout=TIMEOUT_MS)
    wait_idle(page)
    text = main.inner_text()
    assert "Label column: 'diagnosis'" in text and "every value the name of a score column" in text
    no_exception(page)


def test_two_possible_outcomes_are_asked_about_and_the_choice_loads(page, app_url, tmp_path):
    kitti = pd.read_csv(ROOT / "sample_data" / "kitti_random_forest.csv")
    rng = np.random.default_rng(0)
    # Neither outcome is named after the score (a 'was_car' beside 'p_car' is taken by its name since audit 8)
    df = pd.DataFrame({"p_car": kitti["p_positive"], "first_reading": kitti["label"],
                       "second_reading": np.where(rng.random(len(kitti)) < 0.1, 1 - kitti["label"], kitti["label"])})
    path = tmp_path / "two.csv"
    df.to_csv(path, index=False)
    _upload(page, app_url, path)
    error = page.locator('[data-testid="stAlertContentError"]').first
    error.wait_for(timeout=TIMEOUT_MS)
    message = error.inner_text()
    assert "could each be the label" in message and "label_column=" not in message
    wait_idle(page)
    box = page.locator('[data-testid="stSelectbox"]').filter(has_text="Label column").first
    box.scroll_into_view_if_needed()
    box.click()
    page.get_by_role("option", name="first_reading", exact=True).click(timeout=TIMEOUT_MS)
    wait_idle(page)
    page.get_by_role("button", name="Read the file again with these choices").click()
    page.get_by_text("Loaded: two.csv").wait_for(timeout=TIMEOUT_MS)
    wait_idle(page)
    no_exception(page)


def test_the_report_renders_its_text_and_keeps_the_groups(page, app_url, tmp_path):
    """Groups by race, then the report from the Bins & bias page: its sentences are rendered (no
    `*falls*`, the two bias terms are list items) and its Groups section is there."""
    load_sample(page, app_url, "UCI Adult income", "UCI Adult income")
    nav(page, "Groups", "Groups")
    box = page.locator('[data-testid="stSelectbox"]').filter(has_text="Group by").first
    box.scroll_into_view_if_needed()
    box.click()
    page.get_by_role("option", name="race", exact=True).click(timeout=TIMEOUT_MS)
    wait_idle(page)
    page.locator('[data-testid="stMain"]').get_by_text("Largest gap").first.wait_for(timeout=TIMEOUT_MS)
    nav(page, "Bins & bias", "Bins & bias")
    page.wait_for_timeout(1500)  # a download armed by an earlier run is gone once the page has redrawn
    wait_idle(page)
    with page.expect_download(timeout=TIMEOUT_MS) as info:
        page.get_by_role("button", name="Audit report (HTML)").click()
    path = tmp_path / "report.html"
    info.value.save_as(path)
    page.route("http*://**", lambda route: route.abort())  # the report fetches nothing
    page.goto(path.as_uri(), wait_until="load")
    body = page.locator("body").inner_text()
    assert not re.search(r"\*\*\S|(?<![\w*])\*(true|falls|grows)\*", body)
    assert page.locator("em", has_text="falls").count() >= 1
    assert page.locator("li", has_text="binning bias").count() == 1
    assert page.locator("li", has_text="estimation bias").count() == 1
    assert page.get_by_role("heading", name="Calibration by group: race").count() == 1
