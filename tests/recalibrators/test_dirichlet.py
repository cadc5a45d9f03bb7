"""Dirichlet calibration with ODIR pinned to the authors' code (dirichletcal) on real logits."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.special import softmax

from pbr_core.recalibrators import DirichletCalibration


@pytest.fixture(scope="module")
def c10(cifar10_split):
    z, y = cifar10_split.test.logits, cifar10_split.test.labels
    return softmax(z[:1000], axis=1), y[:1000], softmax(z[1000:4000], axis=1)


@pytest.mark.slow
@pytest.mark.parametrize("lam", [0.1, 1.0])
def test_pinned_to_dirichletcal(c10, lam: float) -> None:
    """``FullDirichletCalibrator(reg_lambda, reg_mu, reg_norm=True)`` (the paper's normalised ODIR
    on the full matrix) on the same rows: measured max |dp| 8e-7 (lambda = mu = 0.1) and 2e-7 (1) on
    5000 CIFAR-10 ResNet-110 validation rows."""
    fulldirichlet = pytest.importorskip("dirichletcal.calib.fulldirichlet")
    P, y, P_test = c10
    ref = fulldirichlet.FullDirichletCalibrator(reg_lambda=lam, reg_mu=lam, reg_norm=True, ref_row=False).fit(P, y)
    ours = DirichletCalibration(reg_lambda=lam, reg_mu=lam).fit(P, y)
    # measured on these 1000 rows: 2.3e-5 (lambda = 0.1; our gtol 1e-7 against its Newton steps to 1e-8)
    assert np.max(np.abs(ours.predict_proba(P_test) - np.asarray(ref.predict_proba(P_test)))) < 1e-4


def test_logits_and_probabilities_give_the_same_map(c10, cifar10_split) -> None:
    z = cifar10_split.test.logits[:1000]
    _, y, P_test = c10
    a = DirichletCalibration().fit(z, y)
    b = DirichletCalibration().fit(softmax(z, axis=1), y)
    assert np.max(np.abs(a.predict_proba(cifar10_split.test.logits[1000:4000]) - b.predict_proba(P_test))) < 1e-6


def test_exact_zeros_are_smoothed_not_clipped_at_minus_708() -> None:
    rng = np.random.default_rng(0)
    y = rng.integers(0, 3, 600)
    P = np.full((600, 3), 0.1)
    P[np.arange(600), y] = 0.8
    P[:6] = [1.0, 0.0, 0.0]  # hard zeros, wrong for these rows
    y[:6] = 1
    rec = DirichletCalibration().fit(P, y)
    assert rec.input_smoothing_ == 1 / 601
    assert np.all(np.isfinite(rec.weights_))
    q = rec.predict_proba(np.array([[0.0, 0.0, 1.0], [0.1, 0.8, 0.1]]))
    assert np.all(q > 0) and q[0, 2] > 0.5 and q[1, 1] > 0.5


def test_default_penalty_keeps_the_per_entry_weight_from_ten_classes_on() -> None:
    from pbr_core.recalibrators.dirichlet import default_penalty

    assert [default_penalty(K) for K in (2, 3, 8, 10)] == [1.0, 1.0, 1.0, 1.0]  # where the references are pinned
    assert default_penalty(100) == pytest.approx(110.0)
    assert default_penalty(100) / (100 * 99) == pytest.approx(default_penalty(10) / (10 * 9))


def test_default_is_the_scaled_penalty() -> None:
    """None fits exactly as the explicit default_penalty(K) (K = 12: 1.4667) and, at K = 10, as lambda = mu = 1."""
    from pbr_core.recalibrators.dirichlet import default_penalty

    rng = np.random.default_rng(0)
    for K in (10, 12):
        y = rng.integers(0, K, 400)
        z = 3.0 * np.eye(K)[y] + rng.normal(0, 1.5, (400, K))
        lam = default_penalty(K)
        a = DirichletCalibration().fit(z, y)
        b = DirichletCalibration(reg_lambda=lam, reg_mu=lam).fit(z, y)
        np.testing.assert_array_equal(a.weights_, b.weights_)
        assert DirichletCalibration().get_params()["reg_lambda"] is None
