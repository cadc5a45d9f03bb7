"""Recalibrator test doubles. ``KLDouble``: shared by the protocol tests (tests/test_experiments.py)
and the paper figures' script tests (tests/test_paper_figures.py); registered only for the duration
of a test (monkeypatch), so it never leaks into the shared recalibrator suite that walks REGISTRY.
``failing_pbr_fits``: PBR fits that fail, for the alpha selection's tests (library, PBRCV, CLI, PBR
page)."""

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


#: What a PBR fit made to fail by :func:`failing_pbr_fits` raises.
FIT_FAILURE = "GP fit diverged: test double"


def failing_pbr_fits(monkeypatch, fails) -> list[tuple[float, int, bool]]:
    """TEST DOUBLE for a PBR fit that fails: every PBR fit (``PBR._fit``: from the prior, or
    continued by ``fit_continued`` with ``start=``) raises ``RuntimeError(FIT_FAILURE)`` where
    ``fails(alpha, n_rows, nth)`` says so (``nth``: 1 for the first fit at this alpha, 2 for the
    next, ...). In-process only: not in worker processes (``n_jobs`` > 1). Returns the log of
    (alpha, rows, continued) of every fit."""
    from pbr_core.recalibrators.gp import PBR

    log: list[tuple[float, int, bool]] = []
    real_fit = PBR._fit

    def _fit(self, preds: Predictions, start=None):  # every fit, from the prior or continued (start=)
        alpha, n = float(self.alpha), preds.n
        log.append((alpha, n, start is not None))
        if fails(alpha, n, sum(a == alpha for a, _, _ in log)):
            raise RuntimeError(FIT_FAILURE)
        return real_fit(self, preds, start=start)

    monkeypatch.setattr(PBR, "_fit", _fit)
    return log
