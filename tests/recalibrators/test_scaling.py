"""Vector and matrix scaling against scikit-learn, a slow reference, and each other."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from scipy.optimize import minimize
from scipy.special import log_softmax, softmax
from sklearn.linear_model import LogisticRegression

from pbr_core.recalibrators import BetaCalibration, MatrixScaling, TemperatureScaling, VectorScaling


def _mean_nll(P: np.ndarray, y: np.ndarray) -> float:
    return float(-np.log(P[np.arange(y.size), y]).mean())


@pytest.fixture(scope="module")
def c10(cifar10_split):
    return cifar10_split.fit.logits, cifar10_split.fit.labels, cifar10_split.test.logits[:3000]


def test_unregularised_matrix_scaling_is_multinomial_logistic_regression(cifar10_split) -> None:
    """softmax(W z + b) by maximum likelihood is scikit-learn's multinomial LogisticRegression on z."""
    z, y = cifar10_split.test.logits[:3000], cifar10_split.test.labels[:3000]
    z_other = cifar10_split.fit.logits
    ours = MatrixScaling(off_diagonal_reg=0.0, bias_reg=0.0, tol=1e-12, max_iter=5000).fit(z, y)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # scikit-learn may report its own convergence at tol=1e-12
        ref = LogisticRegression(C=np.inf, tol=1e-12, max_iter=20000).fit(z, y)
    # Measured: 2e-6 on the fit rows and on other rows; our NLL is the lower of the two.
    assert np.max(np.abs(ours.predict_proba(z) - ref.predict_proba(z))) < 1e-4
    assert np.max(np.abs(ours.predict_proba(z_other) - ref.predict_proba(z_other))) < 1e-4
    assert _mean_nll(ours.predict_proba(z), y) <= _mean_nll(ref.predict_proba(z), y) + 1e-12


@pytest.mark.parametrize("bias_reg", [0.0, 1.0])
def test_vector_scaling_matches_a_slow_reference(c10, bias_reg: float) -> None:
    """The same objective written independently and minimised with numerical gradients (BFGS)."""
    z, y, z_test = c10
    K = z.shape[1]

    def objective(theta):
        w, b = theta[:K], theta[K:]
        lp = log_softmax(z * w + b, axis=1)
        return -np.mean(lp[np.arange(y.size), y]) + bias_reg / K * np.sum(b**2)

    ref = minimize(objective, np.concatenate([np.ones(K), np.zeros(K)]), method="BFGS", options={"gtol": 1e-8})
    ours = VectorScaling(bias_reg=bias_reg, tol=1e-12).fit(z, y)
    theirs = softmax(z_test * ref.x[:K] + ref.x[K:], axis=1)
    assert objective(np.concatenate([ours.scale_, ours.bias_])) <= ref.fun + 1e-10
    assert np.max(np.abs(ours.predict_proba(z_test) - theirs)) < 1e-5


def test_strong_odir_turns_matrix_scaling_into_vector_scaling(c10) -> None:
    z, y, z_test = c10
    ms = MatrixScaling(off_diagonal_reg=1e6, bias_reg=1.0, tol=1e-12).fit(z, y)
    vs = VectorScaling(bias_reg=1.0, tol=1e-12).fit(z, y)
    off = ms.weights_[~np.eye(z.shape[1], dtype=bool)]
    assert np.max(np.abs(off)) < 1e-3
    np.testing.assert_allclose(np.diag(ms.weights_), vs.scale_, atol=1e-3)
    assert np.max(np.abs(ms.predict_proba(z_test) - vs.predict_proba(z_test))) < 1e-4  # measured 2e-5


def test_vector_scaling_fits_at_least_as_well_as_temperature_scaling(c10) -> None:
    """Temperature scaling is vector scaling with equal scales and no bias: a sub-model."""
    z, y, _ = c10
    ts = TemperatureScaling().fit(z, y)
    vs = VectorScaling(bias_reg=0.0).fit(z, y)
    assert _mean_nll(vs.predict_proba(z), y) <= _mean_nll(ts.predict_proba(z), y)


def test_binary_vector_scaling_is_unconstrained_beta_calibration() -> None:
    """On log-probabilities [ln(1-p), ln p], softmax(w * z + b) gives
    sigmoid(w1 ln p - w0 ln(1 - p) + b1 - b0): beta calibration with a = w1, b = w0."""
    rng = np.random.default_rng(1)
    p = rng.beta(2.0, 2.0, 3000)
    y = (rng.uniform(size=p.size) < p**1.5).astype(np.int64)
    vs = VectorScaling(bias_reg=0.0, tol=1e-12).fit(p, y)
    beta = BetaCalibration().fit(p, y)
    m = beta.maps_[0]
    assert m["a"] > 0 and m["b"] > 0  # the constraint is inactive here
    np.testing.assert_allclose(vs.scale_, [m["b"], m["a"]], rtol=1e-6)
    assert vs.bias_[1] - vs.bias_[0] == pytest.approx(m["c"], abs=1e-6)
    assert np.max(np.abs(vs.predict_proba(p) - beta.predict_proba(p))) < 1e-8  # measured 1e-9


def test_applying_to_the_other_score_type_warns(c10) -> None:
    z, y, _ = c10
    vs = VectorScaling().fit(z, y)
    with pytest.warns(UserWarning, match="fitted on logits but is applied to probabilities"):
        vs.predict_proba(softmax(z, axis=1))


@pytest.mark.parametrize("params,name", [
    ({"off_diagonal_reg": -1.0}, "off_diagonal_reg"),
    ({"bias_reg": np.nan}, "bias_reg"),
    ({"max_iter": 0}, "max_iter"),
    ({"tol": 0.0}, "tol"),
])
def test_invalid_matrix_scaling_params(params: dict, name: str) -> None:
    with pytest.raises(ValueError, match=f"`{name}`"):
        MatrixScaling(**params).fit(np.eye(3), np.arange(3))


def test_invalid_vector_scaling_params() -> None:
    with pytest.raises(ValueError, match="`bias`"):
        VectorScaling(bias="yes").fit(np.eye(3), np.arange(3))
    with pytest.raises(ValueError, match="`bias_reg`"):
        VectorScaling(bias_reg=-1).fit(np.eye(3), np.arange(3))


def test_vector_scaling_without_bias(c10) -> None:
    z, y, _ = c10
    vs = VectorScaling(bias=False).fit(z, y)
    np.testing.assert_array_equal(vs.bias_, 0.0)
    np.testing.assert_allclose(vs.predict_proba(z), softmax(z * vs.scale_, axis=1))
