"""Isotonic regression (Zadrozny & Elkan, 2002), fitted with scikit-learn, stored as thresholds."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

import numpy as np

from pbr_core.recalibrators import _state
from pbr_core.recalibrators._binary import MULTICLASS_CONSTRAINT, BinaryRecalibrator
from pbr_core.recalibrators._params import BOOLEAN, PROBABILITY_FLOOR, Constraint
from pbr_core.recalibrators.base import register


def centred_isotonic_points(p: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The knots (x, q) of centred isotonic regression (Oron & Flournoy 2017), to interpolate linearly.

    Isotonic regression of y on the distinct values of p (weighted by their counts), each maximal
    run of equal fitted values (a flat stretch) collapsed to one knot at its rows' mean p, except
    runs at exactly 0 or 1, kept point by point (the R package ``cir``'s default,
    ``interiorStrict``); the first and last knots are extended to the smallest and largest p with
    their values. Equal to ``cir``'s ``cirPAVA`` loop (Oron's Python port, ``pycir``; re-written in
    tests/recalibrators/test_isotonic.py and compared on random data with ties).
    """
    from sklearn.isotonic import IsotonicRegression

    xu, inverse = np.unique(p, return_inverse=True)
    w = np.bincount(inverse).astype(np.float64)
    fitted = IsotonicRegression(increasing=True).fit(
        xu, np.bincount(inverse, weights=y) / w, sample_weight=w).predict(xu)
    starts = np.ones(xu.size, dtype=bool)
    starts[1:] = (fitted[1:] != fitted[:-1]) | (fitted[1:] == 0.0) | (fitted[1:] == 1.0)
    run = np.cumsum(starts) - 1
    weight = np.bincount(run, weights=w)
    x, q = np.bincount(run, weights=w * xu) / weight, fitted[starts]
    if x[0] > xu[0]:
        x, q = np.concatenate([[xu[0]], x]), np.concatenate([[q[0]], q])
    if x[-1] < xu[-1]:
        x, q = np.concatenate([x, [xu[-1]]]), np.concatenate([q, [q[-1]]])
    return x, q


@register
class IsotonicCalibration(BinaryRecalibrator):
    """Isotonic regression: the non-decreasing map p -> q that minimises the squared error to y.

    Fitted by scikit-learn's ``IsotonicRegression(increasing=True, y_min=0, y_max=1,
    out_of_bounds="clip")``; only its thresholds are kept. Prediction is
    ``np.interp(p, X_thresholds, y_thresholds)`` (linear between thresholds, constant beyond the
    end points), which is what scikit-learn computes with ``out_of_bounds="clip"``, so a loaded model
    needs no scikit-learn object. The block frequencies are floored at 1/(n+1) and capped at
    n/(n+1) for n fit rows, so that no class that can occur gets probability exactly 0 (or 1).
    Binary data: one map on p(y=1); multiclass: one map on the top label's probability (default, see
    :mod:`pbr_core.recalibrators._binary`), or one-vs-all, renormalised, where a row whose K maps are
    all zero becomes uniform. Measured on the bundled CIFAR files, 5000 rows to fit and 5000 to test
    (uncalibrated NLL: CIFAR-10 ResNet-110 .1958, CIFAR-100 DenseNet-121 .9535): one-vs-all .1877 and
    .9724 (worse than the model on CIFAR-100: ~50 positives per class, and each class's lowest block
    shared by every row below it), top-label .1822 and .9406.

    Parameters
    ----------
    floor : float or None
        The block frequencies are kept within [floor, 1 - floor]; None (default) uses 1/(n+1) for n
        fit rows; 0 gives the plain isotonic regression (probabilities of exactly 0 and 1).
    multiclass : {"top_label", "one_vs_all"}
        How multiclass data are recalibrated (binary data: one map on p(y=1) either way);
        "one_vs_all" is scikit-learn's ``CalibratedClassifierCV(method="isotonic")``.
    centred : bool
        Centred isotonic regression (Oron & Flournoy 2017, :func:`centred_isotonic_points`):
        each flat block becomes one point at its rows' mean probability, linear between them, so
        the map is strictly increasing inside the data's range instead of a staircase (rows in one
        block are no longer tied). On the bundled CIFAR files it is within the noise of the plain
        map (top-label; test NLL / top-label ECE, plain -> centred): the first 5000 rows to fit,
        CIFAR-10 .1822 / .0093 -> .1819 / .0091, CIFAR-100 .9406 / .0183 -> .9392 / .0149; the
        shared suite's 1000-row splits, CIFAR-10 .1899 / .0144 -> .1891 / .0135, CIFAR-100
        .9798 / .0182 -> .9801 / .0226. Off by default: the plain method is scikit-learn's
        isotonic regression, to which it is pinned.

    Attributes
    ----------
    maps_ : list of dict
        Per class (one entry for binary data and top-label fits): ``{"X_thresholds": ...,
        "y_thresholds": ...}``.

    References
    ----------
    .. [1] B. Zadrozny and C. Elkan. Transforming classifier scores into accurate multiclass
       probability estimates. KDD 2002.
    .. [2] A. Niculescu-Mizil and R. Caruana. Predicting good probabilities with supervised
       learning. ICML 2005.
    .. [3] A. P. Oron and N. Flournoy. Centered isotonic regression: point and interval estimation
       for dose-response studies. Statistics in Biopharmaceutical Research 9(3), 2017.

    Examples
    --------
    >>> import numpy as np
    >>> from pbr_core.recalibrators import IsotonicCalibration
    >>> p = np.array([0.1, 0.3, 0.35, 0.6, 0.8, 0.9])
    >>> y = np.array([0, 1, 0, 1, 1, 1])
    >>> IsotonicCalibration().fit(p, y).predict_proba(np.array([0.2, 0.85]))[:, 1]
    array([0.32142857, 0.85714286])
    """

    method: ClassVar[str] = "isotonic"
    label: ClassVar[str] = "Isotonic regression"

    _parameter_constraints: ClassVar[dict[str, Constraint]] = {"floor": PROBABILITY_FLOOR,
                                                                "multiclass": MULTICLASS_CONSTRAINT,
                                                                "centred": BOOLEAN}

    def __init__(self, floor: float | None = None,
                 multiclass: Literal["top_label", "one_vs_all"] = "top_label", centred: bool = False) -> None:
        self.floor = floor
        self.multiclass = multiclass
        self.centred = centred

    def _fit_binary(self, p: np.ndarray, y: np.ndarray, name: str) -> dict[str, Any]:
        # scikit-learn on first use: importing it (with scipy.stats) costs ~1 CPU s, which every
        # process importing pbr_core.recalibrators paid, a GP fit's included (issue 40).
        from sklearn.isotonic import IsotonicRegression

        iso = IsotonicRegression(increasing=True, y_min=0.0, y_max=1.0, out_of_bounds="clip").fit(p, y)
        # A block without positives (or without negatives) has the frequency 0 (or 1), which the map
        # would give every later row in it: a class that then occurs costs an infinite log loss (on
        # CIFAR-10 with 5000 rows, test NLL 1.39 against .43 uncalibrated). The block frequencies are
        # kept within [1/(n+1), n/(n+1)]: "rarer than one in n", the most n rows can tell
        # (``floor``: another floor, 0 for the plain method).
        floor = 1.0 / (p.shape[0] + 1) if self.floor is None else float(self.floor)
        if self.centred:
            x, q = centred_isotonic_points(p, y)
            return {"X_thresholds": x, "y_thresholds": np.clip(q, floor, 1.0 - floor)}
        return {
            "X_thresholds": np.asarray(iso.X_thresholds_, dtype=np.float64),
            "y_thresholds": np.clip(np.asarray(iso.y_thresholds_, dtype=np.float64), floor, 1.0 - floor),
        }

    def _predict_binary(self, p: np.ndarray, state: dict[str, Any]) -> np.ndarray:
        # np.interp returns the end values outside [X_min, X_max]: scikit-learn's "clip".
        return np.interp(p, state["X_thresholds"], state["y_thresholds"])

    def _check_map(self, fields: _state.Fields) -> dict[str, Any]:
        # Thresholds are probabilities, sorted (np.interp needs increasing x; the fit is increasing).
        x = fields.array("X_thresholds", (None,), low=0.0, high=1.0, nondecreasing=True, min_size=1)
        y = fields.array("y_thresholds", (None,), low=0.0, high=1.0, nondecreasing=True, min_size=1)
        _state.same_length(x, y, fields.path("X_thresholds"), fields.path("y_thresholds"))
        return {"X_thresholds": x, "y_thresholds": y}
