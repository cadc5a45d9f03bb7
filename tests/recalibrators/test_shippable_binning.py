"""Isotonic regression and histogram binning never give a class that can occur probability 0 (issue 37)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.special import softmax

from pbr_core.recalibrators import get_recalibrator


def _nll(P: np.ndarray, y: np.ndarray) -> float:
    return float(-np.log(P[np.arange(y.size), y]).mean())


@pytest.fixture(scope="module")
def c10_5000(cifar10_split):
    """The bundled CIFAR-10 ResNet-110 logits, 5000 rows to fit and 4000 to test."""
    z = np.concatenate([cifar10_split.fit.logits, cifar10_split.test.logits])
    y = np.concatenate([cifar10_split.fit.labels, cifar10_split.test.labels])
    return z[:5000], y[:5000], z[5000:9000], y[5000:9000]


@pytest.mark.parametrize("method", ["isotonic", "histogram_binning"])
def test_no_probability_of_zero_or_one(c10_5000, method: str) -> None:
    z, y, z_test, y_test = c10_5000
    rec = get_recalibrator(method).fit(z, y)
    P = rec.predict_proba(z_test)
    assert np.all(P > 0) and np.all(P < 1)
    assert np.isfinite(_nll(P, y_test))
    for m in rec.maps_:  # each one-vs-all map within [1/(n+1), n/(n+1)]
        values = m.get("y_thresholds", m.get("values"))
        assert values.min() >= 1 / 5001 and values.max() <= 5000 / 5001


def test_isotonic_beats_the_model_in_test_nll(c10_5000) -> None:
    """Measured: .1837 against .1973 uncalibrated; without the floor, a class predicted at 0 that then
    occurred made the NLL infinite (the issue measured 1.39 against .43 on DenseNet-40)."""
    z, y, z_test, y_test = c10_5000
    P = get_recalibrator("isotonic").fit(z, y).predict_proba(z_test)
    assert _nll(P, y_test) < _nll(softmax(z_test, axis=1), y_test)


def test_binary_maps_are_floored_too() -> None:
    p = np.array([0.05, 0.1, 0.2, 0.3, 0.7, 0.8, 0.9, 0.95])
    y = np.array([0, 0, 0, 0, 1, 1, 1, 1])
    for method in ("isotonic", "histogram_binning"):
        q = get_recalibrator(method).fit(p, y).predict_proba(np.array([0.0, 0.01, 0.99, 1.0]))[:, 1]
        assert q.min() == pytest.approx(1 / 9) and q.max() == pytest.approx(8 / 9)
