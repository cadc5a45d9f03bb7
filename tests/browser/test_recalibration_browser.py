"""The Recalibration pages in a real browser: run fits through the UI and download the results.

Uses the CIFAR-10 sample (10 classes: small GP fits), temperature scaling on the Compare page and a
tiny PBR fit (150 rows, 10 optimiser iterations) on the PBR page; the downloads are parsed.
Navigation stays inside one browser session (a new URL would start a new session).
"""

from __future__ import annotations

import io
import json
import re

import pandas as pd
import pytest
from browser_ui import load_sample, nav, no_exception, wait_idle

from dashboard import runs

pytestmark = pytest.mark.browser

TIMEOUT_MS = 90_000
SAMPLE = "CIFAR-10 · ResNet-110 (logits, 10 classes, npz)"


def _number(page, label: str, value: int) -> None:
    box = page.get_by_role("spinbutton", name=label).first
    box.fill(str(value))
    box.press("Enter")
    wait_idle(page)


def _download(page, label: str, key: str | None = None) -> bytes:
    """Click the download button ``label`` (the one with widget ``key`` when given) and read the file."""
    scope = page.locator(f".st-key-{key}") if key else page
    with page.expect_download(timeout=TIMEOUT_MS) as info:
        scope.get_by_role("button", name=label).click()
    path = info.value.path()
    with open(path, "rb") as fh:
        return fh.read()


def _load_cifar10(page, app_url: str) -> None:
    load_sample(page, app_url, SAMPLE, "CIFAR-10 · ResNet-110")


def test_compare_temperature_and_download_the_table(page, app_url):
    _load_cifar10(page, app_url)
    nav(page, "Compare", "Compare recalibrators")
    select = page.locator('[data-testid="stMultiSelect"]').first
    for chip in ("PBR", "Isotonic regression (top label)"):  # keep the two fast defaults
        select.get_by_role("button", name=f"Remove {chip}").click()
        wait_idle(page)
    chips = select.locator("[title]").evaluate_all("els => els.map(e => e.title).filter(Boolean)")
    assert chips == ["Uncalibrated", "Temperature scaling"]
    _number(page, "Recalibration rows n_re", 300)
    _number(page, "Folds", 6)  # MIN_PAIRED_FOLDS: fewer folds get no paired tests (they could show nothing)
    page.get_by_role("button", name="Run the comparison").click()
    page.get_by_text("Test metrics, mean ± std over folds").wait_for(timeout=TIMEOUT_MS)
    wait_idle(page)
    page.wait_for_selector('[data-testid="stPlotlyChart"] .main-svg', timeout=TIMEOUT_MS)
    no_exception(page)
    table = pd.read_csv(io.BytesIO(_download(page, "Results table (CSV, every fold)")))
    assert len(table) == 12 and set(table["method"]) == {"uncalibrated", "temperature"}
    assert {"ece", "accuracy", "nll", "brier", "fold"} <= set(table.columns)
    assert table["ece"].between(0, 1).all()
    t = table.groupby("method")["ece"].mean()
    assert t["temperature"] < t["uncalibrated"]  # ResNet-110 is over-confident; T-scaling helps
    # Whether a smaller mean is a real difference: the paired tests over folds, named.
    main = page.locator('[data-testid="stMain"]').inner_text()
    assert "Is the difference real? Paired tests over folds" in main and "Compare A" in main
    report = _download(page, "Session report (HTML)").decode()
    assert "Paired tests over folds" in report and "Wilcoxon signed-rank test" in report


def test_pbr_small_fit_and_download_predictions_and_recalibrator(page, app_url):
    _load_cifar10(page, app_url)
    nav(page, "PBR", "PBR recalibration")
    # The device is named (waited for: on a loaded machine the page draws in steps).
    page.locator('[data-testid="stMain"]').get_by_text(re.compile(r"\b(CPU|GPU)\b")).first.wait_for(timeout=TIMEOUT_MS)
    _number(page, "Recalibration rows n_re", 150)
    page.get_by_text("Bound and fit settings").click()
    _number(page, "Max optimiser iterations (0 = default)", 10)
    page.get_by_role("button", name="Run", exact=True).click()
    page.get_by_text("What the PAC-Bayes bounds guarantee").wait_for(timeout=TIMEOUT_MS)
    wait_idle(page)
    no_exception(page)
    page.wait_for_selector('[data-testid="stPlotlyChart"] .main-svg', timeout=TIMEOUT_MS)
    main = page.locator('[data-testid="stMain"]').inner_text()
    assert "KL(ρ‖π)" in main and "Corollary 1" in main and "Corollary 2" in main
    # What the bounds are: an average over the posterior, and which kind of prior they rest on.
    assert "E_ρ |TCE − recalibration ECE|" in main
    assert "Approximate: prior fitted on the same rows" in main
    assert "on average over the draws" in main or "Vacuous here" in main
    assert page.locator('[data-testid="stPlotlyChart"]').count() == 2
    preds = pd.read_csv(io.BytesIO(_download(page, "Calibrated predictions (CSV)")))
    assert preds.shape == (10_000, 12) and "labels" in preds.columns  # the NPZ's own name for them
    assert preds[runs.FIT_ROWS_COLUMN].sum() == 150  # the rows the recalibrator was fitted on are marked
    probs = preds.drop(columns=["labels", runs.FIT_ROWS_COLUMN]).to_numpy()
    assert ((probs >= 0) & (probs <= 1)).all() and abs(probs.sum(axis=1) - 1).max() < 1e-6
    saved = json.loads(_download(page, "Fitted recalibrator (JSON)"))
    assert saved["format"] == "pbr-calib-recalibrator" and saved["method"] == "pbr" and saved["n_classes"] == 10
    report = _download(page, "Session report (HTML)").decode()
    assert report.startswith("<!DOCTYPE html>") and "CIFAR-10" in report and "Plotly.newPlot" in report


def test_fit_download_then_upload_and_apply_the_recalibrator(page, app_url, tmp_path):
    """Fit & apply page: fit temperature scaling, download its JSON, upload that file, apply it."""
    _load_cifar10(page, app_url)
    nav(page, "Fit & apply", "Fit & apply")
    page.get_by_role("button", name="Fit", exact=True).click()
    page.get_by_text("Result: Temperature scaling").wait_for(timeout=TIMEOUT_MS)
    wait_idle(page)
    no_exception(page)
    assert "the 2,000 held-out rows" in page.locator('[data-testid="stMain"]').inner_text()
    saved = _download(page, "Fitted recalibrator (JSON)")
    doc = json.loads(saved)
    assert doc["method"] == "temperature" and doc["n_classes"] == 10
    path = tmp_path / "temperature_recalibrator.json"
    path.write_bytes(saved)
    # A damaged file first: a message naming it, nothing to apply.
    bad = tmp_path / "damaged.json"
    bad.write_text("{not json")
    uploader = page.locator('[data-testid="stFileUploaderDropzoneInput"]')
    uploader.set_input_files(str(bad))
    page.get_by_text("damaged.json: not a JSON recalibrator file").wait_for(timeout=TIMEOUT_MS)
    assert page.get_by_role("button", name="Apply", exact=True).is_disabled()
    uploader.set_input_files(str(path))
    page.get_by_text("K = 10 classes, fitted on logits").wait_for(timeout=TIMEOUT_MS)
    wait_idle(page)
    page.get_by_role("button", name="Apply", exact=True).click()
    page.get_by_text("loaded from temperature_recalibrator.json").wait_for(timeout=TIMEOUT_MS)
    wait_idle(page)
    no_exception(page)
    text = page.locator('[data-testid="stMain"]').inner_text()
    # The saved file records its 8,000 fit rows: the check leaves them out and says so (measured on the
    # 2,000 rows the fit held out, as the fit itself was)
    assert "Some of these rows were used to fit it." in text and "rows of" in text and "it was not fitted on (of 10,000)" in text
    assert "2,000" in text.split("it was not fitted on (of 10,000)")[0].rsplit("measured on", 1)[-1]
    calibrated = pd.read_csv(io.BytesIO(_download(page, "Calibrated predictions (CSV)", "apply_dl_predictions")))
    assert calibrated.shape == (10_000, 11)  # every row recalibrated, fit rows included (no column marks them here)


def _upload_and_settle(page, uploader, path, *done_texts: str) -> None:
    """Upload ``path`` and wait until the page shows one of ``done_texts`` or an uncaught exception."""
    uploader.set_input_files(str(path))
    selector = ", ".join(['[data-testid="stException"]', *(f':text("{t}")' for t in done_texts)])
    page.locator(selector).first.wait_for(timeout=TIMEOUT_MS)
    wait_idle(page)


def test_hostile_recalibrator_uploads_give_a_plain_error(page, app_url, tmp_path):
    """Fit & apply page: a deeply nested JSON (a RecursionError in the parser) and a file whose
    temperature is negative are refused in a plain error box that names the file; no traceback."""
    _load_cifar10(page, app_url)
    nav(page, "Fit & apply", "Fit & apply")
    uploader = page.locator('[data-testid="stFileUploaderDropzoneInput"]')
    error = page.locator('[data-testid="stAlertContentError"] [data-testid="stMarkdownContainer"]')  # not the icon

    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000)
    _upload_and_settle(page, uploader, deep, "deep.json:")
    no_exception(page)
    assert error.count() == 1 and error.first.inner_text().startswith("deep.json: ")
    assert "nested" in error.first.inner_text()
    assert page.get_by_role("button", name="Apply", exact=True).is_disabled()

    negative = tmp_path / "negative_temperature.json"
    negative.write_text(json.dumps({
        "format": "pbr-calib-recalibrator", "format_version": 1, "method": "temperature",
        "params": {"min_temperature": 0.001, "max_temperature": 1000.0}, "n_classes": 10,
        "input_type": "logits", "state": {"temperature": -1.5}}))
    # Before the fix the file loaded and the page described it ("K = 10 classes, fitted on logits").
    _upload_and_settle(page, uploader, negative, "negative_temperature.json:", "K = 10 classes")
    no_exception(page)
    text = error.first.inner_text() if error.count() else ""
    assert text.startswith("negative_temperature.json: "), page.locator('[data-testid="stMain"]').inner_text()
    assert "temperature must be a finite number above 0" in text and "-1.5" in text
    assert page.get_by_role("button", name="Apply", exact=True).is_disabled()


def test_a_matrix_fit_says_its_time_and_a_saved_matrix_beyond_the_class_limit_is_refused(page, app_url, tmp_path):
    """Fit & apply on CIFAR-100 (K = 100), audit 12c: Dirichlet calibration says its estimated time before
    the fit (it ran unannounced for minutes on many classes), and a saved matrix scaling of 1,500 classes
    is refused in words before it is parsed (a 48 MB one of 5,000 classes took 1.37 GB to read)."""
    load_sample(page, app_url, "CIFAR-100 · DenseNet-121 (logits, 100 classes, npz)", "CIFAR-100 · DenseNet-121")
    nav(page, "Fit & apply", "Fit & apply")
    box = page.locator('[data-testid="stSelectbox"]').filter(has_text="Method").first
    box.click(timeout=TIMEOUT_MS)
    page.get_by_role("option", name="Dirichlet calibration (ODIR)", exact=True).click(timeout=TIMEOUT_MS)
    wait_idle(page)
    main = page.locator('[data-testid="stMain"]')
    main.get_by_text("Estimated time: about 16 s for 1 fit of a K × K matrix").wait_for(timeout=TIMEOUT_MS)
    no_exception(page)

    k = 1500
    row = "[" + ",".join(["0"] * k) + "]"
    saved = tmp_path / "matrix_1500.json"
    saved.write_text(json.dumps({"format": "pbr-calib-recalibrator", "format_version": 1, "method": "matrix_scaling",
                                 "params": {}, "n_classes": k, "input_type": "probabilities"})[:-1]
                     + ', "state": {"weights": {"__ndarray__": [' + ",".join([row] * k) + ']}}}')
    uploader = page.locator('[data-testid="stFileUploaderDropzoneInput"]')
    _upload_and_settle(page, uploader, saved, "matrix_1500.json:")
    no_exception(page)
    error = page.locator('[data-testid="stAlertContentError"] [data-testid="stMarkdownContainer"]')
    assert error.first.inner_text() == (
        "matrix_1500.json: a saved Matrix scaling of 1,500 classes, more than the 1,000 classes this page applies "
        "for that method (a 1,500 × 1,500 matrix). Fit vector scaling or temperature scaling instead, which apply "
        "to any number of classes.")
    assert page.get_by_role("button", name="Apply", exact=True).is_disabled()
