"""Inductive Venn-Abers predictors (Vovk & Petej, 2014; Vovk, Petej & Fedorova, 2015).

For a new score s, isotonic regression is fitted twice on the calibration scores with (s, 0) added
and with (s, 1) added; its values at s are p0 and p1 (p0 <= p1). The pair is a multiprobability
prediction: one of the two is calibrated whatever the data's distribution (the Venn predictors'
validity), and its width p1 - p0 says how much the calibration set can tell at s (wide where few
rows are). The single probability reported is the one that minimises the worst-case log loss,
``p = p1 / (1 - p0 + p1)``.

Both values depend only on where s falls among the distinct calibration scores, so they are
tabulated at fit time for each of the m + 1 gaps (2 (m + 1) isotonic fits of m + 1 points) and
looked up at prediction. Multiclass data: one-vs-all maps, the K probabilities renormalised (the
published one-vs-rest construction, as the authors' ``venn-abers`` package does); each class keeps
its own (p0, p1).
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from pbr_core.predictions import Predictions
from pbr_core.recalibrators import _state
from pbr_core.recalibrators._binary import BinaryRecalibrator
from pbr_core.recalibrators.base import as_predictions, register


def venn_abers_tables(p: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(c, p0, p1): the distinct calibration scores and, for a new score in gap i (before c[i];
    i = m: after the last), the isotonic fits' values at it with the label 0 and 1 added."""
    from sklearn.isotonic import isotonic_regression  # on first use: scikit-learn costs ~1 s to import

    c, inverse = np.unique(p, return_inverse=True)
    w = np.bincount(inverse).astype(np.float64)
    s = np.bincount(inverse, weights=y.astype(np.float64))
    m = c.size
    p0, p1 = np.empty(m + 1), np.empty(m + 1)
    for i in range(m + 1):
        weights = np.insert(w, i, 1.0)
        sums = np.insert(s, i, 0.0)
        p0[i] = isotonic_regression(sums / weights, sample_weight=weights, y_min=0.0, y_max=1.0)[i]
        sums[i] = 1.0
        p1[i] = isotonic_regression(sums / weights, sample_weight=weights, y_min=0.0, y_max=1.0)[i]
    return c, p0, p1


def _interval(state: dict[str, Any], p: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    c = state["scores"]
    # A score equal to a calibration score: p0 from the gap after it, p1 from the gap before it
    # (the ``venn-abers`` package's convention); any other score sits in one gap for both.
    return state["p0"][np.searchsorted(c, p, "right")], state["p1"][np.searchsorted(c, p, "left")]


@register
class VennAbers(BinaryRecalibrator):
    """Inductive Venn-Abers predictor: the calibrated probability and its (p0, p1) interval.

    ``predict_proba`` returns ``p1 / (1 - p0 + p1)`` per class (renormalised over classes on
    multiclass data); :meth:`predict_interval` returns the intervals themselves.

    Attributes
    ----------
    maps_ : list of dict
        Per class (one entry for binary data): ``{"scores": distinct calibration scores (m,),
        "p0": (m + 1,), "p1": (m + 1,)}``.

    References
    ----------
    .. [1] V. Vovk and I. Petej. Venn-Abers predictors. UAI 2014.
    .. [2] V. Vovk, I. Petej and V. Fedorova. Large-scale probabilistic predictors with and without
       guarantees of validity. NeurIPS 2015.
    .. [3] V. Manokhin. Multi-class probabilistic classification using inductive and cross
       Venn-Abers predictors. COPA 2017 (one-vs-rest; code: ``venn-abers``).

    Examples
    --------
    >>> import numpy as np
    >>> from pbr_core.recalibrators import VennAbers
    >>> p = np.array([0.1, 0.3, 0.35, 0.6, 0.8, 0.9])
    >>> y = np.array([0, 1, 0, 1, 1, 1])
    >>> low, high = VennAbers().fit(p, y).predict_interval(np.array([0.5]))
    >>> bool(low[0, 1] <= high[0, 1])
    True
    """

    method: ClassVar[str] = "venn_abers"
    label: ClassVar[str] = "Venn-Abers (inductive)"

    def __init__(self) -> None:
        pass

    def _fit_binary(self, p: np.ndarray, y: np.ndarray, name: str) -> dict[str, Any]:
        c, p0, p1 = venn_abers_tables(p, y)
        return {"scores": c, "p0": p0, "p1": p1}

    def _predict_binary(self, p: np.ndarray, state: dict[str, Any]) -> np.ndarray:
        p0, p1 = _interval(state, p)
        return p1 / (1.0 - p0 + p1)

    def predict_interval(self, X: Predictions | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The (p0, p1) interval of every class of every row: two arrays of shape (n, K).

        For binary data, column 1 is the interval of p(y=1) and column 0 that of p(y=0)
        (1 - p1, 1 - p0). On multiclass data the intervals are those of each one-vs-all map, before
        the renormalisation that ``predict_proba`` applies.
        """
        self._check_fitted()
        preds = as_predictions(X)
        probs = preds.probs
        if probs.shape[1] != self.n_classes_:
            raise ValueError(f"Expected predictions with {self.n_classes_} classes, but got {probs.shape[1]}.")
        if self.n_classes_ == 2:
            low1, high1 = _interval(self.maps_[0], probs[:, 1])
            return np.column_stack([1.0 - high1, low1]), np.column_stack([1.0 - low1, high1])
        low, high = np.empty_like(probs), np.empty_like(probs)
        for k, state in enumerate(self.maps_):
            low[:, k], high[:, k] = _interval(state, probs[:, k])
        return low, high

    def _check_map(self, fields: _state.Fields) -> dict[str, Any]:
        c = fields.array("scores", (None,), low=0.0, high=1.0, nondecreasing=True, min_size=1)
        p0 = fields.array("p0", (None,), low=0.0, high=1.0)
        p1 = fields.array("p1", (None,), low=0.0, high=1.0)
        _state.same_length(c, p0, fields.path("scores"), fields.path("p0"), offset=1)
        _state.same_length(c, p1, fields.path("scores"), fields.path("p1"), offset=1)
        return {"scores": c, "p0": p0, "p1": p1}
