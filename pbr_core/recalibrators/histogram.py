"""Histogram binning (Zadrozny & Elkan, 2001): q = the frequency of y = 1 in p's bin."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

import numpy as np

from pbr_core.bounds import optimal_n_bins
from pbr_core.metrics import assign_bins, bin_boundaries
from pbr_core.recalibrators import _state
from pbr_core.recalibrators._binary import MULTICLASS_CONSTRAINT, BinaryRecalibrator
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

    Bins are right-closed, (e_{j-1}, e_j], with the first one also holding 0, as the paper's ECE
    bins (Eq. 2) in :mod:`pbr_core.metrics`. A bin without recalibration samples
    predicts its midpoint (the classifier is taken as calibrated where there is no evidence). The
    frequencies are floored at 1/(n+1) and capped at n/(n+1) for n fit rows, so that a bin without
    positives does not give a class that can occur probability exactly 0.
    Binary data: one map on p(y=1); multiclass: one map on the top label's probability (default,
    see :mod:`pbr_core.recalibrators._binary`), or one-vs-all, renormalised, where a row whose K
    maps are all zero becomes uniform.

    The defaults (equal-mass bins, the top label) are those under which binning does not lose to the
    model it recalibrates in test NLL. Measured on the bundled CIFAR files, 5000 rows to fit and 5000 to
    test (uncalibrated NLL: CIFAR-10 ResNet-110 .1958, CIFAR-100 DenseNet-121 .9535): uniform bins one-
    vs-all .2714 and 1.5355 (each class below 1/B is given its bin's frequency, and the K - 1 of them
    together take ~.13 from the top class), uniform bins top-label .2035 and .9426 (a confident model's
    rows nearly all fall in the top bin, [16/17, 1], one value for all), equal-mass top-label .1819 and
    .9422. Equal-mass ("uniform-mass") bins are also those of Gupta & Ramdas's distribution-free
    guarantee for histogram binning. ``strategy="uniform", multiclass="one_vs_all"`` is the plain method
    (netcal's ``HistogramBinning``).

    Parameters
    ----------
    n_bins : int or None
        Number of bins B; None uses the paper's floor(n^(1/3)) for n recalibration samples.
    strategy : {"equal_mass", "uniform"}
        "equal_mass" (default): edges between consecutive groups of n/B sorted recalibration
        predictions (equal-frequency binning). "uniform": edges i/B, the paper's ECE bins.
    floor : float or None
        The bin frequencies are kept within [floor, 1 - floor]; None (default) uses 1/(n+1) for n
        fit rows; 0 gives the plain histogram binning (probabilities of exactly 0 and 1).
    multiclass : {"top_label", "one_vs_all"}
        How multiclass data are binned (binary data: one map on p(y=1) either way).

    Attributes
    ----------
    maps_ : list of dict
        Per class (one entry for binary data and top-label fits): ``{"edges": inner edges (B-1,),
        "values": (B,)}``.

    References
    ----------
    .. [1] B. Zadrozny and C. Elkan. Obtaining calibrated probability estimates from decision trees
       and naive Bayesian classifiers. ICML 2001.
    .. [2] H. Fujisawa and F. Futami. PAC-Bayes analysis for recalibration in classification.
       ICML 2025 (uniform bins, Eq. 2; B = floor(n^(1/3)), Theorem 1).
    .. [3] C. Gupta and A. Ramdas. Distribution-free calibration guarantees for histogram binning
       without sample splitting. ICML 2021.

    Examples
    --------
    >>> import numpy as np
    >>> from pbr_core.recalibrators import HistogramBinning
    >>> p = np.array([0.1, 0.2, 0.3, 0.7, 0.8, 0.9])
    >>> y = np.array([0, 0, 1, 1, 1, 0])
    >>> HistogramBinning(n_bins=2, strategy="uniform").fit(p, y).predict_proba(np.array([0.25, 0.75]))[:, 1]
    array([0.33333333, 0.66666667])
    """

    method: ClassVar[str] = "histogram_binning"
    label: ClassVar[str] = "Histogram binning"
    _parameter_constraints: ClassVar[dict[str, Constraint]] = {
        "n_bins": or_none(int_range(1, MAX_BINS)), "strategy": one_of(STRATEGIES, words=f"one of {STRATEGIES}"),
        "floor": PROBABILITY_FLOOR, "multiclass": MULTICLASS_CONSTRAINT}

    def __init__(self, n_bins: int | None = None, strategy: Literal["equal_mass", "uniform"] = "equal_mass",
                 floor: float | None = None, multiclass: Literal["top_label", "one_vs_all"] = "top_label") -> None:
        self.n_bins = n_bins
        self.strategy = strategy
        self.floor = floor
        self.multiclass = multiclass

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
