"""Small, exact logistic regression for the parametric binary recalibrators (Platt, beta).

The problems have two or three parameters, so Newton's method with a backtracking line search
reaches the maximum-likelihood solution to machine precision in a handful of steps, in float64 and
without a penalty (scikit-learn's ``LogisticRegression`` with ``penalty=None`` solves the same
problem, but stops at its looser ``tol``).

Targets may be soft (``t`` in [0, 1], e.g. Platt's smoothed labels), which also covers sample
weights: a sample with soft target t is a positive with weight t and a negative with weight 1 - t.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from typing import ClassVar, Literal

import numpy as np
from pbr_core._special import expit, log_expit

from pbr_core.predictions import Predictions
from pbr_core.recalibrators._binary import BinaryRecalibrator
from pbr_core.recalibrators._params import Constraint, one_of

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
                 tol: float = 1e-10) -> LogisticFit:
    """Unpenalised logistic regression ``sigmoid(features @ coef + intercept)`` by damped Newton.

    Parameters
    ----------
    features : array of shape (n, d)
    targets : array of shape (n,)
        Labels or soft targets in [0, 1].
    max_iter : int
        Newton iterations at most (a well-posed problem needs fewer than 30).
    tol : float
        Converged when the Newton step changes no parameter by more than ``tol * (1 + max|theta|)``,
        or when the decrease it promises is at the rounding level of the loss. A small gradient
        alone is not enough: on separable data the gradient vanishes while the coefficients grow
        without bound, so convergence is followed by a check for a flat direction (see
        ``_flat_direction``), which reports separation.

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

    def result(it: int, converged: bool, message: str) -> LogisticFit:
        return LogisticFit(theta[:-1].copy(), float(theta[-1]), loss, it, converged, message)

    for it in range(1, max_iter + 1):
        mu = expit(eta)
        grad = X.T @ (mu - t)
        w = mu * (1.0 - mu)
        if not np.any(w > 0):
            return result(it, False, _SEPARATED)
        hess = (X * w[:, None]).T @ X
        # lstsq: the minimum-norm step stays defined when a feature is constant (singular Hessian).
        step = np.linalg.lstsq(hess, grad, rcond=None)[0]
        slope = float(grad @ step)  # twice the decrease a full Newton step promises
        if np.max(np.abs(step)) <= tol * (1.0 + np.max(np.abs(theta))) or slope <= 1e-15 * (1.0 + loss):
            if _flat_direction(X, w):
                return result(it - 1, False, _SEPARATED)
            return result(it - 1, True, "Newton step below tolerance")
        scale = 1.0
        while scale >= 1e-10:
            cand = theta - scale * step
            cand_eta = X @ cand
            cand_loss = _loss(cand_eta, t)
            if np.isfinite(cand_loss) and cand_loss <= loss - 1e-4 * scale * slope:
                break
            scale *= 0.5
        else:
            # A large Newton step with no decrease: rounding has taken over far from a clean optimum.
            gmax = float(np.max(np.abs(grad))) / n
            if gmax < 1e-9 and np.max(np.abs(step)) < 1e-4 * (1.0 + np.max(np.abs(theta))) and not _flat_direction(X, w):
                return result(it - 1, True, "line search found no further decrease at the optimum")
            return result(it - 1, False, _SEPARATED if loss < 1e-6 * n else
                          f"the line search found no decrease (gradient {gmax:.3g})")
        theta, eta, loss = cand, cand_eta, cand_loss
        if np.max(np.abs(theta)) > _DIVERGENCE:
            return result(it, False, _SEPARATED)
    return result(max_iter, False, f"Newton's method did not converge in {max_iter} iterations; "
                  f"the coefficients reached {np.max(np.abs(theta[:-1])) if d > 1 else 0.0:.3g}: "
                  "most likely the two classes are (almost) separated by the feature(s), so the "
                  "maximum-likelihood fit does not exist")


def _flat_direction(X: np.ndarray, w: np.ndarray, threshold: float = 1e-9) -> bool:
    """True when the Hessian X^T diag(w) X is (numerically) flat along some direction that the data
    span: min eigenvalue of U^T diag(w) U, U the left singular vectors of X, below ``threshold``.

    That is the signature of (quasi-)separation: the samples that could bend the loss along that
    direction are all fitted with probability ~0 or ~1, and the loss keeps falling towards a limit
    at infinity. Newton's step then shrinks numerically although no finite optimum exists. A
    constant feature (a direction the data do not span) is excluded by the SVD.
    """
    U, s, _ = np.linalg.svd(X, full_matrices=False)
    U = U[:, s > s[0] * 1e-12]
    return bool(np.linalg.eigvalsh((U * w[:, None]).T @ U)[0] < threshold)


_SEPARATED = ("the two classes are perfectly separated by the feature(s) (or one class is absent), "
              "so the maximum-likelihood fit does not exist")


def clip_probability(p: np.ndarray) -> np.ndarray:
    """p clipped to [EPS, 1 - EPS] so that its logs are finite."""
    return np.clip(np.asarray(p, dtype=np.float64), EPS, 1.0 - EPS)


def logit(p: np.ndarray) -> np.ndarray:
    """log(p / (1 - p)) of the clipped probability."""
    p = clip_probability(p)
    return np.log(p) - np.log1p(-p)


Targets = Literal["auto", "labels", "platt"]
TARGET_CHOICES = ("auto", "labels", "platt")
#: What a fitted map records in its "targets" field: the targets it was actually fitted on.
FITTED_TARGETS = ("labels", "platt")


def platt_targets(y: np.ndarray) -> np.ndarray:
    """Platt's smoothed targets: (N+ + 1) / (N+ + 2) for positives, 1 / (N- + 2) for negatives."""
    y = np.asarray(y, dtype=np.float64)
    n_pos = float(y.sum())
    n_neg = float(y.size - n_pos)
    return np.where(y > 0.5, (n_pos + 1.0) / (n_pos + 2.0), 1.0 / (n_neg + 2.0))


#: The warning of "auto" targets, for ``BinaryRecalibrator._fit_note_message``.
AUTO_TARGETS_NOTE = ("the labels of {names} are perfectly separated by p (or one class is absent), so "
                     "their maximum-likelihood fit does not exist; Platt's smoothed targets were used "
                     "for these maps (targets='auto').")


def fit_with_targets(features: np.ndarray, y: np.ndarray, targets: Targets, what: str,
                     name: str, notes: list[str]) -> tuple[LogisticFit, str]:
    """Fit on the labels or on Platt's targets as ``targets`` asks; returns (fit, targets used).

    "auto" fits the labels and, only when their maximum-likelihood fit does not exist (separable
    data, a class absent), refits on Platt's targets and appends ``name`` to ``notes``. "labels"
    raises instead.
    """
    if targets == "platt":
        fit = fit_logistic(features, platt_targets(y))
        used = "platt"
    else:
        fit = fit_logistic(features, y)
        used = "labels"
        if not fit.converged and targets == "auto":
            notes.append(name)
            fit = fit_logistic(features, platt_targets(y))
            used = "platt"
    if not fit.converged:
        hint = " Use targets='auto' or 'platt' (Platt's smoothed targets)." if used == "labels" else ""
        raise RuntimeError(f"{what} failed for {name}: {fit.message}.{hint}")
    return fit, used


class TargetsRecalibrator(BinaryRecalibrator):
    """Shared parameter of the logistic one-vs-all families (Platt, beta): how to treat separable labels."""

    _fit_note_message: ClassVar[str] = AUTO_TARGETS_NOTE
    _parameter_constraints: ClassVar[dict[str, Constraint]] = {
        "targets": one_of(TARGET_CHOICES, words=f"one of {TARGET_CHOICES}")}

    def __init__(self, targets: Targets = "auto") -> None:
        self.targets = targets

    def _fit(self, preds: Predictions) -> None:
        message = hard_scores_warning(preds, type(self).__name__, top_label=self._top_label())
        if message:
            warnings.warn(message, RuntimeWarning, stacklevel=4)
        super()._fit(preds)


def hard_scores_warning(preds: Predictions, who: str, top_label: bool = False) -> str:
    """The warning of a logistic map (Platt, beta) fitted on probabilities of exactly 0 or 1 of which
    some were wrong, or "".

    The logs of an exact 0 or 1 are taken at EPS, so its log-odds reach -36 or +36, far beyond every
    other row's. A right one (0 for an outcome of 0, 1 for an outcome of 1) costs the fit nothing for
    any positive slope and does not move it: 330 exact 0/1 scores of 3,000, all right, gave Platt a
    slope of 0.95 and took the ECE from 0.0114 to 0.0092 (a user audit).
    A wrong one costs 36 times the slope, so a few of them set the slope: on a 10-tree random forest
    of KITTI (1,297 of 3,000 scores exactly 0 or 1, some wrong) Platt's slope was 0.104, which maps
    every other score into 0.19-0.27, where 42 held-out rows predicted 0.25 were positive 90 % of the
    time (audit 3). So the warning counts the wrong ones, for the maps being fitted: p(y=1) for two
    classes; each class's probability against "this class or not" one-vs-all; the top probability
    against "the top label was right" for ``top_label``. Logits input has no such rows; a file where
    every score is 0 or 1 is a decision, not a probability, and is not this case.

    Parameters
    ----------
    preds : Predictions
        The fitting data.
    who : str
        The recalibrator's name, which starts the message.
    top_label : bool
        Whether a multiclass fit is the one top-label map (else one map per class).

    Returns
    -------
    str
        The message, or "" when no exact 0 or 1 was wrong.
    """
    if preds.logits is not None or preds.probs is None:
        return ""
    n_hard, n_wrong, all_hard = hard_score_rows(preds.probs, preds.labels, top_label)
    return hard_scores_message(who, preds.n, n_hard, n_wrong, all_hard, preds.n_classes, top_label)


def hard_score_rows(probs: np.ndarray, labels: np.ndarray, top_label: bool = False) -> tuple[int, int, bool]:
    """(rows with an exact 0 or 1 among the fitted maps' probabilities, rows where such a score was
    wrong, whether every such probability is 0 or 1) of one batch (:func:`hard_scores_warning`; the
    streamed Platt fit adds them up over its first pass)."""
    rows = np.arange(probs.shape[0])
    if probs.shape[1] == 2:
        p, y = probs[:, 1], labels == 1
    elif top_label:
        top = probs.argmax(axis=1)
        p, y = probs[rows, top], labels == top
    else:
        p = probs
        y = labels[:, None] == np.arange(probs.shape[1])[None, :]
    hard = (p == 0.0) | (p == 1.0)
    wrong = ((p == 0.0) & y) | ((p == 1.0) & ~y)
    all_hard = bool(np.all(hard))
    if p.ndim == 2:
        hard, wrong = hard.any(axis=1), wrong.any(axis=1)
    return int(np.count_nonzero(hard)), int(np.count_nonzero(wrong)), all_hard


def hard_scores_message(who: str, n: int, n_hard: int, n_wrong: int, all_hard: bool, n_classes: int,
                        top_label: bool = False) -> str:
    """:func:`hard_scores_warning`'s message from the counts of :func:`hard_score_rows` ("" when none
    was wrong, or when every score is 0 or 1: a decision, not a probability)."""
    if n_wrong == 0 or all_hard:
        return ""
    what = ("a probability" if n_classes == 2 else "a top probability" if top_label
            else "a class probability")
    verb = "was" if n_wrong == 1 else "were"
    return (f"{who}: {n_hard:,} of {n:,} rows have {what} of exactly 0 or 1, and {n_wrong:,} of those "
            f"rows {verb} wrong (the outcome was the one given no chance). The log-odds of an exact 0 or 1 "
            f"reach ±{abs(math.log(EPS)):.0f}, far beyond every other row's, so the wrong rows set the fitted "
            "slope: the map can squeeze every other row's probability into a narrow range (a random forest's "
            "exact 0/1 scores gave a slope of 0.10). Isotonic regression, histogram binning and temperature "
            "scaling are not thrown off by them.")
