"""CORP reliability, the MCB - DSC + UNC decomposition (pinned to model-diagnostics) and the log-loss split."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from pathlib import Path

from pbr_core.corp import corp_reliability, log_loss_split, score_decomposition

SAMPLE_DATA = Path(__file__).resolve().parents[1] / "sample_data"


@pytest.fixture(scope="module")
def kitti_xgb():
    df = pd.read_csv(SAMPLE_DATA / "kitti_xgboost.csv")
    return df["p_positive"].to_numpy(), df["label"].to_numpy()


@pytest.mark.parametrize("kind", ["brier", "log"])
def test_decomposition_pinned_to_model_diagnostics(kitti_xgb, kind: str) -> None:
    scoring = pytest.importorskip("model_diagnostics.scoring")
    p, y = kitti_xgb
    ours = score_decomposition(p, y, kind)
    fn = scoring.SquaredError() if kind == "brier" else scoring.LogLoss()
    ref = scoring.decompose(y_obs=y, y_pred=p, scoring_function=fn).row(0, named=True)
    assert ours.score == pytest.approx(ref["score"], rel=1e-9, abs=1e-12)
    assert ours.mcb == pytest.approx(ref["miscalibration"], rel=1e-6, abs=1e-10)
    assert ours.dsc == pytest.approx(ref["discrimination"], rel=1e-6, abs=1e-10)
    assert ours.unc == pytest.approx(ref["uncertainty"], rel=1e-9, abs=1e-12)
    assert ours.score == pytest.approx(ours.mcb - ours.dsc + ours.unc, abs=1e-12)
    assert ours.mcb >= 0 and ours.dsc >= 0


def test_corp_curve_is_the_pav_fit_and_calibrated_forecasts_stay_in_the_band() -> None:
    """Known truth: outcomes drawn from p itself. The band covers the CORP curve at most points;
    a forecast shifted by .15 leaves it."""
    rng = np.random.default_rng(3)
    p = rng.uniform(size=3000)
    y = (rng.uniform(size=p.size) < p).astype(int)
    r = corp_reliability(p, y, n_resamples=60)
    assert np.all(np.diff(r.recalibrated) >= 0)
    inside = np.mean((r.recalibrated >= r.band_low - 1e-12) & (r.recalibrated <= r.band_high + 1e-12))
    assert inside > 0.8
    shifted = corp_reliability(np.clip(p + 0.15, 0, 1), y, n_resamples=60)
    outside = np.mean((shifted.recalibrated < shifted.band_low) | (shifted.recalibrated > shifted.band_high))
    assert outside > 0.5


def test_log_loss_split(cifar10_logits) -> None:
    z, y = cifar10_logits
    s = log_loss_split(z, y)
    assert s["calibration"] >= 0 and s["refinement"] <= s["log_loss"]
    assert s["log_loss"] == pytest.approx(s["refinement"] + s["calibration"])
    # an over-confident copy: the same refinement, a larger calibration part
    t = log_loss_split(3 * z, y)
    assert t["refinement"] == pytest.approx(s["refinement"], rel=1e-6)
    assert t["calibration"] > s["calibration"]


@pytest.fixture(scope="module")
def cifar10_logits():
    d = np.load(SAMPLE_DATA / "cifar10_resnet110.npz")
    return d["logits"].astype(np.float64)[:3000], d["labels"][:3000]


def test_bad_input_is_named() -> None:
    with pytest.raises(ValueError, match="Outcomes must be 0 or 1"):
        score_decomposition(np.array([0.2, 0.3]), np.array([0, 2]))
    with pytest.raises(ValueError, match="same non-zero length"):
        corp_reliability(np.array([0.2]), np.array([0, 1]))


def test_the_more_than_chance_reading_is_rarely_made_for_a_calibrated_model() -> None:
    """Known truth, counted: outcomes drawn from the forecasts (calibrated), and from forecasts that
    are off by up to .1 (p + .1 sin 2 pi p). The reading "more than chance" (a share of rows outside
    the band above CHANCE_OUTSIDE_SHARE) was made for 0 of 12 calibrated draws and 11 of 12 off ones
    (n = 1000; 40 calibrated draws while choosing the threshold: at most one above it)."""
    from pbr_core.corp import CHANCE_OUTSIDE_SHARE, outside_band_share

    rng = np.random.default_rng(7)
    calibrated, off = [], []
    for _ in range(12):
        p = rng.beta(2, 2, size=1000)
        y = (rng.uniform(size=p.size) < p).astype(int)
        calibrated.append(outside_band_share(corp_reliability(p, y), p))
        q = np.clip(p + 0.1 * np.sin(2 * np.pi * p), 0, 1)
        y_off = (rng.uniform(size=p.size) < q).astype(int)
        off.append(outside_band_share(corp_reliability(p, y_off), p))
    assert sum(s > CHANCE_OUTSIDE_SHARE for s in calibrated) <= 1
    assert sum(s > CHANCE_OUTSIDE_SHARE for s in off) >= 11
    assert 0.05 < np.mean(calibrated) < 0.2  # about the 10 % a pointwise 90 % band leaves by chance
