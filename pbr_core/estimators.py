"""Estimators of the calibration error beside the paper's binned ECE, and the conventions of other
libraries, so that a user who got another number elsewhere can see why.

The paper's binned ECE (:func:`pbr_core.ece`, Eq. 2: B = floor(n^(1/3)) equal-width bins) stays the
default everywhere; these are offered next to it, clearly labelled:

* :func:`ece_equal_mass` -- "adaptive" binning: B bins holding (nearly) the same number of rows
  (Nguyen & O'Connor 2015; the equal-mass binning of Kumar, Liang & Ma 2019);
* :func:`ece_debiased` -- the debiased ECE of Kumar, Liang & Ma (2019, "Verified uncertainty
  calibration"): the plug-in ECE minus an estimate of its upward bias from each bin's sampling noise;
* :func:`smooth_ece` -- the smooth ECE of Blasiok & Nakkiran (2023): kernel smoothing instead of
  bins, with the bandwidth chosen as the fixed point sigma = smECE_sigma (their relplot package's
  algorithm, reproduced here);
* :func:`smooth_reliability` -- the smoothed reliability curve with a pointwise 95 % interval for it;
* :func:`library_conventions` -- the ECE as netcal, torchmetrics, scikit-learn's ``calibration_curve``
  and relplot would report it by default on the same data, each with its difference in one line.

Every function takes what :func:`pbr_core.ece` takes: ``probs`` of shape (n, K) with integer
``labels`` (top-label: confidence = max_k p_k, outcome = whether argmax is right), or a 1-D array of
scores in [0, 1] with 0/1 outcomes (binary p(y=1), or (confidence, correct) records).
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Literal

import numpy as np
import pandas as pd

from pbr_core import metrics as _metrics
from pbr_core.metrics import (BinaryTarget, _clopper_pearson, _resolve_n_bins, assign_bins,
                              check_binary_target, confidence_and_outcome, ece_inputs)

__all__ = [
    "ece_debiased",
    "ece_equal_mass",
    "equal_mass_edges",
    "reliability_equal_mass",
    "library_conventions",
    "smooth_ece",
    "smooth_reliability",
]


# --------------------------------------------------------------------------- equal-mass bins
def equal_mass_edges(confidence: np.ndarray, n_bins: int) -> np.ndarray:
    """Upper bin edges that put (nearly) the same number of rows in each of ``n_bins`` bins.

    The rows, sorted by confidence, are cut into ``n_bins`` consecutive parts (sizes differ by at
    most one); each edge is the midpoint between a part's largest value and the next part's
    smallest, and the last edge is 1. Equal values never straddle an edge, so ties can merge bins
    (duplicate edges are dropped). A row goes to the first bin whose edge is >= its value, as in
    Kumar et al.'s ``get_equal_bins``.
    """
    c = np.sort(np.asarray(confidence, dtype=np.float64))
    n_bins = min(int(n_bins), c.size)
    parts = np.array_split(c, n_bins)
    edges = [(parts[i][-1] + parts[i + 1][0]) / 2.0 for i in range(n_bins - 1)] + [1.0]
    return np.unique(np.asarray(edges))


def _binned(conf: np.ndarray, out: np.ndarray, edges: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(count, mean confidence, mean outcome) per bin for upper edges ``edges`` (empty bins: count 0)."""
    idx = assign_bins(conf, edges)
    m = edges.size
    count = np.bincount(idx, minlength=m).astype(np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean_conf = np.bincount(idx, weights=conf, minlength=m) / count
        mean_out = np.bincount(idx, weights=out, minlength=m) / count
    return count, mean_conf, mean_out


def ece_equal_mass(probs: np.ndarray, labels: np.ndarray, n_bins: int | None = None, *,
                   binary_target: BinaryTarget | None = None) -> float:
    """ECE with equal-mass ("adaptive") bins: the paper's Eq. 2 with bins of equal size in rows.

    Parameters
    ----------
    probs, labels, binary_target : as for :func:`pbr_core.ece` (``binary_target``: what a two-column
        binary ``probs`` measures, p(y=1) or the top label)
    n_bins : int, optional
        Number of bins; None -> floor(n^(1/3)), the paper's choice for equal-width bins.

    Notes
    -----
    Equal-width bins leave most of a confident model's rows in the last bin or two; equal-mass bins
    spend the resolution where the rows are. Pinned in the tests against Kumar et al.'s
    ``calibration.get_ece_em(debias=False)`` (package ``uncertainty-calibration``).
    """
    conf, out = confidence_and_outcome(_metrics._binary_columns(probs, binary_target, "ece_equal_mass"), labels)
    B = _resolve_n_bins(n_bins, conf.shape[0])
    count, mean_conf, mean_out = _binned(conf, out, equal_mass_edges(conf, B))
    keep = count > 0
    return float(np.sum(count[keep] / conf.shape[0] * np.abs(mean_conf[keep] - mean_out[keep])))


def reliability_equal_mass(probs: np.ndarray, labels: np.ndarray, n_bins: int | None = None,
                           level: float = 0.95, *, binary_target: BinaryTarget | None = None) -> pd.DataFrame:
    """The reliability-diagram table of :func:`pbr_core.reliability_diagram` with equal-mass bins.

    Same columns (``bin, lower, upper, count, mean_confidence, accuracy, gap, weight, ci_low,
    ci_high``: Clopper-Pearson intervals, as the uniform bins' whiskers); the bins' edges are those of :func:`equal_mass_edges`, so their
    widths differ and each holds about n / B rows. Their weighted gaps sum to :func:`ece_equal_mass`.
    """
    conf, out = confidence_and_outcome(_metrics._binary_columns(probs, binary_target, "reliability_equal_mass"), labels)
    B = _resolve_n_bins(n_bins, conf.shape[0])
    edges = equal_mass_edges(conf, B)
    count, mean_conf, mean_out = _binned(conf, out, edges)
    lo, hi = _clopper_pearson(mean_out * count, count, level)
    lower = np.concatenate([[0.0], edges[:-1]])
    return pd.DataFrame({"bin": np.arange(1, edges.size + 1), "lower": lower, "upper": edges,
                         "count": count.astype(np.int64), "mean_confidence": mean_conf, "accuracy": mean_out,
                         "gap": mean_out - mean_conf, "weight": count / conf.shape[0], "ci_low": lo, "ci_high": hi})


def ece_debiased(probs: np.ndarray, labels: np.ndarray, n_bins: int | None = None,
                 binning: Literal["equal_mass", "equal_width"] = "equal_mass", *,
                 binary_target: BinaryTarget | None = None) -> float:
    """The debiased ECE of Kumar, Liang & Ma (2019): the plug-in ECE corrected for its upward bias.

    Within a bin of n_b rows the observed accuracy is noisy (standard deviation
    sqrt(acc_b (1 - acc_b) / n_b)), and the absolute value turns noise into a positive bias. The
    estimator subtracts that bias, estimated by the same plug-in on a Gaussian model of the noise::

        ECE_debiased = 2 * ECE_plugin - sum_b (n_b / n) E|N(acc_b, acc_b (1 - acc_b) / n_b) - conf_b|

    The expectation has a closed form here (the authors' package draws 1000 Gaussian samples; the
    tests pin this against it within that Monte Carlo error). It can be slightly negative for a
    well-calibrated model: a noisy estimate of a value near 0.

    Parameters
    ----------
    probs, labels, binary_target : as for :func:`pbr_core.ece` (``binary_target``: what a two-column
        binary ``probs`` measures, p(y=1) or the top label)
    n_bins : int, optional
        None -> floor(n^(1/3)).
    binning : {"equal_mass", "equal_width"}
        Equal-mass bins (the authors' default) or the paper's equal-width bins.

    Raises
    ------
    ValueError
        If a non-empty bin holds a single row (its noise cannot be estimated): use fewer bins.
    """
    from scipy.stats import norm

    conf, out = confidence_and_outcome(_metrics._binary_columns(probs, binary_target, "ece_debiased"), labels)
    n = conf.shape[0]
    B = _resolve_n_bins(n_bins, n)
    if binning == "equal_mass":
        edges = equal_mass_edges(conf, B)
    elif binning == "equal_width":
        edges = np.arange(1, B + 1) / B
    else:
        raise ValueError(f"Expected argument `binning` to be 'equal_mass' or 'equal_width', but got {binning!r}")
    count, mean_conf, mean_out = _binned(conf, out, edges)
    keep = count > 0
    if np.any(count[keep] < 2):
        raise ValueError(f"the debiased ECE needs at least 2 rows in every bin, but one of the {B} bins holds 1; "
                         "use fewer bins.")
    w, f, a, c = count[keep] / n, mean_conf[keep], mean_out[keep], count[keep]
    plugin = float(np.sum(w * np.abs(f - a)))
    s = np.sqrt(a * (1 - a) / c)
    d = a - f
    with np.errstate(divide="ignore", invalid="ignore"):
        gauss = s * np.sqrt(2 / np.pi) * np.exp(-d**2 / (2 * s**2)) + d * (1 - 2 * norm.cdf(-d / s))
    expected = np.where(s > 0, gauss, np.abs(d))  # E|N(a, s^2) - f|
    return 2 * plugin - float(np.sum(w * expected))


# --------------------------------------------------------------------------- smooth ECE
#: Evaluation points of the smooth ECE's integral (relplot's ``config.smECE_mesh_pts``).
SMOOTH_MESH = 200


def _splat(f: np.ndarray, values: np.ndarray, points: int) -> np.ndarray:
    """Spread each value onto the two nearest of ``points`` grid points on [0, 1], linearly."""
    pos = f * (points - 1)
    lo = np.clip(pos.astype(np.int64), 0, points - 2)
    frac = pos - lo
    return (np.bincount(lo, weights=(1 - frac) * values, minlength=points)
            + np.bincount(lo + 1, weights=frac * values, minlength=points))


def _reflected_smooth(f: np.ndarray, values: np.ndarray, sigma: float, t: np.ndarray) -> np.ndarray:
    """Sum_i values_i K_sigma(t, f_i) for a Gaussian kernel reflected at 0 and 1, evaluated on a grid
    of max(2000, 20 / sigma) // 2 + 1 points and interpolated at ``t`` (relplot's discretisation)."""
    points = max(2000, round(20 / sigma)) // 2 + 1
    grid = _splat(f, values, points)
    x = np.linspace(0, 1, points)
    kernel = np.exp(-((x - 0.5) ** 2) / (2 * sigma**2)) / (np.sqrt(2 * np.pi) * sigma)
    extended = np.concatenate([grid[::-1][:-1], grid, grid[::-1][1:]])
    from scipy.signal import fftconvolve

    smoothed = fftconvolve(extended, kernel, mode="valid")[points // 2: points // 2 + points]
    pos = t * (points - 1)
    i = np.clip(pos.astype(np.int64), 0, points - 2)
    frac = pos - i
    return smoothed[i] * (1 - frac) + smoothed[i + 1] * frac


def _smooth_at(conf: np.ndarray, out: np.ndarray, sigma: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(t, smoothed residual conf - outcome, density) on the evaluation mesh, at bandwidth sigma."""
    t = np.linspace(0, 1, max(round(10 / sigma), SMOOTH_MESH))
    density = _reflected_smooth(conf, np.ones_like(conf), sigma, t) + 1e-4
    residual = _reflected_smooth(conf, conf - out, sigma, t) / density
    return t, residual, density


def _smece_at(conf: np.ndarray, out: np.ndarray, sigma: float) -> float:
    _, r, dens = _smooth_at(conf, out, sigma)
    return float(np.sum(np.abs(r) * dens) / np.sum(dens))


def _fixed_point_sigma(conf: np.ndarray, out: np.ndarray, eps: float = 1e-3, refine: int = 10) -> float:
    """The bandwidth where smECE_sigma = sigma, by bisection on [0, 1] (relplot's ``search_param``)."""
    def ok(sigma: float) -> bool:
        return sigma < eps or sigma < _smece_at(conf, out, sigma)

    if ok(1.0):
        return 1.0
    hi, lo = 1.0, 0.0
    for _ in range(refine):
        mid = (hi + lo) / 2
        if ok(mid):
            lo = mid
        else:
            hi = mid
    return hi


def smooth_ece(probs: np.ndarray, labels: np.ndarray, sigma: float | None = None,
               return_sigma: bool = False, *, binary_target: BinaryTarget | None = None) -> float | tuple[float, float]:
    """The smooth ECE of Blasiok & Nakkiran (2023): no bins, a kernel of bandwidth sigma.

    smECE_sigma = integral over t of |r_sigma(t)| delta_sigma(t) dt, where r_sigma is the kernel
    average of (confidence - outcome) near confidence t and delta_sigma the kernel density of the
    confidences (a Gaussian kernel reflected at 0 and 1). With ``sigma=None`` the bandwidth is the
    fixed point sigma* = smECE_sigma*, which makes the estimator consistent without a free parameter.
    The numerics (grid, reflection, bisection) are those of the authors' relplot package, so the
    value equals ``relplot.smECE`` (pinned in the tests).

    ``binary_target``: what a two-column (binary) ``probs`` measures, as in :func:`pbr_core.ece`.

    Returns
    -------
    float, or (float, sigma) with ``return_sigma=True``
    """
    conf, out = confidence_and_outcome(_metrics._binary_columns(probs, binary_target, "smooth_ece"), labels)
    if sigma is None:
        sigma = _fixed_point_sigma(conf, out)
    elif not (0 < float(sigma) <= 1):
        raise ValueError(f"Expected argument `sigma` to be in (0, 1], but got {sigma!r}")
    value = _smece_at(conf, out, float(sigma))
    return (value, float(sigma)) if return_sigma else value


def _kernel_sums(conf: np.ndarray, out: np.ndarray, sigma: float,
                 t: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(sum w, sum w * outcome, sum w^2) at each t, with w the weight :func:`_reflected_smooth` gives a
    row at t: the row splatted onto relplot's grid, the grid reflected at 0 and 1 (its end points not
    doubled), convolved with the Gaussian and read between the two grid points around t.

    Why these weights and not the continuous kernel's: the curve (``observed``) is relplot's, and an
    interval centred on it must average the outcomes with its weights. With the continuous kernel
    (each image c, -c, 2 - c counted) the two differ where the rows pile up within a grid step of 0 or
    1, which relplot's grid counts once, not twice: on Adult moved to a mean of 0.1 % (5,000 rows, the
    median score 2e-5), relplot's mean outcome at t = 0 was 1.7 times the continuous kernel's, and the
    band centred on the curve missed the truth whenever the window held an event (audit 10b: 77.7 %).
    ``sum w^2`` splats w^2 as w is splatted (sum over grid points of the splatted count times the grid
    point's squared weight), at least the exact sum (Jensen): n_eff errs small, the interval wide.
    """
    points = max(2000, round(20 / sigma)) // 2 + 1   # _reflected_smooth's grid
    step = 1 / (points - 1)
    counts, outcomes = _splat(conf, np.ones_like(conf), points), _splat(conf, out, points)
    half = (points - 1) // 2                          # relplot's kernel spans +-0.5: half grid steps
    reach = min(int(np.ceil(8 * sigma / step)) + 1, half)
    pos = t * (points - 1)
    g = np.clip(pos.astype(np.int64), 0, points - 2)
    frac = (pos - g)[:, None]
    offsets = np.arange(-reach, reach + 2)            # grid points a near g and g + 1
    a = g[:, None] + offsets[None, :]
    inside = (a >= 0) & (a < points)
    a = np.clip(a, 0, points - 1)

    def kernel(d: np.ndarray) -> np.ndarray:
        return np.where(np.abs(d) <= half, np.exp(-(d * step) ** 2 / (2 * sigma**2)), 0.0)

    # unit mass at grid point a read at grid point g (then g + 1): a itself depends on a - g alone ...
    w = kernel(-offsets)[None, :] * (1 - frac) + kernel(1 - offsets)[None, :] * frac
    # ... its mirrors -a (not for a = 0) and 2 - a (not for a = points - 1) reach only t near 0 or 1
    edge = (g <= 2 * reach + 2) | (g >= points - 3 - 2 * reach)
    if edge.any():
        ae, ge, fe = a[edge], g[edge][:, None], frac[edge]
        for image, use in ((-ae, ae > 0), (2 * (points - 1) - ae, ae < points - 1)):
            w[edge] += np.where(use, kernel(ge - image) * (1 - fe) + kernel(ge + 1 - image) * fe, 0.0)
    w *= inside
    return np.sum(counts[a] * w, axis=1), np.sum(outcomes[a] * w, axis=1), np.sum(counts[a] * w**2, axis=1)


def smooth_reliability(probs: np.ndarray, labels: np.ndarray, sigma: float | None = None,
                       level: float = 0.95, n_boot: int | None = None, seed: int | None = None, *,
                       binary_target: BinaryTarget | None = None) -> pd.DataFrame:
    """The smoothed reliability curve at the smooth ECE's bandwidth, with a pointwise interval.

    The curve at confidence t is t - r_sigma(t) (``observed``): the kernel-weighted mean outcome of the
    rows near t, plus t minus their kernel-weighted mean confidence. The interval at t (``band_low``,
    ``band_high``) is a Clopper-Pearson interval at ``level`` for the kernel-weighted mean outcome, read
    as x = mean outcome * n_eff events of n_eff, with the effective count n_eff = (sum w)^2 / sum w^2 of
    the kernel weights w (Korn and Graubard's rule for a weighted proportion), moved by the same
    t - mean confidence. The weights are those of the curve itself (relplot's grid, :func:`_kernel_sums`).
    It is an interval for the **smoothed** curve of the population (the outcome frequency averaged over
    the same kernel window, for one t at a time), not for the true calibration curve, which it can miss
    where that curve bends within a window (the kernel's bias), and not a band for the whole curve at
    once. Where no row is within reach of t it is NaN.

    Measured (audit 10b; one point per file, 300 files a cell; ``tests/test_estimators.py`` pins it):
    with outcomes drawn from known chances, the interval held the population's smoothed curve at
    94-100 % of the files on UCI Adult p(y=1), Adult moved to a mean of 1 % and of 0.1 %, Adult rounded
    to 1 decimal and CIFAR-10 top-label confidences, 50-5,000 rows, at the population's median and
    90th-percentile confidence (docs/claims.md row 21). The Wilson interval it replaced, centred with
    other weights than the curve's (the continuous kernel's), held 78-87 % on the rare-event files
    (a window of a few events, where Wilson's interval dips, and relplot's grid counts rows within a
    grid step of 0 once where the continuous kernel counts them twice) and 91-93 % at some points of
    plain Adult. The price: about 5 % wider on ordinary files. On 10^5 rows it takes a few hundredths
    of a second beside the bandwidth's 2 s.

    Returns
    -------
    DataFrame with columns ``t`` (confidence), ``observed``, ``band_low``, ``band_high``, ``n_eff``
    (the effective row count of the window), ``density`` (of the confidences; plot the curve only
    where it is not negligible) and ``sigma``.

    ``n_boot`` and ``seed`` (the bootstrap's, before audit 7) are accepted and ignored, with a
    DeprecationWarning: the interval draws nothing.
    ``binary_target``: what a two-column (binary) ``probs`` measures, as in :func:`pbr_core.ece`.
    """
    if n_boot is not None or seed is not None:
        import warnings

        warnings.warn("smooth_reliability: n_boot and seed no longer do anything (the interval is computed, "
                      "not a bootstrap, since audit 7) and will be removed.", DeprecationWarning,
                      stacklevel=2)
    if not (0 < float(level) < 1):
        raise ValueError(f"Expected argument `level` to be in (0, 1), but got {level!r}")
    conf, out = confidence_and_outcome(_metrics._binary_columns(probs, binary_target, "smooth_reliability"), labels)
    if sigma is None:
        sigma = _fixed_point_sigma(conf, out)
    elif not (0 < float(sigma) <= 1):
        raise ValueError(f"Expected argument `sigma` to be in (0, 1], but got {sigma!r}")
    t, r, dens = _smooth_at(conf, out, float(sigma))
    observed = t - r
    s0, s_out, s2 = _kernel_sums(conf, out, float(sigma), t)
    with np.errstate(invalid="ignore", divide="ignore"):
        n_eff = np.where(s2 > 0, s0**2 / s2, 0.0)
        mean_out = np.clip(s_out / s0, 0.0, 1.0)
    # Clopper-Pearson on the window's effective count of events (Korn and Graubard's rule for a
    # weighted mean): Wilson's interval dips below its level at a few events, as the window of a
    # rare-event file holds (audit 10b: 84-86 % at a point on Adult moved to a mean of 1 %).
    lo, hi = _clopper_pearson(mean_out * n_eff, n_eff, float(level))
    # The curve is the window's mean outcome moved by t - its mean confidence: move the interval alike.
    none = n_eff <= 0
    band_low = np.where(none, np.nan, observed - (mean_out - lo))
    band_high = np.where(none, np.nan, observed + (hi - mean_out))
    return pd.DataFrame({"t": t, "observed": observed, "band_low": band_low, "band_high": band_high,
                         "n_eff": n_eff, "density": dens / np.sum(dens) * (t.size - 1), "sigma": float(sigma)})


# --------------------------------------------------------------------------- other libraries
@dataclass(frozen=True)
class Convention:
    """How one library computes "the ECE" by default."""

    name: str           # what the row is called
    target: str         # what is calibrated: "top-label confidence" or "p(y=1)"
    n_bins: str         # number of bins, as text
    difference: str     # how it differs from the paper's Eq. 2, in one line


def _weighted_gap(count: np.ndarray, mean_conf: np.ndarray, mean_out: np.ndarray, n: int) -> float:
    keep = count > 0
    return float(np.sum(count[keep] / n * np.abs(mean_conf[keep] - mean_out[keep])))


def _by_index(conf: np.ndarray, out: np.ndarray, idx: np.ndarray, m: int) -> tuple[np.ndarray, ...]:
    count = np.bincount(idx, minlength=m).astype(np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        return (count, np.bincount(idx, weights=conf, minlength=m) / count,
                np.bincount(idx, weights=out, minlength=m) / count)


def ece_netcal(conf: np.ndarray, out: np.ndarray, n_bins: int = 10) -> float:
    """netcal ``ECE(bins)``: values clipped to [eps, 1 - eps], bins [a, b) with the last one closed."""
    eps = np.finfo(np.float64).eps
    c = np.clip(conf, eps, 1 - eps)
    edges = np.linspace(0, 1, n_bins + 1)
    idx = np.minimum(np.searchsorted(edges, c, side="right") - 1, n_bins - 1)
    return _weighted_gap(*_by_index(c, out, idx, n_bins), conf.shape[0])


def _torch_unit_linspace(steps: int, dtype: type[np.floating]) -> np.ndarray:
    """``torch.linspace(0, 1, steps, dtype=dtype)`` bit for bit.

    torch's kernel takes step = 1 / (steps - 1) rounded to ``dtype``, makes the first half of the
    points ``step * k`` and the second half ``1 - step * (steps - 1 - k)``; its x86 builds with AVX2
    or AVX-512 (what torch picks on any recent CPU) compile that to a fused multiply-add, one
    rounding per point, which is what this does (checked against the installed torch in the tests
    for every ``steps`` up to 300, float32 and float64). numpy's ``linspace`` rounds k / (steps - 1)
    instead, which for float32 and 16 points moves six edges by one unit in the last place, among
    them 0.2 and 0.4.
    """
    step = Fraction(float(dtype(1) / dtype(steps - 1)))
    exact = [step * k if k < steps // 2 else 1 - step * (steps - 1 - k) for k in range(steps)]
    # Fraction -> float64 rounds correctly. In float32 the exact values need at most 24 + log2(steps)
    # + 1 bits, so float64 holds them exactly and the cast to float32 is the one rounding torch does.
    return np.array([float(v) for v in exact], dtype=np.float64).astype(dtype)


def ece_torchmetrics(probs: np.ndarray, labels: np.ndarray, n_bins: int = 15,
                     dtype: type[np.floating] = np.float32) -> float:
    """torchmetrics' ``binary_calibration_error`` / ``multiclass_calibration_error`` (``n_bins=15``,
    ``norm="l1"``), emulated in numpy step by step, arithmetic and rounding included.

    Parameters
    ----------
    probs : array
        1-D: what ``binary_calibration_error`` takes, p(y=1) (or a top-label confidence) with 0/1
        ``labels``. (n, K): what ``multiclass_calibration_error`` takes, with class indices.
        Values in [0, 1] (torchmetrics would pass anything else through a sigmoid or softmax).
    labels : array
    n_bins : int
    dtype : np.float32 or np.float64
        The dtype of the tensor handed to torchmetrics: float32 (default) is what a model outputs
        and what ``torch.tensor`` makes of Python floats; float64 is ``torch.from_numpy`` of a
        float64 array.

    Returns
    -------
    float
        torchmetrics' value to a few units of 1e-9 (its final sum of the n_bins + 1 float32 terms is
        taken in another order); pinned against torchmetrics in the tests.

    Notes
    -----
    What torchmetrics 1.x does (``_binning_bucketize`` and ``_ce_compute``):

    * the bin edges are ``torch.linspace(0, 1, n_bins + 1)`` in the confidences' dtype
      (:func:`_torch_unit_linspace`): in float32, 0.2, 0.4 and 7/15 (as float32) lie just *below*
      their edge and fall in the lower bin, the other multiples of 1/15 (0.6, 0.8, ...) in the
      upper one;
    * ``bucketize(right=True) - 1``: bins [a, b), and a confidence of exactly 1.0 gets index
      n_bins, an extra bin of its own;
    * per-bin counts, confidence sums and accuracy sums are ``scatter_add_`` in the confidences'
      dtype, one row after another (``np.add.at`` adds in the same order: the sums agree bit for
      bit); means, bin weights and the weighted sum are in that dtype too;
    * multiclass: ``max`` and ``argmax`` (first maximum on ties) are taken in the tensor's dtype,
      then confidences and accuracies become float32 (``.float()``) whatever that dtype was;
      binary: p(y=1) and the label stay in the tensor's dtype.
    """
    if not isinstance(n_bins, (int, np.integer)) or n_bins < 1:
        raise ValueError(f"Expected argument `n_bins` to be an integer larger than 0, but got {n_bins}")
    dtype = np.dtype(dtype).type
    if dtype not in (np.float32, np.float64):
        raise ValueError(f"Expected argument `dtype` to be np.float32 or np.float64, but got {dtype}.")
    p = np.asarray(probs).astype(dtype)
    y = np.asarray(labels)
    if p.ndim == 1:
        conf, acc = p, y.astype(dtype)
    else:
        pred = p.argmax(axis=1)
        conf = p[np.arange(p.shape[0]), pred].astype(np.float32)
        acc = (pred == y).astype(np.float32)
    ftype = conf.dtype.type
    idx = np.searchsorted(_torch_unit_linspace(n_bins + 1, ftype), conf, side="right") - 1
    count, conf_sum, acc_sum = (np.zeros(n_bins + 1, dtype=ftype) for _ in range(3))
    np.add.at(count, idx, ftype(1))
    np.add.at(conf_sum, idx, conf)
    np.add.at(acc_sum, idx, acc)
    with np.errstate(invalid="ignore", divide="ignore"):
        gap = np.abs(np.nan_to_num(acc_sum / count) - np.nan_to_num(conf_sum / count))
    return float(np.sum(gap * (count / np.sum(count, dtype=ftype)), dtype=ftype))


def sklearn_curve_ece(conf: np.ndarray, out: np.ndarray, n_bins: int = 5, weighted: bool = True) -> float:
    """The gaps of scikit-learn's ``calibration_curve(n_bins=5, strategy="uniform")`` (bins (a, b],
    empty bins dropped), averaged weighted by each bin's share of rows, or plainly (``weighted=False``,
    what averaging the curve's two arrays gives)."""
    edges = np.linspace(0, 1, n_bins + 1)
    idx = np.searchsorted(edges[1:-1], conf, side="left")
    count, mean_conf, mean_out = _by_index(conf, out, idx, n_bins)
    if weighted:
        return _weighted_gap(count, mean_conf, mean_out, conf.shape[0])
    keep = count > 0
    return float(np.mean(np.abs(mean_conf[keep] - mean_out[keep])))


CONVENTIONS: dict[str, Convention] = {
    "paper": Convention("pbr-calib: the paper's ECE (Eq. 2)", "", "floor(n^(1/3))",
                        "the reference: equal-width bins (a, b], each weighted by its share of rows"),
    "equal_mass": Convention("pbr-calib: equal-mass bins", "", "floor(n^(1/3))",
                             "bins of equal row counts instead of equal width: finer where the rows are"),
    "debiased": Convention("pbr-calib: debiased ECE (Kumar et al. 2019)", "", "floor(n^(1/3)), equal-mass",
                           "removes the upward bias that bin noise adds: lower, can be slightly negative"),
    "smooth": Convention("smooth ECE (Blasiok & Nakkiran 2023; relplot.smECE)", "", "no bins (kernel)",
                         "a kernel of width sigma = smECE instead of bins; the relplot package's default"),
    "netcal": Convention("netcal (its ECE class)", "", "10",
                         "10 bins [a, b) (last closed), values clipped to [eps, 1 - eps]; binary data: p(y=1)"),
    "torchmetrics": Convention("torchmetrics (calibration_error)", "", "15",
                               "15 bins [a, b) on float32 edges (0.2, 0.4 and 7/15 fall in the bin below), sums in "
                               "float32, a confidence of exactly 1.0 in a bin of its own"),
    "sklearn": Convention("scikit-learn (calibration_curve), weighted", "p(y=1)", "5",
                          "5 bins (a, b], empty bins dropped; it reports the curve, not an ECE: gaps weighted by rows"),
    "sklearn_unweighted": Convention("scikit-learn (calibration_curve), plain mean of the gaps", "p(y=1)", "5",
                                     "the same 5 gaps averaged without weights: a nearly empty bin counts as much "
                                     "as a full one"),
}


def library_conventions(probs: np.ndarray, labels: np.ndarray, binary_target: BinaryTarget | None = None,
                        one_dimensional: Literal["positive", "confidence"] = "positive") -> pd.DataFrame:
    """The ECE of the same predictions as each estimator and library reports it by default.

    Parameters
    ----------
    probs, labels, binary_target : as for :func:`pbr_core.ece` (``binary_target``: what a two-column
        binary ``probs`` measures, p(y=1) or the top label)
    binary_target : {"positive", "top_label"}, optional
        For binary data (probs of shape (n, 2), or 1-D p(y=1)): what pbr-calib's own rows measure.
        The libraries' rows follow each library's default for binary data (netcal, torchmetrics'
        ``binary_calibration_error`` and scikit-learn: p(y=1); relplot: what it is given, here the
        same as pbr-calib's rows). Default: "positive" for binary data.
    one_dimensional : {"positive", "confidence"}
        What a 1-D ``probs`` is: p(y=1) with 0/1 labels (default), or a top-label confidence with
        0/1 correctness (e.g. LLM records); only the ``measures`` wording differs.

    Returns
    -------
    DataFrame, one row per convention: ``key``, ``convention``, ``measures``, ``bins``, ``ece`` and
    ``difference`` (one line: why it differs from the paper's Eq. 2).
    """
    p = np.asarray(probs, dtype=np.float64)
    y = np.asarray(labels)
    binary = p.ndim == 1 or (p.ndim == 2 and p.shape[1] == 2)
    target = check_binary_target(binary_target or ("positive" if binary else "top_label"))
    p_pos = ece_inputs(p, y, "positive")[0] if binary else None
    ours = (p_pos, y) if binary and target == "positive" else (p, y)
    conf_ours, out_ours = confidence_and_outcome(*ours)
    lib_inputs = (p_pos, y) if binary else (p, y)
    conf_lib, out_lib = confidence_and_outcome(*lib_inputs)
    ours_words = "p(y=1)" if binary and target == "positive" else "top-label confidence"
    libs_words = "p(y=1)" if binary else "top-label confidence"
    if p.ndim == 1 and one_dimensional == "confidence":
        ours_words = libs_words = "top-label confidence"
    n = conf_ours.shape[0]
    from pbr_core.metrics import ece as paper_ece

    values = {
        "paper": (paper_ece(conf_ours, out_ours), ours_words),
        "equal_mass": (ece_equal_mass(conf_ours, out_ours), ours_words),
        "debiased": (_debiased_or_nan(conf_ours, out_ours), ours_words),
        "smooth": (smooth_ece(conf_ours, out_ours), ours_words),
        "netcal": (ece_netcal(conf_lib, out_lib), libs_words),
        "torchmetrics": (ece_torchmetrics(*lib_inputs), libs_words),
    }
    if binary:  # scikit-learn's calibration_curve is for binary problems only
        values["sklearn"] = (sklearn_curve_ece(conf_lib, out_lib), libs_words)
        values["sklearn_unweighted"] = (sklearn_curve_ece(conf_lib, out_lib, weighted=False), libs_words)
    rows = []
    for key, (value, measures) in values.items():
        conv = CONVENTIONS[key]
        bins = conv.n_bins.replace("floor(n^(1/3))", f"{_resolve_n_bins(None, n)} = floor(n^(1/3))")
        rows.append({"key": key, "convention": conv.name, "measures": measures, "bins": bins, "ece": value,
                     "difference": conv.difference})
    return pd.DataFrame(rows)


def _debiased_or_nan(conf: np.ndarray, out: np.ndarray) -> float:
    try:
        return ece_debiased(conf, out)
    except ValueError:  # too few rows per bin
        return float("nan")



# --------------------------------------------------------------------------- teaching: known truth
ESTIMATORS = {
    "paper": "Binned ECE, equal width (the paper)",
    "equal_mass": "Binned ECE, equal mass",
    "debiased": "Debiased ECE (Kumar et al.)",
    "smooth": "Smooth ECE (Blasiok & Nakkiran)",
}


def simulated_predictions(n: int, shift: float = 0.1, seed: int | None = 0) -> tuple[np.ndarray, np.ndarray]:
    """SIMULATED (confidence, correct) pairs with a known true calibration error.

    Confidence ~ Uniform(0.5, 1); P(correct | confidence c) = c - shift * 2 (c - 0.5), a model that
    is calibrated at 0.5 and over-confident by up to ``shift`` at 1. The true calibration error
    TCE = E|c - P(correct | c)| = shift / 2 (:func:`simulated_tce`).
    """
    rng = np.random.default_rng(seed)
    conf = rng.uniform(0.5, 1.0, n)
    acc = conf - shift * 2 * (conf - 0.5)
    return conf, (rng.uniform(size=n) < acc).astype(np.float64)


def simulated_tce(shift: float = 0.1) -> float:
    """The true calibration error of :func:`simulated_predictions`: E[2 shift (c - 0.5)] = shift / 2."""
    return shift / 2


def estimator_convergence(n_values: tuple[int, ...] = (100, 300, 1000, 3000, 10000, 30000), shift: float = 0.1,
                          repeats: int = 20, seed: int = 0) -> pd.DataFrame:
    """How each estimator approaches the true calibration error as n grows, on simulated data.

    Returns one row per (estimator, n): ``estimator`` (a key of :data:`ESTIMATORS`), ``n``, ``mean``,
    ``std`` over ``repeats`` simulated data sets, and ``tce`` (the truth). B = floor(n^(1/3)) for the
    binned estimators.
    """
    rows = []
    rng = np.random.default_rng(seed)
    for n in n_values:
        values: dict[str, list[float]] = {k: [] for k in ESTIMATORS}
        for _ in range(repeats):
            conf, out = simulated_predictions(int(n), shift, seed=int(rng.integers(2**32)))
            from pbr_core.metrics import ece as paper_ece

            values["paper"].append(paper_ece(conf, out))
            values["equal_mass"].append(ece_equal_mass(conf, out))
            values["debiased"].append(_debiased_or_nan(conf, out))
            values["smooth"].append(smooth_ece(conf, out))
        for key, v in values.items():
            rows.append({"estimator": key, "n": int(n), "mean": float(np.nanmean(v)), "std": float(np.nanstd(v)),
                         "tce": simulated_tce(shift)})
    return pd.DataFrame(rows)
