"""Small, exact logistic regression for the parametric binary recalibrators (Platt, beta).

The problems have two or three parameters, so Newton's method with a backtracking line search
reaches the maximum-likelihood solution to machine precision in a handful of steps, in float64 and
without a penalty (scikit-learn's ``LogisticRegression`` with ``penalty=None`` solves the same
problem, but stops at its looser ``tol``).

Targets may be soft (``t`` in [0, 1], e.g. Platt's smoothed labels), which also covers sample
weights: a sample with soft target t is a positive with weight t and a negative with weight 1 - t.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import expit, log_expit

#: Probabilities are clipped to [EPS, 1 - EPS] before logs, as the betacal package does.
EPS = float(np.finfo(np.float64).eps)

#: A coefficient this large means the likelihood has no finite maximiser (separable data).
_DIVERGENCE = 1e8


@dataclass(frozen=True)
class LogisticFit:
    """Result of :func:`fit_logistic`: ``coef`` (d,), ``intercept``, and how the solver ended."""

    coef: np.ndarray
    intercept: float
    loss: float
    n_iter: int
    converged: bool
    message: str


def _loss(eta: np.ndarray, t: np.ndarray) -> float:
    # -[t log sigma(eta) + (1 - t) log sigma(-eta)], summed; log_expit is exact in both tails.
    return float(-(t * log_expit(eta) + (1.0 - t) * log_expit(-eta)).sum())


def fit_logistic(features: np.ndarray, targets: np.ndarray, max_iter: int = 100,
                 tol: float = 1e-11) -> LogisticFit:
    """Unpenalised logistic regression ``sigmoid(features @ coef + intercept)`` by damped Newton.

    Parameters
    ----------
    features : array of shape (n, d)
    targets : array of shape (n,)
        Labels or soft targets in [0, 1].
    max_iter : int
        Newton iterations at most.
    tol : float
        Converged when the largest gradient entry, divided by n, is below ``tol``, or when a step
        no longer changes the parameters.

    Returns
    -------
    LogisticFit
        ``converged`` is False with a reason in ``message`` when the data are separable (the
        maximum-likelihood estimate does not exist) or the iteration budget ran out.
    """
    X = np.column_stack([np.asarray(features, dtype=np.float64), np.ones(len(targets))])
    t = np.asarray(targets, dtype=np.float64)
    n, d = X.shape
    theta = np.zeros(d)
    # Start the intercept at the log-odds of the base rate: one Newton step less, and stable.
    rate = np.clip(t.mean(), 1e-12, 1 - 1e-12)
    theta[-1] = np.log(rate / (1 - rate))
    eta = X @ theta
    loss = _loss(eta, t)
    for it in range(1, max_iter + 1):
        mu = expit(eta)
        grad = X.T @ (mu - t)
        if np.max(np.abs(grad)) / n < tol:
            return LogisticFit(theta[:-1].copy(), float(theta[-1]), loss, it - 1, True, "gradient below tolerance")
        w = mu * (1.0 - mu)
        hess = (X * w[:, None]).T @ X
        # lstsq: the minimum-norm step stays defined when a feature is constant (singular Hessian).
        step = np.linalg.lstsq(hess, grad, rcond=None)[0]
        slope = float(grad @ step)
        scale = 1.0
        while True:
            cand = theta - scale * step
            cand_eta = X @ cand
            cand_loss = _loss(cand_eta, t)
            if cand_loss <= loss - 1e-4 * scale * slope or scale < 1e-10:
                break
            scale *= 0.5
        if scale < 1e-10 or not np.isfinite(cand_loss):
            # No descent along the Newton direction: we are at the optimum up to rounding.
            converged = np.max(np.abs(grad)) / n < 1e-6
            msg = "line search found no further decrease" + ("" if converged else f" (gradient {np.max(np.abs(grad)) / n:.3g})")
            return LogisticFit(theta[:-1].copy(), float(theta[-1]), loss, it, converged, msg)
        moved = np.max(np.abs(cand - theta))
        theta, eta, loss = cand, cand_eta, cand_loss
        if np.max(np.abs(theta)) > _DIVERGENCE:
            return LogisticFit(theta[:-1].copy(), float(theta[-1]), loss, it, False,
                               "the coefficients diverge: the two classes are perfectly separated, so the "
                               "maximum-likelihood fit does not exist")
        if moved <= 1e-15 * (1.0 + np.max(np.abs(theta))):
            return LogisticFit(theta[:-1].copy(), float(theta[-1]), loss, it, True, "step below tolerance")
    mu = expit(eta)
    gmax = float(np.max(np.abs(X.T @ (mu - t)))) / n
    converged = gmax < 1e-8
    return LogisticFit(theta[:-1].copy(), float(theta[-1]), loss, max_iter, converged,
                       f"reached max_iter={max_iter} (gradient {gmax:.3g})")


def clip_probability(p: np.ndarray) -> np.ndarray:
    """p clipped to [EPS, 1 - EPS] so that its logs are finite."""
    return np.clip(np.asarray(p, dtype=np.float64), EPS, 1.0 - EPS)


def logit(p: np.ndarray) -> np.ndarray:
    """log(p / (1 - p)) of the clipped probability."""
    p = clip_probability(p)
    return np.log(p) - np.log1p(-p)
