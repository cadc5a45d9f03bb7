"""KL divergence against the ECE generalisation gap (paper Section 6.1, Figures 2, 5 and 6).

For each alpha (the KL weight of the PBR objective) and each fold, PBR is fitted on a recalibration
set of n_re rows; the gap |ECE(test subset of n_re rows) - ECE(recalibration set)| is measured with
B = floor(n_re^(1/3)) bins on both sides ("we set n_te = n_re when estimating the ECE gap",
Appendix F), and set against the fitted KL(q || p). Corollary 1 bounds the expected gap by a
function of that KL, so the two should correlate.

Whether they do is judged fold by fold (:func:`fold_kendall`): within a fold every alpha is fitted
on the same recalibration rows and measured on the same test rows, so its fits share their noise,
and one correlation over all (fold, alpha) fits, tested as if they were independent, has p-values
far too small (:class:`KLGapResult`'s pooled ``pearson_p`` / ``kendall_p``, kept for reference).
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Literal, Sequence

import numpy as np
import pandas as pd
from scipy import stats

from pbr_core.bounds import fit_bounds, optimal_n_bins
from pbr_core.cancel import Cancelled
from pbr_core.experiments._protocol import (
    BinaryECE,
    DEFAULT_BINARY_ECE,
    MIN_FIT_ROWS,
    CancelCallback,
    OnError,
    Runner,
    check_folds,
    fold_label,
    check_int,
    check_predictions,
    default_n_re,
    iter_folds,
    split_indices,
    warn_small_test_set,
)
from pbr_core.evaluation import measured_ece
from pbr_core.paper import PAPER_ALPHAS, PAPER_N_RE
from pbr_core.gp.grid import GridFit, fit_grid, fit_grid_batched
from pbr_core.parallel import check_n_jobs
from pbr_core.predictions import Predictions
from pbr_core.progress import Progress
from pbr_core.recalibrators import get_recalibrator

__all__ = ["KL_GAP_COLUMNS", "MAX_FOLD_SHARE", "FoldKendall", "KLGapResult", "extreme_kl", "fold_kendall",
           "folds_overlap_too_much", "kl_gap_default_n_re", "kl_limit", "kl_vs_ece_gap"]

#: Columns of :attr:`KLGapResult.table`, in order.
KL_GAP_COLUMNS = ("alpha", "fold", "n_re", "n_bins", "kl", "ece_re", "ece_te", "gap", "bound", "fit_seconds", "error")


Verdict = Literal["positive", "negative", "none shown", "undefined"]

#: The largest share n_re / n of a file's rows a fold's recalibration set may take for the fold test
#: (:class:`FoldKendall`) to be read. Folds re-split one file, so two folds' recalibration sets share
#: about n_re / n of their rows, and every fold's fits see the same sample's noise; the test treats the
#: folds' taus as independent. Null simulations (fit family shared across folds, as fits on shared rows
#: are; audit 6, repeated in tests/test_kl_gap_folds.py): at n_re / n = 1/2 the verdict claimed a relation in 8.3 % and 9.3 %
#: of studies (33 of 400, 28 of 300; nominal 5 %), at 200 / 900 = 0.22 (the reproduction's 20-22 %) in
#: 4 % (12 of 300).
MAX_FOLD_SHARE = 0.25


def folds_overlap_too_much(n_re: int, n: int) -> bool:
    """Whether the folds of a KL-gap study with ``n_re`` rows per set, drawn from a file of ``n`` rows,
    share too many rows for :attr:`FoldKendall.verdict` to be read: n_re above n / 4
    (:data:`MAX_FOLD_SHARE`).

    Examples
    --------
    >>> folds_overlap_too_much(1000, 2000), folds_overlap_too_much(500, 2000), folds_overlap_too_much(1000, 9090)
    (True, False, False)
    """
    n_re, n = int(n_re), int(n)
    if n < 1:
        raise ValueError(f"Expected argument `n` (the file's rows) to be positive, but got {n}.")
    return n_re > MAX_FOLD_SHARE * n


def kl_gap_default_n_re(n: int) -> int:
    """The n_re a front end proposes for a KL-gap study on a file of ``n`` rows: the paper's 1000
    (:data:`~pbr_core.experiments.PAPER_N_RE`) or a quarter of the rows, whichever is smaller, so that
    the folds' verdict can be read (:func:`folds_overlap_too_much`); when a quarter is below
    :data:`~pbr_core.experiments.MIN_FIT_ROWS`, :func:`~pbr_core.experiments.default_n_re` (half the
    rows), whose fits are then measurable though its fold verdict is not.

    Examples
    --------
    >>> kl_gap_default_n_re(10_000), kl_gap_default_n_re(2_000), kl_gap_default_n_re(576), kl_gap_default_n_re(400)
    (1000, 500, 144, 200)
    """
    quarter = min(PAPER_N_RE, int(n) // 4)
    return quarter if quarter >= MIN_FIT_ROWS else default_n_re(n)


@dataclass(frozen=True)
class FoldKendall:
    """Kendall's tau of KL against the ECE gap within each fold, tested across the folds.

    Within a fold the alphas differ and the rows do not, so each fold's tau asks the paper's
    question (does a larger KL come with a larger gap?) free of the fold's own noise. The folds'
    taus are then tested against 0 as one sample: under "no relation" each is as likely positive
    as negative. Folds are random splits of one file, so two folds share some rows (2 n_re of n
    each); the simulations of ``tests/test_paper_figures.py`` draw folds from one pool in this way
    and find the false-alarm rate at or below its nominal level, where one pooled test over every
    fit raises it several-fold. That holds while the folds share few rows: with n_re above n / 4
    the folds are re-splits of mostly the same rows, fits on those rows share a direction of their
    own, and the verdict claims a relation too often (:func:`folds_overlap_too_much`; front ends then
    do not read it).

    Attributes
    ----------
    taus : pandas.Series
        Kendall's tau-b (``scipy.stats.kendalltau``'s statistic) of each fold (index: fold, sorted),
        over its fits that did not fail; NaN where a fold has fewer than 3 such fits or no
        variation in KL or gap.
    mean_tau : float
        Mean of the defined taus (NaN when none is).
    folds : int
        Folds with a defined tau.
    folds_positive, folds_negative : int
        Folds whose tau is above / below 0 (a tau of exactly 0 counts in neither).
    wilcoxon_p : float
        Two-sided Wilcoxon signed-rank test of the taus against 0, exact (every sign pattern of
        the ranks, mid-ranks for ties, folds with tau = 0 left out: scipy.stats.wilcoxon's exact
        and permutation p-values); 1 when no tau differs from 0, NaN when none is defined.
    sign_p : float
        Two-sided exact sign test: folds_positive among folds_positive + folds_negative against
        Binomial(., 1/2).
    level : float
        The level of :attr:`verdict`.

    Notes
    -----
    With F folds neither test can go below 2 / 2^F (:attr:`smallest_p`): 3 folds can never show a
    relation at 5 %, 6 folds can only when every fold agrees.
    """

    taus: pd.Series
    mean_tau: float
    folds: int
    folds_positive: int
    folds_negative: int
    wilcoxon_p: float
    sign_p: float
    level: float = 0.05

    @property
    def smallest_p(self) -> float:
        """The smallest p-value either test can give with these folds (all agreeing in sign)."""
        n = self.folds_positive + self.folds_negative
        return min(1.0, 2.0 ** (1 - n)) if n else 1.0

    @property
    def verdict(self) -> Verdict:
        """"positive" / "negative" when the Wilcoxon and the sign test both give p < ``level`` and
        the mean tau and the majority of folds agree in sign; "none shown" otherwise;
        "undefined" when no fold has a tau.

        Two tests, as for every claim of docs/reproduction.md: the signed-rank test weighs how far
        each tau is from 0, the sign test only its direction, so a relation carried by one or two
        folds' large taus is not called shown.
        """
        if self.folds == 0:
            return "undefined"
        if self.wilcoxon_p < self.level and self.sign_p < self.level:
            if self.mean_tau > 0 and self.folds_positive > self.folds_negative:
                return "positive"
            if self.mean_tau < 0 and self.folds_negative > self.folds_positive:
                return "negative"
        return "none shown"


def fold_kendall(table: pd.DataFrame, *, exclude_alpha_zero: bool = False, level: float = 0.05) -> FoldKendall:
    """Kendall's tau of KL against the ECE gap within each fold of a :func:`kl_vs_ece_gap` table,
    tested across the folds (see :class:`FoldKendall`).

    Parameters
    ----------
    table : pandas.DataFrame
        Columns ``fold``, ``alpha``, ``kl``, ``gap`` at least (``KLGapResult.table``); rows with
        NaN KL or gap (failed fits) are left out.
    exclude_alpha_zero : bool, default False
        Leave out the alpha = 0 fits (no KL term: their KL can be orders of magnitude above the
        others').
    level : float, default 0.05
        Level of the verdict.

    Returns
    -------
    FoldKendall

    Examples
    --------
    >>> import pandas as pd
    >>> t = pd.DataFrame({"fold": [0] * 3 + [1] * 3, "alpha": [0.1, 0.5, 1.0] * 2,
    ...                   "kl": [9.0, 4.0, 1.0] * 2, "gap": [0.03, 0.02, 0.01, 0.01, 0.02, 0.03]})
    >>> r = fold_kendall(t)
    >>> list(r.taus), r.folds_positive, r.folds_negative, r.verdict
    ([1.0, -1.0], 1, 1, 'none shown')
    """
    if not (isinstance(level, (int, float)) and 0 < level < 1):
        raise ValueError(f"Expected argument `level` to be a number between 0 and 1, but got {level!r}.")
    missing = [c for c in ("fold", "alpha", "kl", "gap") if c not in table.columns]
    if missing:
        raise ValueError(f"The KL-gap table has no column(s) {missing}: expected a kl_vs_ece_gap table.")
    kl, gap = table["kl"].to_numpy(float), table["gap"].to_numpy(float)
    keep = ~(np.isnan(kl) | np.isnan(gap))
    if exclude_alpha_zero:
        keep &= table["alpha"].to_numpy(float) > 0
    folds = table["fold"].to_numpy()
    # A fold whose every fit failed stays in the series (NaN): left out, and seen to be.
    taus = {fold: _kendall_tau_b(kl[keep & (folds == fold)], gap[keep & (folds == fold)])
            for fold in sorted(pd.unique(folds))}
    series = pd.Series(taus, dtype=float, name="kendall_tau")
    series.index.name = "fold"
    defined = series.dropna().to_numpy()
    if not defined.size:
        return FoldKendall(series, math.nan, 0, 0, 0, math.nan, math.nan, level)
    pos, neg = int((defined > 0).sum()), int((defined < 0).sum())
    return FoldKendall(taus=series, mean_tau=float(defined.mean()), folds=int(defined.size), folds_positive=pos,
                       folds_negative=neg, wilcoxon_p=signed_rank_p(defined), sign_p=sign_test_p(pos, neg),
                       level=float(level))


def kl_limit(n_re: int, n_classes: int) -> float:
    """The largest KL(rho || pi), in nats, that a fit on ``n_re`` rows of ``n_classes`` classes can owe
    to its data: n_re * ln K.

    Why this line. PAC-Bayes reads the KL as the information the posterior took from the
    recalibration set, and the labels of n_re rows carry at most n_re ln K nats (ln K each, what a
    label of K classes can hold). A KL above that is not information learned from these rows: the
    optimiser moved the posterior away from the prior further than any data could justify. That
    happens at alpha = 0, where the PBR objective has no KL term at all (the Brier score only, plus
    the cross entropy for PBR total): nothing holds the posterior near its prior, so its mean and variances
    can drift as far as the optimiser takes them (issue 35: a 7-class file gave KL = 1.6e8 nats at
    alpha = 0; in the paper's reproduction, whose alpha > 0 fits stay below 150 nats, the only 3 of
    its 560 fits above the line are alpha = 0 fits: 4,655 and 1,563 on KITTI XGBoost, limit 693,
    and 6,835 on CIFAR-100 WRN-26-10, limit 4,605, against medians of 53 and 99 over the folds).
    Corollary 1's bound is then far above 1: it says nothing. The dashboard marks such a fit, draws
    the KL on a log scale and keeps it out of the mean KL and mean bound of a study
    (:func:`extreme_kl`); its ECE gap is still measured and shown.
    """
    return float(n_re) * math.log(max(int(n_classes), 2))


def extreme_kl(kl: np.ndarray | pd.Series | float, n_re: np.ndarray | pd.Series | int, n_classes: int) -> np.ndarray:
    """True where a fit's KL exceeds :func:`kl_limit` (n_re ln K nats): more than the labels of its
    recalibration rows can carry, a posterior that drifted from its prior (alpha = 0 allows it).
    NaN (a failed fit) is never extreme."""
    kl = np.asarray(kl, dtype=float)
    limit = np.asarray(n_re, dtype=float) * math.log(max(int(n_classes), 2))
    with np.errstate(invalid="ignore"):
        return np.nan_to_num(kl, nan=-np.inf) > limit


def _kendall_tau_b(x: np.ndarray, y: np.ndarray) -> float:
    """Kendall's tau-b of a fold's fits (scipy.stats.kendalltau's statistic); NaN with fewer than 3
    fits or no variation in either (a fold whose fits all ended at the prior has no order).

    Counted pair by pair for the few fits of a fold (a tenth of kendalltau's call overhead, which
    the simulations of the tests repeat thousands of times); scipy above 200 fits.
    """
    n = x.size
    if n < 3 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return math.nan
    if n > 200:
        return float(stats.kendalltau(x, y)[0])
    i, j = np.triu_indices(n, 1)
    dx, dy = np.sign(x[i] - x[j]), np.sign(y[i] - y[j])
    pairs = i.size
    return float((dx * dy).sum() / math.sqrt((pairs - np.count_nonzero(dx == 0)) * (pairs - np.count_nonzero(dy == 0))))


def signed_rank_p(x: np.ndarray) -> float:
    """Two-sided exact Wilcoxon signed-rank p-value of ``x`` against 0.

    Zeros are left out (Wilcoxon's convention); ties share their mid-rank. The null distribution is
    that of the rank sum under every one of the 2^n sign patterns, counted exactly by convolution
    (doubled mid-ranks are integers), so ties and zeros keep the test exact: scipy.stats.wilcoxon
    gives the same value (its exact distribution without ties, its permutation test with them, up
    to 13 values; above that it switches to the normal approximation, this does not).
    """
    x = np.asarray(x, dtype=float)
    x = x[x != 0]
    n = x.size
    if n == 0:
        return 1.0
    ranks2 = np.rint(2 * stats.rankdata(np.abs(x))).astype(np.int64)
    total = int(ranks2.sum())
    counts = np.zeros(total + 1)
    counts[0] = 1.0
    for r in ranks2:  # the distribution of the (doubled) positive rank sum, one value at a time
        counts[r:] = counts[r:] + counts[:-r]  # the right side is a new array: no overlap
    observed = int(ranks2[x > 0].sum())
    sums = np.arange(total + 1)
    # Doubled rank sums are integers and the null is symmetric about total / 2, so "as far from the
    # centre" is an exact integer comparison.
    extreme = np.abs(2 * sums - total) >= abs(2 * observed - total)
    return float(min(1.0, counts[extreme].sum() / counts.sum()))


def sign_test_p(positive: int, negative: int) -> float:
    """Two-sided exact sign test: ``positive`` successes in ``positive + negative`` trials at 1/2."""
    n = positive + negative
    if n == 0:
        return 1.0
    k = min(positive, negative)
    tail = sum(math.comb(n, i) for i in range(k + 1))
    return float(min(1.0, 2 * tail / 2 ** n))


@dataclass(frozen=True)
class KLGapResult:
    """The per-fit table of :func:`kl_vs_ece_gap` and its KL-gap correlations.

    :attr:`across_folds` is the test to read (Kendall's tau within each fold, tested across
    folds). The pooled correlations below treat every (fold, alpha) fit as an independent point;
    the fits of a fold share its rows, so their p-values are too small (on the reproduction's
    KITTI XGBoost fits the pooled Kendall p is 0.019 against 0.17 across folds). They are kept
    as descriptions and for old callers, not for deciding anything.

    Attributes
    ----------
    table : pandas.DataFrame
        One row per (fold, alpha), columns :data:`KL_GAP_COLUMNS`; ``bound`` is Corollary 1 with
        n = n_re, B = floor(n_re^(1/3)) and the row's KL.
    pearson_r, pearson_p : float
        Pooled Pearson's correlation between ``kl`` and ``gap`` over all fits and its two-sided
        p-value (scipy.stats.pearsonr; too small, see above).
    kendall_tau, kendall_p : float
        Pooled Kendall's tau-b and its p-value (scipy.stats.kendalltau; too small, see above).
    n_re, n_bins : int
        Recalibration (and test-subset) size and the number of bins used on both sides.
    objective : str
        The registry name of the method fitted ("pbr", "pbr_total", ...).
    eps : float
        Confidence parameter of the Corollary 1 bound.
    batched : bool
        Whether the fits were made as one batch (``kl_vs_ece_gap(batched=...)``).
    """

    table: pd.DataFrame
    pearson_r: float
    pearson_p: float
    kendall_tau: float
    kendall_p: float
    n_re: int
    n_bins: int
    objective: str
    eps: float = 0.05
    batched: bool = False

    @classmethod
    def from_table(cls, table: pd.DataFrame, objective: str = "pbr", eps: float = 0.05,
                   batched: bool = False) -> "KLGapResult":
        """Correlations of a (possibly partial, e.g. cancelled) table; rows with NaN KL or gap are left out."""
        ok = table.dropna(subset=["kl", "gap"])
        r, rp, tau, tp = _correlations(ok["kl"].to_numpy(float), ok["gap"].to_numpy(float))
        n_re = int(table["n_re"].iloc[0]) if len(table) else 0
        return cls(table=table, pearson_r=r, pearson_p=rp, kendall_tau=tau, kendall_p=tp, n_re=n_re,
                   n_bins=optimal_n_bins(n_re) if n_re else 0, objective=objective, eps=eps, batched=bool(batched))

    @cached_property
    def across_folds(self) -> FoldKendall:
        """Kendall's tau within each fold, tested across folds (:func:`fold_kendall`)."""
        return fold_kendall(self.table)

    def correlations(self) -> pd.DataFrame:
        """The two pooled correlations as a small table: rows pearson / kendall, columns statistic,
        p_value, n (p-values too small: see the class docstring and :attr:`across_folds`)."""
        n = int(self.table.dropna(subset=["kl", "gap"]).shape[0])
        return pd.DataFrame(
            {"statistic": [self.pearson_r, self.kendall_tau], "p_value": [self.pearson_p, self.kendall_p], "n": [n, n]},
            index=pd.Index(["pearson", "kendall"], name="correlation"),
        )


def _correlations(kl: np.ndarray, gap: np.ndarray) -> tuple[float, float, float, float]:
    if kl.shape[0] < 3:
        warnings.warn(f"KL-gap correlations need at least 3 fits, but got {kl.shape[0]}; they are NaN.",
                      RuntimeWarning, stacklevel=3)
        return (math.nan,) * 4
    if np.ptp(kl) == 0 or np.ptp(gap) == 0:
        which = "KL" if np.ptp(kl) == 0 else "ECE gap"
        warnings.warn(f"The {which} is the same in every fit, so its correlations are undefined (NaN).",
                      RuntimeWarning, stacklevel=3)
        return (math.nan,) * 4
    pearson = stats.pearsonr(kl, gap)
    kendall = stats.kendalltau(kl, gap)
    return float(pearson[0]), float(pearson[1]), float(kendall[0]), float(kendall[1])


def kl_vs_ece_gap(
    preds: Predictions,
    alphas: Sequence[float] = PAPER_ALPHAS,
    objective: str = "pbr",
    n_re: int = 1000,
    n_folds: int = 10,
    seed: int = 0,
    progress: Progress | None = None,
    cancel: CancelCallback | None = None,
    *,
    eps: float = 0.05,
    binary_ece: BinaryECE = DEFAULT_BINARY_ECE,
    on_error: OnError = "raise",
    warm_start: bool = False,
    folds: Sequence[int] | None = None,
    n_jobs: int = 1,
    batched: bool | str = "auto",
    **pbr_params: Any,
) -> KLGapResult:
    """Fit PBR for each alpha on each fold and relate its KL to the ECE generalisation gap (Section 6.1).

    Fold f draws the permutation of :func:`split_indices`: its first ``n_re`` rows are the
    recalibration set, its last ``n_re`` rows the test subset (disjoint; needs 2 n_re <= n).
    Every alpha sees the same rows in a fold.

    Parameters
    ----------
    preds : Predictions
        Full probability (or logit) vectors and labels.
    alphas : sequence of float
        KL weights (paper: {0, 0.01, 0.1, 0.25, 0.5, 0.75, 0.9, 1.0}).
    objective : str
        Registry name of a method that takes ``alpha`` and exposes ``kl_`` after fitting
        ("pbr" is Eq. vi_obj2 of the paper, "pbr_total" Eq. vi_obj3; "_app" variants predict with
        the mean approximation).
    n_re : int
        Recalibration set size = test subset size (paper: 1000).
    n_folds, seed : int
        Number of random splits (paper: 10) and their seed.
    progress, cancel : callables, optional
        As in :func:`compare`; ``total = n_folds * len(alphas)``; :class:`Cancelled` carries the
        partial table (``KLGapResult.from_table(exc.partial)`` gives its correlations).
    eps : float
        Confidence parameter of the Corollary 1 bound in the ``bound`` column.
    binary_ece, on_error
        As in :func:`compare`.
    warm_start : bool, default False
        False (the paper's protocol): every fit from the prior. True: within a fold, fit the
        alphas in ascending order, each fit continuing from the previous alpha's solution
        (:meth:`~pbr_core.recalibrators.gp.PBR.fit_continued`; the fold's smallest alpha, and any
        fit after a failed one, start from the prior), 1.8x cheaper at K = 100 but not the paper's
        fits: a continued fit stays in the valley it starts from (objectives up to 6 % higher or
        lower than from the prior, and on DenseNet-121's first two folds Pearson's r of KL
        against the gap .20 instead of .51; benchmarks/RESULTS_fast_pbr.md), so the figure of the
        paper is drawn from cold fits. The table's rows keep the order of ``alphas`` either way;
        ``fit_seconds`` is each fit's own time.
    folds : sequence of int or None
        Which folds to run (indices; ``n_folds`` is then ignored). None: folds 0 .. n_folds-1.
        A fold's split depends only on (n, seed, fold), so a long study can be run in pieces (one
        (fold, alpha) at a time, resumed later) and its rows equal those of one full run.
    n_jobs : int, default 1
        Folds fitted at the same time, each in a worker process (:mod:`pbr_core.parallel`; -1: one
        per available core). The rows are the same numbers as with 1 (each fit is seeded by its
        own parameters); only ``fit_seconds`` differs. Worth it from a few folds of GP fits on: a
        worker pays 1-2 CPU s to import torch. Warnings of fits in workers are re-issued here.
    batched : bool or "auto", default "auto"
        True: every (fold, alpha) fit in one batched GP model (:func:`pbr_core.gp.batch.fit_batch`),
        the same Adam fits as one after another (element-wise Adam; equal up to float rounding), in
        far fewer launches: on one H200 the paper's 80 fits of a CIFAR-100 network took 15.8 s
        batched against ~151 s one after another (benchmarks/RESULTS_gp.md). Needs
        ``optimizer="adam"`` and a PBR-family GP method, not ``warm_start`` or ``n_jobs`` > 1;
        ``fit_seconds`` is the batch's time shared equally. Where one GP of the batch needs more
        jitter, every GP gets it (those rows then differ slightly from the fits alone). When the
        batch fails (a GP fails its training check even after the recovery, say), a warning says
        so and the fits are made one after another instead, each with ``on_error`` as usual: a
        batch never fails a study that the fits alone would finish. "auto":
        batched when the fits are Adam on a GPU (``device`` resolving to CUDA), else one after
        another (on a CPU batching does not pay). With the default L-BFGS, never batched.
    **pbr_params
        Further constructor parameters of the method (e.g. ``n_inducing=10``, ``device="cpu"``).

    Returns
    -------
    KLGapResult

    References
    ----------
    Fujisawa & Futami (ICML 2025), Section 6.1, Corollary 1 (Eq. pac-re) and Appendix F.
    """
    preds = check_predictions(preds)
    alphas = [float(a) for a in (alphas if np.ndim(alphas) else [alphas])]
    if not alphas:
        raise ValueError("Expected at least one value in `alphas`, but got none.")
    if any(not math.isfinite(a) or a < 0 for a in alphas):
        raise ValueError(f"Expected every alpha to be a finite number >= 0, but got {alphas}.")
    template = get_recalibrator(objective, alpha=alphas[0], **pbr_params)  # fail fast on bad names/params
    if pbr_params.get("prior_split"):
        # The gap compares ECEs on n_re rows each (Corollary 1: n_te = n_re); a prior split bounds
        # fewer rows, so the study's sizes would no longer match the corollary.
        raise ValueError("kl_vs_ece_gap does not take `prior_split`: its bound column compares n_re recalibration "
                         "rows with n_re test rows (Corollary 1 assumes equal sizes); fit with prior_split directly "
                         "to get a bound valid as stated.")
    check_int("n_re", n_re, 2)
    if 2 * n_re > preds.n:
        raise ValueError(
            f"The ECE gap uses a recalibration set and a disjoint test subset of n_re rows each, so it needs "
            f"2 * n_re <= n, but n_re={n_re} and the predictions have n={preds.n} rows."
        )
    if not isinstance(warm_start, (bool, np.bool_)):
        raise ValueError(f"Expected argument `warm_start` to be True or False, but got {warm_start!r}.")
    warn_small_test_set(n_re)  # the test subset has n_re rows; the Generalization page refuses it
    n_bins = optimal_n_bins(n_re)
    folds = list(iter_folds(n_folds)) if folds is None else check_folds(folds)
    n_jobs = check_n_jobs(n_jobs)
    runner = Runner(total=len(folds) * len(alphas), columns=KL_GAP_COLUMNS, progress=progress, cancel=cancel)
    splits = [split_indices(preds.n, n_re, fold=fold, seed=seed, n_te=n_re) for fold in folds]
    score = _GapScore(tuple(splits), tuple(folds), int(n_re), n_bins, float(eps), binary_ece, objective)
    if _use_batch(batched, objective, alphas, pbr_params, warm_start, n_jobs):
        with runner.fitting():
            if _batched_rows(preds, template, alphas, splits, folds, score, runner):
                return KLGapResult.from_table(runner.table(), objective=objective, eps=eps, batched=True)
    # Rows keep (fold, position in `alphas`) order, however the folds' fits interleave or finish.
    with runner.fitting():
        fit_grid(preds, template, alphas, [re_idx for re_idx, _ in splits], score,
                 lambda j, i, row: runner.put((j, i), row, _what(objective, alphas[i], folds[j], folds)),
                 warm_start=bool(warm_start), on_error="raise" if on_error == "raise" else "warn", n_jobs=n_jobs,
                 names=[fold_label(fold, folds) for fold in folds], prefix=f"{objective} ")
    return KLGapResult.from_table(runner.table(), objective=objective, eps=eps)


def _use_batch(batched: bool | str, objective: str, alphas: list[float], params: dict[str, Any], warm_start: bool,
               n_jobs: int) -> bool:
    """Whether :func:`kl_vs_ece_gap` fits as one batch; a ValueError names what ``batched=True`` lacks."""
    if isinstance(batched, np.bool_):
        batched = bool(batched)
    if not (isinstance(batched, bool) or (isinstance(batched, str) and batched == "auto")):
        raise ValueError(f"Expected argument `batched` to be True, False or 'auto', but got {batched!r}.")
    if batched is False:
        return False
    rec = get_recalibrator(objective, alpha=alphas[0], **params)
    missing = [why for why, bad in (
        (f"a PBR-family GP method (got {objective!r})", not hasattr(rec, "_spec") or getattr(rec, "objective", "") == "gp"),
        (f"optimizer='adam' (got {getattr(rec, 'optimizer', None)!r}): a batched fit is always Adam",
         getattr(rec, "optimizer", None) != "adam"),
        ("warm_start=False (a batched fit starts every GP at its prior)", warm_start),
        (f"n_jobs=1 (got {n_jobs}): the batch is one process", n_jobs != 1),
    ) if bad]
    if batched == "auto":
        if missing:
            return False
        from pbr_core.gp.device import resolve_device

        return resolve_device(rec.device).type == "cuda"
    if missing:
        raise ValueError("kl_vs_ece_gap(batched=True) needs " + "; ".join(missing) + ".")
    return True


def _what(objective: str, alpha: float, fold: int, folds: Sequence[int]) -> str:
    """How progress and messages name one fit of the study: "pbr alpha=0.5, fold 2/10"."""
    return f"{objective} alpha={alpha:g}, {fold_label(fold, folds)}"


def _batched_rows(preds: Predictions, template: Any, alphas: list[float], splits: list[tuple[np.ndarray, np.ndarray]],
                  folds: list[int], score: "_GapScore", runner: Runner) -> bool:
    """Every (fold, alpha) of :func:`kl_vs_ece_gap` in one batched fit (:func:`pbr_core.gp.grid.fit_grid_batched`),
    each row as the fit alone makes it. False (with a warning, no row added) when the batched fit
    failed: the caller fits one by one."""
    objective = score.objective
    n_pairs = len(folds) * len(alphas)
    runner.check_cancel()

    def on_iteration(it: int, max_it: int, message: str = "") -> None:
        if runner.progress is not None:
            runner.progress(0, runner.total, f"batched fit of {n_pairs} GPs, iteration {it}")

    what = f"{objective}, batched fit of {n_pairs} GPs ({len(alphas)} alpha x {len(folds)} folds)"
    try:
        rows = fit_grid_batched(preds, template, alphas, [re_idx for re_idx, _ in splits], score,
                                progress=on_iteration)
    except Cancelled:
        raise
    except Exception as exc:  # noqa: BLE001 - said, then the fits one by one (each with on_error)
        warnings.warn(f"The {what} failed ({type(exc).__name__}: {exc}); fitting them one after another instead.",
                      RuntimeWarning, stacklevel=3)
        return False
    for j, i, row in rows:
        runner.put((j, i), row, _what(objective, alphas[i], folds[j], folds))
    return True


@dataclass(frozen=True)
class _GapScore:
    """The study's scorer (:data:`pbr_core.gp.grid.Scorer`): one row of :data:`KL_GAP_COLUMNS` for a fit
    on a fold's recalibration rows: its KL, the ECE there and on the fold's test subset (B =
    floor(n_re^(1/3)) on both sides), the gap, and Corollary 1's bound for the KL."""

    splits: tuple[tuple[np.ndarray, np.ndarray], ...]
    folds: tuple[int, ...]
    n_re: int
    n_bins: int
    eps: float
    binary_ece: str
    objective: str

    def __call__(self, fit: GridFit, preds: Predictions) -> dict[str, Any]:
        re_idx, te_idx = self.splits[fit.fold]
        row: dict[str, Any] = {"alpha": fit.alpha, "fold": self.folds[fit.fold], "n_re": self.n_re,
                               "n_bins": self.n_bins, "kl": math.nan, "ece_re": math.nan, "ece_te": math.nan,
                               "gap": math.nan, "bound": math.nan, "fit_seconds": fit.seconds, "error": fit.error}
        if fit.error is not None:
            return row
        if math.isnan(fit.kl):
            raise ValueError(f"Method {self.objective!r} exposes no `kl_` after fitting, so it cannot be used for "
                             "the KL-gap study.")
        fit_set, test_set = preds.subset(re_idx), preds.subset(te_idx)
        ece_re = measured_ece(fit.predict_proba(fit_set), fit_set.labels, fit_set.kind, self.binary_ece,
                              n_bins=self.n_bins)
        ece_te = measured_ece(fit.predict_proba(test_set), test_set.labels, test_set.kind, self.binary_ece,
                              n_bins=self.n_bins)
        # n_bins is floor(n_re^(1/3)) = fit_bounds' B, as n = n_re.
        row.update(kl=fit.kl, ece_re=ece_re, ece_te=ece_te, gap=abs(ece_te - ece_re),
                   bound=fit_bounds(fit_set.n, fit.kl, eps=self.eps)["corollary1"])
        return row
