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


def slow_cir(x, y, wt):
    """Centred isotonic regression as the R package cir's cirPAVA (Oron's Python port, pycir), written again
    without pandas: the leftmost violation, or tie of two values not both 0 or 1, is pooled first (its
    count-weighted mean x and y), then the ends are extended to the data's smallest and largest x."""
    x, y, wt = list(map(float, x)), list(map(float, y)), list(map(float, wt))
    x_min, x_max = x[0], x[-1]
    while len(y) > 1:
        viol = [y[i + 1] < y[i] or (y[i + 1] == y[i] and not (y[i] in (0.0, 1.0) and y[i + 1] in (0.0, 1.0)))
                for i in range(len(y) - 1)]
        if not any(viol):
            break
        i = viol.index(True)
        w = wt[i] + wt[i + 1]
        y[i] = (y[i] * wt[i] + y[i + 1] * wt[i + 1]) / w
        x[i] = (x[i] * wt[i] + x[i + 1] * wt[i + 1]) / w
        wt[i] = w
        del x[i + 1], y[i + 1], wt[i + 1]
    if x[0] > x_min:
        x.insert(0, x_min)
        y.insert(0, y[0])
    if max(x) < x_max:
        x.append(x_max)
        y.append(max(y))
    return np.array(x), np.array(y)


@pytest.mark.parametrize("seed", range(40))
def test_centred_matches_the_cir_loop(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 80))
    p = np.round(rng.uniform(size=n), int(rng.integers(1, 4)))  # ties
    y = (rng.uniform(size=n) < p**2).astype(float)
    rec = IsotonicCalibration(floor=0.0, centred=True).fit(p, y.astype(int))
    xu, inverse = np.unique(p, return_inverse=True)
    w = np.bincount(inverse).astype(float)
    x_ref, q_ref = slow_cir(xu, np.bincount(inverse, weights=y) / w, w)
    grid = np.concatenate([np.linspace(0, 1, 201), p])
    np.testing.assert_allclose(rec.predict_proba(grid)[:, 1], np.interp(grid, x_ref, q_ref), rtol=0, atol=1e-12)


def test_centred_is_strictly_increasing_inside_and_floored(binary_split) -> None:
    p, y = binary_split.fit.probs[:, 1], binary_split.fit.labels
    plain = IsotonicCalibration().fit(p, y).maps_[0]
    m = IsotonicCalibration(centred=True).fit(p, y).maps_[0]
    inner = (m["y_thresholds"] > m["y_thresholds"].min()) & (m["y_thresholds"] < m["y_thresholds"].max())
    assert np.all(np.diff(m["y_thresholds"][inner]) > 0)  # no flat step between the end plateaus
    assert np.unique(plain["y_thresholds"]).size < plain["y_thresholds"].size  # the plain map has flat steps
    n = p.size
    assert m["y_thresholds"].min() >= 1 / (n + 1) and m["y_thresholds"].max() <= n / (n + 1)


@pytest.mark.parametrize("name", ["cifar10", "cifar100"])
def test_centred_is_within_noise_of_the_plain_map_on_cifar(request, name: str) -> None:
    """Both beat the model; the two differ by less than .005 nats in test NLL and .005 in ECE (either way:
    on this split CIFAR-100's test NLL is .9798 plain, .9801 centred)."""
    import pbr_core

    split = request.getfixturevalue(f"{name}_split")
    y = split.test.labels
    rows = np.arange(y.size)
    out = {}
    for centred in (False, True):
        P = IsotonicCalibration(centred=centred).fit(split.fit).predict_proba(split.test)
        out[centred] = (-np.log(P[rows, y]).mean(), pbr_core.ece(P, y))
    P0 = split.test.probs
    assert max(out[True][0], out[False][0]) < -np.log(P0[rows, y]).mean()
    assert abs(out[True][0] - out[False][0]) < 0.005 and abs(out[True][1] - out[False][1]) < 0.005


def test_centred_saves_and_loads_exactly(tmp_path, cifar10_split) -> None:
    from pbr_core.recalibrators import load_recalibrator

    rec = IsotonicCalibration(centred=True).fit(cifar10_split.fit)
    loaded = load_recalibrator(rec.save(tmp_path / "cir.json"))
    assert loaded.centred is True
    np.testing.assert_array_equal(loaded.predict_proba(cifar10_split.test), rec.predict_proba(cifar10_split.test))
