"""The fold runs of the Generalization and Compare pages (audit 13, items 5, 7 and 12): a default number
of folds with which the Generalization test can answer, a time estimate for their GP fits in the PBR
page's words, the extreme-KL note's explanation of the α it flags, the per-α table and the log axes in
words a reader takes in, and no plan printed above a refused run."""

from __future__ import annotations

import html
import math
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest

from dashboard import fit_estimate, jobs, report, runs, tables
from kl_studies import election_study
from pbr_core.experiments import MIN_PAIRED_FOLDS, KLGapResult, kl_gap_default_n_re

ROOT = Path(__file__).resolve().parents[2]
COMPARE, GEN = "views/compare.py", "views/generalization.py"


def _kitti_csv(n: int, seed: int = 0) -> bytes:
    """``n`` random rows (seeded) of the bundled KITTI random-forest predictions (a real binary model)."""
    frame = pd.read_csv(ROOT / "sample_data" / "kitti_random_forest.csv")
    rows = np.sort(np.random.default_rng(seed).choice(len(frame), size=n, replace=False))
    return frame.iloc[rows].to_csv(index=False).encode()


def _app(n: int) -> AppTest:
    app = AppTest.from_file(str(ROOT / "dashboard" / "app.py"), default_timeout=60)
    app.run()
    app.file_uploader(key="data_upload").upload(f"forecasts_{n}.csv", _kitti_csv(n), "text/csv").run()
    assert not app.exception, app.exception
    return app


def _texts(at: AppTest) -> list[str]:
    return [e.value for kind in ("caption", "info", "error", "markdown") for e in getattr(at, kind)]


@pytest.fixture(autouse=True)
def _no_rescaling(monkeypatch):
    """The estimates from the model alone (fits run earlier in this process would rescale them)."""
    monkeypatch.setattr(fit_estimate, "_OBSERVED", [])


def test_generalization_defaults_to_folds_that_can_show_a_relation_and_says_how_long():
    at = _app(504)
    at.switch_page(GEN).run()
    assert not at.exception, at.exception
    folds = at.number_input(key="gen_n_folds").value
    assert folds == MIN_PAIRED_FOLDS == 6  # on a CPU; the former 3 could never give p < 0.05
    assert 2.0 ** (1 - folds) < 0.05  # the folds' tests' smallest p-value (FoldKendall.smallest_p)
    n_alphas, n_re = len(at.multiselect(key="gen_alphas").value), kl_gap_default_n_re(504)
    workers = runs.fold_jobs(folds)
    # By hand: rounds of `workers` folds, each fitting every α on n_re rows and predicting n_re rows.
    rounds = math.ceil(folds / workers)
    fitting = rounds * n_alphas * fit_estimate.model_seconds(n_re, 2)
    seconds = (fitting + rounds * n_alphas * fit_estimate.PREDICT_PER_ENTRY_S * n_re * 2
               + (fit_estimate.WORKER_START_S if workers > 1 else 0.0))
    est = fit_estimate.folds_estimate(n_re, n_re, 2, n_alphas, folds, workers)
    assert est.fits == n_alphas * folds and est.seconds == pytest.approx(seconds)
    sentence = est.sentence()
    assert f"for {n_alphas * folds} fits in {folds} folds" in sentence and sentence.startswith("Estimated time: about")
    assert any(sentence in t for t in _texts(at)), _texts(at)
    # The estimate follows the folds asked for.
    at.number_input(key="gen_n_folds").set_value(10).run()
    assert any(f"for {n_alphas * 10} fits in 10 folds" in t for t in _texts(at))


_study = election_study  # the audit's election file's study (tests/kl_studies.py)


def test_generalization_explains_the_flagged_alpha_and_writes_kl_and_axes_readably():
    at = _app(504)
    at.switch_page(GEN).run()
    res = KLGapResult.from_table(_study(), objective="pbr")
    gen = runs.GenResult(settings=runs.KLGapSettings(alphas=(0.0, 0.01, 0.75), n_folds=3), data_name="d",
                         data_key="k", result=res, n_classes=2, n_rows=504)
    job = jobs.start_job("generalization", "shown", lambda ctx: gen, heavy=False, lock=None)
    assert job.join(5)
    at.session_state["recal_jobs"]["generalization"] = job
    at.run()
    assert not at.exception, at.exception
    (note,) = [w.value for w in at.warning if "extreme KL" in w.value]
    assert "α = 0.01, fold 3: KL = 211.3" in note
    # both α values flagged, each explained: no KL term at 0, a cheap one at 0.01
    assert "At α = 0 the objective has no KL term" in note and "at α = 0.01 the KL enters the objective only as α·KL/n_re" in note
    only_small = tables.extreme_kl_note(_study().query("alpha > 0"), 2)
    assert only_small.startswith("One fit has an extreme KL (α = 0.01, fold 3") and "no KL term" not in only_small
    assert "At α = 0.01 the KL enters the objective only as α·KL/n_re, so a small α makes each nat of KL cheap" in only_small
    # The per-α table: words, not "None" (every α = 0 fit left out of the mean) or "0.00000001".
    shown = tables.per_alpha_styler(tables.per_alpha_frame(_study(), 0.05, 2)).to_string()
    assert "None" not in shown and "nan" not in shown and "0.00000001" not in shown
    assert tables.EVERY_FIT_EXTREME in shown and "below 0.001" in shown and "40" in shown
    doc = html.unescape(re.sub(r"<[^>]+>", " ", report.build_report([report.generalization_section(gen)], data_name="d")))
    assert tables.EVERY_FIT_EXTREME in doc and "below 0.001" in doc
    # The chart's log axes: powers of ten (10^-8 ... 10^5), not SI prefixes ("10n", "100k").
    from tests.dashboard.apptest_tools import sent_figure

    fig = sent_figure(at)
    assert fig.layout.xaxis.type == "log" and fig.layout.xaxis.exponentformat == "power"
    assert fig.layout.xaxis2.exponentformat == "power" and fig.layout.yaxis2.exponentformat == "power"


def test_compare_says_how_long_its_gp_fits_take_in_the_pbr_page_s_words():
    at = _app(504)
    at.switch_page(COMPARE).run()
    assert not at.exception, at.exception
    n_re, folds = at.number_input(key="cmp_n_re").value, at.number_input(key="cmp_n_folds").value
    assert "pbr" in at.multiselect(key="cmp_methods").value
    workers = runs.fold_jobs(folds)
    est = fit_estimate.folds_estimate(n_re, 504 - n_re, 2, 1, folds, workers)
    rounds = math.ceil(folds / workers)  # by hand: one GP fit per fold, the folds `workers` at a time
    assert est.seconds == pytest.approx(rounds * (fit_estimate.model_seconds(n_re, 2)
                                                  + fit_estimate.PREDICT_PER_ENTRY_S * (504 - n_re) * 2)
                                        + (fit_estimate.WORKER_START_S if workers > 1 else 0.0))
    sentence = est.sentence()
    assert f"for {folds} fits in {folds} folds" in sentence
    assert workers == 1 or f"{workers} folds at a time in worker processes" in sentence
    assert any(sentence in t for t in _texts(at)), _texts(at)
    # Without a GP method: no GP estimate.
    at.multiselect(key="cmp_methods").set_value(["uncalibrated", "temperature"]).run()
    assert not any("Estimated time" in t for t in _texts(at))


def test_compare_prints_no_plan_above_a_refused_run():
    at = _app(45)
    at.switch_page(COMPARE).run()
    assert not at.exception, at.exception
    assert at.error, "the 45-row file's comparison is refused"
    assert not any("fits in all" in t or "each fold fits on" in t or "Estimated time" in t for t in _texts(at))


def test_the_fold_estimates_follow_the_gp_fits_measured_here():
    """A comparison's or a KL-gap study's GP fits rescale later estimates, as a PBR fit does: the HAM
    file's fits (1,500 rows x 7 classes) ended at the prior and were redone, 4.3 s each against the
    model's 1.9, and the first estimate said about 12 s for a run of 28 s."""
    before = fit_estimate.folds_estimate(750, 750, 7, 1, 10, 2)
    assert not before.measured_here
    runs._record_fits(pd.DataFrame({"fit_seconds": [4.3, 4.3, np.nan]}), 750, 7)
    after = fit_estimate.folds_estimate(750, 750, 7, 1, 10, 2)
    ratio = 4.3 / fit_estimate.model_seconds(750, 7)
    assert after.measured_here and "from the fits already run on this server" in after.sentence()
    assert after.seconds - fit_estimate.WORKER_START_S == pytest.approx(ratio * (before.seconds - fit_estimate.WORKER_START_S))


def test_generalization_prints_no_plan_above_a_refused_run():
    """As Compare (item 12): the 45-row file is refused with one sentence, and no "48 GP fits" above it."""
    at = _app(45)
    at.switch_page(GEN).run()
    assert not at.exception, at.exception
    assert at.error or at.info, "the 45-row file's study is refused"
    assert not any("GP fits on" in t or "Estimated time" in t for t in _texts(at)), _texts(at)
