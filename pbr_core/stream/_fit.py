"""Fitting on every row of a dataset by streamed passes (temperature scaling)."""

from __future__ import annotations

import math
from typing import Callable

import numpy as np
from scipy.special import softmax

from pbr_core.predictions import PredictionsError
from pbr_core.stream._source import Dataset

__all__ = ["fit_temperature"]


def _slope_pass(dataset: Dataset, beta: float) -> tuple[float, float, int]:
    """One pass: sum over rows of g_n = E_{softmax(beta z_n)}[z_n] - z_{n, y_n} (the NLL's derivative in
    beta) and of its derivative Var_{softmax(beta z_n)}[z_n] (>= 0: the NLL is convex in beta)."""
    g = h = 0.0
    n = 0
    for unit in dataset.units():
        for _, preds in dataset.predictions(unit):
            z = np.asarray(preds.scores, dtype=np.float64)
            p = softmax(beta * z, axis=1)
            mean = np.einsum("nk,nk->n", p, z)
            second = np.einsum("nk,nk->n", p, z * z)
            g += float((mean - z[np.arange(z.shape[0]), preds.labels]).sum())
            h += float((second - mean * mean).sum())
            n += preds.n
    return g, h, n


def fit_temperature(dataset: Dataset, *, min_temperature: float = 1e-3, max_temperature: float = 1e3,
                    tol: float = 1e-10, max_passes: int = 60,
                    progress: Callable[[int, float], None] | None = None):
    """Temperature scaling fitted on EVERY row of ``dataset``, one streamed pass per step.

    The objective and the answer are those of :class:`pbr_core.recalibrators.TemperatureScaling`
    (the NLL of softmax(z / T) on all rows, convex in beta = 1 / T): its derivative and second
    derivative in beta are sums over rows, so each pass gives both, and a safeguarded Newton
    iteration (a Newton step when it stays inside the current bracket of the root, else bisection)
    finds the root in a handful of passes (typically 4-8) from beta = 1.

    Returns
    -------
    TemperatureScaling
        Fitted (``temperature_``), as if ``fit`` had seen every row; ``fit_passes_`` records the passes.

    Raises
    ------
    PredictionsError
        A bad row, or top-label-only data.
    RuntimeError
        No convergence within ``max_passes`` passes.
    """
    from pbr_core.recalibrators import TemperatureScaling

    lay = dataset.layout()
    if lay.kind == "top_label":
        raise PredictionsError(f"{dataset.spec}: top-label-only data cannot be recalibrated: recalibration needs "
                               "the full probability or logit vector of every row.")
    rec = TemperatureScaling(min_temperature=min_temperature, max_temperature=max_temperature)
    rec._validate_params()
    lo, hi = 1.0 / max_temperature, 1.0 / min_temperature
    beta = min(max(1.0, lo), hi)
    passes = 0
    g_lo = g_hi = None
    while True:
        g, h, n = _slope_pass(dataset, beta)
        passes += 1
        if progress is not None:
            progress(passes, 1.0 / beta)
        if n < 2:
            raise PredictionsError(f"{dataset.spec}: at least 2 rows are needed to fit, but the dataset has {n}.")
        g, h = g / n, h / n
        if g > 0:
            hi, g_hi = beta, g
        else:
            lo, g_lo = beta, g
        step = beta - g / h if h > 0 else math.nan
        if abs(g) <= tol * max(1.0, h) or hi - lo <= 1e-15 * hi:
            break
        if passes >= max_passes:
            raise RuntimeError(f"Temperature scaling on every row did not converge in {max_passes} passes "
                               f"(|slope| = {abs(g):.3g}).")
        beta = step if lo < step < hi else 0.5 * (lo + hi)
        if beta == lo or beta == hi:
            break
    rec.n_classes_ = lay.n_classes
    rec.input_type_ = lay.input_type
    rec.temperature_ = float(1.0 / beta)
    rec.fit_passes_ = passes
    return rec
