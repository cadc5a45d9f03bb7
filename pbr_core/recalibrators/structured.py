"""Structured vector and matrix scaling (SVS, SMS; Berta, Holzmüller, Jordan & Bach, 2025).

Both are regularised logistic recalibrators on the logits, fitted in three steps exactly as the
authors' ``probmetrics`` (1.3, ``get_calibrator("svs")`` / ``get_calibrator("sms")``, the paper's
default):

1. temperature scaling, without regularisation: ``q = softmax(beta * log p)``;
2. Laplace smoothing of its output (probmetrics' "ts-mix"): ``q <- (1 - c) q + c / K`` with
   ``c = 1 / (n + 1)`` for n recalibration rows, so no probability is 0 and its log is finite;
3. on ``z = log q``, an affine map fitted by the mean NLL plus ridge penalties that shrink it
   towards the identity (the temperature-scaled model):

   * SVS: ``softmax((1 + v) * z + b)``, penalty ``lam_d ||v||^2 + lam_b ||b||^2``;
   * SMS: ``softmax((I + D + M) z + b)`` (D diagonal, M off-diagonal), penalty
     ``lam_d ||D||^2 + lam_o ||M||^2 + lam_b ||b||^2``.

The strengths follow the paper's scaling with the number of classes K and rows n:
``lam_b = lambda_intercept K^rho / n^tau``, ``lam_d = lambda_diagonal K^rho / n^tau``,
``lam_o = lambda_off_diagonal (K (K - 1))^rho / n^tau``; the defaults (all lambdas, rho and tau
equal to 1) are the paper's and probmetrics' default choice. The ridge penalty makes the objective
strictly convex, so the optimum is unique and any exact optimiser reaches it: here L-BFGS on
analytic gradients in float64 (probmetrics uses torchmin's BFGS in float32; the two agree to that
optimiser's tolerance, tests/recalibrators/test_structured.py). The paper's other penalties (lasso,
MCP, group lasso, fitted by SAGA) are not offered. Probability input holding exact zeros is
smoothed before step 1 as well (:func:`~pbr_core.recalibrators.temperature.input_smoothing`);
probmetrics clips its log at ln(float32 tiny) = -87 instead.
"""

from __future__ import annotations

import warnings
from typing import Any, ClassVar

import numpy as np
from pbr_core._special import log_softmax, softmax

from pbr_core.predictions import Predictions
from pbr_core.recalibrators import _state
from pbr_core.recalibrators._params import FINITE_NON_NEGATIVE, MAX_ITERATIONS, POSITIVE_NUMBER, Constraint, int_range
from pbr_core.recalibrators.base import Recalibrator, register
from pbr_core.recalibrators.scaling import _minimise, _nll_and_grad_logits
from pbr_core.recalibrators.temperature import (
    TemperatureScaling,
    input_smoothing,
    read_input_smoothing,
    smoothed_scores,
)


def smoothed_log_probs(scores: np.ndarray, inv_temperature: float, mix: float) -> np.ndarray:
    """log((1 - mix) softmax(inv_temperature * scores) + mix / K), computed stably.

    ``scores`` are logits or log-probabilities (softmax(beta log p) = softmax(beta z) for the
    logits z of p), so the result is the same for both kinds of input.
    """
    K = scores.shape[1]
    lq = log_softmax(inv_temperature * scores, axis=1)
    if mix <= 0.0:
        return lq
    # log((1 - c) e^lq + c / K) = logaddexp(log(1 - c) + lq, log(c / K)): exact where q is tiny.
    return np.logaddexp(np.log1p(-mix) + lq, np.log(mix / K))


class _StructuredScaling(Recalibrator):
    """Shared part: the temperature-scaling and smoothing steps, parameters and state."""

    uses: ClassVar[str] = "scores"
    _common_constraints: ClassVar[dict[str, Constraint]] = {
        "lambda_intercept": FINITE_NON_NEGATIVE, "lambda_diagonal": FINITE_NON_NEGATIVE,
        "rho": FINITE_NON_NEGATIVE, "tau": FINITE_NON_NEGATIVE,
        "max_iter": int_range(1, MAX_ITERATIONS), "tol": POSITIVE_NUMBER}

    def _preprocess_fit(self, preds: Predictions) -> tuple[np.ndarray, np.ndarray, int, int]:
        """Fit steps 1-2; return (z = log of the smoothed temperature-scaled probabilities, y, n, K)."""
        self.input_smoothing_ = input_smoothing(preds)  # exact zeros: see temperature.input_smoothing
        z0 = smoothed_scores(preds, self.input_smoothing_)
        y = preds.labels
        n, K = z0.shape
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # a bound hit by temperature scaling is reported by the fit below
            ts = TemperatureScaling().fit(z0, y, input_type="logits")
        self.inv_temperature_ = float(1.0 / ts.temperature_)
        self.smoothing_ = float(1.0 / (n + 1))
        return smoothed_log_probs(z0, self.inv_temperature_, self.smoothing_), y, n, K

    def _strength(self, lam: float, size: float, n: int) -> float:
        return float(lam * size**self.rho / n**self.tau)

    def _preprocess(self, preds: Predictions) -> np.ndarray:
        z0 = smoothed_scores(preds, self.input_smoothing_)
        return smoothed_log_probs(z0, self.inv_temperature_, self.smoothing_)

    def _predict_proba(self, preds: Predictions) -> np.ndarray:
        return softmax(self._affine(self._preprocess(preds)), axis=1)

    def _affine(self, z: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def _get_common_state(self) -> dict[str, Any]:
        return {"inv_temperature": self.inv_temperature_, "smoothing": self.smoothing_,
                "input_smoothing": self.input_smoothing_}

    def _set_common_state(self, fields: _state.Fields) -> None:
        self.inv_temperature_ = fields.number("inv_temperature", low=0.0, low_open=True)
        self.smoothing_ = fields.number("smoothing", low=0.0, high=0.5)
        self.input_smoothing_ = fields.number("input_smoothing", low=0.0, high=0.5)


@register
class StructuredVectorScaling(_StructuredScaling):
    """Structured vector scaling (SVS): ``softmax((1 + v) * z + b)`` on temperature-scaled,
    smoothed log-probabilities z, with ridge penalties towards the identity.

    Parameters
    ----------
    lambda_intercept, lambda_diagonal : float
        Penalty weights of b and v, multiplied by K^rho / n^tau (default 1: the paper's choice).
    rho, tau : float
        How the penalties grow with the number of classes K and shrink with the rows n (default 1).
    max_iter : int
        L-BFGS iterations at most.
    tol : float
        L-BFGS projected-gradient tolerance.

    Attributes
    ----------
    inv_temperature_ : float
        beta of the temperature-scaling step.
    smoothing_ : float
        c = 1 / (n + 1), the weight of the uniform distribution mixed in after it.
    scale_ : ndarray of shape (K,)
        1 + v.
    bias_ : ndarray of shape (K,)
        b.

    References
    ----------
    .. [1] E. Berta, D. Holzmüller, M. I. Jordan and F. Bach. Structured matrix scaling for
       multi-class calibration. arXiv:2511.03685, 2025 (AISTATS 2026); code: ``probmetrics``.

    Examples
    --------
    >>> import numpy as np
    >>> from pbr_core.recalibrators import StructuredVectorScaling
    >>> rng = np.random.default_rng(0)
    >>> labels = rng.integers(0, 3, 500)
    >>> logits = 4.0 * np.eye(3)[labels] + rng.normal(0, 2.0, (500, 3))
    >>> StructuredVectorScaling().fit(logits, labels).scale_.shape
    (3,)
    """

    method: ClassVar[str] = "svs"
    label: ClassVar[str] = "Structured vector scaling (SVS)"
    _parameter_constraints: ClassVar[dict[str, Constraint]] = dict(_StructuredScaling._common_constraints)

    def __init__(self, lambda_intercept: float = 1.0, lambda_diagonal: float = 1.0, rho: float = 1.0,
                 tau: float = 1.0, max_iter: int = 1000, tol: float = 1e-7) -> None:
        self.lambda_intercept = lambda_intercept
        self.lambda_diagonal = lambda_diagonal
        self.rho = rho
        self.tau = tau
        self.max_iter = max_iter
        self.tol = tol

    def _fit(self, preds: Predictions) -> None:
        z, y, n, K = self._preprocess_fit(preds)
        lam_b = self._strength(self.lambda_intercept, K, n)
        lam_d = self._strength(self.lambda_diagonal, K, n)

        def fun(theta: np.ndarray) -> tuple[float, np.ndarray]:
            v, b = theta[:K], theta[K:]
            loss, G = _nll_and_grad_logits(z * (1.0 + v) + b, y)
            loss += lam_d * float(v @ v) + lam_b * float(b @ b)
            return loss, np.concatenate([(G * z).sum(axis=0) + 2.0 * lam_d * v, G.sum(axis=0) + 2.0 * lam_b * b])

        theta = _minimise(fun, np.zeros(2 * K), "Structured vector scaling", self.max_iter, self.tol)
        self.scale_ = 1.0 + theta[:K]
        self.bias_ = theta[K:].copy()

    def _affine(self, z: np.ndarray) -> np.ndarray:
        return z * self.scale_ + self.bias_

    def _get_state(self) -> dict[str, Any]:
        return {**self._get_common_state(), "scale": self.scale_, "bias": self.bias_}

    def _set_state(self, state: dict[str, Any]) -> None:
        K, fields = self.n_classes_, _state.Fields(state, "state")
        self._set_common_state(fields)
        self.scale_ = fields.array("scale", (K,), shape_note=f"(one per class, {K} classes)")
        self.bias_ = fields.array("bias", (K,), shape_note=f"(one per class, {K} classes)")


@register
class StructuredMatrixScaling(_StructuredScaling):
    """Structured matrix scaling (SMS): ``softmax((I + D + M) z + b)`` on temperature-scaled,
    smoothed log-probabilities z, with separate ridge penalties on the diagonal D, the
    off-diagonal M and the intercepts b (Berta et al., 2025).

    With K classes there are K^2 + K parameters; the off-diagonal penalty grows as K (K - 1) / n,
    so with few rows per class SMS stays close to vector scaling, and with many it becomes full
    matrix scaling.

    Parameters
    ----------
    lambda_intercept, lambda_diagonal : float
        Penalty weights of b and D, multiplied by K^rho / n^tau (default 1: the paper's choice).
    lambda_off_diagonal : float
        Penalty weight of M, multiplied by (K (K - 1))^rho / n^tau (default 1).
    rho, tau : float
        How the penalties grow with K and shrink with n (default 1).
    max_iter : int
        L-BFGS iterations at most.
    tol : float
        L-BFGS projected-gradient tolerance.

    Attributes
    ----------
    inv_temperature_ : float
        beta of the temperature-scaling step.
    smoothing_ : float
        c = 1 / (n + 1), the weight of the uniform distribution mixed in after it.
    weights_ : ndarray of shape (K, K)
        I + D + M.
    bias_ : ndarray of shape (K,)
        b.

    References
    ----------
    .. [1] E. Berta, D. Holzmüller, M. I. Jordan and F. Bach. Structured matrix scaling for
       multi-class calibration. arXiv:2511.03685, 2025 (AISTATS 2026); code: ``probmetrics``.

    Examples
    --------
    >>> import numpy as np
    >>> from pbr_core.recalibrators import StructuredMatrixScaling
    >>> rng = np.random.default_rng(0)
    >>> labels = rng.integers(0, 3, 500)
    >>> logits = 4.0 * np.eye(3)[labels] + rng.normal(0, 2.0, (500, 3))
    >>> StructuredMatrixScaling().fit(logits, labels).weights_.shape
    (3, 3)
    """

    method: ClassVar[str] = "sms"
    label: ClassVar[str] = "Structured matrix scaling (SMS)"
    class_power: ClassVar[int] = 2  # a K x K matrix
    _parameter_constraints: ClassVar[dict[str, Constraint]] = {
        "lambda_off_diagonal": FINITE_NON_NEGATIVE, **_StructuredScaling._common_constraints}

    def __init__(self, lambda_intercept: float = 1.0, lambda_diagonal: float = 1.0, lambda_off_diagonal: float = 1.0,
                 rho: float = 1.0, tau: float = 1.0, max_iter: int = 2000, tol: float = 1e-7) -> None:
        self.lambda_intercept = lambda_intercept
        self.lambda_diagonal = lambda_diagonal
        self.lambda_off_diagonal = lambda_off_diagonal
        self.rho = rho
        self.tau = tau
        self.max_iter = max_iter
        self.tol = tol

    def _fit(self, preds: Predictions) -> None:
        z, y, n, K = self._preprocess_fit(preds)
        lam_b = self._strength(self.lambda_intercept, K, n)
        lam_d = self._strength(self.lambda_diagonal, K, n)
        lam_o = self._strength(self.lambda_off_diagonal, K * (K - 1), n)
        # One weight matrix of penalties: lam_d on the diagonal, lam_o off it.
        P = np.full((K, K), lam_o)
        np.fill_diagonal(P, lam_d)

        def fun(theta: np.ndarray) -> tuple[float, np.ndarray]:
            Wd, b = theta[: K * K].reshape(K, K), theta[K * K:]
            loss, G = _nll_and_grad_logits(z + z @ Wd.T + b, y)
            loss += float((P * Wd**2).sum()) + lam_b * float(b @ b)
            gW = G.T @ z + 2.0 * P * Wd
            return loss, np.concatenate([gW.ravel(), G.sum(axis=0) + 2.0 * lam_b * b])

        theta = _minimise(fun, np.zeros(K * K + K), "Structured matrix scaling", self.max_iter, self.tol)
        self.weights_ = np.eye(K) + theta[: K * K].reshape(K, K)
        self.bias_ = theta[K * K:].copy()

    def _affine(self, z: np.ndarray) -> np.ndarray:
        return z @ self.weights_.T + self.bias_

    def _get_state(self) -> dict[str, Any]:
        return {**self._get_common_state(), "weights": self.weights_, "bias": self.bias_}

    def _set_state(self, state: dict[str, Any]) -> None:
        K, fields = self.n_classes_, _state.Fields(state, "state")
        self._set_common_state(fields)
        self.weights_ = fields.array("weights", (K, K), shape_note=f"(for {K} classes)")
        self.bias_ = fields.array("bias", (K,), shape_note=f"(one per class, {K} classes)")
