"""Histogram binning (Zadrozny & Elkan, 2001): q = the frequency of y = 1 in p's bin."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

import numpy as np

from pbr_core.bounds import optimal_n_bins
from pbr_core.metrics import assign_bins, bin_boundaries
from pbr_core.recalibrators import _state
from pbr_core.recalibrators._binary import BinaryRecalibrator
from pbr_core.recalibrators._params import MAX_BINS, PROBABILITY_FLOOR, Constraint, int_range, one_of, or_none
from pbr_core.recalibrators.base import register

STRATEGIES = ("uniform", "equal_mass")


def equal_mass_edges(p_sorted: np.ndarray, n_bins: int) -> np.ndarray:
    """The B - 1 inner edges that split sorted values into B groups of (nearly) equal size.

    Bin j holds the sorted values at ranks round(j n / B) .. round((j + 1) n / B) - 1; the edge
    between two bins is the midpoint of the last value of one and the first value of the next, so
    no recalibration sample lies on an edge unless values are tied (ties go to the lower bin).
    """
    n = p_sorted.shape[0]
    cuts = np.rint(np.arange(1, n_bins) * (n / n_bins)).astype(np.int64)
    cuts = np.clip(cuts, 1, n - 1) if n > 1 else np.zeros(n_bins - 1, dtype=np.int64)
    return 0.5 * (p_sorted[cuts - 1] + p_sorted[cuts]) if n > 1 else np.full(n_bins - 1, p_sorted[0])


def check_step_map(fields: _state.Fields) -> dict[str, np.ndarray]:
    """The step function of a saved map, checked: sorted inner edges in [0, 1] and one
    probability per bin (one more than the edges)."""
    edges = fields.array("edges", (None,), low=0.0, high=1.0, nondecreasing=True)
    values = fields.array("values", (None,), low=0.0, high=1.0)
    _state.same_length(edges, values, fields.path("edges"), fields.path("values"), offset=1)
    return {"edges": edges, "values": values}


@register
class HistogramBinning(BinaryRecalibrator):
    """Histogram binning: split [0, 1] into B bins and predict each bin's frequency of y = 1.

    Bins are right-closed, (e_{j-1}, e_j], with the first one also holding 0, exactly as the
    paper's ECE bins (Eq. 2) in :mod:`pbr_core.metrics`. A bin without recalibration samples
    predicts its midpoint (the classifier is taken as calibrated where there is no evidence). The
    frequencies are floored at 1/(n+1) and capped at n/(n+1) for n fit rows, so that a bin without
    positives does not give a class that can occur probability exactly 0.
    Binary data: one map on p(y=1); multiclass: one-vs-all, renormalised, and a row whose K maps
    are all zero becomes uniform.

    Parameters
    ----------
    n_bins : int or None
        Number of bins B; None uses the paper's floor(n^(1/3)) for n recalibration samples.
    strategy : {"uniform", "equal_mass"}
        "uniform": edges i/B. "equal_mass": edges between consecutive groups of n/B sorted
        recalibration predictions (equal-frequency binning).
    floor : float or None
        The bin frequencies are kept within [floor, 1 - floor]; None (default) uses 1/(n+1) for n
        fit rows; 0 gives the plain histogram binning (probabilities of exactly 0 and 1).

    Attributes
    ----------
    maps_ : list of dict
        Per class (one entry for binary data): ``{"edges": inner edges (B-1,), "values": (B,)}``.

    References
    ----------
    .. [1] B. Zadrozny and C. Elkan. Obtaining calibrated probability estimates from decision trees
       and naive Bayesian classifiers. ICML 2001.
    .. [2] H. Fujisawa and F. Futami. PAC-Bayes analysis for recalibration in classification.
       ICML 2025 (uniform bins, Eq. 2; B = floor(n^(1/3)), Theorem 1).

    Examples
    --------
    >>> import numpy as np
    >>> from pbr_core.recalibrators import HistogramBinning
    >>> p = np.array([0.1, 0.2, 0.3, 0.7, 0.8, 0.9])
    >>> y = np.array([0, 0, 1, 1, 1, 0])
    >>> HistogramBinning(n_bins=2).fit(p, y).predict_proba(np.array([0.25, 0.75]))[:, 1]
    array([0.33333333, 0.66666667])
    """

    method: ClassVar[str] = "histogram_binning"
    label: ClassVar[str] = "Histogram binning"
    _parameter_constraints: ClassVar[dict[str, Constraint]] = {
        "n_bins": or_none(int_range(1, MAX_BINS)), "strategy": one_of(STRATEGIES, words=f"one of {STRATEGIES}"),
        "floor": PROBABILITY_FLOOR}

    def __init__(self, n_bins: int | None = None, strategy: Literal["uniform", "equal_mass"] = "uniform",
                 floor: float | None = None) -> None:
        self.n_bins = n_bins
        self.strategy = strategy
        self.floor = floor

    def _fit_binary(self, p: np.ndarray, y: np.ndarray, name: str) -> dict[str, Any]:
        B = optimal_n_bins(p.shape[0]) if self.n_bins is None else int(self.n_bins)
        if self.strategy == "uniform":
            edges = bin_boundaries(B)[:-1]  # the inner edges 1/B, ..., (B-1)/B of Eq. 2's bins
        else:
            edges = equal_mass_edges(np.sort(p), B)
        idx = assign_bins(p, edges)
        count = np.bincount(idx, minlength=B).astype(np.float64)
        positives = np.bincount(idx, weights=y, minlength=B)
        lower = np.concatenate([[0.0], edges])
        upper = np.concatenate([edges, [1.0]])
        values = 0.5 * (lower + upper)
        np.divide(positives, count, out=values, where=count > 0)
        # As isotonic regression: a bin without positives would predict 0 for a class that occurs
        # (CIFAR-10, 5000 rows: test NLL 3.58 against .43 uncalibrated); within [1/(n+1), n/(n+1)].
        floor = 1.0 / (p.shape[0] + 1) if self.floor is None else float(self.floor)
        return {"edges": edges, "values": np.clip(values, floor, 1.0 - floor)}

    def _predict_binary(self, p: np.ndarray, state: dict[str, Any]) -> np.ndarray:
        return state["values"][assign_bins(p, state["edges"])]

    def _check_map(self, fields: _state.Fields) -> dict[str, Any]:
        return check_step_map(fields)
