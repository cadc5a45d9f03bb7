"""A small real file on the recalibration pages (issue 35): defaults that leave a test set worth
measuring, and a test set too small to say anything refused with why and what to do, on every page.

The file: 504 random rows of the bundled KITTI random-forest predictions (a real binary model), the
size of the audit's election forecasts. Before, the PBR page proposed n_re = 503 and tested on 1 row
("Test ECE 0.0000, accuracy 100 %"), Compare ran 10 folds of 1 test row each.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest

from dashboard import runs
from pbr_core.experiments import MIN_TEST_ROWS, SmallTestSetError

ROOT = Path(__file__).resolve().parents[2]
PBR, COMPARE, GEN, APPLY = "views/pbr.py", "views/compare.py", "views/generalization.py", "views/apply.py"
N = 504


def small_kitti_csv(n: int = N, seed: int = 0) -> bytes:
    """``n`` random rows (seeded) of sample_data/kitti_random_forest.csv, as CSV bytes."""
    frame = pd.read_csv(ROOT / "sample_data" / "kitti_random_forest.csv")
    rows = np.sort(np.random.default_rng(seed).choice(len(frame), size=n, replace=False))
    return frame.iloc[rows].to_csv(index=False).encode()


@pytest.fixture
def at() -> AppTest:
    app = AppTest.from_file(str(ROOT / "dashboard" / "app.py"), default_timeout=60)
    app.run()
    app.file_uploader(key="data_upload").upload("forecasts_504.csv", small_kitti_csv(), "text/csv").run()
    assert not app.exception, app.exception
    assert app.session_state["pbr_loaded"].preds.n == N
    return app


def _errors(at: AppTest) -> list[str]:
    return [e.value for e in at.error]


def test_pbr_page_proposes_half_and_refuses_a_one_row_test_part(at):
    at.switch_page(PBR).run()
    assert not at.exception
    assert at.number_input(key="pbr_n_re").value == 252  # not 503: half the rows, 252 left to test on
    assert not _errors(at) and not at.button(key="pbr_run").disabled
    at.number_input(key="pbr_n_re").set_value(503).run()
    (error,) = _errors(at)
    assert "A test set of 1 row is too small to say anything" in error  # why
    assert "Lower n_re to at most 360, so that at least 144 rows are left to test on." in error  # what to do
    assert at.button(key="pbr_run").disabled
    at.number_input(key="pbr_n_re").set_value(360).run()  # 144 test rows: allowed
    assert not _errors(at) and not at.button(key="pbr_run").disabled


def test_compare_page_proposes_half_and_refuses_tiny_folds(at):
    at.switch_page(COMPARE).run()
    assert not at.exception
    assert at.number_input(key="cmp_n_re").value == 252
    assert not _errors(at) and not at.button(key="cmp_run").disabled
    at.number_input(key="cmp_n_re").set_value(503).run()
    (error,) = _errors(at)
    assert "A test set of 1 row is too small" in error and "Lower n_re to at most 360" in error
    assert at.button(key="cmp_run").disabled
    at.number_input(key="cmp_n_re").set_value(252).run()
    at.number_input(key="cmp_n_te").set_value(100).run()  # the page's own test size, too small
    (error,) = _errors(at)
    assert "A test set of 100 rows is too small" in error and "“Test rows per fold” to at least 144" in error
    assert at.button(key="cmp_run").disabled
    # The n_re sweep offers only the sizes that leave 144 rows to test on (not 500 of 504).
    assert at.multiselect(key="sweep_n_re_values").options == ["10", "50", "100", "250"]


def _finish(at: AppTest, kind: str):
    job = at.session_state["recal_jobs"][kind]
    assert job.join(240), f"{kind} job still {job.status}"
    at.run()
    assert not at.exception and job.status == "done", (job.status, job.error)
    return job


def test_compare_names_no_best_method_the_folds_cannot_support(at):
    """Issue 35: 3 folds cannot show any difference (Wilcoxon's smallest p is 2/2^3 = 0.25): no green
    'best' cell, no paired tests, a sentence that says why. With 10 folds a method is green only
    where the paired tests show it better than every other one (pbr_core.experiments.shown_best)."""
    from pbr_core.experiments import shown_best, too_few_folds

    at.switch_page(COMPARE).run()
    at.multiselect(key="cmp_methods").set_value(["uncalibrated", "temperature", "platt"]).run()
    at.number_input(key="cmp_n_folds").set_value(3).run()
    at.button(key="cmp_run").click().run()
    job = _finish(at, "compare")
    assert (job.result.table["n_te"] == 252).all()
    assert any(too_few_folds(3) in c.value for c in at.caption)  # under the summary
    assert any(too_few_folds(3) in i.value for i in at.info)  # instead of the paired tests
    assert not [d for d in at.dataframe if "p-value, rank test" in d.value.columns]
    assert "#d8f0dc" not in str([d.proto for d in at.dataframe])
    at.number_input(key="cmp_n_folds").set_value(10).run()
    at.button(key="cmp_run").click().run()
    job = _finish(at, "compare")
    best = shown_best(job.result.table)
    assert [d for d in at.dataframe if "p-value, rank test" in d.value.columns]
    assert ("#d8f0dc" in str([d.proto for d in at.dataframe])) == (best is not None)


def test_generalization_page_refuses_a_test_subset_below_144_rows(at):
    at.switch_page(GEN).run()
    assert not at.exception
    assert at.number_input(key="gen_n_re").value == 252 and not _errors(at)
    at.number_input(key="gen_n_re").set_value(100).run()
    (error,) = _errors(at)
    assert "A test set of 100 rows is too small" in error and "Raise n_re to at least 144" in error
    assert at.button(key="gen_run").disabled


def test_generalization_page_proposes_a_quarter_of_a_small_file():
    """On 1,200 rows the page proposes n_re = 300 (a quarter: folds sharing few rows, their verdict read;
    before, 600 of 1,200, where every fold re-split the whole file); on 504 rows a quarter (126) is below
    the 144 a fit needs, and half the rows stay (the test above)."""
    app = AppTest.from_file(str(ROOT / "dashboard" / "app.py"), default_timeout=60)
    app.run()
    app.file_uploader(key="data_upload").upload("forecasts_1200.csv", small_kitti_csv(1200), "text/csv").run()
    app.switch_page(GEN).run()
    assert not app.exception
    assert app.number_input(key="gen_n_re").value == 300 and not _errors(app)
    assert "at most n / 4" in app.number_input(key="gen_n_re").help


def test_fit_and_apply_holds_out_enough_rows_to_check_the_fit(at):
    at.switch_page(APPLY).run()
    assert not at.exception
    assert at.slider(key="ship_holdout").value == 30  # 20 % would be 101 rows; 30 % is 151
    assert not _errors(at) and not at.button(key="ship_run").disabled
    at.slider(key="ship_holdout").set_value(20).run()
    (error,) = _errors(at)
    assert "A test set of 101 rows is too small" in error and "Hold out at least 30 % (144 of the 504 rows)" in error
    assert at.button(key="ship_run").disabled
    at.slider(key="ship_holdout").set_value(0).run()  # fit on every row: allowed, said to be in-sample
    assert not _errors(at) and not at.button(key="ship_run").disabled


def test_runs_refuse_a_small_test_set_started_without_the_page(kitti_small):
    """A run started by a script cannot report a meaningless result either."""
    with pytest.raises(SmallTestSetError, match="1 row is too small.*Lower n_re to at most 360"):
        runs.run_compare(kitti_small, runs.CompareSettings.of(["uncalibrated"], 503, 2, 0), runs.NullReporter())
    with pytest.raises(SmallTestSetError, match="100 rows is too small"):
        runs.run_generalization(kitti_small, runs.KLGapSettings(n_re=100, n_folds=1), runs.NullReporter())
    with pytest.raises(SmallTestSetError, match="101 rows is too small"):
        runs.run_ship(kitti_small, runs.FitSettings(holdout=0.2), runs.NullReporter())
    assert runs.default_holdout_percent(N) == 30 == runs.min_holdout_percent(N)
    assert runs.default_holdout_percent(10_000) == 20 and runs.default_holdout_percent(200) == 0
    ok = runs.run_compare(kitti_small, runs.CompareSettings.of(["uncalibrated"], 252, 2, 0), runs.NullReporter())
    assert (ok.table["n_te"] == 252).all() and (ok.table["n_te"] >= MIN_TEST_ROWS).all()


@pytest.fixture(scope="module")
def kitti_small():
    import pbr_core

    return pbr_core.load_predictions(small_kitti_csv(), format="csv")


def test_every_recalibration_result_says_which_binary_ece_it_is(kitti_small):
    """Issue 33: the same binary file, the same test ECE and the same words on every page's report
    section: the app's one choice, p(y=1) by default."""
    from dashboard import report, texts
    from pbr_core.experiments import compare, evaluation_metrics, split_indices

    words = texts.binary_ece_caption("positive")
    ship = runs.run_ship(kitti_small, runs.FitSettings(method="platt", holdout=0.5), runs.NullReporter())
    assert "ECE: " + words in report.apply_section(ship).paragraphs
    cmp_ = runs.run_compare(kitti_small, runs.CompareSettings.of(["uncalibrated"], 252, 1, 0), runs.NullReporter())
    assert "ECE: " + words in report.compare_section(cmp_).paragraphs
    # The uncalibrated test ECE of Compare's fold 1 is the ECE of p(y=1) on those rows, as the
    # Reliability page measures it, and as evaluation_metrics (the PBR page's "before") gives it.
    _, te = split_indices(kitti_small.n, 252, fold=0, seed=0)
    import pbr_core

    expected = pbr_core.ece(kitti_small.p_positive[te], kitti_small.labels[te])
    assert cmp_.table["ece"].iloc[0] == pytest.approx(expected, abs=1e-15)
    part = kitti_small.subset(te)
    assert evaluation_metrics(part.probs, part.labels, "binary")["ece"] == pytest.approx(expected, abs=1e-15)
