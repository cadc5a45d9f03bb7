"""Shared machinery of the binary recalibrators (Platt, isotonic, histogram binning, beta, BBQ,
Venn-Abers).

A binary recalibrator learns a map p -> q on [0, 1] from (p(y=1), y) pairs. On binary data
(K = 2) it is fitted once on ``probs[:, 1]``. On multiclass data it is fitted one of two ways:

* one-vs-all: map k is learned on (``probs[:, k]``, 1[y = k]); at prediction the K outputs are
  divided by their row sum, as in Zadrozny & Elkan (2002). A row whose K outputs are all zero
  (possible with isotonic regression or histogram binning) gets the uniform distribution 1/K, as
  scikit-learn's ``CalibratedClassifierCV`` does.
* top-label (the "confidence calibration" of Guo et al. 2017; Gupta & Ramdas 2022's multiclass-to-
  binary reduction, pooled over the predicted classes): one map is learned on (max_k p_k, 1[y =
  argmax_k p_k]); at prediction the top class gets q = map(max_k p_k) and the other classes share
  1 - q in the proportions the model gave them (the softmax of their logits where there are logits),
  mixed with the uniform distribution over them with a weight c fitted by maximum likelihood on the
  rows whose top label was wrong (at least 1/(n+1) where the probability input holds exact zeros, so
  that no class that can occur gets 0). c is ~0 for the CIFAR networks and .47 for the bundled KITTI
  multiclass random forest, whose zeros say little: there top-label histogram binning scores test NLL
  .4527 with the fitted c, .823 with c = 1/(n+1), .4914 one-vs-all (5000 rows to fit).
  Used by the step-function methods (isotonic regression, histogram binning, BBQ, the Venn-Abers
  predictors) on multiclass data by default, their ``multiclass`` parameter: a step map gives every class inside one step the same
  value, and one-vs-all with many classes gives each of the K - 1 classes below the first step that
  step's frequency, which the renormalisation then takes from the top class. Measured on the bundled
  CIFAR-100 DenseNet-121 (5000 rows to fit, 5000 to test, uncalibrated NLL .9535): one-vs-all
  histogram binning 1.5355 (rows whose top probability was in [.9, .99) got .865 on median), BBQ
  1.3253, isotonic .9724; top-label .9422, .9397, .9406. The top-label map keeps the model's ranking
  of the other classes, which is all a step map could not learn from ~n / K positives per class.

References
----------
.. [1] B. Zadrozny and C. Elkan. Transforming classifier scores into accurate multiclass
   probability estimates. KDD 2002.
.. [2] C. Gupta and A. Ramdas. Top-label calibration and multiclass-to-binary reductions. ICLR 2022.
"""

from __future__ import annotations

import warnings
from typing import Any, ClassVar, Sequence

import numpy as np

from pbr_core._special import softmax

from pbr_core.predictions import Predictions, real_class_names
from pbr_core.recalibrators import _state
from pbr_core.recalibrators._params import Constraint, one_of
from pbr_core.recalibrators._state import StateError
from pbr_core.recalibrators.base import Recalibrator, track

#: How a binary map is applied to K > 2 classes: the ``multiclass`` parameter of the step-function methods.
MULTICLASS = ("top_label", "one_vs_all")
MULTICLASS_CONSTRAINT: Constraint = one_of(MULTICLASS, words=f"one of {MULTICLASS}")


def top_label_rest(preds: Predictions, top: np.ndarray, smoothing: float = 0.0) -> np.ndarray:
    """Each row's distribution over the classes other than ``top`` (0 at ``top``), in the model's
    proportions: the softmax of the other logits where there are logits (exact where the probabilities
    underflow), else the other probabilities divided by their sum (uniform where they are all 0),
    mixed with the uniform distribution over the others with weight ``smoothing``, so that a class
    given exactly 0 (a random forest's, a rounded export's) keeps a probability above 0."""
    rows = np.arange(top.shape[0])
    uniform = np.full(preds.probs.shape, 1.0 / (preds.n_classes - 1))
    uniform[rows, top] = 0.0
    if preds.logits is not None:
        z = np.array(preds.logits, dtype=np.float64)
        z[rows, top] = -np.inf
        out = softmax(z, axis=1)
    else:
        rest = np.array(preds.probs, dtype=np.float64)
        rest[rows, top] = 0.0
        total = rest.sum(axis=1, keepdims=True)
        out = np.divide(rest, total, out=uniform.copy(), where=total > 0)
    return (1.0 - smoothing) * out + smoothing * uniform if smoothing > 0 else out


def fit_rest_mixing(rest_true: np.ndarray, n_classes: int) -> float:
    """The weight c in [0, 1] maximising mean ln((1 - c) r + c / (K - 1)) over the true classes' shares
    ``rest_true`` of the other classes (rows whose top label was wrong): 0 when the model's ranking of
    the other classes is to be trusted as it is, 1 when it says nothing. The log-likelihood is concave
    in c, so its derivative's root (Brent's method) is the maximum; 0 without such rows."""
    r = np.asarray(rest_true, dtype=np.float64)
    if r.size == 0:
        return 0.0
    u = 1.0 / (n_classes - 1)

    def slope(c: float) -> float:
        return float(np.mean((u - r) / ((1.0 - c) * r + c * u)))

    if np.all(r > 0) and slope(0.0) <= 0.0:
        return 0.0
    if slope(1.0) >= 0.0:
        return 1.0
    from scipy.optimize import brentq  # on first use, as temperature scaling's

    return float(brentq(slope, 1e-300 if np.any(r == 0) else 0.0, 1.0, xtol=1e-15, maxiter=500))


def map_names(class_names: Sequence[str], n_classes: int) -> list[str]:
    """What messages call each map of a one-vs-all fit: the class's own name where the classes have names
    ("class 'six'"), else its position ("class 6"); binary data's one map is p(y=1) (``p(y='yes')``).
    Audit 10a: Platt on digits named 'zero'..'nine' warned of "class 6, class 8"."""
    names = real_class_names(class_names)
    if names is not None and len(names) != n_classes:
        names = None
    if n_classes == 2:
        return [f"p(y={names[1]!r})" if names else "p(y=1)"]
    # 'class_2' says "class" itself: "class 'class_2'" would say it twice
    return [(repr(names[k]) if "class" in names[k].lower() else f"class {names[k]!r}") if names else f"class {k}"
            for k in range(n_classes)]


class BinaryRecalibrator(Recalibrator):
    """Base of recalibrators that map one probability to one probability.

    Subclasses implement ``_fit_binary(p, y, name) -> dict`` (the learned map of one class, a dict
    of floats, strings and float arrays, saved as is; ``name`` says which map it is, for messages),
    ``_predict_binary(p, state) -> q`` and ``_check_map(fields) -> dict``, which reads one map back
    from a saved file and checks it. A subclass that had to deviate from its plain fit for
    some maps appends their names to ``self._fit_notes``; ``fit`` then issues one warning,
    ``_fit_note_message`` formatted with the names.
    The learned maps are in ``maps_``: one dict for binary data and for top-label fits, K dicts (class
    order) one-vs-all. A subclass that offers the top-label reduction takes a ``multiclass`` parameter
    (``MULTICLASS_CONSTRAINT``).
    """

    uses: ClassVar[str] = "probs"
    family: ClassVar[str] = "binary"
    _fit_note_message: ClassVar[str] = "{names}: fitted differently"

    def _fit(self, preds: Predictions) -> None:
        probs, labels = preds.probs, preds.labels
        self._fit_notes: list[str] = []
        map_words = map_names(preds.class_names, preds.n_classes)
        if preds.n_classes == 2:
            self.maps_ = [self._fit_binary(probs[:, 1], (labels == 1).astype(np.float64), map_words[0])]
        elif self._top_label():
            top = probs.argmax(axis=1)
            self.maps_ = [self._fit_binary(probs[np.arange(preds.n), top], (labels == top).astype(np.float64),
                                           "top label")]
            # How far to trust the model's ranking of the other classes: the weight of the uniform
            # distribution mixed into them, by maximum likelihood on the rows whose top label was wrong;
            # at least 1/(n+1) where the probability input holds exact zeros (temperature.input_smoothing).
            from pbr_core.recalibrators.temperature import input_smoothing

            wrong = np.flatnonzero(top != labels)
            rest = top_label_rest(preds, top)[wrong, labels[wrong]]
            self.rest_smoothing_ = max(fit_rest_mixing(rest, preds.n_classes), input_smoothing(preds))
        else:
            K = preds.n_classes
            self.maps_ = [
                self._fit_binary(probs[:, k], (labels == k).astype(np.float64), map_words[k])
                for k in track(range(K), total=K, desc=f"{self.method} (one-vs-all)")
            ]
        if self._fit_notes:
            names = ", ".join(self._fit_notes)
            warnings.warn(f"{type(self).__name__}: " + self._fit_note_message.format(names=names),
                          RuntimeWarning, stacklevel=4)
        del self._fit_notes

    def _predict_proba(self, preds: Predictions) -> np.ndarray:
        probs = preds.probs
        if self.n_classes_ == 2:
            q = np.clip(self._predict_binary(probs[:, 1], self.maps_[0]), 0.0, 1.0)
            return np.column_stack([1.0 - q, q])
        if self._fitted_top_label():
            top = probs.argmax(axis=1)
            rows = np.arange(top.shape[0])
            q = np.clip(self._predict_binary(probs[rows, top], self.maps_[0]), 0.0, 1.0)
            out = top_label_rest(preds, top, self.rest_smoothing_) * (1.0 - q)[:, None]
            out[rows, top] = q
            return out
        Q = np.empty_like(probs)
        for k, state in enumerate(self.maps_):
            Q[:, k] = self._predict_binary(probs[:, k], state)
        np.clip(Q, 0.0, 1.0, out=Q)
        total = Q.sum(axis=1, keepdims=True)
        out = np.full_like(Q, 1.0 / self.n_classes_)
        np.divide(Q, total, out=out, where=total > 0)
        return out

    def _get_state(self) -> dict[str, Any]:
        if self._fitted_top_label():
            return {"maps": self.maps_, "rest_smoothing": self.rest_smoothing_}
        return {"maps": self.maps_}

    def _set_state(self, state: dict[str, Any]) -> None:
        maps = _state.Fields(state, "state").get("maps")
        expected = 1 if self.n_classes_ == 2 or self._top_label() else self.n_classes_
        if not isinstance(maps, list) or len(maps) != expected:
            what = (f"{expected} maps (one per class)" if expected > 1 else "1 map (of p(y=1), for 2 classes)"
                    if self.n_classes_ == 2 else "1 map (of the top label's probability)")
            raise StateError(f"state.maps must be a list of {what}, but the file holds {_state.shown(maps)}")
        self.maps_ = [self._check_map(_state.Fields(m, f"state.maps[{i}]")) for i, m in enumerate(maps)]
        if self.n_classes_ > 2 and self._top_label():
            self.rest_smoothing_ = _state.Fields(state, "state").number("rest_smoothing", low=0.0, high=1.0)

    def _fitted_top_label(self) -> bool:
        """Whether the fitted maps are one top-label map of multiclass data: read from the maps, so that a
        ``multiclass`` changed by ``set_params`` after ``fit`` does not change what ``predict`` does
        (scikit-learn's convention: the fitted state decides until the next fit)."""
        return self.n_classes_ > 2 and len(self.maps_) == 1

    def _top_label(self) -> bool:
        """Whether multiclass data get the one top-label map (``multiclass="top_label"``); methods
        without the parameter are one-vs-all."""
        return getattr(self, "multiclass", "one_vs_all") == "top_label"

    @classmethod
    def _from_fields(cls, data: dict[str, Any]) -> "BinaryRecalibrator":
        # Files written before the ``multiclass`` parameter existed hold one-vs-all maps: read them so.
        params = data.get("params")
        if "multiclass" in cls._param_names() and isinstance(params, dict) and "multiclass" not in params:
            data = {**data, "params": {**params, "multiclass": "one_vs_all"}}
        return super()._from_fields(data)

    # ------------------------------------------------------------------ for subclasses
    def _fit_binary(self, p: np.ndarray, y: np.ndarray, name: str) -> dict[str, Any]:
        raise NotImplementedError

    def _predict_binary(self, p: np.ndarray, state: dict[str, Any]) -> np.ndarray:
        raise NotImplementedError

    def _check_map(self, fields: _state.Fields) -> dict[str, Any]:
        """One map of a saved file, checked: the dict ``_fit_binary`` returned (same keys and values),
        or :class:`~pbr_core.recalibrators._state.StateError` naming the field."""
        raise NotImplementedError
