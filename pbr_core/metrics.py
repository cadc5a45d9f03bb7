"""Calibration metrics: the paper's binned ECE and friends, vectorised.

Conventions (paper Section 2.2, Eq. 2 and Appendix A):

* Uniform-width bins I_1 = (0, 1/B], I_2 = (1/B, 2/B], ..., I_B = ((B-1)/B, 1]. A confidence of
  exactly 0 (possible only for binary p(y=1)) is put in I_1. Boundaries are i/B computed in float64.
* ``probs`` of shape (n, K) -> top-label metrics: confidence max_k p_k, outcome 1[argmax_k p_k = y].
* ``probs`` of shape (n,) -> binary metrics on p(y=1) with outcome y in {0, 1} (Appendix A). The
  same path gives the top-label ECE of top-label-only data: pass (confidence, correct).
* Empty bins contribute 0.

Nothing here loops in Python over samples or over B.
"""

from __future__ import annotations

from typing import Iterable, Literal

import numpy as np
import pandas as pd

from pbr_core.bounds import optimal_n_bins

__all__ = [
    "accuracy",
    "bin_boundaries",
    "bin_index",
    "brier_score",
    "confidence_and_outcome",
    "ece",
    "ece_curve",
    "mce",
    "nll",
    "reliability_diagram",
]


def _check_n_bins(n_bins: int) -> int:
    if isinstance(n_bins, bool) or not isinstance(n_bins, (int, np.integer)) or n_bins < 1:
        raise ValueError(f"Expected argument `n_bins` to be an integer larger than 0, but got {n_bins!r}.")
    return int(n_bins)


def confidence_and_outcome(probs: np.ndarray, labels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The two per-sample numbers every binned metric needs.

    Returns ``(confidence, outcome)``: for (n, K) input the top-label confidence and 1[correct];
    for (n,) input p(y=1) itself and the 0/1 label.
    """
    p = np.asarray(probs, dtype=np.float64)
    y = np.asarray(labels)
    if p.ndim not in (1, 2):
        raise ValueError(f"Expected `probs` of shape (n, K) or (n,), but got shape {p.shape}.")
    if y.ndim != 1 or y.shape[0] != p.shape[0]:
        raise ValueError(f"Expected `labels` of shape ({p.shape[0]},), but got shape {y.shape}.")
    if p.shape[0] == 0:
        raise ValueError("Expected at least one prediction, but got an empty array.")
    if not np.all(np.isfinite(p)):
        raise ValueError("`probs` contains NaN or infinite values.")
    if np.any(p < 0) or np.any(p > 1):
        raise ValueError("`probs` has values outside [0, 1].")
    if p.ndim == 1:
        if not np.all((y == 0) | (y == 1)):
            raise ValueError("A 1-D `probs` is binary p(y=1), so `labels` must be 0 or 1.")
        return p, y.astype(np.float64)
    K = p.shape[1]
    if np.any((y < 0) | (y >= K)):
        raise ValueError(f"`labels` has values outside 0..{K - 1}.")
    pred = p.argmax(axis=1)
    return p[np.arange(p.shape[0]), pred], (pred == y).astype(np.float64)


def bin_boundaries(n_bins: int) -> np.ndarray:
    """Right edges 1/B, 2/B, ..., 1 of the uniform-width bins (float64)."""
    n_bins = _check_n_bins(n_bins)
    return np.arange(1, n_bins + 1, dtype=np.float64) / n_bins


def bin_index(confidence: np.ndarray, n_bins: int) -> np.ndarray:
    """0-based bin of each confidence: i such that i/B < c <= (i+1)/B (c = 0 -> 0)."""
    return np.searchsorted(bin_boundaries(n_bins), np.asarray(confidence, dtype=np.float64), side="left")


def _bin_sums(confidence: np.ndarray, outcome: np.ndarray, n_bins: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    idx = bin_index(confidence, n_bins)
    count = np.bincount(idx, minlength=n_bins).astype(np.float64)
    sum_conf = np.bincount(idx, weights=confidence, minlength=n_bins)
    sum_out = np.bincount(idx, weights=outcome, minlength=n_bins)
    return count, sum_conf, sum_out


def _resolve_n_bins(n_bins: int | None, n: int) -> int:
    return optimal_n_bins(n) if n_bins is None else _check_n_bins(n_bins)


def ece(probs: np.ndarray, labels: np.ndarray, n_bins: int | None = None) -> float:
    """Expected calibration error with uniform-width binning (paper Eq. 2).

    ECE = sum_i (|I_i| / n) * |mean confidence in I_i - accuracy in I_i|.

    Parameters
    ----------
    probs : array of shape (n, K) or (n,)
        Class probabilities (top-label ECE) or binary p(y=1) (binary ECE, Appendix A).
    labels : array of shape (n,)
        True labels.
    n_bins : int or None
        Number of bins B; None uses the paper's optimum floor(n^(1/3)) (Theorem 1).

    Examples
    --------
    >>> import numpy as np, pbr_core
    >>> pbr_core.ece(np.array([0.9, 0.8, 0.3]), np.array([1, 1, 0]), n_bins=2)
    0.1333333333333333
    """
    conf, out = confidence_and_outcome(probs, labels)
    B = _resolve_n_bins(n_bins, conf.shape[0])
    count, sum_conf, sum_out = _bin_sums(conf, out, B)
    return float(np.abs(sum_conf - sum_out).sum() / conf.shape[0])


def mce(probs: np.ndarray, labels: np.ndarray, n_bins: int | None = None) -> float:
    """Maximum calibration error: the largest |confidence - accuracy| over non-empty bins."""
    conf, out = confidence_and_outcome(probs, labels)
    B = _resolve_n_bins(n_bins, conf.shape[0])
    count, sum_conf, sum_out = _bin_sums(conf, out, B)
    nz = count > 0
    return float(np.max(np.abs(sum_conf[nz] - sum_out[nz]) / count[nz]))


def ece_curve(probs: np.ndarray, labels: np.ndarray, n_bins: Iterable[int] = range(1, 201)) -> np.ndarray:
    """ECE for every B in ``n_bins`` in one vectorised pass.

    Sorts the confidences once, takes cumulative sums of confidence and outcome, finds every bin
    edge of every B with one ``searchsorted`` and sums per-bin gaps with ``np.add.reduceat``.
    Cost: O(n log n + sum(B) log n); no Python loop over samples or over B.
    """
    conf, out = confidence_and_outcome(probs, labels)
    Bs = np.asarray(list(n_bins), dtype=np.int64)
    if Bs.size == 0:
        return np.zeros(0)
    if Bs.min() < 1:
        raise ValueError(f"Expected every `n_bins` to be an integer larger than 0, but got {int(Bs.min())}.")
    n = conf.shape[0]
    order = np.argsort(conf, kind="stable")
    c_sorted = conf[order]
    cum_c = np.concatenate([[0.0], np.cumsum(c_sorted)])
    cum_o = np.concatenate([[0.0], np.cumsum(out[order])])
    # All right edges of all B, concatenated: for B, edges k/B for k = 1..B (same float as bin_boundaries).
    reps = np.repeat(Bs, Bs)
    starts = np.concatenate([[0], np.cumsum(Bs)[:-1]])
    k = np.arange(reps.size) - np.repeat(starts, Bs) + 1
    edges = k / reps.astype(np.float64)
    # Number of samples with c <= edge. c = 0 falls in the first bin, consistent with bin_index.
    upto = np.searchsorted(c_sorted, edges, side="right")
    lower = np.empty_like(upto)
    lower[1:] = upto[:-1]
    lower[starts] = 0
    # The last edge of every B is 1.0; anything above 1 by float noise still belongs to the last bin.
    upto[np.cumsum(Bs) - 1] = n
    gaps = np.abs((cum_c[upto] - cum_c[lower]) - (cum_o[upto] - cum_o[lower]))
    return np.add.reduceat(gaps, starts) / n


def _wilson(successes: np.ndarray, count: np.ndarray, level: float) -> tuple[np.ndarray, np.ndarray]:
    from scipy.stats import norm

    z = norm.ppf(0.5 + level / 2)
    with np.errstate(invalid="ignore", divide="ignore"):
        p = successes / count
        denom = 1 + z**2 / count
        centre = (p + z**2 / (2 * count)) / denom
        half = z * np.sqrt(p * (1 - p) / count + z**2 / (4 * count**2)) / denom
    return centre - half, centre + half


def reliability_diagram(
    probs: np.ndarray,
    labels: np.ndarray,
    n_bins: int | None = None,
    level: float = 0.95,
    interval: Literal["wilson"] = "wilson",
) -> pd.DataFrame:
    """Per-bin statistics of a reliability diagram.

    Columns: ``bin`` (1-based), ``lower``, ``upper`` (edges), ``count``, ``mean_confidence``,
    ``accuracy`` (binary input: frequency of y = 1), ``gap`` (accuracy - mean confidence),
    ``weight`` (count / n), ``ci_low``, ``ci_high``: a Wilson score interval at ``level`` for the
    bin's accuracy (it stays inside [0, 1] and behaves at 0 or n successes, unlike the normal
    approximation). Empty bins have count 0 and NaN statistics.
    """
    if interval != "wilson":
        raise ValueError(f"Expected argument `interval` to be 'wilson', but got {interval!r}.")
    if not 0 < level < 1:
        raise ValueError(f"Expected argument `level` in (0, 1), but got {level!r}.")
    conf, out = confidence_and_outcome(probs, labels)
    B = _resolve_n_bins(n_bins, conf.shape[0])
    count, sum_conf, sum_out = _bin_sums(conf, out, B)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean_conf = sum_conf / count
        acc = sum_out / count
    lo, hi = _wilson(sum_out, count, level)
    edges = bin_boundaries(B)
    return pd.DataFrame({
        "bin": np.arange(1, B + 1),
        "lower": np.concatenate([[0.0], edges[:-1]]),
        "upper": edges,
        "count": count.astype(np.int64),
        "mean_confidence": mean_conf,
        "accuracy": acc,
        "gap": acc - mean_conf,
        "weight": count / conf.shape[0],
        "ci_low": lo,
        "ci_high": hi,
    })


def _probs_labels(probs: np.ndarray, labels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    p = np.asarray(probs, dtype=np.float64)
    y = np.asarray(labels).astype(np.int64)
    confidence_and_outcome(p, y)  # validation only
    if p.ndim == 1:
        p = np.column_stack([1.0 - p, p])
    return p, y


def accuracy(probs: np.ndarray, labels: np.ndarray) -> float:
    """Fraction of samples whose argmax (binary: p >= 0.5) equals the label."""
    p, y = _probs_labels(probs, labels)
    return float((p.argmax(axis=1) == y).mean())


def brier_score(probs: np.ndarray, labels: np.ndarray) -> float:
    """Multiclass Brier score mean_n ||e_y - p_n||_2^2 (the paper's Eq. for PBR).

    A 1-D binary input is expanded to the two-column vector [1-p, p], so the value is twice the
    scikit-learn ``brier_score_loss`` on the same data.
    """
    p, y = _probs_labels(probs, labels)
    onehot = np.zeros_like(p)
    onehot[np.arange(p.shape[0]), y] = 1.0
    return float(((p - onehot) ** 2).sum(axis=1).mean())


def nll(probs: np.ndarray, labels: np.ndarray) -> float:
    """Negative log-likelihood -mean_n log p_{n, y_n}, with p clipped at the smallest positive float."""
    p, y = _probs_labels(probs, labels)
    py = p[np.arange(p.shape[0]), y]
    return float(-np.log(np.clip(py, np.finfo(np.float64).tiny, None)).mean())
