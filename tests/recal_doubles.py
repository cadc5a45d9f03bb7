"""A recalibrator test double shared by the protocol tests (tests/test_experiments.py) and the paper
figures' script tests (tests/test_paper_figures.py). Registered only for the duration of a test
(monkeypatch), so it never leaks into the shared recalibrator suite that walks REGISTRY."""

from __future__ import annotations

from typing import Any

import numpy as np

from pbr_core.predictions import Predictions, softmax
from pbr_core.recalibrators.base import Recalibrator


class KLDouble(Recalibrator):
    """TEST DOUBLE for a PBR-like method: temperature 1 + alpha, and a made-up KL that falls with alpha.

    Just enough to exercise the KL-gap machinery (columns, bound, correlations) without a GP fit.
    """

    method = "test_double_kl"
    uses = "scores"

    def __init__(self, alpha: float = 0.5) -> None:
        self.alpha = alpha

    def _validate_params(self) -> None:
        if not self.alpha >= 0:
            raise ValueError(f"Expected argument `alpha` >= 0, but got {self.alpha!r}.")

    def _fit(self, preds: Predictions) -> None:
        self.temperature_ = 1.0 + self.alpha
        self.kl_ = 10.0 * (1.0 - self.alpha) + float(preds.confidence.mean())

    def _predict_proba(self, preds: Predictions) -> np.ndarray:
        return softmax(preds.scores / self.temperature_)

    def _get_state(self) -> dict[str, Any]:
        return {"temperature_": self.temperature_, "kl_": self.kl_}

    def _set_state(self, state: dict[str, Any]) -> None:
        self.temperature_, self.kl_ = state["temperature_"], state["kl_"]
