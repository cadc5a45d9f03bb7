"""Isotonic regression against scikit-learn's IsotonicRegression."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.isotonic import IsotonicRegression

from pbr_core.recalibrators import IsotonicCalibration


def test_matches_sklearn_predictions_and_thresholds(binary_split) -> None:
    p, y = binary_split.fit.probs[:, 1], binary_split.fit.labels
    ours = IsotonicCalibration(floor=0.0).fit(p, y)
    ref = IsotonicRegression(increasing=True, y_min=0, y_max=1, out_of_bounds="clip").fit(p, y)
    np.testing.assert_array_equal(ours.maps_[0]["X_thresholds"], ref.X_thresholds_)
    np.testing.assert_array_equal(ours.maps_[0]["y_thresholds"], ref.y_thresholds_)
    # Test rows, plus points outside the fitted range (clipped) and on every threshold.
    grid = np.concatenate([binary_split.test.probs[:, 1], np.linspace(0, 1, 1001), ref.X_thresholds_])
    diff = np.abs(ours.predict_proba(grid)[:, 1] - ref.predict(grid))
    assert diff.max() <= 1e-15  # np.interp vs scipy's interp1d: measured 0 on this data


def test_interpolates_between_thresholds_and_clips_outside() -> None:
    p = np.array([0.2, 0.4, 0.6, 0.8])
    y = np.array([0, 0, 1, 1])
    iso = IsotonicCalibration(floor=0.0).fit(p, y)
    q = iso.predict_proba(np.array([0.0, 0.2, 0.5, 0.8, 1.0]))[:, 1]
    np.testing.assert_allclose(q, [0.0, 0.0, 0.5, 1.0, 1.0])


def test_one_vs_all_rows_that_become_all_zero_are_uniform() -> None:
    # Six classes; each class's positives have p >= 0.7 and its negatives p <= 0.2, so every
    # one-vs-all map is 0 up to 0.2, and the uniform row (1/6 each) maps to zeros everywhere.
    K = 6
    rows, labels = [], []
    for k in range(K):
        for top in (0.7, 0.75):
            row = np.full(K, (1.0 - top - 0.2) / (K - 2))
            row[k], row[(k + 1) % K] = top, 0.2
            rows.append(row)
            labels.append(k)
    iso = IsotonicCalibration(floor=0.0, multiclass="one_vs_all").fit(np.array(rows), np.array(labels))
    out = iso.predict_proba(np.array([np.full(K, 1 / K), rows[0]]))
    np.testing.assert_array_equal(out[0], np.full(K, 1 / K))
    assert out[1].argmax() == 0
    np.testing.assert_allclose(out.sum(axis=1), 1.0)


def test_constant_input_gives_constant_map() -> None:
    iso = IsotonicCalibration(floor=0.0).fit(np.full(10, 0.3), np.array([0, 1] * 5))
    np.testing.assert_allclose(iso.predict_proba(np.array([0.0, 0.3, 0.9]))[:, 1], 0.5)
    ref = IsotonicRegression(y_min=0, y_max=1, out_of_bounds="clip").fit(np.full(10, 0.3), np.array([0, 1] * 5))
    assert ref.predict(np.array([0.9]))[0] == pytest.approx(0.5)
