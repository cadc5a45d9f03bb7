"""Where data scientists work (issue 38), as a notebook would use the library, on real bundled data:
tables in memory (pandas, pyarrow, polars), a scikit-learn model's predictions, and a recalibrator
behind the model as one scikit-learn classifier."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import pbr_core
from pbr_core import Predictions

SAMPLES = Path(__file__).resolve().parents[1] / "sample_data"


def _same(a: Predictions, b: Predictions) -> None:
    assert (a.kind, a.n, a.class_names, a.input_type) == (b.kind, b.n, b.class_names, b.input_type)
    np.testing.assert_array_equal(a.probs, b.probs)
    np.testing.assert_array_equal(a.labels, b.labels)
    assert a.column_roles == b.column_roles and a.notes == b.notes
    if b.metadata is not None:
        pd.testing.assert_frame_equal(a.metadata.reset_index(drop=True), b.metadata.reset_index(drop=True))


# ----------------------------------------------------------------------------- tables in memory
@pytest.mark.parametrize("name", ["adult_gradient_boosting.csv.gz", "kitti_multiclass_random_forest.csv",
                                  "llm_qa_confidence_correct.csv.gz"])
def test_a_dataframe_reads_as_the_same_csv_does(name):
    path = SAMPLES / name
    from_file = pbr_core.load_predictions(path)
    df = pd.read_csv(path)
    _same(pbr_core.load_predictions(df), from_file)
    import pyarrow as pa

    table = pa.Table.from_pandas(df, preserve_index=False)
    _same(pbr_core.load_predictions(table), from_file)
    assert table.num_rows == len(df)   # the caller's table is not consumed
    _same(pbr_core.load_predictions(df, group_columns="race") if "adult" in name else from_file,
          pbr_core.load_predictions(path, group_columns="race") if "adult" in name else from_file)


def test_a_polars_dataframe_when_polars_is_installed():
    pl = pytest.importorskip("polars", reason="polars is optional: detected, never required")
    path = SAMPLES / "kitti_random_forest.csv"
    _same(pbr_core.load_predictions(pl.read_csv(path)), pbr_core.load_predictions(path))


def test_options_and_errors_are_a_files():
    df = pd.read_csv(SAMPLES / "kitti_multiclass_random_forest.csv")
    with pytest.raises(pbr_core.PredictionsError, match=r"^DataFrame: .*no column 'nope'|^DataFrame: .*'nope'"):
        pbr_core.load_predictions(df, label_column="nope")
    named = pbr_core.load_predictions(df.rename(columns={"label": "truth"}), label_column="truth", name="export")
    assert named.source == "export" and named.n == len(df)
    indexed = df.set_index(pd.Index(np.arange(len(df)) + 5000, name="row_id"))
    assert "row_id" in pbr_core.load_predictions(indexed).metadata.columns   # a named index is a column
    with pytest.raises(pbr_core.PredictionsError, match="more than the limit of 10 rows"):
        pbr_core.load_predictions(df, max_rows=10)


# ----------------------------------------------------------------------------- scikit-learn models
@pytest.fixture(scope="module")
def adult_model():
    """A gradient-boosting model on the real Adult rows' metadata (numbers only), as a notebook has."""
    from sklearn.ensemble import HistGradientBoostingClassifier

    adult = pbr_core.load_predictions(SAMPLES / "adult_gradient_boosting.csv.gz")
    X = pd.get_dummies(adult.metadata, dtype=float).to_numpy()
    y = np.where(adult.labels == 1, ">50K", "<=50K")
    model = HistGradientBoostingClassifier(max_iter=60, random_state=0).fit(X[:8000], y[:8000])
    return model, X, y


def test_predictions_from_an_estimator_and_from_predictions(adult_model):
    model, X, y = adult_model
    preds = Predictions.from_estimator(model, X[8000:], y[8000:])
    assert preds.kind == "binary" and preds.class_names == ("<=50K", ">50K")
    np.testing.assert_allclose(preds.probs, model.predict_proba(X[8000:]))
    assert preds.labels.tolist() == [int(v == ">50K") for v in y[8000:]]
    same = Predictions.from_predictions(y[8000:], model.predict_proba(X[8000:])[:, 1])
    np.testing.assert_allclose(same.probs, preds.probs)
    assert same.class_names == preds.class_names
    # scikit-learn's own ECE reading: the binned gaps of calibration_curve equal pbr-calib's on p(y=1)
    from sklearn.calibration import calibration_curve

    frac, mean = calibration_curve(same.labels, same.p_positive, n_bins=5)
    table = pbr_core.reliability_diagram(same.p_positive, same.labels, 5)
    full = table[table["count"] > 0]
    np.testing.assert_allclose(full["accuracy"], frac, rtol=1e-12)
    np.testing.assert_allclose(full["mean_confidence"], mean, rtol=1e-12)
    with pytest.raises(pbr_core.PredictionsError, match="label 'maybe' is not one of the classes"):
        Predictions.from_estimator(model, X[:3], ["maybe", ">50K", ">50K"])
    with pytest.raises(pbr_core.PredictionsError, match="1-D y_prob is p\\(y = positive class\\)"):
        Predictions.from_predictions([0, 1, 2], [0.1, 0.5, 0.9])


def test_calibrated_model_is_a_scikit_learn_classifier(adult_model, tmp_path):
    from sklearn.base import clone
    from sklearn.model_selection import cross_val_score
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    from pbr_core.recalibrators import PlattScaling, TemperatureScaling

    model, X, y = adult_model
    clf = pbr_core.CalibratedModel(model, PlattScaling()).fit(X[8000:12000], y[8000:12000])
    assert list(clf.classes_) == ["<=50K", ">50K"] and clf.input_ == "predict_proba"
    proba = clf.predict_proba(X[12000:])
    # the recalibrator alone on the model's probabilities gives the same numbers
    direct = PlattScaling().fit(Predictions.from_estimator(model, X[8000:12000], y[8000:12000]))
    np.testing.assert_allclose(proba, direct.predict_proba(model.predict_proba(X[12000:])), rtol=1e-12)
    assert set(clf.predict(X[12000:12010])) <= {"<=50K", ">50K"}
    # clone keeps the fitted model (frozen) and gives a fresh recalibrator
    twin = clone(clf)
    assert twin.estimator is model and not hasattr(twin, "recalibrator_")
    assert twin.get_params()["recalibrator"].get_params() == PlattScaling().get_params()
    # inside cross_val_score: only the recalibrator is fitted, on each fold
    scores = cross_val_score(pbr_core.CalibratedModel(model, TemperatureScaling()), X[8000:12000], y[8000:12000],
                             cv=3, scoring="neg_log_loss")
    assert scores.shape == (3,) and np.all(np.isfinite(scores))
    # the last step of a Pipeline (the model here is the pipeline's own fitted steps)
    pipe_model = make_pipeline(StandardScaler(), model.__class__(max_iter=30, random_state=0)).fit(X[:8000], y[:8000])
    piped = pbr_core.CalibratedModel(pipe_model, TemperatureScaling()).fit(X[8000:12000], y[8000:12000])
    assert piped.predict_proba(X[:5]).shape == (5, 2)
    # saved as the recalibrator's JSON with a note of the model; loaded behind the same model
    path = clf.save(tmp_path / "calibrated.json")
    back = pbr_core.CalibratedModel.load(path, model)
    np.testing.assert_array_equal(back.predict_proba(X[12000:]), proba)
    assert pbr_core.recalibrators.load_recalibrator(path).method == "platt"   # also a plain recalibrator file


def test_calibrated_model_uses_the_decision_function_for_scaling_on_logits():
    from sklearn.datasets import load_iris
    from sklearn.linear_model import LogisticRegression

    from pbr_core.recalibrators import TemperatureScaling

    X, y = load_iris(return_X_y=True)
    model = LogisticRegression(max_iter=1000).fit(X[::2], y[::2])
    clf = pbr_core.CalibratedModel(model, TemperatureScaling()).fit(X[1::2], y[1::2])
    assert clf.input_ == "decision_function"
    T = clf.recalibrator_.temperature_
    z = model.decision_function(X[:4]) / T
    expected = np.exp(z - z.max(axis=1, keepdims=True))
    np.testing.assert_allclose(clf.predict_proba(X[:4]), expected / expected.sum(axis=1, keepdims=True), rtol=1e-9)
    with pytest.raises(ValueError, match="fit it first"):
        pbr_core.CalibratedModel(LogisticRegression()).fit(X, y)


def test_calibrated_model_load_checks_the_model_against_the_file(tmp_path):
    # audit 10a finding 10: a model without the recorded input was accepted, then failed with a bare
    # AttributeError at predict_proba
    import warnings

    from sklearn.datasets import load_breast_cancer
    from sklearn.linear_model import LogisticRegression, SGDClassifier
    from sklearn.naive_bayes import GaussianNB

    from pbr_core.recalibrators import TemperatureScaling

    X, y = load_breast_cancer(return_X_y=True)
    lr = LogisticRegression(max_iter=5000).fit(X[:300], y[:300])
    path = pbr_core.CalibratedModel(lr, TemperatureScaling()).fit(X[300:], y[300:]).save(tmp_path / "cm.json")
    with pytest.raises(ValueError, match=r"cm.json: fitted on the decision_function of a sklearn.linear_model.*"
                                         r"this GaussianNB has no decision_function"):
        pbr_core.CalibratedModel.load(path, GaussianNB().fit(X[:300], y[:300]))
    other = SGDClassifier(random_state=0).fit(X[:300], y[:300])   # has decision_function, another class
    with pytest.warns(UserWarning, match="fitted behind a sklearn.linear_model._logistic.LogisticRegression, but this "
                                         "model is a sklearn.linear_model._stochastic_gradient.SGDClassifier"):
        back = pbr_core.CalibratedModel.load(path, other)
    assert back.predict_proba(X[:3]).shape == (3, 2)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        same = pbr_core.CalibratedModel.load(path, lr)   # the model it was fitted behind: silent
    assert same.predict_proba(X[:3]).shape == (3, 2)


def test_a_damaged_model_note_is_refused(tmp_path):
    import json

    from pbr_core.recalibrators import RecalibratorFileError, TemperatureScaling, load_recalibrator

    preds = pbr_core.load_predictions(SAMPLES / "cifar10_resnet110.npz").subset(range(500))
    data = TemperatureScaling().fit(preds).to_dict()
    for bad in ({"model": 1, "classes": list(preds.class_names), "input": "predict_proba"},
                {"model": "m", "classes": ["a"], "input": "predict_proba"},
                {"model": "m", "classes": list(preds.class_names), "input": "pickle"}):
        path = tmp_path / "bad.json"
        path.write_text(json.dumps({**data, "calibrated_model": bad}))
        with pytest.raises(RecalibratorFileError, match="calibrated_model must be a note"):
            load_recalibrator(path)


def test_values_show_as_html_tables_in_a_notebook():
    from pbr_core.groups import calibration_by_group, gap_statement

    adult = pbr_core.load_predictions(SAMPLES / "adult_gradient_boosting.csv.gz")
    shown = adult._repr_html_()
    assert "<table" in shown and "16,281" in shown and "ECE of p(y=1), B = 25" in shown
    report = calibration_by_group(adult, "sex", n_boot=20)
    html = report._repr_html_()
    assert "Female" in html and "no evidence that the predictions are off on average" in html
    import html as html_lib

    assert html_lib.escape(gap_statement(report)) in html
    summary = pbr_core.calibration_summary(adult.p_positive, adult.labels, n_boot=20)
    assert isinstance(summary, dict) and "Brier score" in summary._repr_html_()
    # names are text, never markup
    hostile = Predictions.from_predictions(["a", "b", "b"], [0.2, 0.6, 0.7], source="<img src=x onerror=alert(1)>")
    assert "<img" not in hostile._repr_html_() and "&lt;img src=x" in hostile._repr_html_()


# ----------------------------------------------------------------------------- figures (pbr_core.plot)
def _bars(fig, name):
    from pbr_core.plot import trace

    return trace(fig, name)


def test_the_reliability_figure_draws_the_librarys_table():
    import pbr_core.plot
    from pbr_core.plot import diagrams as D

    adult = pbr_core.load_predictions(SAMPLES / "adult_gradient_boosting.csv.gz")
    fig = pbr_core.plot.reliability(adult)                       # binary: p(y=1), B = floor(n^(1/3)) = 25
    table = pbr_core.reliability_diagram(adult.p_positive, adult.labels, pbr_core.optimal_n_bins(adult.n))
    assert len(table) == 25 and fig.layout.xaxis2.title.text == "Predicted probability p(y=1)"
    bars = _bars(fig, "Observed frequency of y = 1 per bin")
    np.testing.assert_array_equal(bars.y, table["accuracy"])
    np.testing.assert_allclose(bars.error_y.array, table["ci_high"] - table["accuracy"], rtol=1e-12)
    np.testing.assert_array_equal(_bars(fig, D.TRACE_COUNTS).y, table["count"])
    full = (table["count"] > 0).to_numpy()
    band = _bars(fig, D.TRACE_BANDS)                             # the consistency band of every bin
    np.testing.assert_array_equal(np.asarray(band.base, float)[full], table["band_low"][full])
    wide = full & (table["band_high"] - table["band_low"] >= 0.004).to_numpy()
    np.testing.assert_allclose((np.asarray(band.base, float) + np.asarray(band.y, float))[wide],
                               table["band_high"][wide], rtol=1e-12)
    over = _bars(fig, D.TRACE_OVER_BINARY)                       # the gap boxes: the bars' share of the ECE
    gap_sum = np.nansum(np.asarray(over.y, float) * table["weight"]) + np.nansum(
        np.asarray(_bars(fig, D.TRACE_UNDER_BINARY).y, float) * table["weight"])
    assert gap_sum == pytest.approx(pbr_core.ece(adult.p_positive, adult.labels), rel=1e-12)

    # arrays work too: CIFAR-10 logits' softmax, the top label, B given
    c10 = pbr_core.load_predictions(SAMPLES / "cifar10_resnet110.npz")
    fig = pbr_core.plot.reliability(c10.probs, c10.labels, n_bins=15, bands=False)
    table = pbr_core.reliability_diagram(c10.probs, c10.labels, 15)
    np.testing.assert_array_equal(_bars(fig, D.TRACE_ACCURACY).y, table["accuracy"])
    assert fig.layout.yaxis.title.text == "Accuracy" and D.TRACE_BANDS not in [t.name for t in fig.data]
    with pytest.raises(ValueError, match="Expected `labels`"):
        pbr_core.plot.reliability(c10.probs)
    # equal-mass bins, as the Reliability page offers (no consistency band: the table has none)
    from pbr_core.estimators import reliability_equal_mass

    fig = pbr_core.plot.reliability(adult, binning="mass")
    table = reliability_equal_mass(adult.p_positive, adult.labels, n_bins=25)
    np.testing.assert_array_equal(_bars(fig, "Observed frequency of y = 1 per bin").y, table["accuracy"])
    np.testing.assert_array_equal(_bars(fig, D.TRACE_COUNTS).y, table["count"])


def test_ece_against_b_draws_the_curve_and_theorem_1():
    import pbr_core.plot
    from pbr_core.plot import bins as BI, marker_b

    kitti = pbr_core.load_predictions(SAMPLES / "kitti_random_forest.csv")
    fig = pbr_core.plot.ece_vs_bins(kitti, max_bins=60, lipschitz=2.0, eps=0.1)
    p, y = kitti.p_positive, kitti.labels
    Bs = np.arange(1, 61)
    curve = pbr_core.ece_curve(p, y, n_bins=Bs)
    np.testing.assert_array_equal(_bars(fig, BI.TRACE_ECE).y, curve)
    bound = pbr_core.theorem1_bound(kitti.n, Bs, lipschitz=2.0, eps=0.1)
    np.testing.assert_allclose(_bars(fig, BI.TRACE_BAND_HIGH).y, np.clip(curve + bound, 0, 1), rtol=1e-12)
    np.testing.assert_allclose(_bars(fig, BI.TRACE_BINNING).y, pbr_core.theorem1_binning_bias(Bs, lipschitz=2.0))
    np.testing.assert_allclose(_bars(fig, BI.TRACE_ESTIMATION).y,
                               pbr_core.theorem1_estimation_bias(kitti.n, Bs, eps=0.1))
    assert marker_b(fig, BI.TRACE_OPTIMAL_B) == pbr_core.optimal_n_bins(kitti.n) == 20
    assert marker_b(fig, BI.TRACE_MINIMISING_B) == pbr_core.bound_minimizing_n_bins(kitti.n, lipschitz=2.0, eps=0.1)
    assert "(90%)" in _bars(fig, BI.TRACE_BAND_HIGH).name
    # the default: B up to min(100, n), the app's binary ECE of p(y=1); the top label on request
    top = pbr_core.plot.ece_vs_bins(kitti, target="top_label")
    np.testing.assert_array_equal(_bars(top, BI.TRACE_ECE).y, pbr_core.ece_curve(kitti.probs, y, n_bins=range(1, 101)))
    assert _bars(top, BI.TRACE_ECE).y[19] != curve[19]            # the top label is not p(y=1)


def test_the_groups_figure_draws_each_groups_curve():
    import pbr_core.plot
    from pbr_core.groups import calibration_by_group

    adult = pbr_core.load_predictions(SAMPLES / "adult_gradient_boosting.csv.gz")
    report = calibration_by_group(adult, "race", n_boot=20)
    fig = pbr_core.plot.groups(report)
    from pbr_core.plot.diagrams import TRACE_SPARSE_BINS

    def curves(traces):  # one per group: not the hollow circles of its sparse bins, nor their legend entry
        return [t.name for t in traces[1:] if t.showlegend is not False and not t.name.startswith(TRACE_SPARSE_BINS)]

    shown = curves(fig.data)
    assert shown == [g for g in report.table["group"] if g not in report.small]   # largest first
    for g in shown:
        d = report.diagrams[g]
        d = d[d["count"] >= 10]  # a curve joins its bins of 10 rows or more (the others: hollow circles)
        np.testing.assert_array_equal(_bars(fig, g).x, d["mean_confidence"])
        np.testing.assert_array_equal(_bars(fig, g).y, d["accuracy"])
    assert fig.layout.yaxis.title.text == "Observed frequency of y = 1"
    two = pbr_core.plot.groups(report, most=2).data
    assert curves(two) == shown[:2]


def test_a_comparison_draws_the_compare_table_and_its_diagrams():
    import pbr_core.plot
    from pbr_core.experiments import CompareSettings, compare, summarize
    from pbr_core.experiments.runs import run_compare
    from pbr_core.plot import studies as ST

    c10 = pbr_core.load_predictions(SAMPLES / "cifar10_resnet110.npz")
    table = compare(c10, ["uncalibrated", "temperature"], n_re=1000, n_folds=3, seed=0)
    fig = pbr_core.plot.comparison(table)                        # a table alone: each fold and the means
    means = summarize(table, metrics=["ece"], by=["method"]).set_index("method")
    assert list(fig.layout.xaxis.ticktext) == ["Uncalibrated", "Temperature scaling"]
    np.testing.assert_allclose(_bars(fig, ST.TRACE_MEAN).x, [0.12, 1.12])
    np.testing.assert_allclose(_bars(fig, ST.TRACE_MEAN).y, means.loc[["uncalibrated", "temperature"], "mean"])
    np.testing.assert_allclose(_bars(fig, ST.TRACE_MEAN).error_y.array,
                               means.loc[["uncalibrated", "temperature"], "std"])
    np.testing.assert_array_equal(_bars(fig, ST.TRACE_FOLDS).y, table["ece"])
    assert float(means.loc["temperature", "mean"]) < float(means.loc["uncalibrated", "mean"])

    run = run_compare(c10, CompareSettings(methods=("uncalibrated", "temperature"), n_re=1000, n_folds=2))
    grid = pbr_core.plot.comparison(run)                          # the Compare page's small multiples
    ece0 = run.table[run.table["fold"] == 0].set_index("method")["ece"]
    titles = [a.text for a in grid.layout.annotations]
    assert titles == [f"Uncalibrated · ECE {ece0['uncalibrated']:.4f}",
                      f"Temperature scaling · ECE {ece0['temperature']:.4f}"]
    np.testing.assert_array_equal(grid.data[0].y, run.diagrams["uncalibrated"]["accuracy"])
    overlay = pbr_core.plot.comparison(run, kind="overlay")
    assert [t.name for t in overlay.data if t.showlegend is not False][:3] == [
        "Perfect calibration", "Uncalibrated", "Temperature scaling"]
    with pytest.raises(ValueError, match="reliability tables"):
        pbr_core.plot.comparison(table, kind="grid")


def test_the_paper_figures_draw_the_studies_tables():
    """The KL-gap and n_re charts of the reproduction's own result tables (KITTI, 10 folds)."""
    import pbr_core.plot
    from pbr_core.experiments import summarize
    from pbr_core.plot import studies as ST

    figures = Path(__file__).resolve().parents[1] / "docs" / "reproduction_results" / "figures"
    kl = pd.read_csv(figures / "kl_gap_kitti.csv")
    xgb = kl[kl["model"] == "xgboost"]
    fig = pbr_core.plot.kl_gap(xgb, n_classes=2)
    drifted = xgb["kl"] > xgb["n_re"] * np.log(2)                  # extreme_kl: above n_re ln K
    np.testing.assert_array_equal(_bars(fig, ST.TRACE_GAP_POINTS).y, xgb.loc[~drifted, "gap"])
    assert len(_bars(fig, ST.TRACE_EXTREME).y) == drifted.sum() and fig.layout.xaxis.type == "log"
    np.testing.assert_array_equal(_bars(fig, ST.TRACE_BOUND_POINTS).y, np.sort(xgb.loc[~drifted, "bound"]))
    nre = pd.read_csv(figures / "n_re_kitti.csv")
    nre = nre[nre["model"] == "xgboost"]
    fig = pbr_core.plot.n_re_sweep(nre)
    means = summarize(nre, metrics=["ece"], by=["method", "n_re"])
    pbr = means[means["method"] == "pbr"].sort_values("n_re")
    np.testing.assert_allclose(_bars(fig, "PBR").y, pbr["mean"], rtol=1e-12)
    np.testing.assert_array_equal(_bars(fig, "PBR").x, pbr["n_re"])


def test_the_corp_figure_draws_the_pav_fit_and_its_band():
    import pbr_core.plot
    from pbr_core.corp import corp_reliability
    from pbr_core.plot import corp_diagram as C

    kitti = pbr_core.load_predictions(SAMPLES / "kitti_random_forest.csv")
    fig = pbr_core.plot.corp(kitti, n_resamples=20)
    diagram = corp_reliability(kitti.p_positive, kitti.labels, n_resamples=20)
    np.testing.assert_array_equal(_bars(fig, C.TRACE_CORP).x, diagram.x)
    np.testing.assert_array_equal(_bars(fig, C.TRACE_CORP).y, diagram.recalibrated)
    np.testing.assert_array_equal(_bars(fig, C.TRACE_CORP_BAND + ",").y, diagram.band_low)
    assert fig.layout.xaxis.title.text == "Predicted probability p(y=1)"
