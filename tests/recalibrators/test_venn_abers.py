"""Inductive Venn-Abers predictors pinned to the authors' package (venn-abers) on real predictions."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy.special import softmax

from pbr_core.recalibrators import VennAbers

SAMPLE_DATA = Path(__file__).resolve().parents[2] / "sample_data"


@pytest.fixture(scope="module")
def kitti_xgb():
    df = pd.read_csv(SAMPLE_DATA / "kitti_xgboost.csv")
    p, y = df["p_positive"].to_numpy(), df["label"].to_numpy()
    return p[:1000], y[:1000], p[1000:4000]


@pytest.mark.filterwarnings("ignore:All-NaN slice:RuntimeWarning")  # inside venn-abers
def test_binary_pinned_to_venn_abers(kitti_xgb) -> None:
    """Measured: identical (0.0) probabilities and (p0, p1) on the KITTI XGBoost file."""
    va = pytest.importorskip("venn_abers")
    p, y, p_test = kitti_xgb
    ref = va.VennAbers().fit(np.column_stack([1 - p, p]), y)
    p_prime, p01 = ref.predict_proba(np.column_stack([1 - p_test, p_test]))
    ours = VennAbers().fit(p, y)
    np.testing.assert_allclose(ours.predict_proba(p_test)[:, 1], p_prime[:, 1], rtol=0, atol=1e-12)
    low, high = ours.predict_interval(p_test)
    np.testing.assert_allclose(low[:, 1], p01[:, 0], rtol=0, atol=1e-12)
    np.testing.assert_allclose(high[:, 1], p01[:, 1], rtol=0, atol=1e-12)
    np.testing.assert_allclose(low[:, 0], 1 - high[:, 1])
    assert np.all(low <= high)


@pytest.mark.filterwarnings("ignore:All-NaN slice:RuntimeWarning")
def test_one_vs_rest_pinned_to_venn_abers(cifar10_split) -> None:
    va = pytest.importorskip("venn_abers.venn_abers")
    P = softmax(cifar10_split.fit.logits[:500], axis=1)
    y = cifar10_split.fit.labels[:500]
    P_test = softmax(cifar10_split.test.logits[:1000], axis=1)
    p_prime, p01 = va.predict_proba_prefitted_va(P, y, P_test, va_tpe="one_vs_rest")
    ours = VennAbers().fit(P, y)
    np.testing.assert_allclose(ours.predict_proba(P_test), p_prime, rtol=0, atol=1e-12)
    low, high = ours.predict_interval(P_test)
    for k in range(10):
        np.testing.assert_allclose(low[:, k], p01[k][:, 0], atol=1e-12)
        np.testing.assert_allclose(high[:, k], p01[k][:, 1], atol=1e-12)


def test_interval_narrows_with_more_calibration_rows() -> None:
    """Known truth: y ~ Bernoulli(p). The mean width p1 - p0 shrinks as the calibration set grows."""
    rng = np.random.default_rng(0)
    p_new = rng.uniform(size=2000)
    widths = []
    for n in (100, 1000):
        p = rng.uniform(size=n)
        y = (rng.uniform(size=n) < p).astype(int)
        low, high = VennAbers().fit(p, y).predict_interval(p_new)
        widths.append(float(np.mean(high[:, 1] - low[:, 1])))
    assert widths[1] < widths[0] / 3
