"""Platt scaling (Platt, 1999): a logistic regression on the log-odds of the predicted probability."""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
from pbr_core._special import expit

from pbr_core.recalibrators import _state
from pbr_core.recalibrators._logistic import FITTED_TARGETS, TargetsRecalibrator, fit_with_targets, logit
from pbr_core.recalibrators.base import register


@register
class PlattScaling(TargetsRecalibrator):
    """Platt scaling: q = sigmoid(a * logit(p) + b), fitted by maximum likelihood.

    Binary data: fitted on p = p(y=1). Multiclass data: one map per class, one-vs-all, and the K
    outputs of a row are renormalised to sum to one. The feature is logit(p) with p clipped to
    [eps, 1 - eps] (float64 eps), so a=1, b=0 is the identity map.

    Parameters
    ----------
    targets : {"auto", "labels", "platt"}
        "labels": plain maximum likelihood on the 0/1 labels (unpenalised logistic regression);
        it does not exist when p separates the classes, and ``fit`` then raises. "platt": Platt's
        Bayesian targets (N+ + 1)/(N+ + 2) and 1/(N- + 2) (Platt 1999, Sec. 2.2, as scikit-learn's
        "sigmoid" calibration), always finite. "auto" (default): the labels, and Platt's targets
        only for maps whose labels are separable (common one-vs-all: on CIFAR-100 with 1000 rows,
        8 of 100 classes are perfectly separated by their own probability), with a warning.

    Attributes
    ----------
    maps_ : list of dict
        Per class (one entry for binary data): ``{"slope": a, "intercept": b, "targets": ...}``
        where "targets" says which targets the map was fitted on.

    Raises
    ------
    RuntimeError
        From ``fit`` with ``targets="labels"`` when p separates the labels (the maximum-likelihood
        fit does not exist), or if Newton's method fails.

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
    label: ClassVar[str] = "Platt scaling"

    def _fit_binary(self, p: np.ndarray, y: np.ndarray, name: str) -> dict[str, Any]:
        fit, used = fit_with_targets(logit(p)[:, None], y, self.targets, "Platt scaling", name, self._fit_notes)
        return {"slope": float(fit.coef[0]), "intercept": fit.intercept, "targets": used}

    def _predict_binary(self, p: np.ndarray, state: dict[str, Any]) -> np.ndarray:
        return expit(state["slope"] * logit(p) + state["intercept"])

    def _check_map(self, fields: _state.Fields) -> dict[str, Any]:
        # Any finite slope is a valid map (a negative one reverses a model that ranks backwards).
        return {"slope": fields.number("slope"), "intercept": fields.number("intercept"),
                "targets": fields.choice("targets", FITTED_TARGETS)}
