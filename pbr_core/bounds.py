"""The paper's bias and generalisation bounds for the binned ECE, as functions.

Fujisawa & Futami, "PAC-Bayes Analysis for Recalibration in Classification" (ICML 2025):

* Theorem 1 (test data, before recalibration), for any lambda > 0, with prob. >= 1 - eps:
  |TCE - ECE| <= (1 + L)/B + (B log 2 + log(1/eps) + 2 lambda^2 / n) / lambda.
  Nothing in it depends on the data, so lambda is optimised in closed form:
  lambda* = sqrt(n (B log 2 + log(1/eps)) / 2), giving (1 + L)/B + 2 sqrt(2 (B log 2 + log(1/eps)) / n).
* Theorem 2 / Corollary 2 (training or recalibration data, with KL(rho || pi)):
  (1 + L)/B + (KL + B log 2 + log(1/eps) + 2 lambda^2 / n) / lambda.
* Corollary 1 (generalisation of the ECE after recalibration, n_te = n_re = n):
  (KL + B log 2 + log(1/eps) + 4 lambda^2 / n) / lambda.
* Theorem 3 (ECE_K, B = B'^K regions):
  K (1 + L) / B^(1/K) + (KL + B K log 2 + log(1/eps) + K^2 lambda^2 / (2 n)) / lambda.

Choosing lambda validly when KL is data-dependent (GP_SPEC section 6): lambda must be fixed before
the data are seen. We fix a grid of G lambda values that depends only on n (never on the data),
apply the bound to each with confidence eps/G (a union bound), and report the smallest. The price
is log(G) added to log(1/eps). ``lambda_grid`` gives the grid used by default for Theorem 2 and the
corollaries; Theorem 3 centres its grid on its own KL-free optimum (which depends on n, K, B', eps
only). Theorem 1 and the KL-free Theorem 3 have no data-dependent term, so there lambda is optimised
in closed form at no cost.

The number of bins must also be fixed without looking at the data (``optimal_n_bins``,
``optimal_n_bins_per_axis`` and ``bound_minimizing_n_bins`` depend on n, L, eps only).
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np

__all__ = [
    "BOUND_EPS",
    "BOUND_LIPSCHITZ",
    "bound_minimizing_n_bins",
    "corollary1_bound",
    "corollary2_bound",
    "fit_bounds",
    "lambda_grid",
    "optimal_n_bins",
    "optimal_n_bins_per_axis",
    "theorem1_binning_bias",
    "theorem1_bound",
    "theorem1_estimation_bias",
    "theorem1_optimal_lambda",
    "theorem2_bound",
    "theorem3_bound",
    "theorem3_optimal_lambda",
]

LOG2 = math.log(2.0)

#: Default bound settings of a fitted recalibrator's report: eps = 0.05, L = 1.
BOUND_EPS = 0.05
BOUND_LIPSCHITZ = 1.0


def _check(n, eps, lipschitz=1.0):
    if np.any(np.asarray(n) < 1):
        raise ValueError(f"Expected argument `n` to be a positive integer, but got {n!r}.")
    if not 0 < eps < 1:
        raise ValueError(f"Expected argument `eps` in (0, 1), but got {eps!r}.")
    if lipschitz < 0:
        raise ValueError(f"Expected argument `lipschitz` to be >= 0, but got {lipschitz!r}.")


def _check_bins(n_bins, name: str = "n_bins") -> np.ndarray:
    B = np.asarray(n_bins, dtype=np.float64)
    if not np.all(B >= 1):
        raise ValueError(f"Expected argument `{name}` to be an integer larger than 0, but got {n_bins!r}.")
    return B


def _check_lambdas(lam) -> np.ndarray:
    lam = np.asarray(lam, dtype=np.float64)
    if not np.all(lam > 0):
        raise ValueError(f"Expected every lambda to be positive, but got {lam!r}.")
    return lam


def _integer_root(n: int, k: int) -> int:
    """floor(n^(1/k)) exactly, for any Python int n >= 1 (no float overflow or rounding)."""
    if k == 1:
        return n
    # Start above the root (a float guess, or 2^ceil(bits/k) beyond float range); integer
    # Newton steps then decrease monotonically to the floor of the root.
    try:
        x = int(math.exp(math.log(n) / k)) + 2
    except OverflowError:
        x = 1 << -(-n.bit_length() // k)
    while x**k <= n:
        x *= 2
    while True:
        y = ((k - 1) * x + n // x ** (k - 1)) // k
        if y >= x:
            return x
        x = y


def _check_count(n, name: str = "n") -> int:
    if isinstance(n, bool) or (isinstance(n, float) and not n.is_integer()):
        raise ValueError(f"Expected argument `{name}` to be a positive integer, but got {n!r}.")
    n = int(n)
    if n < 1:
        raise ValueError(f"Expected argument `{name}` to be a positive integer, but got {n}.")
    return n


def optimal_n_bins(n: int) -> int:
    """The paper's number of bins B = floor(n^(1/3)) (Theorem 1, Corollary 2), at least 1.

    Computed in integers so that exact cubes give their root (1000 -> 10, not 9) for any n.

    Examples
    --------
    >>> optimal_n_bins(1000), optimal_n_bins(999), optimal_n_bins(10**18)
    (10, 9, 1000000)
    """
    return _integer_root(_check_count(n), 3)


def optimal_n_bins_per_axis(n: int, n_classes: int) -> int:
    """Bins per axis B' = floor(n^(1/(K+2))) for ECE_K (Theorem 3: B = B'^K = O(n^(K/(K+2)))).

    Minimising Theorem 3's bound K(1+L)/B' + O(sqrt(B'^K K / n)) over B' gives
    B' = Theta(n^(1/(K+2))), the rate of K-dimensional nonparametric regression; pass
    ``n_classes=K'`` for the "any K' classes" variant (Appendix C.8). With K = 1 this is
    floor(n^(1/3)), the top-label choice.

    Examples
    --------
    >>> optimal_n_bins_per_axis(10000, 10), optimal_n_bins_per_axis(10**6, 1)
    (2, 100)
    """
    K = _check_count(n_classes, "n_classes")
    return _integer_root(_check_count(n), K + 2)


def theorem1_binning_bias(n_bins, lipschitz: float = 1.0):
    """Binning bias (1 + L) / B of Theorem 1: what coarse bins cost, falls as B grows."""
    B = _check_bins(n_bins)
    return (1.0 + lipschitz) / B


def theorem1_optimal_lambda(n, n_bins, eps: float = 0.05):
    """lambda* = sqrt(n (B log 2 + log(1/eps)) / 2), the minimiser of Theorem 1's second term."""
    B = np.asarray(n_bins, dtype=np.float64)
    return np.sqrt(np.asarray(n, dtype=np.float64) * (B * LOG2 + math.log(1.0 / eps)) / 2.0)


def theorem1_estimation_bias(n, n_bins, eps: float = 0.05, lam=None):
    """Estimation bias (B log 2 + log(1/eps) + 2 lambda^2 / n) / lambda of Theorem 1.

    With ``lam=None`` lambda takes its optimal value and the term is 2 sqrt(2 (B log 2 + log(1/eps)) / n):
    too few samples per bin, rises as B grows.
    """
    _check(n, eps)
    B = _check_bins(n_bins)
    n = np.asarray(n, dtype=np.float64)
    lam = theorem1_optimal_lambda(n, B, eps) if lam is None else _check_lambdas(lam)
    return (B * LOG2 + math.log(1.0 / eps) + 2.0 * lam**2 / n) / lam


def theorem1_bound(n, n_bins, lipschitz: float = 1.0, eps: float = 0.05, lam=None):
    """Theorem 1: with probability >= 1 - eps over the test set, |TCE - ECE| is at most this.

    Vectorised over ``n_bins`` (and ``n``). Returns a float for scalar input.

    Examples
    --------
    >>> round(float(theorem1_bound(10000, 21)), 4)
    0.2137
    """
    _check(n, eps, lipschitz)
    out = theorem1_binning_bias(n_bins, lipschitz) + theorem1_estimation_bias(n, n_bins, eps, lam)
    return float(out) if np.ndim(out) == 0 else out


def bound_minimizing_n_bins(n: int, lipschitz: float = 1.0, eps: float = 0.05, max_bins: int | None = None) -> int:
    """The B in 1..max_bins that minimises Theorem 1's bound (default max_bins = max(200, 4 n^(1/3)))."""
    _check(n, eps, lipschitz)
    if max_bins is None:
        max_bins = max(200, 4 * optimal_n_bins(n))
    Bs = np.arange(1, int(max_bins) + 1)
    return int(Bs[np.argmin(theorem1_bound(n, Bs, lipschitz, eps))])


def lambda_grid(n: int, size: int = 41) -> np.ndarray:
    """The fixed, data-independent grid of lambda values for the KL bounds: sqrt(n) * 10^[-1, 3].

    It depends on n alone, so it is fixed before the data are seen. The optimum
    sqrt(n (KL + B log 2 + log(G/eps)) / c) (c = 2 or 4) lies inside it for KL + B log 2 up to
    about 10^6, and neighbouring points differ by 10^0.1, which costs at most 0.7% of the term
    ((10^0.05 + 10^-0.05) / 2 - 1).
    """
    return math.sqrt(n) * np.logspace(-1.0, 3.0, size)


def _kl_bound(n, n_bins, kl, eps, lambdas, quad_coeff, bias):
    """min over the fixed grid of (KL + B log 2 + log(G/eps) + c lambda^2 / n) / lambda + bias."""
    _check(n, eps)
    if np.any(np.asarray(kl) < 0):
        raise ValueError(f"Expected argument `kl` to be >= 0, but got {kl!r}.")
    lams = lambda_grid(n) if lambdas is None else np.atleast_1d(_check_lambdas(lambdas))
    log_term = math.log(len(lams) / eps)
    B = _check_bins(n_bins)[..., None]
    kl = np.asarray(kl, dtype=np.float64)[..., None]
    vals = (kl + B * LOG2 + log_term + quad_coeff * lams**2 / n) / lams
    out = bias + vals.min(axis=-1)
    return float(out) if np.ndim(out) == 0 else out


def corollary1_bound(n: int, n_bins, kl, eps: float = 0.05, lambdas: Sequence[float] | None = None):
    """Corollary 1: E_rho |E ECE(test) - ECE(recalibration set)| <= this, with prob. >= 1 - eps.

    (KL + B log 2 + log(G/eps) + 4 lambda^2 / n) / lambda minimised over a fixed grid of G lambdas
    (union bound; G = 1 when a single lambda fixed in advance is given).
    """
    return _kl_bound(n, n_bins, kl, eps, lambdas, 4.0, 0.0)


def corollary2_bound(n: int, n_bins, kl, lipschitz: float = 1.0, eps: float = 0.05,
                     lambdas: Sequence[float] | None = None):
    """Corollary 2: E_rho |TCE - ECE(recalibration set)| <= this, with prob. >= 1 - eps.

    (1 + L)/B + (KL + B log 2 + log(G/eps) + 2 lambda^2 / n) / lambda, minimised over a fixed grid.
    """
    _check(n, eps, lipschitz)
    return _kl_bound(n, n_bins, kl, eps, lambdas, 2.0, theorem1_binning_bias(n_bins, lipschitz))


def theorem2_bound(n: int, n_bins, kl, lipschitz: float = 1.0, eps: float = 0.05,
                   lambdas: Sequence[float] | None = None):
    """Theorem 2: E_rho |TCE - ECE(training set)| <= this; the same form as Corollary 2."""
    return corollary2_bound(n, n_bins, kl, lipschitz, eps, lambdas)


def theorem3_optimal_lambda(n: int, n_bins_per_axis, n_classes: int, eps: float = 0.05):
    """lambda* = sqrt(2 n (B K log 2 + log(1/eps))) / K with B = B'^K: Theorem 3's minimiser when KL = 0."""
    K = _check_count(n_classes, "n_classes")
    B = _check_bins(n_bins_per_axis, "n_bins_per_axis") ** K
    return np.sqrt(2.0 * float(n) * (B * K * LOG2 + math.log(1.0 / eps))) / K


def theorem3_bound(n: int, n_bins_per_axis, n_classes: int, lipschitz: float = 1.0, eps: float = 0.05,
                   kl: float = 0.0, lambdas: Sequence[float] | None = None):
    """Theorem 3: bound on |CE_K - ECE_K| with B = B'^K regions, with probability >= 1 - eps.

    K (1 + L) / B' + (KL + B K log 2 + log(1/eps) + K^2 lambda^2 / (2 n)) / lambda.

    * ``kl=0`` and no ``lambdas`` (test data, the paper's "dropping the KL term"): lambda is
      optimised in closed form, lambda* = sqrt(2 n (B K log 2 + log(1/eps))) / K, giving
      K (1 + L) / B' + K sqrt(2 (B K log 2 + log(1/eps)) / n).
    * With a KL term (data-dependent) lambda cannot be tuned after the fact: the bound is the
      minimum over a fixed grid of G lambdas with log(G/eps) (union bound). The default grid is
      lambda*(B') * 10^[-1, 3] (41 points): it depends on n, K, B' and eps only, never on the data,
      and is centred where Theorem 3's optimum lies (B'^K can be astronomically larger than the
      top-label B, so the top-label ``lambda_grid`` would miss it). ``lambdas`` overrides it
      (one value fixed in advance: G = 1).

    Pass ``n_classes=K'`` for the "any K' classes" variant (Appendix C.8).
    """
    _check(n, eps, lipschitz)
    K = _check_count(n_classes, "n_classes")
    Bp = _check_bins(n_bins_per_axis, "n_bins_per_axis")
    if np.any(np.asarray(kl) < 0):
        raise ValueError(f"Expected argument `kl` to be >= 0, but got {kl!r}.")
    B = Bp**K
    binning = K * (1.0 + lipschitz) / Bp
    if np.all(np.asarray(kl) == 0.0) and lambdas is None:
        c = B * K * LOG2 + math.log(1.0 / eps)
        out = binning + K * np.sqrt(2.0 * c / n)
        return float(out) if np.ndim(out) == 0 else out
    if lambdas is None:
        lams = theorem3_optimal_lambda(n, Bp, K, eps)[..., None] * np.logspace(-1.0, 3.0, 41)
    else:
        lams = np.atleast_1d(_check_lambdas(lambdas))
    G = lams.shape[-1]
    c = np.asarray(kl, dtype=np.float64)[..., None] + (B * K * LOG2)[..., None] + math.log(G / eps)
    out = binning + ((c + K**2 * lams**2 / (2.0 * n)) / lams).min(axis=-1)
    return float(out) if np.ndim(out) == 0 else out


def fit_bounds(n: int, kl: float, eps: float = BOUND_EPS, lipschitz: float = BOUND_LIPSCHITZ) -> dict[str, float]:
    """Corollary 1 and 2 for one recalibrator fitted on ``n`` rows with KL(rho || pi) = ``kl``.

    The number of bins is B = floor(n^(1/3)) (:func:`optimal_n_bins`) and lambda the minimum over
    the fixed grid of :func:`lambda_grid` (GP_SPEC section 6). A KL below 0 (a fit left at the
    prior can report -1e-12: rounding) counts as 0. ``n`` is the number of rows the bound is
    evaluated on. Whether the bound holds as stated depends on the prior: fitted on the same rows (the
    paper's experiments; a GP recalibrator's ``prior_split = 0``), Corollaries 1-2's "prior
    independent of S_re" holds only approximately; chosen on other rows (``prior_split > 0``), it
    holds as stated on the remaining ``n`` rows (``pbr_core.recalibrators.gp.BOUND_VALIDITY``).

    Returns
    -------
    dict
        ``n``, ``n_bins``, ``kl`` (as used, at least 0), ``eps``, ``lipschitz``, ``corollary1``
        (bound on the ECE generalisation gap) and ``corollary2`` (bound on |TCE - ECE|).

    Examples
    --------
    >>> b = fit_bounds(1000, 2.5)
    >>> b["n_bins"], b["corollary1"] == corollary1_bound(1000, 10, 2.5)
    (10, True)
    """
    kl = max(float(kl), 0.0)
    B = optimal_n_bins(n)
    return {
        "n": int(n), "n_bins": int(B), "kl": kl, "eps": float(eps), "lipschitz": float(lipschitz),
        "corollary1": float(corollary1_bound(n, B, kl, eps=eps)),
        "corollary2": float(corollary2_bound(n, B, kl, lipschitz=lipschitz, eps=eps)),
    }
