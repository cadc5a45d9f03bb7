"""Words for people: the pages, progress lines, tables and downloads use the names people see
(method labels, "Test ECE", folds from 1, "–" for no value), and say where a fit ended at its prior."""

from __future__ import annotations

import io

import numpy as np
import pandas as pd
import pytest

import pbr_core
from dashboard import report, runs, tables, texts


class _Recorder(runs.NullReporter):
    def __init__(self) -> None:
        self.messages: list[str] = []

    def progress(self, done, total, message=""):
        self.messages.append(message)


@pytest.fixture(scope="module")
def small(cifar10) -> pbr_core.Predictions:
    logits, labels = cifar10
    return pbr_core.Predictions.from_arrays(logits[:1500], labels[:1500])


def test_progress_lines_use_page_names_and_count_folds_from_one(small):
    rec = _Recorder()
    runs.run_compare(small, runs.CompareSettings.of(["uncalibrated", "isotonic"], 300, 2, 0), rec)
    assert rec.messages[1:] == ["Uncalibrated, fold 1 of 2", "Isotonic regression (top label), fold 1 of 2",
                                "Uncalibrated, fold 2 of 2", "Isotonic regression (top label), fold 2 of 2"]
    rec = _Recorder()
    runs.run_sweep(small, runs.SweepSettings(methods=("temperature",), n_re_values=(50, 100), n_folds=1), rec)
    assert rec.messages[1:] == ["Temperature scaling, n_re = 50, fold 1 of 1", "Temperature scaling, n_re = 100, fold 1 of 1"]
    # The library's other messages (the KL-gap study, the CV choice of α, batched fits) too.
    assert texts.people_progress("pbr_total alpha=0.5, fold 3/10") == "PBR total, α = 0.5, fold 3 of 10"
    assert texts.people_progress("alpha=0.25, fold 1/5") == "α = 0.25, fold 1 of 5"
    assert texts.people_progress("batched fit of 40 GPs, iteration 50") == "fitting 40 GPs together, iteration 50"
    assert texts.people_progress("Done") == "Done"


def _table() -> pd.DataFrame:
    return pd.DataFrame({
        "method": ["temperature", "pbr", "temperature", "pbr"], "fold": [0, 0, 1, 1], "n_re": 100, "n_te": 900,
        "n_bins": 9, "ece": [0.02, 0.03, 0.021, 0.05], "accuracy": 0.9, "nll": 0.3, "brier": 0.1,
        "kl": [np.nan, 3.2, np.nan, 0.01], "at_prior": [None, False, None, True], "fit_seconds": [0.01, 2.0, 0.01, 2.1],
        "predict_seconds": 0.001, "fit_shared_with": None, "error": None})


def test_fold_table_for_people():
    frame = tables.fold_frame(_table())
    assert list(frame.columns) == ["Method", "Fold", "Recalibration rows (n_re)", "Test rows", "Bins B", "Test ECE",
                                   "Accuracy", "NLL", "Brier score", "KL", "Ended at the prior", "Fit time (s)",
                                   "Prediction time (s)"]
    assert list(frame["Method"]) == ["Temperature scaling", "PBR"] * 2 and list(frame["Fold"]) == [1, 1, 2, 2]
    assert frame["Ended at the prior"].fillna("–").tolist() == ["–", "no", "–", "yes"]
    html = tables.fold_styler(_table()).to_html()
    assert "None" not in html and "nan" not in html and html.count(">–<") == 4   # KL and at-prior of T-scaling
    assert ">0.0300<" in html and ">3.2<" in html and ">2.00<" in html
    # The CSV keeps the library's names (for scripts) but counts folds from 1 like the pages.
    csv = tables.csv_frame(_table())
    assert list(csv.columns) == list(_table().columns) and list(csv["fold"]) == [1, 1, 2, 2]


def test_compare_marks_and_explains_folds_that_ended_at_the_prior():
    s = runs.CompareSettings.of(["temperature", "pbr"], 100, 2, 0, alpha=0.5)
    result = runs.CompareResult(settings=s, data_name="d", data_key="k", table=_table(), diagrams={}, planned=4)
    _, styled = tables.compare_tables(result.table, multiclass=True)
    shown = styled.data
    assert shown.loc["PBR", "Folds at the prior"] == "1 of 2" and shown.loc["Temperature scaling", "Folds at the prior"] == "–"
    notes = tables.compare_at_prior_notes(result)
    assert len(notes) == 1
    assert notes[0].startswith("**PBR ended at its prior in fold 2 of 2**") and "did not recalibrate" in notes[0]
    assert "α = 0.5 and n_re = 100" in notes[0] and "A smaller α or more recalibration rows" in notes[0]
    sec = report.compare_section(result)
    assert notes[0] in sec.paragraphs
    html = report.build_report([sec], data_name="d")
    assert "PBR ended at its prior in fold 2 of 2" in html and "Folds at the prior" in html
    # No fold at the prior: no note.
    clean = _table().assign(at_prior=[None, False, None, False])
    assert tables.compare_at_prior_notes(runs.CompareResult(s, "d", "k", clean, {}, 4)) == []


def test_sweep_says_where_a_fit_ended_at_the_prior():
    t = _table().assign(n_re=[10, 10, 10, 10], at_prior=[None, True, None, True])
    t = pd.concat([t, _table().assign(n_re=100)], ignore_index=True)
    s = runs.SweepSettings(methods=("temperature", "gp"), n_re_values=(10, 100), n_folds=2)
    t["method"] = t["method"].replace({"pbr": "gp"})
    result = runs.SweepResult(settings=s, data_name="d", data_key="k", table=t)
    notes = tables.sweep_at_prior_notes(result)
    assert notes == [texts.at_prior_sweep_note("GP calibration", {10: [1, 2], 100: [2]}, 2, None)]
    assert "n_re = 10 (folds 1 and 2 of 2); n_re = 100 (fold 2 of 2)" in notes[0]
    assert "More recalibration rows" in notes[0]
    sec = report.sweep_section(result)
    assert notes[0] in sec.paragraphs and sec.tables[0][0] == "Every fit"


def test_settings_and_parameters_in_words():
    s = runs.CompareSettings.of(["uncalibrated", "isotonic", "pbr"], 1000, 10, 0, alpha=0.5, max_iter=20)
    d = texts.settings_words(s, multiclass=True)
    assert d["Methods"] == "Uncalibrated, Isotonic regression (top label), PBR"
    assert d["PBR settings"] == "α = 0.5, max optimiser iterations = 20"
    p = texts.settings_words(runs.PBRSettings(alpha=None, alpha_grid=(0.1, 1.0), cv_folds=3))
    assert p["α (weight of the KL term)"] == ("chosen by 3-fold cross-validation on the recalibration rows "
                                              "(score: ECE) from 0.1, 1")
    from pbr_core.recalibrators import get_recalibrator

    pbr = get_recalibrator("pbr", alpha=0.25, max_iter=30, mean_approx=True)
    words = texts.recalibrator_settings(pbr)
    assert words == ("α = 0.25, prediction: softmax of the posterior mean (app.), max optimiser iterations = 30; "
                     "the other settings are the method's defaults")
    assert texts.recalibrator_settings(get_recalibrator("temperature")) == "the method's defaults"
    for text in (str(d), str(p), words):
        for internal in ("mean_approx", "objective =", "max_iter", "n_re values", "'pbr'"):
            assert internal not in text


def test_calibrated_predictions_mark_the_rows_the_recalibrator_was_fitted_on(small):
    shipped = runs.run_ship(small, runs.FitSettings(method="temperature", holdout=0.2), runs.NullReporter())
    csv = pd.read_csv(io.BytesIO(shipped.calibrated_csv()))
    assert list(csv.columns[-2:]) == ["label", runs.FIT_ROWS_COLUMN]
    fitted = np.zeros(small.n, dtype=bool)
    fitted[shipped.fit_rows] = True
    np.testing.assert_array_equal(csv[runs.FIT_ROWS_COLUMN].to_numpy(), fitted)
    assert fitted.sum() == 1200
    # The held-out rows are the ones the page measured on: the same metrics from the file's False rows.
    held = csv[~csv[runs.FIT_ROWS_COLUMN]]
    probs = held.drop(columns=["label", runs.FIT_ROWS_COLUMN]).to_numpy()
    assert pbr_core.ece(probs, held["label"].to_numpy()) == pytest.approx(shipped.after["ece"], abs=1e-6)
    everything = runs.run_ship(small, runs.FitSettings(method="temperature", holdout=0.0), runs.NullReporter())
    assert pd.read_csv(io.BytesIO(everything.calibrated_csv()))[runs.FIT_ROWS_COLUMN].all()
    applied = runs.run_apply(small, shipped.recalibrator, "t.json", runs.NullReporter())
    assert runs.FIT_ROWS_COLUMN not in pd.read_csv(io.BytesIO(applied.calibrated_csv())).columns  # not known


def test_a_fit_worse_calibrated_than_no_recalibration_on_the_test_rows_says_so_and_why():
    """At alpha near 0 the paper's objective can fit the recalibration rows more closely than new data
    reward (CIFAR-10 ResNet-50, alpha = 0, 1,000 rows: test ECE .0393 against .0188 uncalibrated). The
    PBR page and its report then say so, with what to change, when the library's rule shows the rise
    beyond the ECE's noise (pbr_core.evaluation.ece_rise_shown, the run's worse_shown); a rise it does
    not show is said to be within the noise, never "worse"; nothing for a fit that improved the test
    ECE, nor for one that ended at the prior (its own note explains it)."""
    note = texts.worse_on_test_note
    assert note(0.0188, 0.0150, 0.004, 0.0, 1000, 9000, False, None) is None
    assert note(0.0188, 0.0188, 0.004, 0.0, 1000, 9000, False, None) is None
    assert note(0.0188, 0.0190, 0.018, 1.0, 1000, 9000, True, True) is None
    overfit = note(0.0188, 0.0393, 0.0050, 0.0, 1000, 9000, False, True)
    assert overfit.startswith("**On the test rows this fit is worse calibrated than no recalibration**: "
                              "ECE 0.0393 against 0.0188 before, more than the ECE's noise on 9,000 test rows "
                              "explains.")
    assert "On the 1,000 rows it was fitted on, its ECE is 0.0050: it follows those rows" in overfit
    assert "With α = 0 the KL term hardly holds the fit back" in overfit and "Choose α automatically" in overfit
    shown = note(0.0193, 0.0304, 0.0310, 0.25, 1000, 9000, False, True)  # no better on the fitted rows either
    assert "rows it was fitted on" not in shown and "KL term" not in shown and shown.endswith("may do better.")
    noise = note(0.0534, 0.0612, 0.0210, 0.0, 150, 150, False, False)
    assert "worse calibrated than no recalibration" not in noise and "**" not in noise
    assert noise.startswith("The test ECE is higher after this fit than without it (0.0612 against 0.0534), by less "
                            "than the two ECEs' own noise on 150 test rows: these rows cannot tell whether the fit")
    gp = note(0.05, 0.06, 0.01, None, 500, 2000, False, True)  # GP calibration has no alpha
    assert "another method (the Compare page)" in gp and "α" not in gp


def test_the_kl_card_keeps_large_values_short():
    assert [texts.kl_card(v) for v in (0.01234, 3.14159, 9999.4, 15_710.3, 2.5e7)] == [
        "0.01234", "3.142", "9999", "15,710", "2.5e+07"]


def test_the_venn_abers_words_give_the_right_reason_for_a_probability_outside_its_interval():
    from pbr_core.experiments.runs import IntervalSummary

    base = dict(target="top_label", mean_width=0.05, median_width=0.04, p90_width=0.1)
    assert "outside" not in texts.venn_abers_interval_words(IntervalSummary(inside=1.0, **base))
    folds = texts.venn_abers_interval_words(IntervalSummary(inside=0.98, outside_reason="folds", **base))
    assert "2.0% of the rows" in folds and "average of their intervals" in folds and "rescaled" not in folds
    ova = texts.venn_abers_interval_words(IntervalSummary(inside=0.5, outside_reason="renormalised", **base))
    assert "rescaled to add up to 1" in ova
    # The guarantee is the inductive predictor's, with its condition; the cross predictor's averaged
    # intervals carry none (audit 6), and no sentence says "whatever the data".
    single = texts.venn_abers_interval_words(IntervalSummary(inside=1.0, **base))
    assert "guarantees that one of them is calibrated, as long as the new rows come from the same population" in single
    cross = texts.venn_abers_interval_words(IntervalSummary(inside=0.98, outside_reason="folds", cross=True, **base))
    assert "carries no guarantee" in cross and "guarantees" not in cross
    assert all("whatever the data" not in t for t in (single, cross, folds, ova))


def test_the_estimation_bias_is_said_to_be_the_sampling_noise_of_the_binned_estimate():
    """Audit 12a: Bins & bias called the square-root term of Theorem 1 the "estimation bias" (the
    paper's name, kept) without saying what it is; a teacher read it as a fixed offset. It is the
    sampling noise of the binned estimate with n rows in B bins, bounded with probability 1 - eps."""
    from pbr_core.plot.bins import TRACE_ESTIMATION

    words = texts.WHY_CUBE_ROOT
    assert "the **estimation bias** (the paper's name for it) 2·√(2·(B·log 2 + log(1/ε)) / n): the *sampling" in words
    assert "noise* of the binned estimate. The n rows are shared among B bins, about n/B rows each" in words
    assert "It is not a fixed offset" in words and "*grows* like √(B/n)" in words
    assert TRACE_ESTIMATION == "Estimation bias (sampling noise)"
    # the term is the one Theorem 1 bounds: 2 sqrt(2 (B log 2 + log(1/eps)) / n) at lambda = sqrt(n (B log 2 + log 1/eps) / 2)
    n, B, eps = 1000, 10, 0.05
    assert pbr_core.theorem1_estimation_bias(n, B, eps) == pytest.approx(
        2 * np.sqrt(2 * (B * np.log(2) + np.log(1 / eps)) / n), rel=1e-12)


def test_the_download_format_words_name_columns_as_literal_text():
    """The help of the calibrated-predictions download names the columns that held percentages: a
    column named like a Markdown image is shown as typed (texts.md), and each dialect is said in words."""
    from pbr_core.loading.dialect import CsvDialect

    image = "![x](http://127.0.0.1:9/x.png)"
    words = texts.download_format_words(CsvDialect(sep=";", decimal=",", percent={image: "%"}))
    assert image not in words and texts.md(repr(image)) in words and "(0.8455 as 84,55%)" in words
    assert words.startswith("Written in your file's own CSV format: semicolon-separated, decimal commas, UTF-8, LF")
    assert texts.download_format_words(False) == texts.STANDARD_CSV_WORDS
    assert texts.download_format_words(True) == texts.OWN_CSV_WORDS
