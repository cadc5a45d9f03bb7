"""The Recalibration pages (PBR, Compare, Generalization) under AppTest (no browser).

Runs are background jobs: a test clicks Run, waits for the job's thread (``Job.join``) and runs the
script again, as the page's polling fragment would. GP fits are slow on a CPU: the PBR and
Generalization tests use the CIFAR-10 sample, small n_re and few optimiser iterations.
"""

from __future__ import annotations

import base64
import html
import io
import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats
from streamlit.testing.v1 import AppTest

import pbr_core
from dashboard import jobs, report, runs, texts

ROOT = Path(__file__).resolve().parents[2]
APP = str(ROOT / "dashboard" / "app.py")
PBR, COMPARE, GEN, APPLY = "views/pbr.py", "views/compare.py", "views/generalization.py", "views/apply.py"
CIFAR10 = "cifar10_resnet110.npz"
JOB_TIMEOUT = 240



@pytest.fixture
def at() -> AppTest:
    app = AppTest.from_file(APP, default_timeout=60)
    app.run()
    app.selectbox(key="data_sample").set_value(CIFAR10).run()
    assert not app.exception, app.exception
    return app


def _job(at: AppTest, kind: str) -> jobs.Job:
    return at.session_state["recal_jobs"][kind]


def _finish(at: AppTest, kind: str) -> jobs.Job:
    job = _job(at, kind)
    assert job.join(JOB_TIMEOUT), f"{kind} job still {job.status} after {JOB_TIMEOUT} s"
    at.run()
    assert not at.exception, at.exception
    assert job.status == "done", (job.status, job.error)
    return job


def _metric(at: AppTest, label_start: str) -> str:
    for m in at.metric:
        if m.label.startswith(label_start):
            return m.value
    raise AssertionError(f"no metric {label_start!r}; have {[m.label for m in at.metric]}")


def _downloads(at: AppTest) -> list[str]:
    return [d.label for d in at.get("download_button")]


def _small_gp_settings(at: AppTest, prefix: str) -> None:
    key = f"{prefix}_max_iter"
    if any(w.key == key for w in at.number_input):
        at.number_input(key=key).set_value(20).run()


def test_compare_temperature_two_folds(at, cifar10):
    at.switch_page(COMPARE).run()
    assert not at.exception
    at.multiselect(key="cmp_methods").set_value(["uncalibrated", "temperature"]).run()
    at.number_input(key="cmp_n_re").set_value(300).run()
    at.number_input(key="cmp_n_folds").set_value(2).run()
    at.button(key="cmp_run").click().run()
    assert not at.exception
    job = _finish(at, "compare")
    table = job.result.table
    assert list(table["method"]) == ["uncalibrated", "temperature"] * 2
    # The page shows the library's numbers (compare with the same split), highlighted table included.
    logits, labels = cifar10
    expected = pbr_core.experiments.compare(pbr_core.Predictions.from_arrays(logits, labels),
                                            ["uncalibrated", "temperature"], n_re=300, n_folds=2)
    pd.testing.assert_series_equal(table["ece"], expected["ece"])
    shown = at.dataframe[0].value
    assert list(shown.index) == ["Uncalibrated", "Temperature scaling"]
    mean_t = expected[expected["method"] == "temperature"]["ece"].mean()
    assert shown.loc["Temperature scaling", "ECE"].startswith(f"{mean_t:.4f} ± ")
    charts = at.get("plotly_chart")
    assert len(charts) == 3  # small multiples, overlay, and every fold's ECE (pbr_core.plot.comparison)
    means = next(t for t in json.loads(charts[2].proto.spec)["data"] if t["name"] == "Mean ± std over folds")
    y = means["y"]  # plotly writes numpy arrays as base64 (bdata) in the figure's JSON
    y = np.frombuffer(base64.b64decode(y["bdata"]), dtype=y["dtype"]) if isinstance(y, dict) else np.asarray(y)
    assert y[1] == pytest.approx(mean_t, rel=1e-12)
    assert _downloads(at) == ["Results table (CSV, every fold)", "Summary (CSV, mean and std)",
                              "Session report (HTML)"]
    assert not at.button(key="cmp_run").disabled
    # Results survive a page switch.
    at.switch_page("views/reliability.py").run()
    at.switch_page(COMPARE).run()
    assert not at.exception
    assert at.dataframe[0].value.shape[0] == 2


#: Internal names that must not reach a page or the report: registry names, snake_case columns,
#: constructor parameters, Python reprs and the internal design documents.
INTERNAL = re.compile(r"fit_seconds|predict_seconds|fit_shared_with|at_prior|n_bins|pbr_total_app|pbr_app|"
                      r"mean_approx|max_iter|objective ?=|alpha ?=|GP_SPEC|DESIGN\.md|\bNone\b|\bnan\b|"
                      r"\bisotonic\b|(?<![\w-])pbr(?![\w-])|\bece\b|\bnll\b|\bkl\b|Parameters:")


def _shown(element) -> pd.DataFrame:
    """A dataframe element as the page shows it: a Styler's display values (e.g. "–"), else the data."""
    styler = element.proto.arrow_data.styler
    if styler.display_values:
        import pyarrow as pa

        shown = pa.ipc.open_stream(styler.display_values).read_all().to_pandas()
        shown.columns = element.value.columns
        return shown
    return element.value


def _page_text(at: AppTest) -> str:
    """Everything a person reads on the page: text elements, metrics, tables (as shown), labels."""
    parts: list[str] = []
    for kind in ("title", "header", "subheader", "markdown", "caption", "info", "warning", "error", "success"):
        parts += [str(e.value) for e in at.get(kind)]
    parts += [f"{m.label} {m.value}" for m in at.metric]
    for d in at.dataframe:
        shown = _shown(d)
        parts += [str(c) for c in shown.columns] + [str(v) for v in shown.to_numpy().ravel()]
        if shown.index.name or not isinstance(shown.index, pd.RangeIndex):
            parts += [str(i) for i in shown.index]
    parts += [e.label for e in at.expander] + [d.label for d in at.get("download_button")]
    return "\n".join(parts)


def _html_text(doc: str) -> str:
    doc = re.sub(r"<(script|style)[^>]*>.*?</\1>", " ", doc, flags=re.S)
    return html.unescape(re.sub(r"<[^>]+>", " ", doc))


def _no_internal_names(text: str, where: str) -> None:
    found = sorted({m.group(0) for m in INTERNAL.finditer(text)})
    assert not found, f"{where} shows internal names {found}"


def test_compare_with_a_fixed_test_set_size(at, cifar10):
    at.switch_page(COMPARE).run()
    at.multiselect(key="cmp_methods").set_value(["uncalibrated"]).run()
    at.number_input(key="cmp_n_re").set_value(300).run()
    at.number_input(key="cmp_n_folds").set_value(2).run()
    at.number_input(key="cmp_n_te").set_value(9800).run()  # 300 + 9800 > 10000 rows
    assert any("need 10,100 rows" in e.value for e in at.error) and at.button(key="cmp_run").disabled
    at.number_input(key="cmp_n_te").set_value(2000).run()
    assert not at.error and any("tests on 2,000 of the other 9,700" in c.value for c in at.caption)
    at.button(key="cmp_run").click().run()
    table = _finish(at, "compare").result.table
    assert (table["n_te"] == 2000).all()
    logits, labels = cifar10
    expected = pbr_core.experiments.compare(pbr_core.Predictions.from_arrays(logits, labels), ["uncalibrated"],
                                            n_re=300, n_folds=2, n_te=2000)
    pd.testing.assert_series_equal(table["ece"], expected["ece"])


def test_compare_n_re_sweep(at):
    at.switch_page(COMPARE).run()
    at.multiselect(key="cmp_methods").set_value(["temperature"]).run()
    at.multiselect(key="sweep_n_re_values").set_value([50, 500]).run()
    at.number_input(key="sweep_n_folds").set_value(2).run()
    at.button(key="sweep_run").click().run()
    job = _finish(at, "sweep")
    assert len(job.result.table) == 4
    charts = at.get("plotly_chart")
    assert charts and "log" in charts[-1].proto.spec
    assert "Sweep table (CSV)" in _downloads(at)
    # n_re = 50 is below what the comparison fits on: said, before the run and under the chart (audit 14 D)
    said = [c.value for c in at.caption if c.value.startswith("n_re = 50 is below")]
    assert said == [("n_re = 50 is below the 144 rows the comparison above needs to fit on: it is here to show "
                     "what so few recalibration rows do, measured on the same test rows (at least 144) as the "
                     "larger values. It is not a recommended n_re.")] * 2, said
    from dashboard import texts

    assert texts.sweep_below_fit_rows([10, 50, 100, 250], 144, 144).startswith("n_re = 10, 50 and 100 are below")
    assert texts.sweep_below_fit_rows([250, 500], 144, 144) is None


def test_controls_are_disabled_while_a_job_runs(at):
    """A held lock keeps a GP job waiting: the page shows why, the controls are disabled, Cancel works."""
    at.switch_page(COMPARE).run()
    at.multiselect(key="cmp_methods").set_value(["temperature"]).run()
    lock = jobs.fit_lock()
    holder = lock.hold("a PBR fit of another user")
    try:
        # A job that needs the lock: reuse the page's own start path with a heavy job.
        at.session_state["recal_jobs"]["compare"] = jobs.start_job(
            "compare", "test job", lambda ctx: runs.NullReporter(), heavy=True, lock=lock)
        at.run()
        assert not at.exception
        assert at.button(key="cmp_run").disabled
        assert at.multiselect(key="cmp_methods").disabled
        assert any("Another fit is running" in i.value and "a PBR fit of another user" in i.value for i in at.info)
        at.button(key="compare_job_cancel").click().run()
        job = _job(at, "compare")
        assert job.join(5) and job.status == "stopped"
        at.run()
        assert not at.button(key="cmp_run").disabled
    finally:
        lock.release()
    assert holder.label


def test_lock_held_by_another_session_makes_the_pbr_run_wait(at):
    at.switch_page(PBR).run()
    assert not at.exception
    lock = jobs.fit_lock()
    lock.hold("a fit in another browser")
    try:
        at.button(key="pbr_run").click().run()
        assert not at.exception
        assert _job(at, "pbr").status == "waiting"
        assert any("Another fit is running, waiting for it to finish" in i.value for i in at.info)
        assert at.button(key="pbr_run").disabled
        at.button(key="pbr_job_cancel").click().run()
        assert _job(at, "pbr").join(5) and _job(at, "pbr").status == "stopped"
    finally:
        lock.release()


def test_pbr_tiny_fit_shows_kl_bounds_and_downloads(at):
    at.switch_page(PBR).run()
    assert not at.exception
    assert any(("CPU" in m.value or "GPU" in m.value) for m in at.markdown)  # the device is named
    at.number_input(key="pbr_n_re").set_value(150).run()
    _small_gp_settings(at, "pbr")
    at.button(key="pbr_run").click().run()
    assert not at.exception
    job = _finish(at, "pbr")
    r = job.result
    assert _metric(at, "KL") == f"{r.kl:.4g}"
    assert _metric(at, "Test ECE after") == f"{r.after['ece']:.4f}"
    c1 = pbr_core.corollary1_bound(150, pbr_core.optimal_n_bins(150), max(r.kl, 0.0))
    assert _metric(at, "Corollary 1") == f"{c1:.4f}"
    assert _metric(at, "Corollary 2").startswith("")
    readings = " ".join(m.value for m in at.markdown)
    assert ("fresh data of the same size" in readings) or ("Vacuous here" in readings)
    # which kind of bound this is, and what Corollary 2 is about (an average over the posterior)
    assert any("Approximate: prior fitted on the same rows" in w.value for w in at.warning)
    assert ("on average over the draws" in readings and "not a range for the TCE" in readings) or \
        "Vacuous here" in readings
    # What Corollary 2's range means, and which number answers "how miscalibrated is it?".
    assert texts.COROLLARY2_RANGE_MEANING in [c.value for c in at.caption]
    assert len(at.get("plotly_chart")) == 2  # before / after
    assert _downloads(at) == ["Calibrated predictions (CSV)", "Fitted recalibrator (JSON)", "Session report (HTML)"]
    # The download contents (built when clicked) parse and have the right shape.
    csv = pd.read_csv(io.BytesIO(r.calibrated_csv()))
    # The label under the file's own name (the NPZ's 'labels' array), then the fitted rows' mark.
    assert csv.shape == (10_000, 12) and list(csv.columns[-2:]) == ["labels", runs.FIT_ROWS_COLUMN]
    # The fitted rows are marked: the 150 rows of the recalibration set, the rest is the test part.
    assert csv[runs.FIT_ROWS_COLUMN].sum() == 150
    from pbr_core.experiments import split_indices

    np.testing.assert_array_equal(np.flatnonzero(csv[runs.FIT_ROWS_COLUMN]), np.sort(split_indices(10_000, 150, fold=0, seed=0)[0]))
    saved = json.loads(r.recalibrator_json())
    assert saved["method"] == "pbr" and saved["n_classes"] == 10
    assert not any("ended at the prior" in i.value for i in at.info) or r.at_prior
    # The same result as if the fit had ended at the prior (what the training code writes in the fit
    # report then): the page says what that means.
    import dataclasses

    ended = dataclasses.replace(r, fit_report={**r.fit_report, "ended_at_prior": True,
                                               "stop_reason": "tolerance (ended at the prior; "
                                               "restarts from smaller alpha did not do better)"})
    at_prior = jobs.start_job("pbr", "at the prior", lambda ctx: ended, heavy=False, lock=None)
    assert at_prior.join(5)
    at.session_state["recal_jobs"]["pbr"] = at_prior
    at.run()
    notes = [i.value for i in at.info if "ended at the prior" in i.value]
    assert len(notes) == 1 and "With α = 0.5 and n_re = 150 rows" in notes[0]
    assert not any("worse calibrated than no recalibration" in w.value for w in at.warning)  # its own note says it
    # A fit at alpha = 0 whose test ECE rose above the uncalibrated one: the page and the report say so.
    worse = dataclasses.replace(r, alpha=0.0, after={**r.after, "ece": r.before["ece"] + 0.02}, kl=15_710.3,
                                fit_report={**r.fit_report, "ended_at_prior": False}, worse_shown=True)
    shown_worse = jobs.start_job("pbr", "worse", lambda ctx: worse, heavy=False, lock=None)
    assert shown_worse.join(5)
    at.session_state["recal_jobs"]["pbr"] = shown_worse
    at.run()
    expected = texts.worse_on_test_note(r.before["ece"], r.before["ece"] + 0.02, r.ece_re, 0.0, 150, r.n_te, False,
                                        True)
    assert "With α = 0 the KL term hardly holds the fit back" in expected
    assert [w.value for w in at.warning if "worse calibrated" in w.value] == [expected]
    # The rise shown by the rule (worse_shown): the ECE card is red with an up arrow; any other change is grey.
    card = next(m for m in at.metric if m.label == "Test ECE after")
    assert card.proto.delta == "+0.0200" and (card.proto.color, card.proto.direction) == (card.proto.RED, card.proto.UP)
    assert _metric(at, "KL") == "15,710"  # such fits have large KLs: whole numbers fit the card, 1.571e+04 did not
    assert "worse calibrated than no recalibration" in _html_text(report.build_report([report.pbr_section(worse)],
                                                                                       data_name="d"))
    # The caption says how the expectation was estimated: this fit drew every class of each row; a
    # fit with many classes draws only each row's largest scores (pbr_core.gp.objectives.ClassSplit).
    caption = next(c.value for c in at.caption if c.value.startswith("device:"))
    assert f"Details: {r.fit_report['n_mc']} Monte Carlo draws per entry (" in caption and "largest scores" not in caption
    # The plain line first (a user audit: "stopped: tolerance (L-BFGS: ...)" is jargon); the optimiser's
    # reason and the draws only in the details for experts.
    plain, details = caption.split("Details:")
    assert (texts.FIT_CONVERGED if r.fit_report["converged"] else texts.FIT_NOT_CONVERGED) in plain
    assert "L-BFGS" not in plain and "Monte Carlo" not in plain and "stopped: " not in plain
    assert f"optimiser's stop reason: {texts.fit_words(r.fit_report['stop_reason'])}" in details
    split = dataclasses.replace(r, fit_report={**r.fit_report, "n_mc": 16, "mc_classes": 24})
    shown = jobs.start_job("pbr", "split", lambda ctx: split, heavy=False, lock=None)
    assert shown.join(5)
    at.session_state["recal_jobs"]["pbr"] = shown
    at.run()
    caption = next(c.value for c in at.caption if c.value.startswith("device:"))
    assert "16 Monte Carlo draws per entry of each row's 24 largest scores and its label" in caption
    _no_internal_names(_page_text(at), "the PBR page")
    _no_internal_names(_html_text(report.build_report([report.pbr_section(ended)], data_name="d")), "the PBR report")


def test_pbr_prior_split_gives_bounds_valid_as_stated_on_the_other_rows(at):
    at.switch_page(PBR).run()
    at.number_input(key="pbr_n_re").set_value(200).run()
    _small_gp_settings(at, "pbr")
    at.toggle(key="pbr_prior_split_on").set_value(True).run()
    at.number_input(key="pbr_prior_share").set_value(0.4).run()
    assert any("chosen on 80 of the 200 recalibration rows" in c.value for c in at.caption)
    at.button(key="pbr_run").click().run()
    job = _finish(at, "pbr")
    assert not at.exception
    r = job.result
    assert r.recalibrator.prior_split == 0.4 and r.n_bound == 120 and r.bound_prior == "split"
    c1 = pbr_core.corollary1_bound(120, pbr_core.optimal_n_bins(120), max(r.kl, 0.0))
    assert _metric(at, "Corollary 1") == f"{c1:.4f}"
    # the ECE next to the bound is measured on the 120 bound rows only
    from pbr_core.experiments import split_indices

    re_idx, _ = split_indices(r.preds.n, 200, fold=0, seed=0)
    fit_set = r.preds.subset(re_idx)
    rows = r.recalibrator.bound_rows_
    ece = pbr_core.ece(r.recalibrator.predict_proba(fit_set)[rows], fit_set.labels[rows], pbr_core.optimal_n_bins(120))
    assert r.ece_re == pytest.approx(ece, abs=1e-12)
    assert any("Valid as stated" in m.value and "n = 120 instead of 200" in m.value for m in at.success)
    sec = report.pbr_section(r)
    assert any(c.startswith("Bounds (valid as stated)") for c, _ in sec.tables)
    _no_internal_names(_page_text(at), "the PBR page with a prior split")
    _no_internal_names(_html_text(report.build_report([sec], data_name="d")), "the PBR report with a prior split")


def _run_automatic_alpha(at):
    """The PBR page with alpha chosen by 2-fold CV over (0.1, 1) on 144 rows (the fewest a front end fits
    on, MIN_FIT_ROWS), small fits; the finished job."""
    at.switch_page(PBR).run()
    at.segmented_control(key="pbr_alpha_mode").set_value("auto").run()
    assert not at.exception
    at.multiselect(key="pbr_alpha_grid").set_value([0.1, 1.0]).run()
    at.number_input(key="pbr_cv_folds").set_value(2).run()
    at.number_input(key="pbr_n_re").set_value(144).run()
    _small_gp_settings(at, "pbr")
    at.button(key="pbr_run").click().run()
    return _finish(at, "pbr")


def test_pbr_automatic_alpha_shows_the_grid_scores(at):
    job = _run_automatic_alpha(at)
    r = job.result
    assert r.alpha in (0.1, 1.0) and list(r.alpha_scores["alpha"]) == [0.1, 1.0]
    assert job.total == 2 * 2 + 1  # the CV fits, then the final fit
    assert len(at.get("plotly_chart")) == 3  # before, after, the alpha scores
    shown = at.dataframe[0].value
    assert list(shown["α"]) == [0.1, 1.0]
    assert any("chosen by cross-validation" in c.value for c in at.caption)


def test_pbr_automatic_alpha_survives_a_failed_fit_and_says_so(at, monkeypatch):
    """One fit of the alpha grid fails: the run still ends with the best of the other alphas, the
    table counts the failed folds and the page says which fit failed and why."""
    from recal_doubles import failing_pbr_fits

    failing_pbr_fits(monkeypatch, lambda alpha, n, nth: alpha == 1.0 and n == 72 and nth == 1)  # fold 0's
    monkeypatch.setattr(runs, "fold_jobs", lambda folds: 1)  # the folds in this process, where the double is
    job = _run_automatic_alpha(at)
    assert not at.exception and job.error is None
    assert job.result.alpha == 0.1
    shown = _shown(at.dataframe[0])
    assert list(shown["α"]) == ["0.1", "1"] and list(shown["folds whose fit failed"]) == ["0", "1"]
    assert shown.iloc[1, 1] == "–" and shown.iloc[0, 1] == f"{job.result.alpha_scores['mean'][0]:.4f}"
    said = "α = 1 on fold 1 of 2 failed (GP fit diverged: test double); α = 1 is left out of the selection"
    assert any(said in c.value for c in at.caption)
    _no_internal_names(_page_text(at), "the PBR page")
    doc = _html_text(report.build_report([report.pbr_section(job.result)], data_name="d"))
    assert said in doc and "–" in doc  # the report says it too; the failed α's mean is "–"
    _no_internal_names(doc, "the PBR report")


def test_generalization_two_alphas_two_folds(at):
    at.switch_page(GEN).run()
    assert not at.exception
    at.multiselect(key="gen_alphas").set_value([0.1, 1.0]).run()
    at.number_input(key="gen_n_folds").set_value(2).run()
    at.number_input(key="gen_n_re").set_value(150).run()
    _small_gp_settings(at, "gen")
    at.button(key="gen_run").click().run()
    job = _finish(at, "generalization")
    res = job.result.result
    assert len(res.table) == 4
    # Two α per fold: no order to compare within a fold, so no τ, and the page says why.
    assert res.across_folds.folds == 0 and _metric(at, texts.FOLD_METRICS[0]) == "–"
    assert any("No fold has enough fits" in m.value for m in at.markdown)
    assert len(at.get("plotly_chart")) == 1
    assert _downloads(at) == ["Results table (CSV, every fit)", "Session report (HTML)"]


def test_generalization_on_a_gpu_can_fit_everything_as_one_batch(at, monkeypatch, cifar10):
    """The batch option shows where a GPU does (faked here: the batched fit itself runs on this
    CPU, the same arithmetic) and nowhere else; checked, the study is one batched Adam fit."""
    at.switch_page(GEN).run()
    _small_gp_settings(at, "gen")
    assert not [c for c in at.checkbox if c.key == "gen_batched"]          # a CPU: no such option
    monkeypatch.setattr(runs, "device_label", lambda: "GPU: NVIDIA H200")
    at.run()
    at.multiselect(key="gen_alphas").set_value([0.1, 1.0]).run()
    at.number_input(key="gen_n_folds").set_value(2).run()
    at.number_input(key="gen_n_re").set_value(150).run()
    at.checkbox(key="gen_batched").check().run()
    import pbr_core.experiments.kl_gap as kl_gap

    batches = []
    real = kl_gap._batched_rows
    monkeypatch.setattr(kl_gap, "_batched_rows", lambda *a, **k: batches.append(1) or real(*a, **k))
    at.button(key="gen_run").click().run()
    job = _finish(at, "generalization")
    res = job.result.result
    assert job.result.settings.batched and texts.settings_words(job.result.settings)["Fitting"].startswith("all fits together")
    assert batches == [1] and res.batched     # one batched fit, not 4 fits one by one
    assert len(res.table) == 4 and res.table.error.isna().all()
    # the Adam fits the library makes with batched=True (the page passed optimizer="adam")
    from pbr_core.experiments import kl_vs_ece_gap

    again = kl_vs_ece_gap(pbr_core.Predictions.from_arrays(*cifar10, input_type="logits"), alphas=[0.1, 1.0],
                          n_re=150, n_folds=2, batched=True, optimizer="adam", max_iter=20)
    np.testing.assert_allclose(res.table.kl, again.table.kl, rtol=1e-9)


def test_top_label_only_data_explains_why_not(at):
    at.selectbox(key="data_sample").set_value("cifar10_resnet110_toplabel.csv").run()
    for page in (PBR, COMPARE, GEN, APPLY):
        at.switch_page(page).run()
        assert not at.exception, page
        assert any("full probability (or logit) vector" in i.value for i in at.info), page
        assert not at.button  # nothing to run


def test_binary_data_compare_uses_the_apps_one_binary_ece_and_says_so(at):
    """Issue 33: Compare has no ECE control of its own; it measures what the sidebar chose for the whole
    app (p(y=1) by default, as the Reliability, PBR, Generalization and Fit & apply pages) and says which."""
    at.selectbox(key="data_sample").set_value("kitti_xgboost.csv").run()
    at.switch_page(COMPARE).run()
    assert not at.exception
    options = at.multiselect(key="cmp_methods").options
    assert "Platt scaling" in options and "Beta calibration" in options  # no "(one-vs-all)" on binary data
    assert not [c for c in at.segmented_control if c.key == "cmp_binary_ece"]  # no second default
    at.multiselect(key="cmp_methods").set_value(["uncalibrated", "platt", "beta"]).run()
    at.number_input(key="cmp_n_re").set_value(1000).run()
    at.number_input(key="cmp_n_folds").set_value(2).run()
    at.button(key="cmp_run").click().run()
    job = _finish(at, "compare")
    preds = at.session_state["pbr_loaded"].preds
    expected = pbr_core.experiments.compare(preds, ["uncalibrated", "platt", "beta"], n_re=1000, n_folds=2,
                                            binary_ece="positive")
    pd.testing.assert_series_equal(job.result.table["ece"], expected["ece"])
    pd.testing.assert_series_equal(job.result.table["brier"], expected["brier"])  # the Brier score of p(y=1)
    assert any("ECE of p(y=1)" in c.value for c in at.caption)
    assert "Predicted probability p(y=1)" in at.get("plotly_chart")[0].proto.spec  # binary axis wording
    # The Reliability page measures the same p(y=1) on the same rows (fold 1's raw test rows).
    _, te = pbr_core.experiments.split_indices(preds.n, 1000, fold=0, seed=0)
    b = pbr_core.optimal_n_bins(te.size)
    assert expected["ece"].iloc[0] == pytest.approx(pbr_core.ece(preds.p_positive[te], preds.labels[te], b), abs=1e-15)
    # The sidebar's one choice changes it for every page, Compare included, named as such.
    at.sidebar.radio(key="pbr_binary_target").set_value("top_label").run()
    at.switch_page(COMPARE).run()
    at.button(key="cmp_run").click().run()
    job = _finish(at, "compare")
    expected = pbr_core.experiments.compare(preds, ["uncalibrated", "platt", "beta"], n_re=1000, n_folds=2,
                                            binary_ece="top_label")
    pd.testing.assert_series_equal(job.result.table["ece"], expected["ece"])
    assert any("Top-label ECE" in c.value and "paper's tables" in c.value for c in at.caption)
    assert "Confidence (probability of the predicted class)" in at.get("plotly_chart")[0].proto.spec


def test_compare_page_shows_paired_tests_and_a_chosen_pair(at):
    at.selectbox(key="data_sample").set_value("kitti_xgboost.csv").run()
    at.switch_page(COMPARE).run()
    at.multiselect(key="cmp_methods").set_value(["uncalibrated", "platt", "beta"]).run()
    at.number_input(key="cmp_n_re").set_value(1000).run()
    at.number_input(key="cmp_n_folds").set_value(6).run()  # the fewest with which a difference can be shown
    at.button(key="cmp_run").click().run()
    job = _finish(at, "compare")
    assert not at.exception
    table = job.result.table
    tests = pbr_core.experiments.paired_tests(table, "ece")
    def paired_frames() -> list[pd.DataFrame]:  # the chosen pair first, then the default pairs
        return [d.value for d in at.dataframe if "p-value, rank test" in d.value.columns]

    shown = paired_frames()[1]
    assert list(shown["A"]) == [texts.method_label(m) for m in tests["a"]]
    assert list(shown["p-value, folds as independent"]) == [texts.p_value(v) for v in tests["t_p"]]
    assert list(shown["p-value, rank test"]) == [texts.p_value(v) for v in tests["wilcoxon_p"]]
    # The verdict rests on the Holm-corrected test for overlapping folds, shown first (issue: the plain
    # tests' verdicts on overlapping folds were false claims half of the time between equal methods).
    assert list(shown["p-value"]) == [texts.p_value(v) for v in tests["decisive_p"]]
    assert (tests["holm_pairs"] == 3).all()  # default pairs: every pair of the 3 methods
    assert list(shown["verdict"]) == [texts.paired_verdict(None if b is None else texts.method_label(b), d, w)
                                      for b, d, w in zip(tests["better"], tests["decisive_p"], tests["wilcoxon_p"])]
    # The picker opens on a pair of the table below (the last method against the first) and shows that
    # row, verdict and deciding p included: corrected over every pair of the methods, as that table (a
    # user audit: tested alone, the picker said 'PBR better', p 0.021, above the table's 0.106, 'no
    # difference shown').
    pair = paired_frames()[0]
    assert (pair["A"].iloc[0], pair["B"].iloc[0]) == (texts.method_label("beta"), texts.method_label("uncalibrated"))
    row = shown[(shown["A"] == pair["A"].iloc[0]) & (shown["B"] == pair["B"].iloc[0])]
    assert len(row) == 1
    pd.testing.assert_frame_equal(pair.reset_index(drop=True), row.reset_index(drop=True))
    alone = pbr_core.experiments.paired_tests(table, "ece", [("beta", "uncalibrated")]).iloc[0]
    assert pair["p-value"].iloc[0] != texts.p_value(alone["decisive_p"])  # Holm over one pair: not the table's
    assert texts.paired_pick_caption(3, 3) in [c.value for c in at.caption]
    at.selectbox(key="cmp_pair_a").set_value("beta").run()
    at.selectbox(key="cmp_pair_b").set_value("platt").run()
    one = pbr_core.experiments.paired_tests(table, "ece", [("beta", "platt")], holm_family="all").iloc[0]
    pair = paired_frames()[0]
    assert pair["mean ECE A − B"].iloc[0] == f"{one['mean_diff']:+.4f}"
    # The corrected test's interval (the table has n_re, n_te), not the plain t interval.
    assert pair["95% interval"].iloc[0] == f"[{one['ci_low']:+.4f}, {one['ci_high']:+.4f}]"
    assert one["ci_low"] < stats.ttest_rel(*(table[table["method"] == m]["ece"].to_numpy() for m in ("beta", "platt"))
                                           ).confidence_interval(0.95).low
    assert one["holm_pairs"] == 3 and pair["p-value"].iloc[0] == texts.p_value(one["decisive_p"])
    at.selectbox(key="cmp_paired_metric").set_value("brier").run()
    one = pbr_core.experiments.paired_tests(table, "brier", [("beta", "platt")], holm_family="all").iloc[0]
    assert paired_frames()[0]["mean Brier score A − B"].iloc[0] == f"{one['mean_diff']:+.4f}"
    assert not at.exception


def test_stopped_run_shows_its_partial_results_and_stale_data_is_flagged(at, cifar10):
    at.switch_page(COMPARE).run()
    logits, labels = cifar10
    preds = pbr_core.Predictions.from_arrays(logits[:2000], labels[:2000])

    class StopAfterTwo(runs.NullReporter):
        done = 0

        def progress(self, done, total, message=""):
            self.done = done

        def cancelled(self):
            return self.done >= 2

    s = runs.CompareSettings.of(["uncalibrated", "temperature"], 300, 5, 0)
    partial = runs.run_compare(preds, s, StopAfterTwo(), data_name="another file", data_key="other")
    job = jobs.start_job("compare", "stopped", lambda ctx: partial, heavy=False, lock=None)
    assert job.join(5) and job.status == "stopped"
    at.session_state["recal_jobs"]["compare"] = job
    at.run()
    assert not at.exception
    assert any(i.value.startswith("Stopped after 2 of 10 fits") for i in at.info)  # 5 folds x 2 methods
    assert any("computed on **another file**" in w.value for w in at.warning)
    assert at.dataframe[0].value.shape[0] == 2


def test_tiny_file_pages_render(at):
    csv = "a,b,label\n0.9,0.1,0\n0.2,0.8,1\n0.6,0.4,1\n"
    at.switch_page("views/data.py").run()
    at.file_uploader(key="data_upload").upload("tiny.csv", csv.encode(), "text/csv").run()
    assert at.session_state["pbr_loaded"].preds.n == 3
    for page in (PBR, COMPARE, GEN, APPLY):
        at.switch_page(page).run()
        assert not at.exception, page


def test_a_failed_run_shows_its_error_not_an_exception(at):
    at.switch_page(GEN).run()

    def boom(ctx):
        raise RuntimeError("GP fit diverged and could not be recovered: NaN objective.")

    job = jobs.start_job("generalization", "failing", boom, heavy=False, lock=None)
    assert job.join(5) and job.status == "failed"
    at.session_state["recal_jobs"]["generalization"] = job
    at.run()
    assert not at.exception
    assert at.error and "GP fit diverged" in at.error[0].value
    assert not at.button(key="gen_run").disabled  # the user can change settings and try again


def test_a_failed_run_shows_no_traceback_on_the_page(at, caplog):
    """A bug in a job: a plain message on the page, the traceback only in the server's log."""
    at.switch_page(GEN).run()
    with caplog.at_level("ERROR", logger="dashboard.jobs"):
        job = jobs.start_job("generalization", "failing", lambda ctx: {}["missing key"], heavy=False, lock=None)
        assert job.join(5) and job.status == "failed"
    assert any(r.name == "dashboard.jobs" and r.exc_info[0] is KeyError for r in caplog.records)
    at.session_state["recal_jobs"]["generalization"] = job
    at.run()
    assert not at.exception
    assert at.error and "unexpected error in pbr-calib (KeyError)" in at.error[0].value
    shown = [e.value for e in at.error] + [c.value for c in at.code] + [x.label for x in at.expander]
    assert not any("Traceback" in v or "Details (for a bug report)" in v or "missing key" in v for v in shown)


def test_compare_and_sweep_say_where_a_fit_ended_at_its_prior(at, monkeypatch):
    """The issue: "PBR 0.0331 ± 0.0285" where one fold did not recalibrate at all, and nothing said so.
    Every GP fit is made to end at the prior the way the training code's own test does it (its
    threshold raised): the page then says so next to the table, with what to change, and marks it."""
    import pbr_core.gp.training as training

    monkeypatch.setattr(training, "PRIOR_SHIFT", 1e9)
    monkeypatch.setenv("PBR_CALIB_JOBS", "1")  # the patch lives in this process: no worker processes
    at.switch_page(COMPARE).run()
    at.multiselect(key="cmp_methods").set_value(["uncalibrated", "isotonic", "pbr"]).run()
    at.number_input(key="cmp_n_re").set_value(144).run()  # the fewest rows a front end fits on (MIN_FIT_ROWS)
    at.number_input(key="cmp_n_folds").set_value(2).run()
    at.number_input(key="cmp_max_iter").set_value(5).run()
    at.button(key="cmp_run").click().run()
    job = _finish(at, "compare")
    assert job.last == "PBR, fold 2 of 2"   # the progress line's words
    assert job.result.table["at_prior"].tolist() == [None, None, True] * 2
    notes = [w.value for w in at.warning if "ended at its prior" in w.value]
    assert len(notes) == 1 and notes[0].startswith("**PBR ended at its prior in folds 1 and 2 of 2**")
    assert "With α = 0.5 and n_re = 144 rows" in notes[0] and "A smaller α or more recalibration rows" in notes[0]
    summary = _shown(at.dataframe[0])
    assert summary["Folds at the prior"].tolist() == ["–", "–", "2 of 2"]
    folds = next(_shown(d) for d in at.dataframe if "Fold" in _shown(d).columns)  # "Every fold" (after the paired tests)
    assert folds["Method"].tolist() == ["Uncalibrated", "Isotonic regression (top label)", "PBR"] * 2
    assert folds["Fold"].astype(int).tolist() == [1, 1, 1, 2, 2, 2]
    assert folds["Ended at the prior"].tolist() == ["–", "–", "yes"] * 2 and folds["KL"].tolist()[0] == "–"
    _no_internal_names(_page_text(at), "the Compare page")
    # The n_re sweep with the same methods.
    at.multiselect(key="sweep_n_re_values").set_value([50, 100]).run()
    at.number_input(key="sweep_n_folds").set_value(1).run()
    at.button(key="sweep_run").click().run()
    sweep = _finish(at, "sweep")
    assert [w.value for w in at.warning if "at n_re" in w.value] == [
        texts.at_prior_sweep_note("PBR", {50: [1], 100: [1]}, 1, 0.5)]
    assert _shown(at.dataframe[-1])["Ended at the prior"].tolist() == ["–", "–", "yes"] * 2
    _no_internal_names(_page_text(at), "the Compare page with the sweep")
    doc = report.build_report([report.compare_section(job.result), report.sweep_section(sweep.result)], data_name="d")
    text = _html_text(doc)
    assert "PBR ended at its prior in folds 1 and 2 of 2" in text and "PBR ended at its prior at n_re = 50" in text
    _no_internal_names(text, "the report")


def test_calibration_pages_offer_the_audit_report(at):
    for page in ("views/reliability.py", "views/bins_bias.py"):
        at.switch_page(page).run()
        assert not at.exception, page
        buttons = [d for d in at.get("download_button") if d.label == "Audit report (HTML)"]
        assert len(buttons) == 1 and not buttons[0].disabled, page


def test_compare_says_the_nll_is_infinite_and_reads_no_test_from_the_floor(at):
    """Audit 12a: a file that gives probability exactly 0 to outcomes that happened. The summary says the
    uncalibrated NLL is infinite on the folds holding them (not a mean of floored numbers), and with
    Metric = NLL the paired table names temperature scaling (finite everywhere) better without a p-value."""
    rng = np.random.default_rng(3)
    n = 1200
    p = rng.uniform(0.05, 0.95, n)
    y = (rng.random(n) < p).astype(int)
    p[:40], y[:40] = 0.0, 0
    y[:3] = 1
    csv = pd.DataFrame({"p_positive": p, "label": y}).to_csv(index=False).encode()
    at.file_uploader(key="data_upload").upload("zeros.csv", csv, "text/csv").run()
    at.switch_page(COMPARE).run()
    assert not at.exception
    at.multiselect(key="cmp_methods").set_value(["uncalibrated", "temperature"]).run()
    at.number_input(key="cmp_n_re").set_value(400).run()
    at.number_input(key="cmp_n_folds").set_value(8).run()
    at.button(key="cmp_run").click().run()
    job = _finish(at, "compare")
    hit = int((job.result.table.query("method == 'uncalibrated'")["nll_infinite_rows"] > 0).sum())
    assert hit >= 1
    shown = at.dataframe[0].value
    assert shown.loc["Uncalibrated", "NLL"] == f"infinite (on {hit} of 8 folds)"
    assert "±" in shown.loc["Temperature scaling", "NLL"]
    at.selectbox(key="cmp_paired_metric").set_value("nll").run()
    paired = next(d.value for d in at.dataframe if "verdict" in getattr(d.value, "columns", []))
    row = paired.iloc[0]
    assert row["verdict"].startswith("Temperature scaling better: Uncalibrated's NLL is infinite on")
    assert row[list(texts.PAIRED_P_COLUMNS)[0]] == "–"
