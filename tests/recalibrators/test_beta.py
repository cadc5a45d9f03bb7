"""Beta calibration against the authors' betacal package (parameters="abm")."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from pbr_core.recalibrators import BetaCalibration
from pbr_core.recalibrators.beta import beta_features

betacal = pytest.importorskip("betacal")
SAMPLE_DATA = Path(__file__).resolve().parents[2] / "sample_data"


def _log_loss(q: np.ndarray, y: np.ndarray) -> float:
    q = np.clip(q, 1e-300, 1 - 1e-16)
    return float(-np.mean(y * np.log(q) + (1 - y) * np.log1p(-q)))


def _synthetic(kind: str) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(3)
    p = rng.beta(2.0, 2.0, 3000)
    if kind == "both_positive":  # a, b > 0: the unconstrained fit is kept
        y = rng.uniform(size=p.size) < p**1.5
    elif kind == "a_negative":  # decreasing in p near 0: a < 0, refit with b alone
        y = rng.uniform(size=p.size) < np.where(p < 0.5, 0.6 - 0.5 * p, p)
    else:  # "b_negative": the mirror image, b < 0, refit with a alone
        y = rng.uniform(size=p.size) < np.where(p > 0.5, 1.0 - 0.9 * p, p)
    return p, y.astype(np.int64)


def _cases(binary_split) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    cases = {k: _synthetic(k) for k in ("both_positive", "a_negative", "b_negative")}
    cases["binary_real"] = (binary_split.fit.probs[:, 1], binary_split.fit.labels)
    xgb = SAMPLE_DATA / "kitti_xgboost.csv"
    if xgb.exists():
        df = pd.read_csv(xgb).iloc[:2000]
        cases["kitti_xgboost"] = (df["p_positive"].to_numpy(), df["label"].to_numpy())
    return cases


def test_matches_betacal_abm(binary_split) -> None:
    """Same parameters and predictions as betacal, whose lbfgs stops earlier than our Newton."""
    for name, (p, y) in _cases(binary_split).items():
        ours = BetaCalibration(targets="labels").fit(p, y)
        ref = betacal.BetaCalibration(parameters="abm").fit(p, y)
        a, b, m = ref.calibrator_.map_
        mine = ours.maps_[0]
        assert (mine["a"] == 0) == (a == 0) and (mine["b"] == 0) == (b == 0), name  # same constraint branch
        assert mine["a"] == pytest.approx(a, rel=5e-3, abs=1e-6), name
        assert mine["b"] == pytest.approx(b, rel=5e-3, abs=1e-6), name
        mid = ours.midpoints()[0]
        if np.isnan(mid):  # q never crosses 1/2 inside (0, 1); betacal's bounded search ends at an end
            assert min(m, 1 - m) < 1e-3, name
        else:
            assert mid == pytest.approx(m, abs=1e-3), name
        grid = np.linspace(0, 1, 1001)
        q_ours, q_ref = ours.predict_proba(grid)[:, 1], ref.predict(grid)
        assert np.max(np.abs(q_ours - q_ref)) < 2e-3, name  # measured <= 5.6e-4 (kitti_xgboost)
        # Ours is the exact maximum-likelihood fit: never a worse log-loss than betacal's.
        assert _log_loss(ours.predict_proba(p)[:, 1], y) <= _log_loss(ref.predict(p), y) + 1e-12, name


def test_constraint_branches_are_exercised(binary_split) -> None:
    maps = {k: BetaCalibration().fit(*v).maps_[0] for k, v in _cases(binary_split).items()}
    assert maps["both_positive"]["a"] > 0 and maps["both_positive"]["b"] > 0
    assert maps["a_negative"]["a"] == 0 and maps["a_negative"]["b"] > 0
    assert maps["b_negative"]["b"] == 0 and maps["b_negative"]["a"] > 0


def test_the_map_formula() -> None:
    p, y = _synthetic("both_positive")
    rec = BetaCalibration().fit(p, y)
    a, b, c = (rec.maps_[0][k] for k in "abc")
    x = np.array([1e-3, 0.3, 0.5, 0.9])
    expected = 1 / (1 + 1 / (np.exp(c) * x**a / (1 - x) ** b))
    np.testing.assert_allclose(rec.predict_proba(x)[:, 1], expected, rtol=1e-12)
    np.testing.assert_allclose(beta_features(np.array([0.0, 1.0])), [[np.log(2.220446049250313e-16), 2.220446049250313e-16],
                                                                     [np.log1p(-2.220446049250313e-16), -np.log(2.220446049250313e-16)]],
                               rtol=1e-12)


def test_recovers_the_identity_on_calibrated_data() -> None:
    rng = np.random.default_rng(0)
    p = rng.uniform(0.01, 0.99, 20000)
    y = (rng.uniform(size=p.size) < p).astype(int)
    m = BetaCalibration().fit(p, y).maps_[0]
    assert m["a"] == pytest.approx(1, abs=0.06) and m["b"] == pytest.approx(1, abs=0.06)
    assert m["c"] == pytest.approx(0, abs=0.06)


def test_separable_labels() -> None:
    p = np.array([0.1, 0.2, 0.3, 0.7, 0.8, 0.9])
    y = np.array([0, 0, 0, 1, 1, 1])
    with pytest.raises(RuntimeError, match="Beta calibration failed for p\\(y=1\\): the two classes are perfectly separated"):
        BetaCalibration(targets="labels").fit(p, y)
    with pytest.warns(RuntimeWarning, match="smoothed targets"):
        rec = BetaCalibration().fit(p, y)
    assert rec.maps_[0]["targets"] == "platt"
    q = rec.predict_proba(p)[:, 1]
    assert np.all(np.diff(q) > 0)


def test_invalid_parameter() -> None:
    with pytest.raises(ValueError, match="`targets`"):
        BetaCalibration(targets=None).fit(np.array([0.2, 0.8]), np.array([0, 1]))
