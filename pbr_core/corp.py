"""CORP reliability diagrams and the score decomposition MCB - DSC + UNC (Dimitriadis, Gneiting & Jordan, 2021).

CORP ("consistent, optimally binned, reproducible, PAV-based") replaces the bins of a reliability
diagram by the isotonic regression of the outcome on the forecast (pool-adjacent-violators): no
number of bins to choose, and the recalibrated forecasts it gives decompose any proper score S::

    mean S(p, y) = MCB - DSC + UNC
    MCB = S(p) - S(p_hat)     miscalibration: what recalibrating p by PAV would gain (>= 0)
    DSC = S(y_bar) - S(p_hat) discrimination: what p_hat gains over the base rate (>= 0)
    UNC = S(y_bar)            uncertainty: the base rate's score

with p_hat the PAV fit and y_bar the mean outcome. The consistency band is the authors' resampling
band: outcomes drawn as Bernoulli(p) (what a calibrated forecast would produce), the PAV fit
redone for each draw, and the pointwise quantiles of those fits around the diagonal; a CORP curve
outside it is evidence of miscalibration there.

``log_loss_split`` is the refinement / calibration split of the log loss of Berta et al.
(2025): the refinement is the loss after the best temperature on the same rows (what no monotone
rescaling of the confidence can remove), the calibration part the rest (what any recalibrator could
at most gain at that level of expressiveness).

References
----------
.. [1] T. Dimitriadis, T. Gneiting and A. I. Jordan. Stable reliability diagrams for probabilistic
   classifiers. PNAS 118 (8), 2021.
.. [2] E. Berta, D. Holzmüller, M. I. Jordan and F. Bach. Rethinking early stopping: refine, then
   calibrate. arXiv:2501.19195, 2025.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

__all__ = ["CHANCE_OUTSIDE_SHARE", "CorpReliability", "ScoreDecomposition", "corp_reliability", "log_loss_split",
           "outside_band_share", "score_decomposition"]


def _binary(p: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    p = np.asarray(p, dtype=np.float64).ravel()
    y = np.asarray(y).ravel()
    if p.shape != y.shape or p.size == 0:
        raise ValueError(f"Expected forecasts and outcomes of the same non-zero length, but got {p.size} and {y.size}.")
    if not np.all(np.isfinite(p)) or np.any((p < 0) | (p > 1)):
        raise ValueError("Forecasts must be probabilities in [0, 1].")
    if not np.all((y == 0) | (y == 1)):
        raise ValueError("Outcomes must be 0 or 1.")
    return p, y.astype(np.float64)


def _pav(p_sorted: np.ndarray, y_sorted: np.ndarray) -> np.ndarray:
    """The PAV fit (non-decreasing least squares) at each sorted forecast, ties pooled."""
    from sklearn.isotonic import IsotonicRegression  # on first use: scikit-learn costs ~1 s to import

    return IsotonicRegression(increasing=True, y_min=0.0, y_max=1.0).fit_transform(p_sorted, y_sorted)


@dataclass(frozen=True)
class CorpReliability:
    """A CORP reliability diagram: the PAV fit at each distinct forecast, and its consistency band."""

    #: The distinct forecasts, sorted.
    x: np.ndarray
    #: The PAV-recalibrated probability at each (the CORP curve).
    recalibrated: np.ndarray
    #: Pointwise lower and upper ends of the consistency band at each x (under calibration).
    band_low: np.ndarray
    band_high: np.ndarray
    level: float
    n_resamples: int


def corp_reliability(p: np.ndarray, y: np.ndarray, *, level: float = 0.9, n_resamples: int = 100,
                     seed: int = 0) -> CorpReliability:
    """The CORP reliability diagram of binary forecasts ``p`` and outcomes ``y`` (DGJ 2021, Sec. 2-3).

    Parameters
    ----------
    p, y : array-like of shape (n,)
        Probabilities of the event and the 0/1 outcomes (for a multiclass model: the confidence and
        whether the top class was right).
    level : float
        Coverage of the pointwise consistency band (default 0.9, the authors').
    n_resamples : int
        Resamples of the band (default 100).
    seed : int
        Seed of the resampling.
    """
    p, y = _binary(p, y)
    if not 0 < level < 1:
        raise ValueError(f"Expected argument `level` to be in (0, 1), but got {level!r}.")
    order = np.argsort(p, kind="stable")
    ps, ys = p[order], y[order]
    fit = _pav(ps, ys)
    x, first = np.unique(ps, return_index=True)
    rng = np.random.default_rng(seed)
    draws = np.empty((n_resamples, x.size))
    for b in range(n_resamples):
        draws[b] = _pav(ps, (rng.uniform(size=ps.size) < ps).astype(np.float64))[first]
    a = (1.0 - level) / 2.0
    low, high = np.quantile(draws, [a, 1.0 - a], axis=0)
    return CorpReliability(x=x, recalibrated=fit[first], band_low=low, band_high=high, level=level,
                           n_resamples=n_resamples)


#: The band is pointwise (90 % at each forecast), so a calibrated model's curve leaves it somewhere by
#: chance: for about 11 % of the rows on average. Measured with outcomes drawn from the forecasts
#: (Beta(2, 2) forecasts, default band): the share of rows outside stayed at or below 0.25 at n = 300 (40
#: draws), 0.37 once and 0.23 otherwise at n = 1000 (40), 0.16 at n = 10^4 (10). More than this share is
#: the reading "more than chance produces" (tests/test_corp.py counts how often it is made).
CHANCE_OUTSIDE_SHARE = 0.3


def outside_band_share(corp: CorpReliability, p: np.ndarray) -> float:
    """The share of the forecasts ``p`` (the rows the diagram was drawn from) at which the CORP curve
    lies outside its consistency band; compare with :data:`CHANCE_OUTSIDE_SHARE`."""
    p = np.asarray(p, dtype=np.float64).ravel()
    outside = (corp.recalibrated < corp.band_low) | (corp.recalibrated > corp.band_high)
    at = np.clip(np.searchsorted(corp.x, p), 0, corp.x.size - 1)
    return float(outside[at].mean())


@dataclass(frozen=True)
class ScoreDecomposition:
    """mean score = miscalibration - discrimination + uncertainty (``score == mcb - dsc + unc``)."""

    score: float
    mcb: float
    dsc: float
    unc: float
    kind: str


def _scores(q: np.ndarray, y: np.ndarray, kind: str) -> float:
    if kind == "brier":
        return float(np.mean((q - y) ** 2))
    with np.errstate(divide="ignore"):  # 0 log 0 = 0: a forecast of 0 for an outcome that did not happen
        loss = -np.where(y == 1, np.log(q), np.log1p(-q))
    return float(np.mean(loss))


def score_decomposition(p: np.ndarray, y: np.ndarray, kind: Literal["brier", "log"] = "brier") -> ScoreDecomposition:
    """The CORP decomposition MCB - DSC + UNC of the Brier score or the log loss of binary forecasts.

    ``kind="brier"``: (p - y)^2 (the binary Brier score; the multiclass one of a top-label view is
    not this). ``kind="log"``: -ln of the probability given to the outcome (infinite where a forecast
    of exactly 0 or 1 was wrong, and then MCB is infinite too).
    """
    p, y = _binary(p, y)
    if kind not in ("brier", "log"):
        raise ValueError(f"Expected argument `kind` to be 'brier' or 'log', but got {kind!r}.")
    order = np.argsort(p, kind="stable")
    ps, ys = p[order], y[order]
    fit = _pav(ps, ys)
    score, rec, clim = _scores(ps, ys, kind), _scores(fit, ys, kind), _scores(np.full_like(ys, ys.mean()), ys, kind)
    return ScoreDecomposition(score=score, mcb=score - rec, dsc=clim - rec, unc=clim, kind=kind)


def log_loss_split(scores: np.ndarray, labels: np.ndarray) -> dict[str, float]:
    """The log loss of softmax(scores) split into refinement (after the best temperature on these
    rows) and calibration (the rest, >= 0): how much any recalibration by a temperature could gain.

    ``scores`` are logits or log-probabilities of shape (n, K).
    """
    from scipy.special import log_softmax

    from pbr_core.recalibrators.temperature import TemperatureScaling, temperature_nll

    z = np.asarray(scores, dtype=np.float64)
    y = np.asarray(labels)
    loss = float(-log_softmax(z, axis=1)[np.arange(y.size), y].mean())
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a bound hit: the refinement is then an upper bound
        T = TemperatureScaling().fit(z, y, input_type="logits").temperature_
    refinement = temperature_nll(T, z, y)
    return {"log_loss": loss, "refinement": refinement, "calibration": loss - refinement, "temperature": T}
