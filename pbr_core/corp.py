"""CORP reliability diagrams and the score decomposition MCB - DSC + UNC (Dimitriadis, Gneiting & Jordan, 2021).

CORP ("consistent, optimally binned, reproducible, PAV-based") replaces the bins of a reliability
diagram by the isotonic regression of the outcome on the forecast (pool-adjacent-violators): no
number of bins to choose, and the recalibrated forecasts it gives decompose any proper score S::

    mean S(p, y) = MCB - DSC + UNC
    MCB = S(p) - S(p_hat)     miscalibration: what recalibrating p by PAV would gain (>= 0)
    DSC = S(y_bar) - S(p_hat) discrimination: what p_hat gains over the base rate (>= 0)
    UNC = S(y_bar)            uncertainty: the base rate's score

with p_hat the PAV fit and y_bar the mean outcome. MCB is measured on the rows the PAV fit was fitted
to, so it is biased upward: calibrated forecasts show an MCB above 0 by chance alone, a large share of
the score on small files (37 % of the Brier score on average for 150 calibrated rows).
``mcb_against_chance`` gives the reference: the MCB of the same forecasts with outcomes drawn from
the forecasts themselves (calibrated by construction), an exact Monte Carlo test of calibration.

The consistency band is the authors' resampling
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

from pbr_core.significance import ALPHA_MCB

__all__ = ["CHANCE_OUTSIDE_SHARE", "MCB_CHANCE_DRAWS", "MCB_CHANCE_MAX_ROWS", "CorpReliability", "McbChance",
           "ScoreDecomposition", "corp_reliability", "log_loss_split", "mcb_against_chance", "mcb_verdict",
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


#: Outcome draws of :func:`mcb_against_chance`: with 199 draws at the default level 1 -
#: :data:`pbr_core.significance.ALPHA_MCB` = 0.99 the 2nd largest MCB is the reference and "beyond chance"
#: has a false-alarm rate of exactly 2 / 200 = 1 % (Monte Carlo test). The MCB's share of the 5 % that the
#: three claims about one set of rows share (the test of calibration, the bins note and this one): each
#: at 5 %, a calibrated model drew at least one in 9-11.5 % of files (audit 5).
MCB_CHANCE_DRAWS = 199
#: :func:`mcb_against_chance` uses at most this many rows (a seeded random subset beyond): one draw costs
#: O(rows), about 10 ms of CPU at 10^5 rows, so the reference costs about 2 s of CPU at 10^5 rows and at
#: 10^6 (measured: 2.0 s and 1.4 s; 0.7 s at 10^4) instead of ~20 s uncapped at 10^6. The test on a
#: random subset is as exact, only less powerful: 10^5 rows still see a miscalibration of a few tenths
#: of a point.
MCB_CHANCE_MAX_ROWS = 100_000


@dataclass(frozen=True)
class McbChance:
    """The miscalibration MCB of a score against what calibrated forecasts give by chance.

    ``beyond_chance`` is ``mcb > chance_high``: the MCB is above the reference that calibrated
    forecasts (outcomes drawn from the forecasts themselves) stay at or below in ``level`` of the
    draws. Under calibration this is claimed at most ``1 - level`` of the time, exactly (a Monte Carlo
    test: the observed MCB and the ``n_draws`` drawn ones are exchangeable).
    """

    kind: str
    #: The MCB of the rows tested (all rows when ``n_rows == n_total``; else a random subset's).
    mcb: float
    #: The ``level`` reference: the MCB that calibrated forecasts of these rows stay at or below.
    chance_high: float
    #: The mean MCB of the calibrated draws (how much the PAV fit finds in pure noise, on average).
    chance_mean: float
    #: Monte Carlo p-value: (1 + draws with an MCB at least the observed one) / (1 + n_draws).
    p_value: float
    beyond_chance: bool
    n_rows: int
    n_total: int
    n_draws: int
    level: float


def _log_terms(q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """ln q and ln(1 - q), -inf at 0 (the caller weights them by counts, and 0 times -inf is taken as 0)."""
    with np.errstate(divide="ignore"):
        return np.log(q), np.log1p(-q)


def _log_sum(terms: tuple[np.ndarray, np.ndarray], ones: np.ndarray, zeros: np.ndarray) -> float:
    """The summed log loss -sum(ones ln q + zeros ln(1 - q)) with 0 ln 0 = 0, as in :func:`_scores`."""
    # Element-wise products, not np.dot: BLAS's dot threads on long vectors, which costs more CPU than it
    # saves on a shared machine (10 s instead of 1.8 s of CPU for the reference at 10^5 rows).
    lq, l1q = terms
    return float(-((ones * np.where(ones > 0, lq, 0.0)).sum() + (zeros * np.where(zeros > 0, l1q, 0.0)).sum()))


def _mcb_per_kind(x: np.ndarray, x_logs: tuple[np.ndarray, np.ndarray], ones: np.ndarray,
                  count: np.ndarray) -> dict[str, float]:
    """MCB of the Brier score and the log loss from the rows grouped by distinct forecast ``x`` (``count``
    rows each, ``ones`` of them with the event): the per-row formulas of :func:`_scores`, summed per
    group, so one draw costs O(groups) after the grouping."""
    from scipy.optimize import isotonic_regression  # the PAV fit of the group means, weighted by size

    fit = np.clip(isotonic_regression(ones / count, weights=count, increasing=True).x, 0.0, 1.0)
    n = float(count.sum())
    zeros = count - ones
    # Brier: the sum over a group of (q - y)^2 is count q^2 - 2 q ones + ones; the "+ ones" cancels in MCB.
    brier = float((count * (x * x - fit * fit)).sum() - 2.0 * (ones * (x - fit)).sum()) / n
    log = (_log_sum(x_logs, ones, zeros) - _log_sum(_log_terms(fit), ones, zeros)) / n
    return {"brier": brier, "log": log}


def mcb_against_chance(p: np.ndarray, y: np.ndarray, *, n_draws: int = MCB_CHANCE_DRAWS,
                       max_rows: int = MCB_CHANCE_MAX_ROWS, level: float = 1.0 - ALPHA_MCB,
                       seed: int = 0) -> dict[str, McbChance]:
    """The MCB of the Brier score and of the log loss against chance, keyed ``"brier"`` and ``"log"``.

    The PAV fit behind MCB is fitted on the same rows it is scored on, so it finds miscalibration in
    calibrated forecasts too. The reference keeps the forecasts ``p`` and draws the outcomes from them
    (Bernoulli(p): calibrated by construction), ``n_draws`` times, and computes MCB on each draw: an
    exact null distribution given these forecasts, for any n and any spread of forecasts. The
    observed MCB is *beyond chance* when it is above the draws' ``level`` reference (the k-th largest
    draw, k = floor((1 - level)(n_draws + 1))), which a calibrated model exceeds with probability at
    most 1 - level (tests/test_corp.py counts it on calibrated and miscalibrated files).

    Parameters
    ----------
    p, y : array-like of shape (n,)
        Probabilities of the event and the 0/1 outcomes.
    n_draws : int
        Outcome draws (default 199: the 2nd largest is the 99 % reference).
    max_rows : int
        Above this many rows the test uses a seeded random subset of ``max_rows`` rows (observed MCB and
        the draws alike), which keeps its cost O(max_rows x n_draws).
    level : float
        The reference's level (default 1 - :data:`pbr_core.significance.ALPHA_MCB` = 0.99: the MCB's share
        of the 5 % that the claims about one set of rows share). At least 1 / (n_draws + 1) must be left
        beyond it (``n_draws`` at least 99 at 0.99), or no MCB could ever be beyond chance.
    seed : int
        Seed of the subset and the draws.

    Returns
    -------
    dict of str to McbChance

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> p = rng.beta(2, 2, 150); y = (rng.uniform(size=150) < p).astype(int)
    >>> mcb_against_chance(p, y)["brier"].beyond_chance
    False
    """
    p, y = _binary(p, y)
    if not 0 < level < 1:
        raise ValueError(f"Expected argument `level` to be in (0, 1), but got {level!r}.")
    k = int(np.floor((1.0 - level) * (n_draws + 1) + 1e-9))
    if k < 1:
        raise ValueError(f"Expected argument `n_draws` to be at least {int(np.ceil(1 / (1 - level))) - 1} for "
                         f"level {level}, but got {n_draws}.")
    if max_rows < 1:
        raise ValueError(f"Expected argument `max_rows` to be an integer larger than 0, but got {max_rows}.")
    rng = np.random.default_rng(seed)
    n_total = p.size
    if n_total > max_rows:
        keep = np.sort(rng.choice(n_total, size=max_rows, replace=False))
        p, y = p[keep], y[keep]
    order = np.argsort(p, kind="stable")
    ps, ys = p[order], y[order]
    x, group, count = np.unique(ps, return_inverse=True, return_counts=True)
    count = count.astype(np.float64)
    x_logs = _log_terms(x)
    observed = _mcb_per_kind(x, x_logs, np.bincount(group, weights=ys, minlength=x.size), count)
    drawn = {"brier": np.empty(n_draws), "log": np.empty(n_draws)}
    for b in range(n_draws):
        ones = np.bincount(group, weights=(rng.uniform(size=ps.size) < ps).astype(np.float64), minlength=x.size)
        for kind, v in _mcb_per_kind(x, x_logs, ones, count).items():
            drawn[kind][b] = v
    out = {}
    for kind, sims in drawn.items():
        sims = np.sort(sims)
        high = float(sims[n_draws - k])
        mcb = float(observed[kind])
        out[kind] = McbChance(kind=kind, mcb=mcb, chance_high=high, chance_mean=float(sims.mean()),
                              p_value=float((1 + np.count_nonzero(sims >= mcb)) / (n_draws + 1)),
                              beyond_chance=bool(mcb > high), n_rows=int(p.size), n_total=int(n_total),
                              n_draws=int(n_draws), level=float(level))
    return out


def mcb_verdict(chance: McbChance) -> str:
    """One line for the command line: is the Brier score's MCB more than chance gives calibrated
    forecasts of this size?"""
    where = (f" (tested on a random {chance.n_rows:,} of the {chance.n_total:,} rows)"
             if chance.n_rows < chance.n_total else "")
    what = f"{chance.kind} MCB {chance.mcb:.4g}"
    draws = f"{chance.level:.0%} of {chance.n_draws} draws with outcomes drawn from the predictions"
    if chance.beyond_chance:
        return (f"beyond chance{where}: {what} is above the {chance.chance_high:.4g} that calibrated predictions of "
                f"this size stay at or below in {draws}; measured on the rows it was fitted to, so on new data "
                "recalibrating gains at most this.")
    return (f"within chance{where}: {what} is no more than calibrated predictions of this size give by chance alone "
            f"(up to {chance.chance_high:.4g} in {draws}): no evidence that recalibrating would gain on new data.")


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
