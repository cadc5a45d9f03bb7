"""Does a slice's calibration differ from the rest's? Its outcomes against the rest's **at the same
predicted probability**, compared within fine strata of the score (the confirmation's test (a)).

The claim "calibrated differently from the rest" means E[y | p, slice] != E[y | p, rest]. When every
row shares one calibration curve g (a file miscalibrated everywhere alike, in any shape), no slice
differs, however its scores are distributed. The earlier test compared logistic recalibration lines
(intercept and slope on logit p) around one line fitted on the search half: unless g is linear in
logit p, slices whose scores lie elsewhere get other best lines, and it rejected, more often as n grew
(audit 12b: 42-100 % of files with g(p) = p + 0.08 or a bend named a slice under a 5 % guarantee).

Here the score is cut into strata of equal mass on the search half (rows the confirmation never
uses: :func:`strata_edges`), about one per :data:`ROWS_PER_STRATUM` rows of the confirmation half, and
in each stratum the slice's outcome sum Y_k is compared with what its share of the stratum's outcomes
would be were its rows and the rest's exchangeable there (Cochran-Mantel-Haenszel): e_k = Y_k - n_k T_k
/ N_k (T_k the stratum's outcomes, N_k its rows, n_k the slice's). Two statistics, so that a slice too
confident at one end only is found too: the overall shift U1 = sum_k e_k and one that grows along the
score, U2 = sum_k (x_k - xbar) e_k (x_k the stratum's logit mean score, xbar its slice-weighted mean);
V = the sum over strata (independent) of the hypergeometric variance of Y_k given the stratum's margins;
the statistic is U' V^- U. Its p-value is the chi^2(2) tail where that is above :data:`EXACT_BELOW` or
the overall shift's variance is :data:`EXACT_MAX_VAR` or more, else exact: the share of :data:`DRAWS`
draws of every Y_k from its hypergeometric law (given the
margins) with a statistic as large (seeded; a permutation test within strata, valid whatever the
number of outcomes: the chi^2 tail let about 9 % of the slice "age <= 24" of calibrated 500-row
Adult files through at 5 %; exact, 2.5 %).

Why so many strata (audit 12b simulations, Adult's real columns, shared g, the slice fixed, one test
at 5 %): within a stratum the slice's scores may still sit higher than the rest's; where g is steep
that alone shifts its outcomes. g = bend on 16,281 rows, "Never-married" against the rest: 14 of 200
files (7 %) with ~sqrt(n) strata (90), 8 of 150 (5.3 %) with strata of ~25 rows. A local slope
adjustment (the rest's curve through neighbouring strata) was tried and dropped: its noise where
outcomes are rare broke the level (19 % for "age <= 24" of calibrated 500-row files). Power is not
lost by the finer strata: "sex = Female" 15 points too low in 500-row files, 85 % with strata of ~25
rows, 84 % with ~sqrt(n).
"""

from __future__ import annotations

import numpy as np

#: The most strata (equal-mass quantiles of the search half's scores).
MAX_STRATA = 400
#: Rows of the confirmation half per stratum (about).
ROWS_PER_STRATUM = 25
#: Monte Carlo draws of the exact test (:func:`compare`), run where the chi^2 approximation gives
#: p < :data:`EXACT_BELOW` (elsewhere no decision at 5 % could change).
DRAWS = 4000
EXACT_BELOW = 0.1
#: ... and where the outcomes' variance V (the overall shift's) is below this: beyond, the chi^2 tail is
#: accurate (the rule of the test of calibration, :mod:`pbr_core.significance`) and finer than 1 / DRAWS.
EXACT_MAX_VAR = 100.0


def _pinv2(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Pseudo-inverse and rank of symmetric 2 x 2 matrices [[a, b], [b, c]] (arrays). Rank 1 (every
    row with the same p: only calibration in the large can be measured): M / trace(M)^2."""
    tr = a + c
    det = a * c - b * b
    full = (tr > 0) & (det > 1e-10 * tr * tr)
    one = (tr > 0) & ~full
    with np.errstate(divide="ignore", invalid="ignore"):
        pa = np.where(full, c / det, np.where(one, a / tr ** 2, 0.0))
        pb = np.where(full, -b / det, np.where(one, b / tr ** 2, 0.0))
        pc = np.where(full, a / det, np.where(one, c / tr ** 2, 0.0))
    return pa, pb, pc, np.where(full, 2, np.where(one, 1, 0))


def _quad(P, u0, u1):
    return P[0] * u0 * u0 + 2 * P[1] * u0 * u1 + P[2] * u1 * u1


def n_strata(n_confirm: float) -> int:
    """One stratum per :data:`ROWS_PER_STRATUM` rows of the confirmation half, at most
    :data:`MAX_STRATA` (see the module docstring for why)."""
    return int(min(MAX_STRATA, max(1, int(max(n_confirm, 0.0)) // ROWS_PER_STRATUM)))


def strata_edges(p: np.ndarray, n_confirm: float) -> tuple[float, ...]:
    """The inner edges of equal-mass strata of ``p`` (the search half's scores), their number from the
    confirmation half's size (:func:`n_strata`); repeated quantiles (tied scores) merged."""
    p = np.asarray(p, dtype=np.float64)
    K = n_strata(n_confirm)
    if p.size == 0 or K < 2:
        return ()
    q = np.unique(np.quantile(p, np.arange(1, K) / K))
    return tuple(float(v) for v in q)


def stratum(p: np.ndarray, edges: tuple[float, ...]) -> np.ndarray:
    """Each row's stratum: 0 below the first edge, ..., len(edges) from the last up."""
    return np.searchsorted(np.asarray(edges, dtype=np.float64), p, side="right")


def _stat(ys: np.ndarray, ns: np.ndarray, N: np.ndarray, T: np.ndarray, w: np.ndarray, P) -> np.ndarray:
    """U' V^- U for outcome sums ``ys`` (draws, strata) given the margins: e = ys - ns T / N per stratum,
    U = (sum e, sum w e)."""
    e = ys - ns * T / N
    u1, u2 = e.sum(axis=-1), (w * e).sum(axis=-1)

    return np.maximum(_quad(P, u1, u2), 0.0)


def compare(slice_: np.ndarray, rest: np.ndarray, seed: int = 0) -> dict[str, np.ndarray]:
    """The test for slices against their rests, from per-stratum sums ``slice_`` and ``rest``, each
    (3, K, slices): rows, outcome sum, score sum. Returns chi2, df (the rank of V: 0 when nothing can be
    compared), p (NaN where df = 0) and method ("chi2" or "monte carlo")."""
    from scipy.special import chdtrc


    ns_all, ys_all, ps_all = (np.asarray(a, dtype=np.float64) for a in slice_)
    nr_all, yr_all, pr_all = (np.asarray(a, dtype=np.float64) for a in rest)
    k = ns_all.shape[1] if ns_all.ndim == 2 else 0
    out = {"chi2": np.zeros(k), "df": np.zeros(k, dtype=int), "p": np.full(k, np.nan), "method": ["chi2"] * k}
    for s in range(k):
        ns, ys, nr, yr = ns_all[:, s], ys_all[:, s], nr_all[:, s], yr_all[:, s]
        N, T = ns + nr, ys + yr
        # strata that can say anything: rows on both sides, both outcomes among them
        on = (ns > 0) & (nr > 0) & (T > 0) & (T < N)
        if not on.any():
            continue
        ns, ys, nr, N, T = ns[on], ys[on], nr[on], N[on], T[on]
        mean_p = np.clip((ps_all[on, s] + pr_all[on, s]) / N, 1e-6, 1 - 1e-6)
        x = np.log(mean_p) - np.log1p(-mean_p)
        w = x - (ns * x).sum() / ns.sum()
        # the hypergeometric variance of ys given the stratum's margins (Mantel-Haenszel)
        var = ns * nr * T * (N - T) / (N * N * np.maximum(N - 1, 1))
        P = _pinv2(np.array(var.sum()), np.array((w * var).sum()), np.array((w * w * var).sum()))
        df = int(P[3])
        if df == 0:
            continue
        chi2 = float(_stat(ys, ns, N, T, w, P))
        p = float(chdtrc(df, chi2))
        if p < EXACT_BELOW and var.sum() < EXACT_MAX_VAR:   # few outcomes: the exact test decides
            rng = np.random.default_rng([int(seed), s, 12])
            draws = rng.hypergeometric(T.astype(np.int64), (N - T).astype(np.int64), ns.astype(np.int64),
                                       size=(DRAWS, ns.size))
            null = _stat(draws.astype(np.float64), ns, N, T, w, P)
            p = float((1 + np.sum(null >= chi2 * (1 - 1e-9))) / (DRAWS + 1))
            out["method"][s] = "monte carlo"
        out["chi2"][s], out["df"][s], out["p"][s] = chi2, df, p
    return out
