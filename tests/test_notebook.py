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
    assert "Female" in html and "no evidence of miscalibration" in html
    import html as html_lib

    assert html_lib.escape(gap_statement(report)) in html
    summary = pbr_core.calibration_summary(adult.p_positive, adult.labels, n_boot=20)
    assert isinstance(summary, dict) and "Brier score" in summary._repr_html_()
    # names are text, never markup
    hostile = Predictions.from_predictions(["a", "b", "b"], [0.2, 0.6, 0.7], source="<img src=x onerror=alert(1)>")
    assert "<img" not in hostile._repr_html_() and "&lt;img src=x" in hostile._repr_html_()
