"""Inductive Venn-Abers predictors (Vovk & Petej, 2014; Vovk, Petej & Fedorova, 2015).

For a new score s, isotonic regression is fitted twice on the calibration scores with (s, 0) added
and with (s, 1) added; its values at s are p0 and p1 (p0 <= p1). The pair is a multiprobability
prediction: one of the two is calibrated whatever the data's distribution, as long as the new rows
are exchangeable with the calibration rows (the Venn predictors' validity; not after a drift), and its width p1 - p0 says how much the calibration set can tell at s (wide where few
rows are). The single probability reported is the one that minimises the worst-case log loss,
``p = p1 / (1 - p0 + p1)``.

Both values depend only on where s falls among the distinct calibration scores, so they are
tabulated at fit time for each of the m + 1 gaps (the bridge between two convex hulls of the
cumulative sum diagram per gap and label, :func:`venn_abers_tables`) and looked up at prediction.

Multiclass data, the ``multiclass`` parameter:

* ``"top_label"`` (default): one predictor on (max_k p_k, 1[y = argmax_k p_k]), the top-label
  reduction the step-function methods use (``_binary``): the top class gets the Venn-Abers
  probability of its confidence, the other classes share the rest in the model's proportions. Its
  (p0, p1) is the interval of the top class's probability; another class's interval is the image of
  it, (r (1 - p1), r (1 - p0)) for its share r of the rest.
* ``"one_vs_all"``: one predictor per class, the K probabilities renormalised (the published
  one-vs-rest construction, as the authors' ``venn-abers`` package does); each class keeps its own
  (p0, p1), before the renormalisation.

Why top-label by default: one-vs-all fits K isotonic maps on ~n / K positives each, and the
renormalisation then moves probability from the top class to the classes below each map's first
step. Measured test NLL against the uncalibrated model (5000 rows to fit, 10000 to test, mean per-row
difference, benchmarks/RESULTS_ranked.md): CIFAR-100 WRN-26-10 one-vs-all +.0051 (cross, 2 splits:
+.0381), top-label -.0131 (cross -.0131); DenseNet-121 +.0030 (+.0310) against -.0166 (-.0166);
CIFAR-10 ResNet-110 -.0159 against -.0162.
"""

from __future__ import annotations

import warnings
from typing import Any, ClassVar, Literal

import numpy as np

from pbr_core.predictions import Predictions
from pbr_core.recalibrators import _state
from pbr_core.recalibrators._binary import MULTICLASS_CONSTRAINT, BinaryRecalibrator, top_label_rest
from pbr_core.recalibrators._params import MAX_FOLDS, NON_NEGATIVE_INT, Constraint, int_range, or_none
from pbr_core.recalibrators.base import register


def _hull_links(X: np.ndarray, Y: np.ndarray) -> tuple[list[int], list[int]]:
    """For the points P_k = (X_k, Y_k) (X increasing): ``prv[k]``, the vertex before P_k on the lower
    convex hull of P_0..P_k, and ``nxt[k]``, the vertex after P_k on the lower hull of P_k..P_m (-1:
    none). Each hull is the chain of these links from P_k, so one pass each way gives all of them."""
    n = X.size
    x, y = X.tolist(), Y.tolist()
    prv, nxt = [-1] * n, [-1] * n
    stack: list[int] = []
    for k in range(n):
        # pop b while it is not strictly below the segment from the vertex before it to P_k
        while len(stack) >= 2 and (y[stack[-1]] - y[stack[-2]]) * (x[k] - x[stack[-1]]) >= \
                (y[k] - y[stack[-1]]) * (x[stack[-1]] - x[stack[-2]]):
            stack.pop()
        if stack:
            prv[k] = stack[-1]
        stack.append(k)
    stack = []
    for k in range(n - 1, -1, -1):
        while len(stack) >= 2 and (y[stack[-1]] - y[k]) * (x[stack[-2]] - x[stack[-1]]) >= \
                (y[stack[-2]] - y[stack[-1]]) * (x[stack[-1]] - x[k]):
            stack.pop()
        if stack:
            nxt[k] = stack[-1]
        stack.append(k)
    return prv, nxt


def venn_abers_tables(p: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(c, p0, p1): the distinct calibration scores and, for a new score in gap i (before c[i];
    i = m: after the last), the isotonic fits' values at it with the label 0 and 1 added.

    The isotonic fit is the slope of the greatest convex minorant of the cumulative sum diagram
    (P_k = (rows, positives) of the k lowest distinct scores). A point (weight 1, label t) added in
    gap i splits the diagram into P_0..P_i and P_i..P_m shifted by (1, t); its fitted value is the
    slope of the bridge between the two parts' lower hulls, found by walking both hulls from P_i
    (``_hull_links``). Equal to fitting isotonic regression again for every gap and label (the
    definition; tests/recalibrators/test_venn_abers.py checks it to 1e-15) at ~1 % of the cost:
    3000 KITTI rows in 0.014 CPU s against 1.4 s, 8000 rows in ~0.05 s.
    """
    c, inverse = np.unique(p, return_inverse=True)
    w = np.bincount(inverse).astype(np.float64)
    s = np.bincount(inverse, weights=y.astype(np.float64))
    m = c.size
    X = np.concatenate([[0.0], np.cumsum(w)]).tolist()
    Y = np.concatenate([[0.0], np.cumsum(s)]).tolist()
    prv, nxt = _hull_links(np.asarray(X), np.asarray(Y))
    tables = []
    for t in (0.0, 1.0):
        values = np.empty(m + 1)
        for i in range(m + 1):
            left = right = i
            value = t  # the new point alone
            while True:
                moved = False
                j = prv[left]
                if j >= 0 and (Y[left] - Y[j]) > value * (X[left] - X[j]):  # the left hull's edge is steeper
                    left = j
                    value = (Y[right] + t - Y[left]) / (X[right] + 1.0 - X[left])
                    moved = True
                j = nxt[right]
                if j >= 0 and (Y[j] - Y[right]) < value * (X[j] - X[right]):  # the right hull's edge is flatter
                    right = j
                    value = (Y[right] + t - Y[left]) / (X[right] + 1.0 - X[left])
                    moved = True
                if not moved:
                    break
            values[i] = value
        tables.append(values)
    return c, tables[0], tables[1]


def _interval(state: dict[str, Any], p: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    c = state["scores"]
    # A score equal to a calibration score: p0 from the gap after it, p1 from the gap before it
    # (the ``venn-abers`` package's convention); any other score sits in one gap for both.
    return state["p0"][np.searchsorted(c, p, "right")], state["p1"][np.searchsorted(c, p, "left")]


@register
class VennAbers(BinaryRecalibrator):
    """Inductive Venn-Abers predictor: the calibrated probability and its (p0, p1) interval.

    ``predict_proba`` returns ``p1 / (1 - p0 + p1)`` (for multiclass data, see ``multiclass``);
    :meth:`predict_interval` returns the intervals themselves.

    Parameters
    ----------
    multiclass : {"top_label", "one_vs_all"}, default "top_label"
        How multiclass data are recalibrated (binary data: one predictor on p(y=1) either way): one
        predictor on the top label's probability, or the published one-vs-rest construction (one per
        class, renormalised). See the module's notes for the measured difference.

    Attributes
    ----------
    maps_ : list of dict
        Per class one-vs-all (one entry for binary data and for top-label fits): ``{"scores":
        distinct calibration scores (m,), "p0": (m + 1,), "p1": (m + 1,)}``.

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
    _parameter_constraints: ClassVar[dict[str, Constraint]] = {"multiclass": MULTICLASS_CONSTRAINT}

    def __init__(self, multiclass: Literal["top_label", "one_vs_all"] = "top_label") -> None:
        self.multiclass = multiclass

    def _fit_binary(self, p: np.ndarray, y: np.ndarray, name: str) -> dict[str, Any]:
        c, p0, p1 = venn_abers_tables(p, y)
        return {"scores": c, "p0": p0, "p1": p1}

    def _predict_binary(self, p: np.ndarray, state: dict[str, Any]) -> np.ndarray:
        p0, p1 = _interval(state, p)
        return p1 / (1.0 - p0 + p1)

    def _map_interval(self, p: np.ndarray, state: dict[str, Any]) -> tuple[np.ndarray, np.ndarray]:
        return _interval(state, p)

    def predict_interval(self, X: Predictions | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The (p0, p1) interval of every class of every row: two arrays of shape (n, K).

        For binary data, column 1 is the interval of p(y=1) and column 0 that of p(y=0)
        (1 - p1, 1 - p0). On multiclass data fitted top-label, the top class's column holds its
        predictor's (p0, p1) and every other class's the image of it, (r (1 - p1), r (1 - p0)) with r
        its share of the rest (as ``predict_proba`` shares it); one-vs-all, the intervals are those of
        each class's map, before the renormalisation that ``predict_proba`` applies.
        """
        self._check_fitted()
        preds = self._input_predictions(X)   # a DataFrame's columns matched by name, as predict_proba does
        if preds.n_classes != self.n_classes_:
            raise ValueError(f"Expected predictions with {self.n_classes_} classes, but got {preds.n_classes}.")
        ordered, back = self._in_fitted_class_order(preds)  # classes matched by name, as predict_proba does
        low, high = self._intervals(ordered)
        return (low, high) if back is None else (low[:, back], high[:, back])

    def _intervals(self, preds: Predictions) -> tuple[np.ndarray, np.ndarray]:
        probs = preds.probs
        if self.n_classes_ == 2:
            low1, high1 = self._map_interval(probs[:, 1], self.maps_[0])
            return np.column_stack([1.0 - high1, low1]), np.column_stack([1.0 - low1, high1])
        if self._fitted_top_label():
            rows, top = np.arange(preds.n), probs.argmax(axis=1)
            p0, p1 = self._map_interval(probs[rows, top], self.maps_[0])
            rest = top_label_rest(preds, top, self.rest_smoothing_)
            low, high = rest * (1.0 - p1)[:, None], rest * (1.0 - p0)[:, None]
            low[rows, top], high[rows, top] = p0, p1
            return low, high
        low, high = np.empty_like(probs), np.empty_like(probs)
        for k, state in enumerate(self.maps_):
            low[:, k], high[:, k] = self._map_interval(probs[:, k], state)
        return low, high

    def _check_map(self, fields: _state.Fields) -> dict[str, Any]:
        c = fields.array("scores", (None,), low=0.0, high=1.0, nondecreasing=True, min_size=1)
        p0 = fields.array("p0", (None,), low=0.0, high=1.0)
        p1 = fields.array("p1", (None,), low=0.0, high=1.0)
        _state.same_length(c, p0, fields.path("scores"), fields.path("p0"), offset=1)
        _state.same_length(c, p1, fields.path("scores"), fields.path("p1"), offset=1)
        return {"scores": c, "p0": p0, "p1": p1}


@register
class VennAbersCross(VennAbers):
    """Cross Venn-Abers predictor (CVAP; Vovk, Petej & Fedorova 2015, Sec. 4): ``n_splits`` inductive
    predictors, each calibrated on one fold of the rows, merged.

    The rows (per map: p(y=1) on binary data; on multiclass data the top label's probability, or each
    class one-vs-all, as ``multiclass`` says) are split
    into ``n_splits`` folds stratified by the outcome (scikit-learn's ``StratifiedKFold``, as the
    authors' ``venn-abers`` package splits them; shuffled with ``random_state``, in file order
    when it is None). Fold i's inductive predictor gives (p0_i, p1_i) at a new score; the
    probability is the log-loss merge ``GM(p1) / (GM(1 - p0) + GM(p1))`` (GM: the geometric mean
    over the folds), the package's ``loss="log"``.

    The interval :meth:`predict_interval` returns is the folds' arithmetic mean of p0 and of p1
    (p0 <= p1 in every fold, so in the mean too); the package returns every fold's pair and merges
    no interval. Here the model that made the scores is fixed (a recalibrator never retrains it),
    so each fold's predictor sees 1 / n_splits of the rows: its intervals are wider than the
    inductive predictor's on every row, and the merge is what narrows the probability's spread.
    The averaged pair has no validity guarantee (the method has none): on 50-row files of an
    over-confident model the true label's averaged probability failed the test of calibration
    (p = 6e-11 with 2 folds, 1e-58 with 5; audit 6), so the front ends claim none for it.

    Parameters
    ----------
    n_splits : int, default 2
        Folds (at least 2). With the model fixed, more folds mean fewer rows per predictor: test NLL
        on CIFAR-10 ResNet-110 (5000 rows to fit, 5000 to test; uncalibrated .1958, inductive .1803,
        top-label) was .1799 with 2 folds, .1804 with 3, .1807 with 5 and .1821 with 10; one-vs-all
        (inductive .1859) .1895 with 2 folds, .1935 with 3 and .2052 with 5, worse than not recalibrating.
    random_state : int or None, default 0
        Seed of the folds' shuffle (the package's ``shuffle=True, random_state``); None keeps the
        rows' order (its ``shuffle=False``).
    multiclass : {"top_label", "one_vs_all"}, default "top_label"
        As :class:`VennAbers`'s.

    References
    ----------
    .. [1] V. Vovk, I. Petej and V. Fedorova. Large-scale probabilistic predictors with and without
       guarantees of validity. NeurIPS 2015 (cross Venn-Abers predictors, Sec. 4).
    .. [2] V. Manokhin. ``venn-abers`` (``VennAbersCV`` with ``inductive=False``).
    """

    method: ClassVar[str] = "venn_abers_cross"
    label: ClassVar[str] = "Venn-Abers (cross)"
    _parameter_constraints: ClassVar[dict[str, Constraint]] = {
        "n_splits": int_range(2, MAX_FOLDS), "random_state": or_none(NON_NEGATIVE_INT),
        "multiclass": MULTICLASS_CONSTRAINT}
    _fit_note_message: ClassVar[str] = ("{names}: fewer rows of one outcome than folds, so some folds hold none of "
                                        "them (their intervals are then wide)")

    def __init__(self, n_splits: int = 2, random_state: int | None = 0,
                 multiclass: Literal["top_label", "one_vs_all"] = "top_label") -> None:
        self.n_splits = n_splits
        self.random_state = random_state
        self.multiclass = multiclass

    def _fit(self, preds: Predictions) -> None:
        if preds.n < self.n_splits:
            raise ValueError(f"Cross Venn-Abers with n_splits = {self.n_splits} needs at least {self.n_splits} rows "
                             f"(one per fold), but got {preds.n}.")
        super()._fit(preds)

    def _fit_binary(self, p: np.ndarray, y: np.ndarray, name: str) -> dict[str, Any]:
        from sklearn.model_selection import StratifiedKFold  # on first use: scikit-learn costs ~1 s to import

        n_pos = int(y.sum())
        if 0 < min(n_pos, y.size - n_pos) < self.n_splits:
            self._fit_notes.append(name)
        kf = StratifiedKFold(n_splits=self.n_splits, shuffle=self.random_state is not None,
                             random_state=self.random_state)
        folds = []
        with warnings.catch_warnings():  # "least populated class has only m members": noted above instead
            warnings.simplefilter("ignore", UserWarning)
            splits = list(kf.split(p.reshape(-1, 1), y))
        for _, rows in splits:
            c, p0, p1 = venn_abers_tables(p[rows], y[rows])
            folds.append({"scores": c, "p0": p0, "p1": p1})
        return {"folds": folds}

    def _fold_intervals(self, p: np.ndarray, state: dict[str, Any]) -> tuple[np.ndarray, np.ndarray]:
        pairs = [_interval(fold, p) for fold in state["folds"]]
        return np.column_stack([a for a, _ in pairs]), np.column_stack([b for _, b in pairs])

    def _predict_binary(self, p: np.ndarray, state: dict[str, Any]) -> np.ndarray:
        p0, p1 = self._fold_intervals(p, state)
        # Geometric means as the package computes them (the product's root): p1 > 0 and p0 < 1 in
        # every fold (a 1, or a 0, was added at the new score), so neither mean is 0.
        g1 = p1.prod(axis=1) ** (1.0 / p1.shape[1])
        g0 = (1.0 - p0).prod(axis=1) ** (1.0 / p0.shape[1])
        return g1 / (g0 + g1)

    def _map_interval(self, p: np.ndarray, state: dict[str, Any]) -> tuple[np.ndarray, np.ndarray]:
        p0, p1 = self._fold_intervals(p, state)
        return p0.mean(axis=1), p1.mean(axis=1)

    def _check_map(self, fields: _state.Fields) -> dict[str, Any]:
        folds = fields.get("folds")
        if not isinstance(folds, list) or len(folds) != self.n_splits:
            raise _state.StateError(f"{fields.path('folds')} must be a list of {self.n_splits} folds (n_splits), "
                                    f"but the file holds {_state.shown(folds)}")
        return {"folds": [super(VennAbersCross, self)._check_map(_state.Fields(f, f"{fields.path('folds')}[{i}]"))
                          for i, f in enumerate(folds)]}

    @classmethod
    def _test_params(cls) -> dict[str, Any]:
        return {"n_splits": 3}
