"""Fits of a K x K matrix (matrix scaling, Dirichlet calibration, SMS) are queued, estimated and bounded
by their cost (audit 12c, finding 2): before, they ran as "classical" fits, never queued, with no word
of their time, and Dirichlet calibration on 1,000 classes ran for minutes.

The pages run on the bundled CIFAR-100 sample (10,000 rows, K = 100); the server's limit is scaled
down through ``PBR_CALIB_RECAL_MAX_SECONDS`` so that the refusal shows without a long file.
"""

from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest

from dashboard import fit_estimate, recal_ui
from test_app_recal import APP

CIFAR100 = "cifar100_densenet121.npz"


@pytest.fixture
def app() -> AppTest:
    at = AppTest.from_file(APP, default_timeout=60)
    at.run()
    at.selectbox(key="data_sample").set_value(CIFAR100).run()
    return at


@pytest.fixture
def started(monkeypatch) -> list:
    """Each job the page starts, as (kind, heavy), without running it."""
    calls: list = []
    monkeypatch.setattr(recal_ui, "start", lambda kind, label, work, *, heavy: calls.append((kind, heavy)))
    return calls


def _texts(at: AppTest) -> str:
    return "\n".join([e.value for e in at.error] + [i.value for i in at.info] + [c.value for c in at.caption])


def test_the_estimate_follows_the_measured_model():
    # matrix scaling: 0.85 s at n = 2,000, K = 100, times (K/100)^2.75 (n/2000)^1
    assert fit_estimate.recal_seconds("matrix_scaling", 4000, 200) == pytest.approx(0.85 * 2 ** 2.75 * 2)
    assert fit_estimate.recal_seconds("dirichlet", 2000, 300) == pytest.approx(12.8 * 3 ** 2.5)
    # max_iter beyond the default (2,000) lets a fit run that many times longer
    assert fit_estimate.recal_seconds("dirichlet", 2000, 100, max_iter=20_000) == pytest.approx(128.0)
    assert fit_estimate.recal_seconds("temperature", 10 ** 6, 10_000) == 0.0
    assert fit_estimate.recal_heavy("matrix_scaling", 100) and not fit_estimate.recal_heavy("matrix_scaling", 10)
    assert not fit_estimate.recal_heavy("vector_scaling", 10_000)


def test_fit_and_apply_queues_a_matrix_fit_on_many_classes_with_the_gp_fits(app, started):
    app.switch_page("views/apply.py").run()
    app.selectbox(key="ship_method").set_value("matrix_scaling").run()
    assert "Estimated time: about 3 s for 1 fit of a K × K matrix" in _texts(app)  # 0.85 * 4 * 8000/2000
    app.button(key="ship_run").click().run()
    assert started == [("ship", True)]


def test_fit_and_apply_refuses_a_matrix_fit_beyond_the_limit_and_offers_vector_scaling(app, started, monkeypatch):
    monkeypatch.setenv("PBR_CALIB_RECAL_MAX_SECONDS", "10")
    app.switch_page("views/apply.py").run()
    app.selectbox(key="ship_method").set_value("dirichlet").run()
    text = _texts(app)
    # 12.8 s * (8000/2000)^0.15 = 15.8 s
    assert ("Dirichlet calibration (ODIR) fits a 100 × 100 matrix here: on 8,000 rows that would take about 16 s "
            "(estimated), more than the 10 s this server allows for one run. Choose vector scaling or temperature "
            "scaling instead") in text
    assert app.button(key="ship_run").disabled  # nothing to start
    assert started == []


def test_temperature_scaling_says_nothing_of_a_matrix(app, started):
    app.switch_page("views/apply.py").run()
    app.selectbox(key="ship_method").set_value("temperature").run()
    assert "K × K matrix" not in _texts(app)
    app.button(key="ship_run").click().run()
    assert started == [("ship", False)]


def test_compare_counts_every_fold_and_refuses_with_fewer_folds_offered(app, started, monkeypatch):
    monkeypatch.setenv("PBR_CALIB_RECAL_MAX_SECONDS", "60")
    app.switch_page("views/compare.py").run()
    app.multiselect(key="cmp_methods").set_value(["temperature", "matrix_scaling"]).run()
    app.number_input(key="cmp_n_re").set_value(2000).run()
    app.number_input(key="cmp_n_folds").set_value(50).run()
    text = _texts(app)  # 50 folds x 0.85 s
    assert "over 50 folds" not in text  # 42.5 s: within 60 s
    assert "Estimated time: about 42 s for 50 fits of a K × K matrix" in text
    app.number_input(key="cmp_n_folds").set_value(10).run()
    app.button(key="cmp_run").click().run()
    assert started == [("compare", True)]
    app.multiselect(key="cmp_methods").set_value(["temperature", "dirichlet"]).run()
    text = _texts(app)  # 10 folds x 12.8 s = 128 s
    assert ("Dirichlet calibration (ODIR) fits a 100 × 100 matrix here: on 2,000 rows over 10 folds that would take "
            "about 2 min (estimated), more than the 60 s this server allows for one run. Choose vector scaling or "
            "temperature scaling instead, which fit 100 numbers or one and take seconds, or use fewer folds, fewer "
            "rows or a file with fewer classes.") in text


def _matrix_doc(k: int) -> bytes:
    """A saved matrix-scaling recalibrator of ``k`` classes as pbr-calib writes one (its weights 0),
    as in the audit's probe: 48 MiB at k = 5,000."""
    row = "[" + ",".join(["0"] * k) + "]"
    return (('{"format": "pbr-calib-recalibrator", "format_version": 1, "method": "matrix_scaling", "params": '
             '{"off_diagonal_reg": 1000.0, "bias_reg": 1.0, "max_iter": 2000, "tol": 1e-09}, "n_classes": %d, '
             '"input_type": "probabilities", "class_names": null, "state": {"weights": {"__ndarray__": [%s], '
             '"dtype": "float64", "shape": [%d, %d]}, "bias": {"__ndarray__": [%s], "dtype": "float64", "shape": '
             '[%d]}, "input_smoothing": 0.0}}') % (k, ",".join([row] * k), k, k, ",".join(["0"] * k), k)).encode()


@pytest.fixture
def never_parsed(monkeypatch):
    from pbr_core.recalibrators import Recalibrator

    def refuse(cls, text, source="recalibrator"):
        raise AssertionError("the file was parsed")
    monkeypatch.setattr(Recalibrator, "loads", classmethod(refuse))


def test_a_saved_matrix_of_more_classes_than_the_page_uses_is_refused_unparsed(app, never_parsed):
    app.switch_page("views/apply.py").run()
    app.file_uploader(key="apply_upload").upload("big_matrix.json", _matrix_doc(1500), "application/json").run()
    assert not app.exception
    assert [e.value for e in app.error] == [
        "big_matrix.json: a saved Matrix scaling of 1,500 classes, more than the 1,000 classes this page applies "
        "for that method (a 1,500 × 1,500 matrix). Fit vector scaling or temperature scaling instead, which apply to "
        "any number of classes."]
    assert app.button(key="apply_run").disabled


def test_a_saved_recalibrator_over_the_pages_byte_limit_is_refused_unread(app, never_parsed, monkeypatch):
    monkeypatch.setattr(recal_ui, "SAVED_MAX_BYTES", 10_240)  # scaled down from 24 MiB
    app.switch_page("views/apply.py").run()
    doc = _matrix_doc(100)
    assert len(doc) == 20_815  # 20.3 KB
    app.file_uploader(key="apply_upload").upload("m.json", doc, "application/json").run()
    assert len(app.error) == 1 and app.error[0].value.startswith(
        "m.json: 20.3 KB, more than the 10 KB a recalibrator file may be here; it was not read.")


def test_a_saved_matrix_within_the_limits_is_read(app):
    app.switch_page("views/apply.py").run()
    app.file_uploader(key="apply_upload").upload("m.json", _matrix_doc(100), "application/json").run()
    assert not app.error and not app.exception
    assert not app.button(key="apply_run").disabled


def test_fit_refuses_a_matrix_of_more_classes_than_the_limit(monkeypatch, app, started):
    monkeypatch.setattr(fit_estimate, "RECAL_MAX_CLASSES", 50)  # the sample's 100 classes over it
    app.switch_page("views/apply.py").run()
    app.selectbox(key="ship_method").set_value("sms").run()
    assert ("Structured matrix scaling (SMS) fits a 100 × 100 matrix here, more than this server fits (up to 50 "
            "classes): its memory and time grow with the square of the classes. Choose vector scaling or temperature "
            "scaling instead, which fit 100 numbers or one and take seconds.") in _texts(app)
    assert app.button(key="ship_run").disabled


def test_the_sweep_of_a_matrix_fit_on_many_classes_is_queued_too(app, started):
    from dashboard.sections import sweep

    app.switch_page("views/compare.py").run()
    app.multiselect(key="cmp_methods").set_value(["matrix_scaling"]).run()
    values = app.multiselect(key=sweep.K_SWEEP_VALUES)
    values.set_value(values.options[:1] if not values.value else values.value[:1]).run()
    app.button(key="sweep_run").click().run()
    assert started == [("sweep", True)]


def test_the_sweep_says_how_long_its_matrix_fits_take_and_refuses_beyond_the_limit(app, started, monkeypatch):
    """The sweep fits each chosen n_re value in each fold: its estimate counts them all, and a sweep over the
    server's limit is refused as the comparison's own run is (it used to start with no word of its time)."""
    from dashboard.sections import sweep

    app.switch_page("views/compare.py").run()
    app.multiselect(key="cmp_methods").set_value(["matrix_scaling"]).run()
    app.multiselect(key=sweep.K_SWEEP_VALUES).set_value([1000, 3000]).run()
    assert app.multiselect(key=sweep.K_SWEEP_VALUES).value == [1000, 3000]
    app.number_input(key=sweep.K_SWEEP_FOLDS).set_value(3).run()
    # 3 folds x (0.425 s at 1,000 rows + 1.275 s at 3,000) = 5.1 s
    assert "Estimated time: about 5 s for 6 fits of a K × K matrix" in _texts(app)
    assert not app.button(key="sweep_run").disabled
    monkeypatch.setenv("PBR_CALIB_RECAL_MAX_SECONDS", "3")
    app.run()
    assert ("Matrix scaling fits a 100 × 100 matrix here: on up to 3,000 rows (2 fits per fold) over 3 folds that "
            "would take about 5 s (estimated), more than the 3 s this server allows for one run.") in _texts(app)
    assert app.button(key="sweep_run").disabled and started == []


def test_a_group_gap_run_of_a_matrix_fit_counts_every_groups_fit(started, monkeypatch):
    """Group gaps fit every row and each group in each fold: estimated from them all, refused beyond the limit."""
    at = AppTest.from_file(APP, default_timeout=60)
    at.run()
    at.selectbox(key="data_sample").set_value("adult_gradient_boosting.csv.gz").run()
    at.switch_page("views/compare.py").run()
    at.number_input(key="cmp_n_re").set_value(3000).run()
    at.selectbox(key="gap_by").set_value("sex").run()
    at.selectbox(key="gap_method").set_value("matrix_scaling").run()
    at.number_input(key="gap_n_folds").set_value(2).run()
    assert "for 6 fits of a K × K matrix" in _texts(at)  # 2 folds x (every row, then the two sexes)
    monkeypatch.setenv("PBR_CALIB_RECAL_MAX_SECONDS", "0.0001")
    at.run()
    assert "on up to 3,000 rows (3 fits per fold) over 2 folds that would take about" in _texts(at)
    assert at.button(key="gap_run").disabled
    at.selectbox(key="gap_method").set_value("platt").run()
    assert "K × K matrix" not in _texts(at) and not at.button(key="gap_run").disabled
