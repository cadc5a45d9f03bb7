"""Shared machinery of the binary recalibrators (Platt, isotonic, histogram binning, beta, BBQ).

A binary recalibrator learns a map p -> q on [0, 1] from (p(y=1), y) pairs. On binary data
(K = 2) it is fitted once on ``probs[:, 1]``. On multiclass data it is fitted one-vs-all: map k is
learned on (``probs[:, k]``, 1[y = k]); at prediction the K outputs are divided by their row sum,
as in Zadrozny & Elkan (2002). A row whose K outputs are all zero (possible with isotonic
regression or histogram binning) gets the uniform distribution 1/K, as scikit-learn's
``CalibratedClassifierCV`` does.

References
----------
.. [1] B. Zadrozny and C. Elkan. Transforming classifier scores into accurate multiclass
   probability estimates. KDD 2002.
"""

from __future__ import annotations

import warnings
from typing import Any, ClassVar

import numpy as np

from pbr_core.predictions import Predictions
from pbr_core.recalibrators import _state
from pbr_core.recalibrators._state import StateError
from pbr_core.recalibrators.base import Recalibrator, track


class BinaryRecalibrator(Recalibrator):
    """Base of recalibrators that map one probability to one probability.

    Subclasses implement ``_fit_binary(p, y, name) -> dict`` (the learned map of one class, a dict
    of floats, strings and float arrays, saved as is; ``name`` says which map it is, for messages),
    ``_predict_binary(p, state) -> q`` and ``_check_map(fields) -> dict``, which reads one map back
    from a saved file and checks it. A subclass that had to deviate from its plain fit for
    some maps appends their names to ``self._fit_notes``; ``fit`` then issues one warning,
    ``_fit_note_message`` formatted with the names.
    The learned maps are in ``maps_``: one dict for binary data, K dicts (class order) otherwise.
    """

    uses: ClassVar[str] = "probs"
    family: ClassVar[str] = "binary"
    _fit_note_message: ClassVar[str] = "{names}: fitted differently"

    def _fit(self, preds: Predictions) -> None:
        probs, labels = preds.probs, preds.labels
        self._fit_notes: list[str] = []
        if preds.n_classes == 2:
            self.maps_ = [self._fit_binary(probs[:, 1], (labels == 1).astype(np.float64), "p(y=1)")]
        else:
            K = preds.n_classes
            self.maps_ = [
                self._fit_binary(probs[:, k], (labels == k).astype(np.float64), f"class {k}")
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
        Q = np.empty_like(probs)
        for k, state in enumerate(self.maps_):
            Q[:, k] = self._predict_binary(probs[:, k], state)
        np.clip(Q, 0.0, 1.0, out=Q)
        total = Q.sum(axis=1, keepdims=True)
        out = np.full_like(Q, 1.0 / self.n_classes_)
        np.divide(Q, total, out=out, where=total > 0)
        return out

    def _get_state(self) -> dict[str, Any]:
        return {"maps": self.maps_}

    def _set_state(self, state: dict[str, Any]) -> None:
        maps = _state.Fields(state, "state").get("maps")
        expected = 1 if self.n_classes_ == 2 else self.n_classes_
        if not isinstance(maps, list) or len(maps) != expected:
            what = "1 map (of p(y=1), for 2 classes)" if expected == 1 else f"{expected} maps (one per class)"
            raise StateError(f"state.maps must be a list of {what}, but the file holds {_state.shown(maps)}")
        self.maps_ = [self._check_map(_state.Fields(m, f"state.maps[{i}]")) for i, m in enumerate(maps)]

    # ------------------------------------------------------------------ for subclasses
    def _fit_binary(self, p: np.ndarray, y: np.ndarray, name: str) -> dict[str, Any]:
        raise NotImplementedError

    def _predict_binary(self, p: np.ndarray, state: dict[str, Any]) -> np.ndarray:
        raise NotImplementedError

    def _check_map(self, fields: _state.Fields) -> dict[str, Any]:
        """One map of a saved file, checked: the dict ``_fit_binary`` returned (same keys and values),
        or :class:`~pbr_core.recalibrators._state.StateError` naming the field."""
        raise NotImplementedError
