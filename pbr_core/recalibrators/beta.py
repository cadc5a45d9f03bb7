"""Beta calibration (Kull, Silva Filho & Flach, 2017), the three-parameter "abm" family."""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
from pbr_core._special import expit

from pbr_core.recalibrators import _state
from pbr_core.recalibrators._logistic import (
    FITTED_TARGETS,
    TargetsRecalibrator,
    clip_probability,
    fit_logistic,
    fit_with_targets,
    platt_targets,
)
from pbr_core.recalibrators.base import register


def beta_features(p: np.ndarray) -> np.ndarray:
    """The two features [ln p, -ln(1 - p)] of beta calibration, with p clipped to [eps, 1 - eps]."""
    p = clip_probability(p)
    return np.column_stack([np.log(p), -np.log1p(-p)])


@register
class BetaCalibration(TargetsRecalibrator):
    """Beta calibration: q = sigmoid(a ln p - b ln(1 - p) + c) with a, b >= 0.

    The map is the likelihood ratio of two beta distributions (Kull et al., 2017); it contains the
    identity (a = b = 1, c = 0) and, unlike Platt scaling, also inverse-sigmoid shapes. It is fitted
    as an unpenalised logistic regression on [ln p, -ln(1 - p)], solved by Newton's method to
    machine precision. The constraint a, b >= 0 is handled as the authors' ``betacal`` package does:
    if the unconstrained a < 0, refit with the second feature alone (a = 0); else if b < 0, refit
    with the first alone (b = 0). Binary data: one map on p(y=1); multiclass: one-vs-all,
    renormalised.

    Parameters
    ----------
    targets : {"auto", "labels", "platt"}
        "labels": the plain maximum-likelihood fit of Kull et al. and ``betacal``; it does not
        exist when p separates the classes, and ``fit`` then raises. "platt": fit Platt's smoothed
        targets (N+ + 1)/(N+ + 2) and 1/(N- + 2) instead, always finite (our extension, borrowed
        from Platt 1999). "auto" (default): the labels, and Platt's targets only for maps whose
        labels are separable (common one-vs-all with many classes), with a warning.

    Attributes
    ----------
    maps_ : list of dict
        Per class (one entry for binary data): ``{"a": a, "b": b, "c": c, "targets": ...}``; the
        midpoint m of the paper is the root of a ln m - b ln(1 - m) + c = 0 (see
        :meth:`midpoints`).

    Raises
    ------
    RuntimeError
        From ``fit`` with ``targets="labels"`` when p separates the labels, or if Newton's method
        fails.

    References
    ----------
    .. [1] M. Kull, T. Silva Filho and P. Flach. Beta calibration: a well-founded and easily
       implemented improvement on logistic calibration for binary classifiers. AISTATS 2017.
    .. [2] M. Kull, T. M. Silva Filho and P. Flach. Beyond sigmoids: how to obtain well-calibrated
       probabilities from binary classifiers with beta calibration. Electronic Journal of
       Statistics 11 (2017).

    Examples
    --------
    >>> import numpy as np
    >>> from pbr_core.recalibrators import BetaCalibration
    >>> p = np.array([0.9, 0.8, 0.7, 0.6, 0.4, 0.3, 0.95, 0.2])
    >>> y = np.array([1, 1, 0, 1, 0, 0, 1, 1])
    >>> BetaCalibration().fit(p, y).predict_proba(p).shape
    (8, 2)
    """

    method: ClassVar[str] = "beta"
    label: ClassVar[str] = "Beta calibration"

    def _fit_binary(self, p: np.ndarray, y: np.ndarray, name: str) -> dict[str, Any]:
        X = beta_features(p)
        fit, used = fit_with_targets(X, y, self.targets, "Beta calibration", name, self._fit_notes)
        a, b = float(fit.coef[0]), float(fit.coef[1])
        if a < 0 or b < 0:
            # betacal's rule: drop the feature of the negative coefficient (a first) and refit.
            # A sub-model of a model with a finite optimum has one too, so this cannot separate.
            keep = 1 if a < 0 else 0
            t = platt_targets(y) if used == "platt" else y
            fit = fit_logistic(X[:, keep:keep + 1], t)
            if not fit.converged:
                raise RuntimeError(f"Beta calibration failed for {name}: {fit.message}.")
            a, b = (0.0, float(fit.coef[0])) if keep == 1 else (float(fit.coef[0]), 0.0)
        return {"a": a, "b": b, "c": fit.intercept, "targets": used}

    def _predict_binary(self, p: np.ndarray, state: dict[str, Any]) -> np.ndarray:
        X = beta_features(p)
        return expit(state["a"] * X[:, 0] + state["b"] * X[:, 1] + state["c"])

    def _check_map(self, fields: _state.Fields) -> dict[str, Any]:
        # a, b >= 0 is the model's constraint (a monotone map); the fit enforces it, a file must too.
        return {"a": fields.number("a", low=0.0), "b": fields.number("b", low=0.0), "c": fields.number("c"),
                "targets": fields.choice("targets", FITTED_TARGETS)}

    def midpoints(self) -> np.ndarray:
        """Kull et al.'s m per map: the p with q(p) = 1/2 (NaN where none exists in (0, 1))."""
        from scipy.optimize import brentq

        self._check_fitted()
        out = []
        for s in self.maps_:
            f = lambda m: s["a"] * np.log(m) - s["b"] * np.log1p(-m) + s["c"]  # noqa: E731
            lo, hi = 1e-12, 1 - 1e-12
            out.append(brentq(f, lo, hi) if f(lo) * f(hi) < 0 else np.nan)
        return np.asarray(out)
