"""Vector scaling and matrix scaling (Guo et al., 2017), with ODIR for large K (Kull et al., 2019).

Both map the scores z (logits, or log-probabilities when only probabilities exist) through an
affine map and a softmax, fitted by minimising the mean NLL with L-BFGS on analytic gradients in
float64:

* vector scaling: p = softmax(w * z + b), 2K parameters;
* matrix scaling: p = softmax(W z + b), K^2 + K parameters, with the off-diagonal and intercept
  regulariser (ODIR) of Kull et al. (2019) added to the mean NLL::

      lambda / (K (K - 1)) * sum_{i != j} W_ij^2  +  mu / K * sum_k b_k^2

  Without it, K = 100 classes and n = 1000 recalibration samples (10100 parameters) overfit badly.
"""

from __future__ import annotations

import warnings
from typing import Any, Callable, ClassVar

import numpy as np
from pbr_core._special import log_softmax, softmax

from pbr_core.cancel import checkpoint
from pbr_core.predictions import Predictions
from pbr_core.recalibrators import _state
from pbr_core.recalibrators._params import (
    BOOLEAN,
    FINITE_NON_NEGATIVE,
    MAX_ITERATIONS,
    POSITIVE_NUMBER,
    Constraint,
    int_range,
)
from pbr_core.recalibrators.base import Recalibrator, register
from pbr_core.recalibrators.temperature import (
    TemperatureScaling,
    input_smoothing,
    read_input_smoothing,
    smoothed_scores,
)


def _nll_and_grad_logits(A: np.ndarray, y: np.ndarray) -> tuple[float, np.ndarray]:
    """Mean NLL of softmax(A) and its gradient with respect to A."""
    n = A.shape[0]
    lp = log_softmax(A, axis=1)
    loss = -lp[np.arange(n), y].mean()
    G = np.exp(lp)
    G[np.arange(n), y] -= 1.0
    return float(loss), G / n


def _minimise(fun: Callable[[np.ndarray], tuple[float, np.ndarray]], x0: np.ndarray, name: str,
              max_iter: int, tol: float) -> np.ndarray:
    """L-BFGS with an analytic gradient; RuntimeError quoting the reason when it really fails."""
    def checked(theta: np.ndarray) -> tuple[float, np.ndarray]:
        checkpoint()  # matrix scaling at K = 100 runs ~1 s: a Stop acts between evaluations
        return fun(theta)

    with np.errstate(over="ignore", invalid="ignore"):
        from scipy.optimize import minimize  # on first use: scipy.optimize costs ~0.4 CPU s to import

        res = minimize(checked, x0, jac=True, method="L-BFGS-B",
                       options={"maxiter": max_iter, "maxfun": 4 * max_iter, "gtol": tol, "ftol": 1e-15})
    if not np.all(np.isfinite(res.x)) or not np.isfinite(res.fun):
        raise RuntimeError(f"{name} failed: the optimiser produced non-finite values ({res.message}).")
    if not res.success:
        gmax = float(np.max(np.abs(res.jac)))
        if res.status == 1:  # iteration budget: the result is usable but may be short of the optimum
            warnings.warn(f"{name}: L-BFGS stopped after {res.nit} iterations ({res.message}); "
                          f"largest gradient entry {gmax:.3g}. Increase max_iter.", RuntimeWarning, stacklevel=4)
        elif gmax > 1e-5:
            raise RuntimeError(f"{name} failed: {res.message} (largest gradient entry {gmax:.3g}).")
        # else: the line search stalls at the optimum up to rounding; the solution is fine.
    return res.x


def _rms_scale(z: np.ndarray) -> float:
    """The RMS of the row-centred scores (1 where that is 0 or not finite): the scale the affine fits
    divide their inputs by."""
    centred = z - z.mean(axis=1, keepdims=True)
    s = float(np.sqrt(np.mean(centred**2)))
    return s if np.isfinite(s) and s > 0 else 1.0


def fit_penalised_matrix(X: np.ndarray, y: np.ndarray, lam: float, mu: float, name: str, max_iter: int,
                         tol: float, start: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    """(W, b) minimising the mean NLL of softmax(X W^T + b) + lam * sum of W's squared off-diagonal
    entries + mu * |b|^2: matrix scaling's and Dirichlet calibration's (ODIR) fit, on X.

    L-BFGS works on X / s (s = :func:`_rms_scale`) with W~ = W s, the penalty written in those
    coordinates, from W = start * I, b = 0 (``start``: temperature scaling's 1/T for matrix scaling)."""
    K = X.shape[1]
    off = ~np.eye(K, dtype=bool)
    s = _rms_scale(X)
    Xs = X / s
    lam_s = lam / s**2  # the penalty on W = W~ / s, written in the rescaled coordinates W~

    def fun(theta: np.ndarray) -> tuple[float, np.ndarray]:
        W, b = theta[: K * K].reshape(K, K), theta[K * K:]
        loss, G = _nll_and_grad_logits(Xs @ W.T + b, y)
        gW = G.T @ Xs
        Woff = np.where(off, W, 0.0)
        loss += lam_s * float((Woff**2).sum()) + mu * float(b @ b)
        gW += 2.0 * lam_s * Woff
        gb = G.sum(axis=0) + 2.0 * mu * b
        return loss, np.concatenate([gW.ravel(), gb])

    x0 = np.concatenate([(s * start * np.eye(K)).ravel(), np.zeros(K)])
    theta = _minimise(fun, x0, name, max_iter, tol)
    return theta[: K * K].reshape(K, K) / s, theta[K * K:].copy()


def _conditioning(z: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """(s, 1/T): the RMS of the centred scores and the temperature-scaling optimum.

    The optimiser works on z / s with weights multiplied by s, which gives the scale and intercept
    parameters Hessian entries of similar size (logits of size ~10 otherwise make L-BFGS crawl),
    and starts from temperature scaling, already close to the optimum for most models.
    """
    s = _rms_scale(z)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ts = TemperatureScaling().fit(z, y, input_type="logits")
    return s, 1.0 / ts.temperature_


class _AffineScaling(Recalibrator):
    """Common part: validation, input-type check and the softmax of an affine map."""

    uses: ClassVar[str] = "scores"
    #: The optimiser's settings, shared by both scaling methods (after their own parameters).
    _optimizer_constraints: ClassVar[dict[str, Constraint]] = {
        "max_iter": int_range(1, MAX_ITERATIONS), "tol": POSITIVE_NUMBER}

    def _scores(self, preds: Predictions) -> np.ndarray:
        if self.is_fitted and preds.input_type != self.input_type_:
            # Unlike temperature scaling, w * z + b is not invariant to the per-row shift between
            # logits and log-probabilities, so mixing them changes the map.
            warnings.warn(
                f"{type(self).__name__} was fitted on {self.input_type_} but is applied to {preds.input_type}; "
                "the learned map assumes the same kind of scores.", UserWarning, stacklevel=4,
            )
        return smoothed_scores(preds, self.input_smoothing_)

    def _affine(self, z: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def _predict_proba(self, preds: Predictions) -> np.ndarray:
        return softmax(self._affine(self._scores(preds)), axis=1)


@register
class VectorScaling(_AffineScaling):
    """Vector scaling: p = softmax(w * z + b) with one scale and one intercept per class.

    Parameters
    ----------
    bias : bool
        Fit the intercepts b (True, as in Guo et al.); False fixes b = 0.
    bias_reg : float
        mu >= 0: adds mu / K * sum_k b_k^2 to the mean NLL (the intercept part of ODIR). 0 gives
        the plain vector scaling of Guo et al., whose intercepts can diverge when a class is
        separable (a few samples per class, e.g. K = 100 and n = 1000).
    max_iter : int
        L-BFGS iterations at most.
    tol : float
        L-BFGS projected-gradient tolerance.

    Attributes
    ----------
    scale_ : ndarray of shape (K,)
        w.
    bias_ : ndarray of shape (K,)
        b (zeros when ``bias=False``).

    References
    ----------
    .. [1] C. Guo, G. Pleiss, Y. Sun and K. Q. Weinberger. On calibration of modern neural
       networks. ICML 2017.
    .. [2] M. Kull, M. Perello-Nieto, M. Kängsepp, T. Silva Filho, H. Song and P. Flach. Beyond
       temperature scaling: obtaining well-calibrated multiclass probabilities with Dirichlet
       calibration. NeurIPS 2019.

    Examples
    --------
    >>> import numpy as np
    >>> from pbr_core.recalibrators import VectorScaling
    >>> rng = np.random.default_rng(0)
    >>> labels = rng.integers(0, 3, 500)
    >>> logits = 4.0 * np.eye(3)[labels] + rng.normal(0, 2.0, (500, 3))
    >>> VectorScaling().fit(logits, labels).scale_.shape
    (3,)
    """

    method: ClassVar[str] = "vector_scaling"
    label: ClassVar[str] = "Vector scaling"
    _parameter_constraints: ClassVar[dict[str, Constraint]] = {
        "bias": BOOLEAN, "bias_reg": FINITE_NON_NEGATIVE, **_AffineScaling._optimizer_constraints}

    def __init__(self, bias: bool = True, bias_reg: float = 1.0, max_iter: int = 1000, tol: float = 1e-9) -> None:
        self.bias = bias
        self.bias_reg = bias_reg
        self.max_iter = max_iter
        self.tol = tol

    def _fit(self, preds: Predictions) -> None:
        self.input_smoothing_ = input_smoothing(preds)  # exact zeros: see temperature.input_smoothing
        z = self._scores(preds)
        y = preds.labels
        K = z.shape[1]

        s, inv_t = _conditioning(z, y)
        zs = z / s
        mu = self.bias_reg / K

        def fun(theta: np.ndarray) -> tuple[float, np.ndarray]:
            w, b = theta[:K], (theta[K:] if self.bias else 0.0)
            loss, G = _nll_and_grad_logits(zs * w + b, y)
            grad_w = (G * zs).sum(axis=0)
            if not self.bias:
                return loss, grad_w
            return loss + mu * float(b @ b), np.concatenate([grad_w, G.sum(axis=0) + 2.0 * mu * b])

        # Start from temperature scaling (w = 1/T) in the rescaled coordinates w~ = w * s.
        w0 = np.full(K, s * inv_t)
        x0 = np.concatenate([w0, np.zeros(K)]) if self.bias else w0
        theta = _minimise(fun, x0, "Vector scaling", self.max_iter, self.tol)
        self.scale_ = theta[:K] / s
        self.bias_ = theta[K:].copy() if self.bias else np.zeros(K)

    def _affine(self, z: np.ndarray) -> np.ndarray:
        return z * self.scale_ + self.bias_

    def _get_state(self) -> dict[str, Any]:
        return {"scale": self.scale_, "bias": self.bias_, "input_smoothing": self.input_smoothing_}

    def _set_state(self, state: dict[str, Any]) -> None:
        K, fields = self.n_classes_, _state.Fields(state, "state")
        self.scale_ = fields.array("scale", (K,), shape_note=f"(one per class, {K} classes)")
        self.bias_ = fields.array("bias", (K,), shape_note=f"(one per class, {K} classes)")
        self.input_smoothing_ = read_input_smoothing(state)


@register
class MatrixScaling(_AffineScaling):
    """Matrix scaling: p = softmax(W z + b), regularised with ODIR (Kull et al., 2019).

    The loss is mean NLL + ``off_diagonal_reg`` / (K (K - 1)) * sum_{i != j} W_ij^2
    + ``bias_reg`` / K * sum_k b_k^2; the diagonal of W is not penalised, so strong regularisation
    shrinks matrix scaling towards vector scaling, not towards zero.

    Parameters
    ----------
    off_diagonal_reg : float
        lambda >= 0 (0: plain matrix scaling of Guo et al., which overfits unless n >> K^2).
    bias_reg : float
        mu >= 0.
    max_iter : int
        L-BFGS iterations at most.
    tol : float
        L-BFGS projected-gradient tolerance.

    Attributes
    ----------
    weights_ : ndarray of shape (K, K)
        W.
    bias_ : ndarray of shape (K,)
        b.

    Notes
    -----
    The defaults (lambda = 1000, mu = 1) were picked on CIFAR-10 (K = 10) and CIFAR-100 (K = 100)
    logits with n = 1000 recalibration rows; Kull et al. choose both by cross-validation, the
    better course when the data allow it. With K = 100 and n = 1000, vector and matrix scaling do
    not beat the uncalibrated test ECE (benchmarks/RESULTS_recalibrators.md); temperature scaling
    does. With K = 10 both lower it.

    References
    ----------
    .. [1] C. Guo, G. Pleiss, Y. Sun and K. Q. Weinberger. On calibration of modern neural
       networks. ICML 2017.
    .. [2] M. Kull, M. Perello-Nieto, M. Kängsepp, T. Silva Filho, H. Song and P. Flach. Beyond
       temperature scaling: obtaining well-calibrated multiclass probabilities with Dirichlet
       calibration. NeurIPS 2019.

    Examples
    --------
    >>> import numpy as np
    >>> from pbr_core.recalibrators import MatrixScaling
    >>> rng = np.random.default_rng(0)
    >>> labels = rng.integers(0, 3, 500)
    >>> logits = 4.0 * np.eye(3)[labels] + rng.normal(0, 2.0, (500, 3))
    >>> MatrixScaling(off_diagonal_reg=1e-2).fit(logits, labels).weights_.shape
    (3, 3)
    """

    method: ClassVar[str] = "matrix_scaling"
    label: ClassVar[str] = "Matrix scaling"
    class_power: ClassVar[int] = 2  # a K x K matrix
    _parameter_constraints: ClassVar[dict[str, Constraint]] = {
        "off_diagonal_reg": FINITE_NON_NEGATIVE, "bias_reg": FINITE_NON_NEGATIVE,
        **_AffineScaling._optimizer_constraints}

    def __init__(self, off_diagonal_reg: float = 1000.0, bias_reg: float = 1.0, max_iter: int = 2000,
                 tol: float = 1e-9) -> None:
        self.off_diagonal_reg = off_diagonal_reg
        self.bias_reg = bias_reg
        self.max_iter = max_iter
        self.tol = tol

    def _fit(self, preds: Predictions) -> None:
        self.input_smoothing_ = input_smoothing(preds)  # exact zeros: see temperature.input_smoothing
        z = self._scores(preds)
        y = preds.labels
        K = z.shape[1]
        inv_t = _conditioning(z, y)[1]
        self.weights_, self.bias_ = fit_penalised_matrix(z, y, self.off_diagonal_reg / (K * (K - 1)),
                                                         self.bias_reg / K, "Matrix scaling", self.max_iter,
                                                         self.tol, start=inv_t)

    def _affine(self, z: np.ndarray) -> np.ndarray:
        return z @ self.weights_.T + self.bias_

    def _get_state(self) -> dict[str, Any]:
        return {"weights": self.weights_, "bias": self.bias_, "input_smoothing": self.input_smoothing_}

    def _set_state(self, state: dict[str, Any]) -> None:
        K, fields = self.n_classes_, _state.Fields(state, "state")
        self.weights_ = fields.array("weights", (K, K), shape_note=f"(for {K} classes)")
        self.bias_ = fields.array("bias", (K,), shape_note=f"(one per class, {K} classes)")
        self.input_smoothing_ = read_input_smoothing(state)
