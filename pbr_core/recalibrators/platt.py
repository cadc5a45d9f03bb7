"""Platt scaling (Platt, 1999): a logistic regression on the log-odds of the predicted probability."""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
from scipy.special import expit

from pbr_core.recalibrators._binary import BinaryRecalibrator
from pbr_core.recalibrators._logistic import fit_logistic, logit
from pbr_core.recalibrators.base import register


def platt_targets(y: np.ndarray) -> np.ndarray:
    """Platt's smoothed targets: (N+ + 1) / (N+ + 2) for positives, 1 / (N- + 2) for negatives."""
    y = np.asarray(y, dtype=np.float64)
    n_pos = float(y.sum())
    n_neg = float(y.size - n_pos)
    return np.where(y > 0.5, (n_pos + 1.0) / (n_pos + 2.0), 1.0 / (n_neg + 2.0))


@register
class PlattScaling(BinaryRecalibrator):
    """Platt scaling: q = sigmoid(a * logit(p) + b), fitted by maximum likelihood.

    Binary data: fitted on p = p(y=1). Multiclass data: one map per class, one-vs-all, and the K
    outputs of a row are renormalised to sum to one. The feature is logit(p) with p clipped to
    [eps, 1 - eps] (float64 eps), so a=1, b=0 is the identity map.

    Parameters
    ----------
    smooth_targets : bool
        False (default): plain maximum likelihood on the 0/1 labels, i.e. unpenalised logistic
        regression. True: Platt's Bayesian targets (N+ + 1)/(N+ + 2) and 1/(N- + 2) (Platt 1999,
        Sec. 2.2; scikit-learn's "sigmoid" calibration), which keep the fit finite when the classes
        are separable (tiny recalibration sets, rare classes one-vs-all).

    Attributes
    ----------
    maps_ : list of dict
        Per class (one entry for binary data): ``{"slope": a, "intercept": b}``.

    Raises
    ------
    RuntimeError
        From ``fit`` when the labels are separable by p and ``smooth_targets`` is False (the
        maximum-likelihood fit does not exist).

    References
    ----------
    .. [1] J. Platt. Probabilistic outputs for support vector machines and comparisons to
       regularized likelihood methods. Advances in Large Margin Classifiers, 1999.
    .. [2] B. Zadrozny and C. Elkan. Transforming classifier scores into accurate multiclass
       probability estimates. KDD 2002 (one-vs-all and renormalisation).

    Examples
    --------
    >>> import numpy as np
    >>> from pbr_core.recalibrators import PlattScaling
    >>> p = np.array([0.9, 0.8, 0.7, 0.6, 0.4, 0.3, 0.95, 0.2])
    >>> y = np.array([1, 1, 0, 1, 0, 0, 1, 1])
    >>> PlattScaling().fit(p, y).predict_proba(p).shape
    (8, 2)
    """

    method: ClassVar[str] = "platt"

    def __init__(self, smooth_targets: bool = False) -> None:
        self.smooth_targets = smooth_targets

    def _validate_params(self) -> None:
        if not isinstance(self.smooth_targets, (bool, np.bool_)):
            raise ValueError(f"Expected argument `smooth_targets` to be a bool, but got {self.smooth_targets!r}.")

    def _fit_binary(self, p: np.ndarray, y: np.ndarray) -> dict[str, Any]:
        targets = platt_targets(y) if self.smooth_targets else y
        fit = fit_logistic(logit(p)[:, None], targets)
        if not fit.converged:
            hint = "" if self.smooth_targets else " Use smooth_targets=True (Platt's prior correction)."
            raise RuntimeError(f"Platt scaling failed: {fit.message}.{hint}")
        return {"slope": float(fit.coef[0]), "intercept": fit.intercept}

    def _predict_binary(self, p: np.ndarray, state: dict[str, Any]) -> np.ndarray:
        return expit(state["slope"] * logit(p) + state["intercept"])
