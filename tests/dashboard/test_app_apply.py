"""The Fit & apply page under AppTest: fit a recalibrator to download, upload a saved one and apply it.

The numbers on the page are checked against the library called directly (same split, same fit).
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

import pbr_core
from dashboard import runs, texts
from pbr_core.experiments import split_indices
from pbr_core.recalibrators import Recalibrator, TemperatureScaling, load_recalibrator
from test_app_recal import APP, CIFAR10, _downloads, _finish, _metric, _no_internal_names, _page_text

APPLY = "views/apply.py"


@pytest.fixture
def at() -> AppTest:
    app = AppTest.from_file(APP, default_timeout=60)
    app.run()
    app.selectbox(key="data_sample").set_value(CIFAR10).run()
    app.switch_page(APPLY).run()
    assert not app.exception, app.exception
    return app


def _loaded(at: AppTest) -> pbr_core.Predictions:
    return at.session_state["pbr_loaded"].preds


def test_fit_with_a_held_out_check_matches_the_library(at):
    at.slider(key="ship_holdout").set_value(30).run()
    at.number_input(key="ship_seed").set_value(3).run()
    at.button(key="ship_run").click().run()
    result = _finish(at, "ship").result
    preds = _loaded(at)
    re_idx, te_idx = split_indices(preds.n, 7000, fold=0, seed=3)
    ts = TemperatureScaling().fit(preds.subset(re_idx))
    held = preds.subset(te_idx)
    expected = pbr_core.ece(ts.predict_proba(held), held.labels)   # B = floor(3000^(1/3)) = 14
    assert result.after["ece"] == pytest.approx(expected, rel=1e-9)
    assert result.before["ece"] == pytest.approx(pbr_core.ece(held.probs, held.labels), rel=1e-12)
    assert result.recalibrator.temperature_ == pytest.approx(ts.temperature_, rel=1e-9)
    assert (result.n_eval, result.in_sample) == (3000, False)
    assert _metric(at, "ECE after") == f"{expected:.4f}"
    # Temperature scaling never changes the top class: "+0.00 pt" was shown green with an up arrow,
    # as a gain. No change is coloured now (the change alone is no test); the number stays.
    acc = next(m for m in at.metric if m.label == "Accuracy after")
    assert acc.proto.delta == "+0.00 pt"
    assert (acc.proto.color, acc.proto.direction) == (acc.proto.GRAY, acc.proto.NONE)
    # A fall of the ECE is grey too: nothing tests "better" (it was green); the test of calibration does.
    ece = next(m for m in at.metric if m.label == "ECE after")
    assert ece.proto.delta.startswith("-") and (ece.proto.color, ece.proto.direction) == (ece.proto.GRAY, ece.proto.NONE)
    assert texts.ECE_CARD_SEE_TEST in ece.proto.help
    assert any("the 3,000 held-out rows" in m.value for m in at.markdown)
    # Whether each side is calibrated beyond chance on those rows: the test of calibration, as the library gives it.
    from pbr_core.evaluation import measured_calibration_test
    t_before = measured_calibration_test(held.probs, held.labels, "multiclass")
    t_after = measured_calibration_test(ts.predict_proba(held), held.labels, "multiclass")
    assert result.tests[0].p_value == t_before.p_value
    assert result.tests[1].p_value == pytest.approx(t_after.p_value, rel=1e-6, abs=1e-12)
    assert texts.held_out_tests(result.tests, 3000) in [m.value for m in at.markdown]
    assert {"Calibrated predictions (CSV)", "Fitted recalibrator (JSON)", "Session report (HTML)"} <= set(_downloads(at))
    assert any("load_recalibrator(\"temperature_recalibrator.json\")" in c.value for c in at.code)
    # What the JSON button gives is the fitted recalibrator itself.
    doc = json.loads(result.recalibrator_json())
    assert doc["method"] == "temperature" and doc["n_classes"] == 10


def _calibrated_csv(n: int = 720, seed: int = 5) -> bytes:
    """Binary predictions drawn calibrated: y ~ Bernoulli(p), p ~ Beta(2, 2)."""
    rng = np.random.default_rng(seed)
    p = rng.beta(2, 2, n)
    y = (rng.random(n) < p).astype(int)
    return ("p0,p1,label\n" + "".join(f"{1 - q:.17g},{q:.17g},{int(t)}\n" for q, t in zip(p, y))).encode()


def _ece_card(at: AppTest):
    return next(m for m in at.metric if m.label == "ECE after")


@pytest.mark.parametrize("seed,rose", [(1, True), (2, False)])
def test_the_ece_card_is_grey_unless_a_rise_is_shown(at, seed, rose):
    """Calibrated data, temperature scaling (no real gain), 144 held-out rows: the ECE card was green or
    red by the sign of the change (44 % / 55 % of files, audit 6); now grey either way, number kept.
    Seed 1: the ECE rose by 0.0074, not beyond its noise (ece_rise_shown); seed 2: it fell by 0.0137."""
    at.switch_page("views/data.py").run()
    at.file_uploader(key="data_upload").upload("calibrated.csv", _calibrated_csv(), "text/csv").run()
    at.switch_page(APPLY).run()
    at.slider(key="ship_holdout").set_value(20).run()
    at.number_input(key="ship_seed").set_value(seed).run()
    at.button(key="ship_run").click().run()
    result = _finish(at, "ship").result
    assert result.n_eval == 144 and (result.after["ece"] > result.before["ece"]) == rose
    assert result.worse_shown is (False if rose else None)
    card = _ece_card(at)
    assert card.proto.delta == f"{result.after['ece'] - result.before['ece']:+.4f}"
    assert (card.proto.color, card.proto.direction) == (card.proto.GRAY, card.proto.NONE)
    assert texts.ECE_CARD_COLOUR in card.proto.help
    nll = next(m for m in at.metric if m.label == "NLL after")
    assert nll.proto.delta and (nll.proto.color, nll.proto.direction) == (nll.proto.GRAY, nll.proto.NONE)


def test_the_ece_card_is_red_where_the_rise_is_shown(at):
    """A saved temperature scaling with T = 0.3 (far over-confident) applied to calibrated data: the
    rows show the rise (ece_rise_shown), and the card is red with an up arrow."""
    at.switch_page("views/data.py").run()
    at.file_uploader(key="data_upload").upload("calibrated.csv", _calibrated_csv(), "text/csv").run()
    at.switch_page(APPLY).run()
    at.file_uploader(key="apply_upload").upload("t.json", _temperature_doc(at, state={"temperature": 0.3}),
                                                "application/json").run()
    at.button(key="apply_run").click().run()
    result = _finish(at, "apply").result
    assert result.worse_shown is True
    card = _ece_card(at)
    assert card.proto.delta == f"{result.after['ece'] - result.before['ece']:+.4f}"
    assert (card.proto.color, card.proto.direction) == (card.proto.RED, card.proto.UP)


def test_fit_on_every_row_says_the_check_is_in_sample(at):
    at.slider(key="ship_holdout").set_value(0).run()
    assert any("look better than they will on new data" in c.value for c in at.caption)
    at.button(key="ship_run").click().run()
    result = _finish(at, "ship").result
    assert result.in_sample and result.n_eval == _loaded(at).n
    assert result.tests is None  # no test of calibration on the rows it was fitted on
    assert not any("Test of calibration on these" in m.value for m in at.markdown)
    assert any("look better than they will on new data" in w.value for w in at.warning)


def test_upload_a_saved_recalibrator_and_apply_it(at, tmp_path):
    """Fitted on rows A (the first 2,000), checked on A and B (all 10,000): measured on B only, and the
    page says how many rows were fit rows (it measured on all 10,000 before, in-sample in part)."""
    preds = _loaded(at)
    ts = TemperatureScaling().fit(preds.subset(np.arange(2000)))
    path = ts.save(tmp_path / "ts.json")
    at.file_uploader(key="apply_upload").upload("ts.json", path.read_bytes(), "application/json").run()
    assert not at.exception
    assert any("**Temperature scaling** · K = 10 classes, fitted on logits" in m.value for m in at.markdown)
    found = "2,000 of these 10,000 rows are rows it was fitted on"
    assert any(found in w.value and "measured on the other 8,000 rows only" in w.value for w in at.warning)
    at.button(key="apply_run").click().run()
    result = _finish(at, "apply").result
    other = preds.subset(np.arange(2000, preds.n))
    expected = pbr_core.ece(load_recalibrator(path).predict_proba(other), other.labels)
    assert result.after["ece"] == pytest.approx(expected, rel=1e-12)
    assert result.n_eval == 8000 and result.settings is None and not result.in_sample
    assert result.tests is not None  # rows it was not fitted on: the test of calibration is a test
    assert result.fit_row_check.n_identified == 2000 and result.fit_row_check.n_possible == 0
    assert "loaded from ts.json" in result.origin and "8,000 rows" in result.evaluated_on
    assert _metric(at, "ECE after") == f"{expected:.4f}"
    assert any(found in w.value for w in at.warning)  # said again with the result
    assert "Fitted recalibrator (JSON)" not in _downloads(at)   # nothing new to download but the predictions
    from dashboard.report import apply_section

    assert any(found in p for p in apply_section(result).paragraphs)  # the report says the same


def test_a_check_on_other_rows_reports_no_overlap(at, tmp_path):
    preds = _loaded(at)
    path = TemperatureScaling().fit(preds.subset(np.arange(2000))).save(tmp_path / "ts.json")
    at.switch_page("views/data.py").run()
    at.file_uploader(key="data_upload").upload("rest.csv", pbr_core.loading.save_predictions(
        preds.subset(np.arange(2000, preds.n))), "text/csv").run()
    at.switch_page(APPLY).run()
    at.file_uploader(key="apply_upload").upload("ts.json", path.read_bytes(), "application/json").run()
    assert any("Not as far as its file can tell: none of these 8,000 rows has exactly the scores and label of one of "
               "the 2,000 rows it was fitted on" in i.value for i in at.info)
    at.button(key="apply_run").click().run()
    result = _finish(at, "apply").result
    assert result.n_eval == 8000 and result.fit_row_check.state == "none" and result.tests is not None


def test_a_check_on_its_own_fit_rows_is_said_to_be_in_sample(at, tmp_path):
    """The classic mistake (fit on a file, then check on the same file): said to be no check; no test
    of calibration; the ECE card shown grey as an in-sample figure."""
    preds = _loaded(at)
    path = TemperatureScaling().fit(preds).save(tmp_path / "ts.json")
    at.file_uploader(key="apply_upload").upload("ts.json", path.read_bytes(), "application/json").run()
    words = "This check is in-sample and cannot be used as a check"
    assert any(words in w.value for w in at.warning)
    at.button(key="apply_run").click().run()
    result = _finish(at, "apply").result
    assert result.in_sample and result.tests is None and result.worse_shown is None
    assert not any("Test of calibration on these" in m.value for m in at.markdown)
    assert any(words in w.value for w in at.warning)


def _upload_data(at: AppTest, name: str, preds: pbr_core.Predictions) -> None:
    at.switch_page("views/data.py").run()
    at.file_uploader(key="data_upload").upload(name, pbr_core.loading.save_predictions(preds), "text/csv").run()
    at.switch_page(APPLY).run()


def test_new_rows_with_repeated_scores_are_kept_and_its_fit_rows_are_said_to_be_them(at, tmp_path):
    """Audit 8: a random forest's scores repeat; fitted on its first 3,000 rows and checked on the other
    rows (none a fit row), the page left out the rows sharing a fit row's values, picking them by label.
    Now it keeps them, says so, and measures on every row; checked on its 3,000 fit rows, it says the
    file appears to be them (in-sample, no test)."""
    from pathlib import Path

    root = Path(pbr_core.__file__).resolve().parent.parent / "sample_data"
    preds = pbr_core.load_predictions(root / "kitti_random_forest.csv")
    fit, new = preds.subset(np.arange(3000)), preds.subset(np.arange(3000, preds.n))
    path = TemperatureScaling().fit(fit).save(tmp_path / "ts.json")
    _upload_data(at, "new.csv", new)
    at.file_uploader(key="apply_upload").upload("ts.json", path.read_bytes(), "application/json").run()
    words = "Some of these rows may have been used to fit it"
    assert any(words in w.value and "It keeps them: leaving them out would pick rows by their label" in w.value
               and f"It is measured on all {new.n:,} rows" in w.value for w in at.warning)
    at.button(key="apply_run").click().run()
    result = _finish(at, "apply").result
    assert result.n_eval == new.n and result.fit_row_check.state == "shared" and result.tests is not None
    assert result.before["ece"] == pytest.approx(pbr_core.ece(new.probs, new.labels), rel=1e-12)
    _upload_data(at, "fit.csv", fit)
    at.file_uploader(key="apply_upload").upload("ts.json", path.read_bytes(), "application/json").run()
    words = "This file appears to be the 3,000 rows it was fitted on"
    assert any(words in w.value and "This check is in-sample" in w.value for w in at.warning)
    at.button(key="apply_run").click().run()
    result = _finish(at, "apply").result
    assert result.in_sample and result.tests is None and result.worse_shown is None


def test_too_few_rows_left_once_the_fit_rows_are_out_is_refused(at, tmp_path):
    preds = _loaded(at)
    path = TemperatureScaling().fit(preds.subset(np.arange(preds.n - 100))).save(tmp_path / "ts.json")
    at.file_uploader(key="apply_upload").upload("ts.json", path.read_bytes(), "application/json").run()
    assert any("Only 100 other rows are left, fewer than the 144 a check needs" in e.value for e in at.error)
    assert at.button(key="apply_run").disabled


def test_a_file_without_fit_rows_says_the_page_cannot_tell(at, tmp_path):
    """A file written before fingerprints (or saved with fit_rows=False): measured on every row, and
    the page says it cannot tell whether those rows were used to fit it."""
    preds = _loaded(at)
    path = TemperatureScaling().fit(preds).save(tmp_path / "ts.json", fit_rows=False)
    assert "fit_rows" not in json.loads(path.read_text())
    at.file_uploader(key="apply_upload").upload("ts.json", path.read_bytes(), "application/json").run()
    assert any("The page cannot tell" in w.value for w in at.warning)
    at.button(key="apply_run").click().run()
    result = _finish(at, "apply").result
    assert result.n_eval == preds.n and result.fit_row_check.state == "not recorded"


@pytest.mark.parametrize("content,message", [
    (b"not json {", "not a JSON recalibrator file"),
    (b'{"hello": 1}', "Not a pbr-calib recalibrator file"),
])
def test_a_bad_upload_names_the_problem(at, content, message):
    at.file_uploader(key="apply_upload").upload("bad.json", content, "application/json").run()
    assert not at.exception
    assert at.error and message in at.error[0].value and at.error[0].value.startswith("bad.json")
    assert at.button(key="apply_run").disabled


def _temperature_doc(at: AppTest, **change) -> bytes:
    preds = _loaded(at)
    # A hand-set state is no longer the fit of those rows: saved without them (else left out of checks).
    doc = TemperatureScaling().fit(preds.subset(np.arange(500))).to_dict(fit_rows=False)
    return json.dumps({**doc, **change}).encode()


@pytest.mark.parametrize("content,message", [
    # RecursionError in the JSON parser: it used to reach the page as an exception with server paths.
    (lambda at: b"[" * 100_000, "not a JSON recalibrator file (its lists or objects are nested too deeply"),
    # Loaded without a word and gave accuracy 0.07 %: softmax(z / T) with T < 0 ranks classes backwards.
    (lambda at: _temperature_doc(at, state={"temperature": -1.5}),
     "state.temperature must be a finite number above 0, but the file holds -1.5"),
    (lambda at: _temperature_doc(at, state={"temperature": 0}), "must be a finite number above 0, but the file holds 0"),
    # An array of dtype "object" (a TypeError deep in numpy before).
    (lambda at: _temperature_doc(at, state={"temperature": {"__ndarray__": 2.0, "dtype": "object", "shape": []}}),
     'state.temperature must be an array of numbers, but its dtype is "object"'),
    (lambda at: _temperature_doc(at, format_version="1"),
     'the "format_version" field must be the number 1, but the file holds the text "1"'),
])
def test_a_hostile_upload_is_a_plain_error_naming_the_file(at, content, message):
    at.file_uploader(key="apply_upload").upload("bad.json", content(at), "application/json").run()
    assert not at.exception
    assert len(at.error) == 1 and at.error[0].value.startswith("bad.json: ") and message in at.error[0].value
    assert "Traceback" not in at.error[0].value and "/" not in at.error[0].value.split(": ", 1)[0]
    assert at.button(key="apply_run").disabled


def test_a_saved_pbr_file_demanding_unbounded_work_is_refused_in_words(at):
    """Issue 34: n_predict_samples = 2 x 10^7 held the Apply click 12.3 s at 3.66 GB; the file is now
    refused on upload, before any prediction, with the field and its bound named."""
    from pbr_core.recalibrators import get_recalibrator
    from pbr_core.recalibrators._params import MAX_PREDICT_SAMPLES

    doc = get_recalibrator("pbr", max_iter=5, n_mc=5).fit(_loaded(at).subset(np.arange(100))).to_dict()
    doc["params"]["n_predict_samples"] = 2 * 10**7
    at.file_uploader(key="apply_upload").upload("big.json", json.dumps(doc).encode(), "application/json").run()
    assert not at.exception
    assert len(at.error) == 1 and at.error[0].value.startswith("big.json: Damaged 'pbr' recalibrator file: ")
    assert (f"params.n_predict_samples must be an integer from 1 to {MAX_PREDICT_SAMPLES}, but the file holds 20000000"
            in at.error[0].value)
    assert at.button(key="apply_run").disabled and "apply_trial" not in at.session_state  # nothing was predicted


def test_an_upload_over_the_file_bound_is_refused_unparsed(at, monkeypatch):
    from pbr_core.recalibrators import base

    monkeypatch.setattr(base, "MAX_FILE_BYTES", 100)  # the bound scaled to a small file
    at.run()  # the uploader is drawn with the scaled bound (its size limit is part of the widget)
    at.file_uploader(key="apply_upload").upload("big.json", _temperature_doc(at), "application/json").run()
    assert not at.exception
    assert len(at.error) == 1 and at.error[0].value.startswith("big.json: larger than 0 MiB")
    assert at.button(key="apply_run").disabled


def test_an_unexpected_failure_reading_the_upload_is_logged_not_shown(at, monkeypatch, caplog):
    def broken(cls, text, source="recalibrator"):
        raise TypeError("internal detail /srv/pbr_core/secret.py")

    monkeypatch.setattr(Recalibrator, "loads", classmethod(broken))
    with caplog.at_level("ERROR", logger="dashboard.views.apply"):
        at.file_uploader(key="apply_upload").upload("ok.json", b"{}", "application/json").run()
    assert not at.exception
    assert at.error and at.error[0].value.startswith("ok.json: ") and "unexpected error" in at.error[0].value
    assert "secret" not in at.error[0].value and at.button(key="apply_run").disabled
    record = next(r for r in caplog.records if r.name == "dashboard.views.apply")
    assert "ok.json" in record.getMessage() and record.exc_info[0] is TypeError


def test_an_unexpected_failure_of_the_trial_prediction_is_logged_not_shown(at, monkeypatch, caplog):
    def broken(self, preds):
        raise ZeroDivisionError("internal detail")

    content = _temperature_doc(at)
    monkeypatch.setattr(TemperatureScaling, "_predict_proba", broken)
    with caplog.at_level("ERROR", logger="dashboard.views.apply"):
        at.file_uploader(key="apply_upload").upload("ts.json", content, "application/json").run()
    assert not at.exception
    assert at.error and at.error[0].value.startswith("ts.json cannot be applied to ")
    assert "unexpected error" in at.error[0].value and "internal detail" not in at.error[0].value
    assert at.button(key="apply_run").disabled
    record = next(r for r in caplog.records if r.name == "dashboard.views.apply")
    assert record.exc_info[0] is ZeroDivisionError


def test_a_recalibrator_of_another_model_is_refused(at, cifar100):
    logits, labels = cifar100
    doc = TemperatureScaling().fit(logits[:500], labels[:500]).to_dict()
    at.file_uploader(key="apply_upload").upload("c100.json", json.dumps(doc).encode(), "application/json").run()
    assert at.error and "fitted on predictions with 100 classes" in at.error[0].value
    assert "has 10" in at.error[0].value
    assert at.button(key="apply_run").disabled


def test_binary_data_is_measured_on_p_positive(at):
    at.switch_page("views/data.py").run()
    at.selectbox(key="data_sample").set_value("kitti_xgboost.csv").run()
    at.switch_page(APPLY).run()
    at.selectbox(key="ship_method").set_value("platt").run()
    at.button(key="ship_run").click().run()
    result = _finish(at, "ship").result
    held = _loaded(at).subset(split_indices(_loaded(at).n, result.preds.n - result.n_eval, fold=0, seed=0)[1])
    probs = result.recalibrator.predict_proba(held)
    assert result.after["ece"] == pytest.approx(pbr_core.ece(probs[:, 1], held.labels), rel=1e-12)
    assert "Predicted probability p(y=1)" in at.get("plotly_chart")[0].proto.spec


def test_a_gp_fitted_on_logits_is_refused_on_probabilities(at, cifar10, tmp_path):
    from pbr_core.predictions import softmax
    from pbr_core.recalibrators import PBR

    logits, labels = cifar10
    doc = PBR(max_iter=5, n_mc=5).fit(logits[:200], labels[:200]).to_dict()
    # What the page says about a GP recalibrator file (on the CIFAR-10 logits it fits).
    at.file_uploader(key="apply_upload").upload("pbr.json", json.dumps(doc).encode(), "application/json").run()
    described = next(m.value for m in at.markdown if m.value.startswith("**PBR**"))
    assert "K = 10 classes, fitted on logits · KL = " in described and "fitted on cpu, 5 iterations (not converged)" in described
    assert "nan" not in described and not at.button(key="apply_run").disabled
    at.switch_page("views/data.py").run()
    csv = "\n".join(["a,b,c,d,e,f,g,h,i,j,label"] + [",".join(f"{v:.17g}" for v in row) + f",{y}"
                                                      for row, y in zip(softmax(logits[:50]), labels[:50])])
    at.file_uploader(key="data_upload").upload("probs.csv", csv.encode(), "text/csv").run()
    assert _loaded(at).input_type == "probabilities"
    at.switch_page(APPLY).run()
    at.file_uploader(key="apply_upload").upload("pbr.json", json.dumps(doc).encode(), "application/json").run()
    assert not at.exception
    assert at.error and "pbr.json cannot be applied to" in at.error[0].value
    assert "fitted on logits" in at.error[0].value
    assert at.button(key="apply_run").disabled


def test_pbr_for_download_with_few_iterations(at):
    at.slider(key="ship_holdout").set_value(50).run()
    at.selectbox(key="ship_method").set_value("pbr_app").run()
    at.slider(key="ship_alpha").set_value(0.25).run()
    at.number_input(key="ship_max_iter").set_value(15).run()
    at.button(key="ship_run").click().run()
    result = _finish(at, "ship").result
    rec = result.recalibrator
    assert (rec.method, rec.alpha, rec.max_iter) == ("pbr_app", 0.25, 15)
    assert np.isfinite(result.after["ece"]) and rec.kl_ >= 0
    assert json.loads(result.recalibrator_json())["method"] == "pbr_app"
    assert isinstance(result.settings, runs.FitSettings) and texts.settings_words(result.settings)["Settings"] == "α = 0.25, max optimiser iterations = 15"


def test_a_saved_pbr_file_is_described_in_words(at, tmp_path):
    """The issue: "Parameters: alpha = 0.5, objective = 'pbr', mean_approx = False". Now the settings
    that differ from the method's defaults, in the page's words."""
    from pbr_core.recalibrators import get_recalibrator

    rec = get_recalibrator("pbr", alpha=0.25, max_iter=5, n_mc=10, mean_approx=True)
    path = rec.fit(_loaded(at).subset(np.arange(100))).save(tmp_path / "pbr.json")
    at.file_uploader(key="apply_upload").upload("pbr.json", path.read_bytes(), "application/json").run()
    assert not at.exception
    described = [m.value for m in at.markdown if m.value.startswith("**PBR** · K = 10 classes")]
    assert len(described) == 1
    assert described[0].endswith("Settings: α = 0.25, prediction: softmax of the posterior mean (app.), max optimiser "
                                 "iterations = 5, Monte Carlo draws (fit) = 10; the other settings are the method's defaults")
    _no_internal_names(_page_text(at), "the Fit & apply page")


def test_venn_abers_shows_its_interval_and_downloads_it(at, tmp_path):
    """A saved Venn-Abers predictor applied on the page: the mean width of the interval of the
    top class (the ECE's target on CIFAR-10) as the library computes it, and the calibrated-predictions
    download holds each class's interval beside its probability column."""
    import io

    import pandas as pd

    from pbr_core.experiments.runs import interval_summary
    from pbr_core.recalibrators import VennAbers

    preds = _loaded(at)
    va = VennAbers().fit(preds.subset(np.arange(600)))
    path = va.save(tmp_path / "va.json", fit_rows=False)  # measured on every row, as the checks below
    at.file_uploader(key="apply_upload").upload("va.json", path.read_bytes(), "application/json").run()
    at.button(key="apply_run").click().run()
    result = _finish(at, "apply").result
    assert not at.exception, at.exception
    rec = load_recalibrator(path)
    expected = interval_summary(rec, preds, rec.predict_proba(preds), "top_label")
    assert result.interval == expected
    low, high = rec.predict_interval(preds)
    top = rec.predict_proba(preds).argmax(axis=1)
    widths = (high - low)[np.arange(preds.n), top]
    assert expected.mean_width == pytest.approx(widths.mean(), rel=1e-12) and expected.mean_width > 0
    shown = [m.value for m in at.markdown if "Venn-Abers interval" in m.value]
    assert len(shown) == 1 and f"on average **{widths.mean():.3f}** wide" in shown[0]
    assert "ranks first" in shown[0]
    written = pd.read_csv(io.BytesIO(result.calibrated_csv()))
    assert list(written.columns[:3]) == ["0", "0_low", "0_high"]
    np.testing.assert_allclose(written[[f"{k}_high" for k in range(10)]].to_numpy(), high, rtol=0, atol=1e-15)
    assert pbr_core.load_predictions(io.BytesIO(result.calibrated_csv()), format="csv").n == preds.n
    # The report's section says the same
    from dashboard.report import apply_section

    assert any("Venn-Abers interval" in p for p in apply_section(result).paragraphs)


def test_compare_lists_and_runs_the_venn_abers_predictors(at):
    """The Compare page offers both Venn-Abers predictors like any registered method and ranks them
    with the library's numbers."""
    import pandas as pd

    at.switch_page("views/compare.py").run()
    labels = {texts.method_label(m, True) for m in ("venn_abers", "venn_abers_cross")}
    assert labels == {"Venn-Abers (inductive) (top label)", "Venn-Abers (cross) (top label)"}
    assert labels <= set(at.multiselect(key="cmp_methods").options)
    at.multiselect(key="cmp_methods").set_value(["uncalibrated", "venn_abers", "venn_abers_cross"]).run()
    at.number_input(key="cmp_n_re").set_value(300).run()
    at.number_input(key="cmp_n_folds").set_value(2).run()
    at.button(key="cmp_run").click().run()
    table = _finish(at, "compare").result.table
    assert not at.exception, at.exception
    expected = pbr_core.experiments.compare(_loaded(at), ["uncalibrated", "venn_abers", "venn_abers_cross"],
                                            n_re=300, n_folds=2)
    pd.testing.assert_series_equal(table["ece"], expected["ece"])
    assert labels <= set(at.dataframe[0].value.index)


def _tiny_spam(n: int = 60, hard: int = 55, wrong: int = 13, seed: int = 0) -> pbr_core.Predictions:
    """The audit's tiny_spam_60.csv in kind: ``hard`` of ``n`` scores exactly 0 or 1, ``wrong`` of them wrong."""
    rng = np.random.default_rng(seed)
    p = np.r_[rng.integers(0, 2, hard).astype(float), rng.uniform(0.2, 0.8, n - hard)]
    y = (rng.random(n) < p).astype(int)
    y[:wrong] = 1 - p[:wrong].astype(int)   # these exact scores were wrong
    return pbr_core.Predictions.from_arrays(np.c_[1 - p, p], y)


def test_a_small_file_is_warned_about_before_the_fit(at):
    """Audit 8: on a 60-row file the page said only 'Fits on all 60 rows. Nothing is held out…' before Fit; the
    CLI warned that fewer than 288 rows leave the fit unmeasured and that 55 of 60 scores are exactly 0/1 (which
    throws Platt off). The page now says both before Fit is clicked, in the words the result and the CLI use."""
    from dashboard import state
    from pbr_core.experiments import MIN_FIT_ROWS, MIN_TEST_ROWS
    from pbr_core.recalibrators._logistic import hard_scores_warning

    preds = _tiny_spam()
    at.session_state["pbr_loaded"] = state.Loaded(preds=preds, name="tiny", file_name="tiny.csv", origin="upload",
                                                  key="test:tiny")
    at.switch_page(APPLY).run()
    assert not at.exception, at.exception
    small = texts.ship_small_file_warning(60, MIN_FIT_ROWS, MIN_TEST_ROWS, in_sample=True)
    warnings = [w.value for w in at.warning]
    assert small in warnings and MIN_FIT_ROWS + MIN_TEST_ROWS == 288
    assert not any("exactly 0 or 1" in w for w in warnings)   # temperature scaling is not thrown off by them
    at.selectbox(key="ship_method").set_value("platt").run()
    hard = texts.fit_words(hard_scores_warning(preds, "PlattScaling"))
    assert "55 of 60 rows have a probability of exactly 0 or 1, and 13 of those" in hard
    assert hard in [w.value for w in at.warning] and small in [w.value for w in at.warning]
    assert not at.session_state["ship_holdout"]   # nothing held out on 60 rows: the in-sample words


def test_a_fall_of_the_ece_beside_a_test_that_now_finds_miscalibration_is_explained():
    """Audit 8 (CIFAR-100, 450 fit rows, 150 held out): 'ECE after 0.0108, -0.0176' (grey: a fall is not
    coloured, test_fit_with_a_held_out_check_matches_the_library) above 'Before: no evidence (p = 0.173)… After:
    miscalibrated beyond chance (p = 0.034)'. A sentence now says why both can hold, only in that case."""
    from pbr_core.significance import CalibrationTest

    def test(p: float) -> CalibrationTest:
        return CalibrationTest(n=150, effective_n=10.0, p_value=p, method="analytic", z=0.0, p_spiegelhalter=p,
                               chi2_cox=1.0, p_cox=p, detectable_shift=0.067, level=0.035)

    why = texts.held_out_tests_disagree(150)
    assert "on 150 rows neither change has been tested here" in why and "above 0.035 before" in why
    assert texts.held_out_tests((test(0.173), test(0.034)), 150, ece=(0.0284, 0.0108)).endswith(why)
    assert why not in texts.held_out_tests((test(0.173), test(0.034)), 150, ece=(0.0108, 0.0284))  # it rose
    assert why not in texts.held_out_tests((test(0.173), test(0.2)), 150, ece=(0.0284, 0.0108))
    assert why not in texts.held_out_tests((test(0.01), test(0.034)), 150, ece=(0.0284, 0.0108))
    assert why not in texts.held_out_tests((test(0.173), test(0.034)), 150)


def test_rows_written_with_fewer_decimals_are_said_to_be_unrecognisable(at, tmp_path):
    """Platt fitted on 1,000 float64 rows, checked on the same rows written with 6 decimals: 13 or so keep
    their float32 value, and the page said "Some of these rows were used to fit it ... measured on the other
    ... rows only" though every row is a fit row. It now says it cannot tell, and measures on all of them."""
    from pbr_core.recalibrators import PlattScaling

    rng = np.random.default_rng(4)
    p = rng.beta(2, 2, 1000)
    y = (rng.random(1000) < p).astype(int)
    path = PlattScaling().fit(pbr_core.Predictions.from_arrays(p, y)).save(tmp_path / "platt.json")
    _upload_data(at, "rounded.csv", pbr_core.Predictions.from_arrays(np.round(p, 6), y))
    at.file_uploader(key="apply_upload").upload("platt.json", path.read_bytes(), "application/json").run()
    words = ("The page cannot tell: these rows are written with fewer decimals than the rows it was fitted on (6 "
             "decimals here, full precision in the fit), so its fit rows would not be recognised among them. It is "
             "measured on all 1,000 rows")
    assert any(words in w.value for w in at.warning), [w.value for w in at.warning]
    assert not any("Some of these rows were used" in w.value for w in at.warning)
    at.button(key="apply_run").click().run()
    result = _finish(at, "apply").result
    assert result.n_eval == 1000 and result.fit_row_check.state == "coarser"


def test_the_recalibrator_download_can_leave_out_its_fit_rows(at, monkeypatch):
    """Beside the download of a fitted recalibrator: what its fingerprint tells (membership, and labels from
    scores), and a box to leave it out; the file downloaded follows the box."""
    from dashboard import recal_ui

    made: dict[str, dict] = {}
    real = recal_ui.lazy_button

    def capture(label, make, file_name, mime, key, **kwargs):  # the deferred download, made at once
        if key == "ship_dl_recalibrator":
            made["doc"] = json.loads(make())
        real(label, make, file_name, mime, key, **kwargs)

    monkeypatch.setattr(recal_ui, "lazy_button", capture)
    at.button(key="ship_run").click().run()
    _finish(at, "ship")
    box = at.checkbox(key="ship_dl_recalibrator_no_fit_rows")
    assert box.label == texts.LEAVE_OUT_FIT_ROWS and not box.value
    assert "from a row's scores, its label" in box.label and "whether a row was a fit row" in box.label
    assert made["doc"]["fit_rows"]["n_rows"] == 8000  # kept by default: the check of the file leaves them out
    box.check().run()
    assert not at.exception
    assert "fit_rows" not in made["doc"] and made["doc"]["method"] == "temperature"


def test_labels_that_differ_from_the_fit_only_in_case_are_matched_and_said_so(at, tmp_path):
    """Audit 10a: a recalibrator fitted on no / yes refused NO / YES (0 / 1 applied by position)."""
    import pandas as pd

    from pbr_core.recalibrators import PlattScaling

    rng = np.random.default_rng(0)
    p = rng.uniform(0.02, 0.98, 1200)
    frame = pd.DataFrame({"p_churn": p, "churn": np.where(rng.uniform(size=1200) < p ** 1.5, "yes", "no")})
    fitted = pbr_core.load_predictions(frame.iloc[:600].to_csv(index=False).encode(), format="csv")
    path = PlattScaling().fit(fitted).save(tmp_path / "platt.json")
    at.switch_page("views/data.py").run()
    at.file_uploader(key="data_upload").upload("upper.csv", frame.iloc[600:].assign(
        churn=lambda f: f["churn"].str.upper()).to_csv(index=False).encode(), "text/csv").run()
    at.switch_page(APPLY).run()
    at.file_uploader(key="apply_upload").upload("platt.json", path.read_bytes(), "application/json").run()
    assert not at.error and not at.exception
    assert any("names the classes as the recalibrator's file does but for upper and lower case" in i.value
               and "matched ignoring case" in i.value for i in at.info)
    at.button(key="apply_run").click().run()
    assert _finish(at, "apply").result.n_eval == 600


def _padded_csv(n: int = 720, seed: int = 5) -> tuple[bytes, list[str], list[str]]:
    """Calibrated binary predictions with a zero-padded ZIP code and an amount written 4.50."""
    rng = np.random.default_rng(seed)
    p = rng.beta(2, 2, n)
    y = (rng.random(n) < p).astype(int)
    zips = [f"{z:05d}" for z in rng.integers(0, 3000, n)]  # 00501, 01234...
    amounts = [f"{a:.2f}" for a in rng.integers(1, 40, n) / 4]  # 4.50, 2.00
    rows = "".join(f"{z},{a},{q:.6f},{int(t)}\n" for z, a, q, t in zip(zips, amounts, p, y))
    return ("zip,amount,p_yes,label\n" + rows).encode(), zips, amounts


@pytest.fixture
def made(monkeypatch) -> dict:
    """The page's downloads as its buttons would make them: key -> (the bytes' maker, the button's help)."""
    from dashboard import recal_ui

    recorded: dict = {}
    real = recal_ui.lazy_button

    def record(label, make, file_name, mime, key, **kw):  # the page's own download, as the click makes it
        recorded[key] = (make, kw.get("help"))
        real(label, make, file_name, mime, key, **kw)

    monkeypatch.setattr(recal_ui, "lazy_button", record)
    return recorded


@pytest.mark.parametrize("kept", [True, False])
def test_the_download_keeps_a_csv_uploads_other_columns_as_written(at, monkeypatch, kept, made):
    """Audit 11 finding 3: the calibrated-predictions download wrote a ZIP code 01234 of a CSV upload
    back as 1234 (the CLI's apply keeps it) while its words promised "your other columns as they
    were". The page's button now writes the upload's text; an upload too large to keep it (here a
    bound of 10 bytes) is written as read and the words say so."""
    import io

    import pandas as pd

    if not kept:
        monkeypatch.setenv("PBR_CALIB_AS_WRITTEN_BYTES", "10")
    data, zips, amounts = _padded_csv()
    at.switch_page("views/data.py").run()
    at.file_uploader(key="data_upload").upload("zips.csv", data, "text/csv").run()
    at.multiselect(key="data_score_columns").set_value(["p_yes"])  # the amount is a number, not a score
    at.button(key="data_apply").click().run()
    assert not at.exception, at.exception
    assert at.session_state["pbr_loaded"].file_name == "zips.csv"
    at.switch_page(APPLY).run()
    at.slider(key="ship_holdout").set_value(20).run()
    at.button(key="ship_run").click().run()
    _finish(at, "ship")
    make, help_text = made["ship_dl_predictions"]
    written = pd.read_csv(io.BytesIO(make()), dtype=str, keep_default_na=False)
    assert list(written.columns[:4]) == ["zip", "amount", "p_yes", "label"]
    if kept:
        assert written["zip"].tolist() == zips
        assert written["amount"].tolist() == amounts
        assert texts.CALIBRATED_COLUMNS_WORDS in help_text
    else:
        assert written["zip"].tolist() == [str(int(z)) for z in zips]
        assert texts.CALIBRATED_COLUMNS_AS_READ_WORDS in help_text and texts.CALIBRATED_COLUMNS_WORDS not in help_text
    assert any(z.startswith("0") for z in zips) and any(a.endswith("0") for a in amounts)


def test_the_download_of_an_excel_export_keeps_its_dialect_and_percentages(at, made):
    """Audit 12a: the calibrated-predictions download of a ';' export with decimal commas, a
    byte-order mark and CRLF came back comma-separated (one column in the same spreadsheet), and its
    percentages (93,3, read with *Scores are percentages*) came back as fractions under the same
    header. It is now written as the upload was, and the button's help says how."""
    from test_download_dialect import BOM, HEADER, _lines, excel_export

    data, rows = excel_export(720, seed=3)
    at.switch_page("views/data.py").run()
    at.file_uploader(key="data_upload").upload("export.csv", data, "text/csv").run()
    at.selectbox(key="data_label_column").set_value("decision")
    at.multiselect(key="data_score_columns").set_value(["p_approved"])
    at.checkbox(key="data_percent").check()
    at.button(key="data_apply").click().run()
    assert not at.exception and not at.error, (at.exception, [e.value for e in at.error])
    loaded = at.session_state["pbr_loaded"]
    at.switch_page(APPLY).run()
    at.slider(key="ship_holdout").set_value(20).run()
    at.button(key="ship_run").click().run()
    result = _finish(at, "ship").result
    make, help_text = made["ship_dl_predictions"]
    written = make()
    assert written.startswith(BOM)
    lines = _lines(written)
    assert lines[0] == ";".join(HEADER + [runs.FIT_ROWS_COLUMN]) and len(lines) == len(rows) + 2
    expected = result.recalibrator.predict_proba(loaded.preds)[:, 1]
    for row, line, p in zip(rows, lines[1:], expected):
        cells = line.rsplit(";", 3)
        assert cells[0] == ";".join(row[:3]) + ";" + ('"' + row[3].replace('"', '""') + '"' if ";" in row[3]
                                                      or '"' in row[3] else row[3])
        assert float(cells[1].replace(",", ".")) == pytest.approx(100 * p, rel=1e-11, abs=1e-13)
        assert "." not in cells[1] and cells[2] == row[5]
    assert ("Written in your file's own CSV format: semicolon-separated, decimal commas, UTF-8 with a byte-order "
            "mark, CRLF (Windows) line ends; 'p_approved' held percentages: the calibrated probabilities are "
            "written there as percentages too (0.8455 as 84,55)") in help_text
