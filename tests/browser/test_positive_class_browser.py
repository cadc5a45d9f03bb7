"""Audit 12a in a real browser: an Excel export (';', decimal commas, '93,3%' scores, BOM, CRLF) whose
score column does not say which of the label's two values it is the probability of. The Data page
says so in its own words, shows "The score is the probability of:" beside the label and score columns,
and the file loads once a value is chosen."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from browser_ui import TIMEOUT_MS, no_exception, wait_idle

pytestmark = pytest.mark.browser


def _excel_file(tmp_path, n: int = 600):
    rng = np.random.default_rng(4)
    p = np.round(rng.beta(1.2, 2.5, n), 3)
    df = pd.DataFrame({"application_id": [f"A{i:05d}" for i in range(n)],
                       "loan_amount": [f"{v:.2f}".replace(".", ",") for v in rng.uniform(500, 50000, n)],
                       "approval_score": [f"{100 * v:.1f}".replace(".", ",") + "%" for v in p],
                       "decision": np.where(rng.random(n) < p, "approved", "denied")})
    path = tmp_path / "credit_excel.csv"
    path.write_bytes(df.to_csv(sep=";", index=False, lineterminator="\r\n").encode("utf-8-sig"))
    return path


def test_the_class_of_the_score_is_chosen_on_the_data_page(page, app_url, tmp_path):
    path = _excel_file(tmp_path)
    page.goto(app_url, wait_until="domcontentloaded")
    page.get_by_text("Bundled samples").wait_for(timeout=TIMEOUT_MS)
    wait_idle(page)
    page.locator('[data-testid="stFileUploader"] input[type="file"]').set_input_files(str(path))
    error = page.locator('[data-testid="stAlertContentError"]').first
    error.wait_for(timeout=TIMEOUT_MS)
    message = error.inner_text()
    assert "does not say which class 'approval_score' is the probability of" in message
    assert "positive_class" not in message and "The score is the probability of" in message
    wait_idle(page)
    box = page.locator('[data-testid="stSelectbox"]').filter(has_text="The score is the probability of:").first
    box.scroll_into_view_if_needed()
    box.click()
    page.get_by_role("option", name="approved", exact=True).click(timeout=TIMEOUT_MS)
    wait_idle(page)
    page.get_by_role("button", name="Read the file again with these choices").click()
    page.get_by_text("Loaded: credit_excel.csv").wait_for(timeout=TIMEOUT_MS)
    wait_idle(page)
    no_exception(page)
    text = page.locator('[data-testid="stMain"]').inner_text()
    assert "'approval_score' is written as percentages" in text
    assert "'approved' is class 1 (as asked" in text
