"""Structured vector and matrix scaling pinned to the authors' code (probmetrics 1.3) on real logits."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.special import log_softmax, softmax

from pbr_core.recalibrators import StructuredMatrixScaling, StructuredVectorScaling, TemperatureScaling
from pbr_core.recalibrators.structured import smoothed_log_probs

N_FIT = 2000


def _nll(P: np.ndarray, y: np.ndarray) -> float:
    return float(-np.log(P[np.arange(y.size), y]).mean())


@pytest.fixture(scope="module")
def c10(cifar10_split):
    """2000 rows of the CIFAR-10 ResNet-110 logits to fit, 3000 others to predict."""
    z, y = cifar10_split.test.logits, cifar10_split.test.labels
    return z[:N_FIT], y[:N_FIT], z[N_FIT:N_FIT + 3000], y[N_FIT:N_FIT + 3000]


def _objective_sms(method, z_fit: np.ndarray, y: np.ndarray, W: np.ndarray, b: np.ndarray) -> float:
    """The SMS objective written independently (on the smoothed, temperature-scaled log-probabilities)."""
    n, K = z_fit.shape
    zs = smoothed_log_probs(z_fit, method.inv_temperature_, method.smoothing_)
    lp = log_softmax(zs @ W.T + b, axis=1)
    D = W - np.eye(K)
    diag = np.diag(D)
    off = D[~np.eye(K, dtype=bool)]
    return float(-lp[np.arange(n), y].mean() + K / n * (b @ b) + K / n * (diag @ diag) + K * (K - 1) / n * (off @ off))


def test_preprocessing_is_temperature_scaling_then_laplace_smoothing(c10) -> None:
    z, y, z_test, _ = c10
    rec = StructuredVectorScaling().fit(z, y)
    ts = TemperatureScaling().fit(z, y)
    assert rec.inv_temperature_ == pytest.approx(1.0 / ts.temperature_, rel=1e-12)
    assert rec.smoothing_ == 1.0 / (N_FIT + 1)
    q = (1 - rec.smoothing_) * ts.predict_proba(z_test) + rec.smoothing_ / z.shape[1]
    np.testing.assert_allclose(np.exp(smoothed_log_probs(z_test, rec.inv_temperature_, rec.smoothing_)), q,
                               rtol=1e-12, atol=0)
    # logits or probabilities in: the same map (softmax(beta ln p) = softmax(beta z))
    P = softmax(z, axis=1)
    from_probs = StructuredVectorScaling().fit(P, y)
    np.testing.assert_allclose(from_probs.predict_proba(softmax(z_test, axis=1)), rec.predict_proba(z_test), atol=1e-7)


@pytest.mark.parametrize("name", ["svs", "sms"])
def test_pinned_to_probmetrics(c10, name: str) -> None:
    """Same split, same defaults: our predictions equal probmetrics' get_calibrator(name) to the
    tolerance of its float32 BFGS (measured on these rows: max |dp| 4e-4 (SVS) and 8e-4 (SMS), test NLL
    equal to 1e-6; on the shared CIFAR-100 DenseNet-121, 5000 validation rows: 1e-5 and 2e-3, NLL .97601 /
    .97587 against probmetrics' .97601 / .97584)."""
    calibrators = pytest.importorskip("probmetrics.calibrators")
    z, y, z_test, y_test = c10
    ref = calibrators.get_calibrator(name, **{f"{name}_print_init_info": False}).fit(softmax(z, axis=1), y)
    theirs = ref.predict_proba(softmax(z_test, axis=1)).astype(np.float64)
    cls = StructuredVectorScaling if name == "svs" else StructuredMatrixScaling
    ours = cls().fit(z, y)
    mine = ours.predict_proba(z_test)
    assert ours.inv_temperature_ == pytest.approx(float(ref.ts_.cal_.invtemp_), rel=1e-6)
    assert np.max(np.abs(mine - theirs)) < 3e-3
    assert abs(_nll(mine, y_test) - _nll(theirs, y_test)) < 2e-5
    if name == "sms":  # ours reaches the (unique) optimum at least as closely as theirs
        W_ref = np.asarray(ref.W_[:, :-1], dtype=np.float64)
        b_ref = np.asarray(ref.W_[:, -1], dtype=np.float64)
        assert _objective_sms(ours, z, y, ours.weights_, ours.bias_) <= _objective_sms(ours, z, y, W_ref, b_ref) + 1e-9


def test_strong_off_diagonal_penalty_turns_sms_into_svs(c10) -> None:
    z, y, z_test, _ = c10
    sms = StructuredMatrixScaling(lambda_off_diagonal=1e6, tol=1e-9).fit(z, y)
    svs = StructuredVectorScaling(tol=1e-9).fit(z, y)
    np.testing.assert_allclose(np.diag(sms.weights_), svs.scale_, atol=1e-4)
    assert np.max(np.abs(sms.predict_proba(z_test) - svs.predict_proba(z_test))) < 1e-4


def test_strong_penalties_leave_temperature_scaling_smoothed(c10) -> None:
    z, y, z_test, _ = c10
    rec = StructuredMatrixScaling(lambda_intercept=1e8, lambda_diagonal=1e8, lambda_off_diagonal=1e8).fit(z, y)
    ts = TemperatureScaling().fit(z, y).predict_proba(z_test)
    expected = (1 - rec.smoothing_) * ts + rec.smoothing_ / z.shape[1]
    assert np.max(np.abs(rec.predict_proba(z_test) - expected)) < 1e-5
