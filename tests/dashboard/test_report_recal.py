"""The self-contained HTML report (dashboard.report), built without a browser."""

from __future__ import annotations

import datetime as dt
import math
import re

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import pytest

import pbr_core
from dashboard import report, runs, texts


@pytest.fixture(scope="module")
def compare_result(cifar10) -> runs.CompareResult:
    logits, labels = cifar10
    preds = pbr_core.Predictions.from_arrays(logits[:2000], labels[:2000])
    s = runs.CompareSettings.of(["uncalibrated", "temperature"], 400, 6, 0)  # 6 folds: paired tests can show a difference
    return runs.run_compare(preds, s, runs.NullReporter(), data_name="CIFAR-10 sample", data_key="k")


def test_report_is_self_contained_with_header_tables_and_figures():
    fig = go.Figure(go.Scatter(x=[1, 2], y=[3, 4], name="a line"))
    section = report.ReportSection(
        title="My <section>", paragraphs=["Plain **bold** text & more"], settings={"n_re": 1000, "α": 0.5},
        tables=[("A table", pd.DataFrame({"ece": [0.01234567]}, index=["temperature"]))],
        figures=[("A caption", fig), ("Second", fig)],
    )
    html = report.build_report([section], data_name="my_model.csv", created=dt.datetime(2025, 7, 1, 12, 30))
    assert html.startswith("<!DOCTYPE html>") and html.rstrip().endswith("</html>")
    assert "my_model.csv" in html and "2025-07-01 12:30" in html
    assert "My &lt;section&gt;" in html and "<b>bold</b>" in html and "&amp; more" in html  # escaped text
    assert "<th>n_re</th><td>1000</td>" in html and "<th>α</th><td>0.5</td>" in html
    assert "0.0123" in html and "temperature" in html
    # plotly.js inlined exactly once, nothing fetched from elsewhere.
    assert html.count("Plotly.newPlot") == 2
    assert len(re.findall(r"<script[^>]*\bsrc=", html)) == 0
    assert html.count('<script type="text/javascript">/**\n* plotly.js') == 1
    assert len(html) > 3_000_000  # the library itself is inside


def test_empty_report_says_nothing_was_run():
    html = report.build_report([], data_name="x.csv")
    assert "No recalibration has been run" in html


def test_compare_section_from_a_real_run(compare_result):
    sec = report.compare_section(compare_result)
    assert sec.settings["Methods"] == "Uncalibrated, Temperature scaling" and sec.settings["Folds"] == 6
    captions = [c for c, _ in sec.tables]
    assert captions == ["Test metrics, mean ± std over folds", "Paired tests over folds (test ECE)", "Every fold"]
    paired = sec.tables[1][1]
    from pbr_core.experiments import paired_tests

    tests = paired_tests(compare_result.table, "ece").iloc[0]
    assert (paired["A"].iloc[0], paired["B"].iloc[0]) == ("Temperature scaling", "Uncalibrated")
    # The verdict right after the pair (read in full at 1400 px), then the p-value that decides it; the
    # pair's own tests after them.
    assert list(paired.columns[:4]) == ["A", "B", "verdict", "p-value"]
    assert paired["p-value"].iloc[0] == texts.p_value(tests["decisive_p"])
    assert paired["p-value, this pair alone"].iloc[0] == texts.p_value(tests["corrected_t_p"])
    assert paired["p-value, folds as independent"].iloc[0] == texts.p_value(tests["t_p"])
    assert paired["p-value, rank test"].iloc[0] == texts.p_value(tests["wilcoxon_p"])
    assert paired["verdict"].iloc[0] == texts.paired_verdict(None, tests["decisive_p"], tests["wilcoxon_p"])
    assert any("Wilcoxon signed-rank test" in p and "Nadeau" in p and "Which test decides" in p for p in sec.paragraphs)
    # the methods section starts with one plain sentence saying what it is for (audit 14, item 2)
    which = next(p for p in sec.paragraphs if "Which test decides" in p)
    assert which.split(". The folds")[0].endswith("the tests behind that are named here for readers who want to "
                                                  "check them") and "What this is for:" in which[:60]
    styled = sec.tables[0][1]
    assert list(styled.data.index) == ["Uncalibrated", "Temperature scaling"]
    assert len(sec.figures) == 3  # small multiples, overlay, and every fold's test ECE
    assert sec.figures[2][0] == texts.COMPARE_FOLDS_CAPTION
    html = report.build_report([sec], data_name=compare_result.data_name)
    assert "Comparison of recalibrators" in html and html.count("Plotly.newPlot") == 3
    ece = compare_result.table.groupby("method")["ece"].mean()
    assert f"{ece['temperature']:.4f}" in html
    # Green only where the paired tests show the best mean better than every other method. On these
    # 2000 rows (n_re = 400, so the 6 folds share most of their 1600 test rows) the test for
    # overlapping folds shows temperature scaling better in NLL only, not in ECE (corrected p 0.36;
    # the plain t-test and Wilcoxon, which the old rule used, both said better).
    from dashboard import tables
    from pbr_core.experiments import shown_best

    assert shown_best(compare_result.table) is None and tests["better"] is None and tests["t_p"] < 0.05
    shown = tables.shown_bests(compare_result.table)
    assert shown == {"nll": "temperature"}
    assert texts.BEST_SHOWN in sec.paragraphs
    styled._compute()
    green = {(r, c) for (r, c), props in styled.ctx.items() if ("background-color", "#d8f0dc") in props}
    assert len(green) == 1


def test_compare_section_with_too_few_folds_claims_no_best_and_runs_no_paired_test(compare_result):
    """Issue 35: 2 folds cannot show any difference (the Wilcoxon test's smallest p is 2/2^2 = 0.5):
    no green cell, no paired-test table, and a sentence that says why."""
    from pbr_core.experiments import too_few_folds

    two = runs.CompareResult(settings=compare_result.settings, data_name="d", data_key="k",
                             table=compare_result.table[compare_result.table["fold"] < 2], diagrams={}, planned=4)
    sec = report.compare_section(two)
    assert [c for c, _ in sec.tables] == ["Test metrics, mean ± std over folds", "Every fold"]
    assert too_few_folds(2) in sec.paragraphs and "2/2^2 = 0.5" in too_few_folds(2)
    styled = sec.tables[0][1]
    styled._compute()
    assert not [k for k, props in styled.ctx.items() if ("background-color", "#d8f0dc") in props]


def test_partial_results_are_labelled(compare_result):
    partial = runs.CompareResult(settings=compare_result.settings, data_name="d", data_key="k",
                                 table=compare_result.table.iloc[:2], diagrams={}, planned=6, stopped=True)
    sec = report.compare_section(partial)
    assert sec.paragraphs[0].startswith("Stopped after 2 of 6 fits")
    assert [c for c, _ in sec.figures] == [texts.COMPARE_FOLDS_CAPTION]   # no diagrams kept: the finished fits


def test_sweep_and_generalization_sections_from_tables():
    rows = [{"method": m, "fold": f, "n_re": n, "ece": 0.05 + 0.01 * f, "n_te": 100, "error": None}
            for m in ("uncalibrated", "temperature") for f in range(2) for n in (10, 100)]
    sweep = runs.SweepResult(settings=runs.SweepSettings(n_re_values=(10, 100), n_folds=2), data_name="d",
                             data_key="k", table=pd.DataFrame(rows))
    sec = report.sweep_section(sweep)
    assert len(sec.figures) == 1 and sec.settings["Recalibration rows (n_re) tried"] == "10, 100"

    from pbr_core.experiments import KLGapResult

    rng = np.random.default_rng(0)
    kl = rng.uniform(1, 30, 18)  # 3 alphas x 6 folds, the gap rising with the KL in every fold
    table = pd.DataFrame({"alpha": np.repeat([0.1, 0.5, 1.0], 6), "fold": np.tile(range(6), 3), "n_re": 500,
                          "n_bins": 7, "kl": kl, "ece_re": 0.02, "ece_te": 0.02 + kl / 1000, "gap": kl / 1000,
                          "bound": 0.5 + kl / 100, "fit_seconds": 1.0, "error": None})
    res = KLGapResult.from_table(table, objective="pbr")
    gen = runs.GenResult(settings=runs.KLGapSettings(alphas=(0.1, 0.5, 1.0), n_re=500, n_folds=6), data_name="d",
                         data_key="k", result=res)
    sec = report.generalization_section(gen)
    assert len(sec.figures) == 1
    assert sec.tables[0][0] == "Correlation between KL and ECE gap"
    shown = sec.tables[0][1]["value"]
    assert shown[texts.FOLD_TAU_ROW.format(fold=1)] == "+1.000" and shown[texts.FOLD_METRICS[1]] == "6 of 6"
    assert shown[texts.FOLD_METRICS[3]] == "0.031"  # 2 / 2^6: six folds all agreeing
    assert any("A larger KL comes with a larger gap in 6 of 6 folds" in p for p in sec.paragraphs)
    # The same fits on a file of 1,200 rows: n_re 500 is above a quarter, the folds re-split mostly the
    # same rows, and the report reads no verdict (pbr_core.experiments.folds_overlap_too_much).
    gen.n_rows = 1200
    (said,) = [p for p in report.generalization_section(gen).paragraphs if "comes with a larger gap in" in p]
    assert said.startswith("Not read") and "more than chance" not in said
    assert "choose n_re of at most 300" in said and "share most of their rows" in said
    gen.n_rows = 2000  # a quarter: read
    assert any("A larger KL comes with a larger gap in 6 of 6 folds" in p
               for p in report.generalization_section(gen).paragraphs)


def test_generalization_reading_follows_the_fold_test():
    """The page's sentence from pbr_core.experiments.FoldKendall's verdict: never "no relation" for a
    verdict of none shown, and with too few folds it says that no test could show one."""
    assert "opposite of what Corollary 1" in texts.correlation_reading("negative", -0.4, 1, 9, 10, 2 / 1024)
    none = texts.correlation_reading("none shown", 0.24, 7, 3, 10, 2 / 1024)
    assert "No relation shown" in none and "7 of 10" in none and "not evidence of no relation" in none
    few = texts.correlation_reading("none shown", 0.9, 3, 0, 3, 0.25)
    assert "With 3 folds no test can show a relation" in few and "0.25" in few
    assert "choose more α values" in texts.correlation_reading("undefined", float("nan"), 0, 0, 0, 1.0)


@pytest.mark.parametrize("verdict", ["positive", "negative", "none shown"])
def test_no_verdict_is_read_when_the_folds_re_split_mostly_the_same_rows(verdict):
    """n_re above a quarter of the file's rows: whatever the fold test says, the sentence claims no relation
    (and no absence of one), says why, and what to do; at a quarter or below, the verdict's own words."""
    args = (verdict, 0.3, 9, 1, 10, 2 / 1024)
    half = texts.correlation_reading(*args, n_re=1000, n_rows=2000)
    assert half.startswith("Not read: a larger KL comes with a larger gap in 9 of 10 folds") and "more than chance" not in half
    assert "No relation shown" not in half and "one sample of 2,000 rows, each using all 2,000 of them" in half
    assert "cannot tell a relation" in half and "choose n_re of at most 500 (a quarter of the rows)" in half
    third = texts.correlation_reading(*args, n_re=700, n_rows=2100)
    assert "each using 1,400 of them" in third and "at most 525" in third
    # A quarter of the rows below the smallest recalibration set: more rows, not a smaller n_re.
    small = texts.correlation_reading(*args, n_re=252, n_rows=504)
    assert "load a file of at least 576 rows" in small and "choose n_re" not in small
    assert texts.correlation_reading(*args, n_re=500, n_rows=2000) == texts.correlation_reading(*args)
    assert texts.correlation_reading(*args, n_re=500) == texts.correlation_reading(*args)  # rows unknown
    assert "choose more α values" in texts.correlation_reading("undefined", math.nan, 0, 0, 0, 1.0, n_re=1000,
                                                               n_rows=2000)


def test_fit_and_apply_sections(cifar10, tmp_path):
    logits, labels = cifar10
    preds = pbr_core.Predictions.from_arrays(logits[:2000], labels[:2000])
    s = runs.FitSettings(method="temperature", holdout=0.0)
    shipped = runs.run_ship(preds, s, runs.NullReporter(), data_name="CIFAR-10 sample", data_key="k")
    sec = report.apply_section(shipped)
    assert sec.title == "Fitted for download: Temperature scaling"
    assert sec.settings["Held out"] == "nothing" and "look better than they will" in sec.paragraphs[1]
    applied = runs.run_apply(preds, shipped.recalibrator, "ts.json", runs.NullReporter(), data_name="new month")
    sec2 = report.apply_section(applied)
    assert sec2.title == "Saved recalibrator: Temperature scaling"
    assert sec2.settings["Recalibrator"] == "Temperature scaling loaded from ts.json"
    assert sec2.settings["Settings"] == "the method's defaults"
    html = report.build_report([sec, sec2], data_name="CIFAR-10 sample")
    assert html.count("Plotly.newPlot") == 4 and f"{applied.after['ece']:.4f}" in html
    # Applying the recalibrator to the rows it was fitted on gives the same numbers as the fit's own check.
    assert applied.after == shipped.after


def test_ship_settings_split_keeps_rows_on_both_sides():
    assert runs.FitSettings(holdout=0.2).split(10_000) == (8000, 2000)
    assert runs.FitSettings(holdout=0.0).split(5) == (5, 0)
    assert runs.FitSettings(holdout=0.05).split(4) == (3, 1)     # at least one row held out
    assert runs.FitSettings(holdout=0.5).split(3) == (2, 1)      # at least two rows to fit on
