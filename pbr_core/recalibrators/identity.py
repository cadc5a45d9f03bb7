"""The identity map ("uncalibrated"), so that comparisons can treat no recalibration as a method."""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from pbr_core.predictions import Predictions
from pbr_core.recalibrators.base import Recalibrator, register


@register
class Identity(Recalibrator):
    """Return the model's own probabilities unchanged (softmax of the logits when given logits).

    Fitting learns nothing but the number of classes; it exists so that experiment tables and the
    dashboard can list "uncalibrated" next to the real recalibrators.

    Examples
    --------
    >>> import numpy as np
    >>> from pbr_core.recalibrators import Identity
    >>> p = np.array([[0.9, 0.1], [0.3, 0.7]])
    >>> Identity().fit(p, np.array([0, 1])).predict_proba(p)
    array([[0.9, 0.1],
           [0.3, 0.7]])
    """

    method: ClassVar[str] = "uncalibrated"
    label: ClassVar[str] = "Uncalibrated"
    uses: ClassVar[str] = "probs"

    def __init__(self) -> None:
        pass

    def _fit(self, preds: Predictions) -> None:
        pass

    def _predict_proba(self, preds: Predictions) -> np.ndarray:
        return preds.probs.copy()

    def _get_state(self) -> dict[str, Any]:
        return {}

    def _set_state(self, state: dict[str, Any]) -> None:
        pass  # nothing learned, nothing to check (n_classes and input_type are checked by the base)
