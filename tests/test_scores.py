"""Scores that are not probabilities: a monotone map fitted on part of the rows, the rest audited
(pbr_core.scores, pbr-calib evaluate --map-scores). Data: UCI Adult predictions turned into risk
deciles and margins, as a scorecard exports them."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import pbr_core
from pbr_core import PredictionsError
from pbr_core.loading import read_table
from pbr_core.scores import map_scores

SAMPLES = Path(__file__).resolve().parents[1] / "sample_data"


@pytest.fixture(scope="module")
def scorecard() -> pd.DataFrame:
    t = read_table(SAMPLES / "adult_gradient_boosting.csv.gz")
    p = t.pop("p_gt50k").to_numpy()
    t["risk_decile"] = pd.qcut(p, 10, labels=False) + 1                   # 1..10
    t["margin"] = -np.log(p / (1 - p))                                      # higher margin: LESS likely
    return t


def test_read_table_reads_like_the_loader(scorecard):
    t = read_table(SAMPLES / "adult_gradient_boosting.csv.gz")
    preds = pbr_core.load_predictions(SAMPLES / "adult_gradient_boosting.csv.gz")
    np.testing.assert_array_equal(t["p_gt50k"].to_numpy(), preds.p_positive)
    assert list(t.columns)[-2:] == ["p_gt50k", "label"]
    with pytest.raises(PredictionsError, match="holds arrays, not a table"):
        read_table(SAMPLES / "cifar10_resnet110.npz")


def test_a_decile_is_mapped_on_part_of_the_rows_and_the_rest_audited(scorecard):
    from sklearn.isotonic import IsotonicRegression

    m = map_scores(scorecard, "risk_decile", "label", share=0.3, seed=4)
    n = len(scorecard)
    assert set(m.fit_rows) | set(m.audit_rows) == set(range(n)) and not set(m.fit_rows) & set(m.audit_rows)
    assert m.fit_rows.size == round(0.3 * n) and m.increasing
    iso = IsotonicRegression(y_min=0, y_max=1, out_of_bounds="clip")
    iso.fit(scorecard["risk_decile"].to_numpy()[m.fit_rows], scorecard["label"].to_numpy()[m.fit_rows])
    np.testing.assert_allclose(m.preds.p_positive, iso.predict(scorecard["risk_decile"].to_numpy()[m.audit_rows]))
    np.testing.assert_array_equal(m.preds.labels, scorecard["label"].to_numpy()[m.audit_rows])
    assert m.preds.metadata["risk_decile"].tolist() == scorecard["risk_decile"].iloc[m.audit_rows].tolist()
    assert "not how calibrated the raw scores are" in " ".join(m.preds.notes)
    assert pbr_core.ece(m.preds.p_positive, m.preds.labels) < 0.03   # deciles of a calibrated model map well


def test_a_decreasing_margin_with_a_logistic_curve(scorecard):
    m = map_scores(scorecard, "margin", "label", method="logistic")
    assert not m.increasing
    order = np.argsort(scorecard["margin"].to_numpy()[m.audit_rows])
    assert np.all(np.diff(m.preds.p_positive[order]) <= 1e-12)   # monotone, decreasing in the margin
    assert pbr_core.ece(m.preds.p_positive, m.preds.labels) < 0.05


def test_what_cannot_be_mapped_is_said(scorecard):
    with pytest.raises(PredictionsError, match="exactly two values"):
        map_scores(scorecard, "risk_decile", "race")
    bad = scorecard.assign(risk_decile=scorecard["risk_decile"].astype(str))
    bad.loc[7, "risk_decile"] = "high"
    with pytest.raises(PredictionsError, match="'high' at row 8"):
        map_scores(bad, "risk_decile", "label")
    with pytest.raises(PredictionsError, match="'nope' is not a column"):
        map_scores(scorecard, "nope", "label")


def test_cli_evaluate_map_scores(scorecard, tmp_path, capsys):
    import json

    from pbr_core.cli import main

    path = tmp_path / "scorecard.csv"
    scorecard.to_csv(path, index=False)
    assert main(["evaluate", str(path), "--map-scores", "risk_decile", "--label-column", "label",
                 "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    m = map_scores(scorecard, "risk_decile", "label")
    assert out["n"] == m.preds.n and out["ece"] == pytest.approx(pbr_core.ece(m.preds.p_positive, m.preds.labels))
    assert any("holds scores, not probabilities" in n for n in out["notes"])
    assert main(["evaluate", str(path), "--map-scores", "risk_decile"]) == 2   # needs the label column
