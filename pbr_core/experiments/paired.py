"""Paired tests over folds: does method A really differ from method B, or is it fold-to-fold noise?

The comparison protocol (:func:`~pbr_core.experiments.compare`) fits every method on the same
random splits, so each fold gives one difference d_f = metric(A, fold f) - metric(B, fold f).
:func:`paired_tests` reports, per pair of methods, the mean difference with a t confidence
interval and three p-values for "the two methods have the same expected metric":

* **paired t-test** (``scipy.stats.ttest_rel``): assumes the F differences are independent draws
  from one normal distribution. With 10 folds normality cannot be checked and matters (one
  outlying fold moves the mean and inflates the std).
* **Wilcoxon signed-rank test** (``scipy.stats.wilcoxon``, exact null distribution for F <= 50
  without ties): assumes independent differences, symmetric about their median; no normality. It
  tests the median (pseudo-median) difference, and with F = 10 its smallest possible two-sided
  p-value is 2 / 2^10 = 0.002. Folds with a difference of exactly 0 are dropped (scipy's
  default ``zero_method="wilcox"``).
* **corrected resampled t-test** (Nadeau & Bengio, 2003): both tests above assume independent
  folds, but the folds here are random splits of ONE data set: their recalibration and test sets
  overlap, so fold differences are positively correlated and both p-values are too small. The
  correction replaces the variance factor 1/F by 1/F + n_te/n_re (needs ``n_re`` and ``n_te``
  columns). It is a heuristic (derived for overlapping training sets) and conservative here.

**The interval** of the mean difference is the one that matches the deciding test: with ``n_re``
and ``n_te``, mean ± t_{F-1} · sd · sqrt(1/F + n_te/n_re), the corrected test's interval; without
them, the plain t interval mean ± t_{F-1} · sd / sqrt(F) (folds assumed independent, too narrow
for overlapping folds). ``folds_assumed_independent`` says which. In :func:`paired_tests` the
intervals of a family of m pairs hold together (Bonferroni: each at level 1 - (1 - confidence)/m,
``ci_pairs`` = m), so an interval that leaves out 0 always comes with a Holm-corrected
``decisive_p`` below 1 - ``confidence``: a pair's interval never says "different" beside a verdict of
"no difference shown" (before, each pair's own interval did, when its p was below 0.05 before the
correction). The converse is not exact: Holm's step-down is less strict than Bonferroni for all
but the smallest p, so a verdict can stand with its interval just reaching 0.

All three say how surprising the observed differences would be if A and B were equally good;
none says how large a difference matters. Read the interval for that.

**Which test decides** (``better``, and the green "best" cell through :func:`shown_best`): a
claim "A is better than B" is about new data, so it must allow for the overlap of the folds. When
the table has ``n_re`` and ``n_te`` (the protocol's tables do), a pair's own p-value ``pair_p`` is
the corrected resampled t-test's. Each row of a table is its own claim, so ``pair_p`` is corrected
with Holm's step-down method over a family of pairs, per metric and within each group of
``group_by``: ``decisive_p``, the p-value the verdict uses (``holm_pairs``: the family's size). The
family is the pairs asked for; for the default pairs it is EVERY pair of the group's methods,
because the pairs against the best mean are chosen after looking at the data (Holm over the shown
pairs alone let four equally good methods produce a winner in 6.6 % of simulated data sets at the
5 % level). ``better`` names the winner when ``decisive_p`` < ``level``, the Wilcoxon test agrees
(its own p < ``level``), and the mean difference is not 0.

Why Wilcoxon must agree, and not the plain t-test: the plain t-test's p-value is always below the
corrected one (variance factor 1/F < 1/F + n_te/n_re), so it never changes a verdict. The Wilcoxon
test can: it keeps one fold far from the others from carrying a normal-theory claim, and with
fewer than :func:`min_paired_folds` folds it can never fall below the level, so such runs never
name a winner. It is not Holm-corrected (the corrected test already is, and every extra condition
only makes fewer claims), so a family of many pairs does not hit its floor of 2/2^F. In the
simulations below it never overruled the corrected test.

Without ``n_re`` / ``n_te`` (a table from elsewhere) the corrected test cannot be run: ``pair_p``
is the plain t-test's, still Holm-corrected and with Wilcoxon agreeing, and
``folds_assumed_independent`` is True: wherever such a verdict is shown, say that the folds were
assumed independent.

Measured with known truth (tests/test_paired.py: one data set of 600 rows per simulation, per-row
losses of A and B exchangeable, 10 random splits into n_re = n_te = 300 as the protocol makes
them, 400 simulations): the old rule (plain t-test and Wilcoxon both below 0.05) called one of two
equally good methods better in 49 % of the data sets; this rule in 4.5 %, at the 5 % level. With
four equally good methods, some row of the default table named a winner in 89 % of 150 data sets
under the old rule, 5.3 % under this one. A real difference of 0.1 in per-row loss (about 0.12
standard deviations of the per-row differences) is still found in 88.5 % of 200 data sets.

References
----------
C. Nadeau and Y. Bengio. Inference for the generalization error. Machine Learning 52, 2003.
"""

from __future__ import annotations

import math
import warnings
from typing import Sequence

import numpy as np
import pandas as pd
from scipy import stats

from pbr_core.experiments.summary import HIGHER_IS_BETTER
from pbr_core.groups import holm

__all__ = ["MIN_PAIRED_FOLDS", "PAIRED_COLUMNS", "TEST_NAMES", "default_pairs", "min_paired_folds", "paired_test",
           "infinite_nll_verdict", "paired_tests", "shown_best", "too_few_folds", "verdict_kind"]

#: Columns of :func:`paired_tests` after the grouping keys.
PAIRED_COLUMNS = (
    "metric", "a", "b", "n_folds", "mean_a", "mean_b", "mean_diff", "ci_low", "ci_high", "confidence",
    "ci_pairs", "t_statistic", "t_p", "wilcoxon_statistic", "wilcoxon_p", "corrected_t_p", "pair_p", "decisive_p",
    "holm_pairs", "folds_assumed_independent", "a_better_folds", "better", "a_infinite_folds", "b_infinite_folds",
)

#: The per-fold column that counts, for the NLL, the test rows given a probability that counts as 0 for
#: what happened (:func:`pbr_core.metrics.nll_infinite_rows`): above 0, that fold's NLL is infinite and
#: its ``nll`` a number set by the floor.
INFINITE_COLUMN = {"nll": "nll_infinite_rows"}

#: How the tests are named wherever their p-values are shown.
TEST_NAMES = {
    "t_p": "paired t-test",
    "wilcoxon_p": "Wilcoxon signed-rank test",
    "corrected_t_p": "corrected resampled t-test (Nadeau & Bengio)",
    "pair_p": "the pair's own p-value of the deciding test (the corrected t-test; the plain one without n_re, n_te)",
    "decisive_p": "the p-value the verdict uses: pair_p after Holm's correction over the pairs tested",
}


def min_paired_folds(level: float = 0.05) -> int:
    """The fewest folds with which the paired tests can show a difference at ``level``.

    A difference is shown only when the Wilcoxon signed-rank test agrees (p < ``level``, a condition
    of :func:`paired_tests`' ``better`` and of :func:`shown_best`). Its smallest two-sided p-value over F folds is 2 / 2^F (every
    difference of one sign), so with fewer folds it can never fall below ``level``, whatever the
    data: at 0.05, 5 folds give at least 0.0625 and 6 folds 0.031. Running the tests with fewer folds
    can only say "no difference shown", which reads like a finding. (The deciding test, the corrected
    t-test, has no such floor, but it is Holm-corrected and less powerful: more folds help it too.)
    """
    if not 0 < level < 1:
        raise ValueError(f"Expected argument `level` in (0, 1), but got {level!r}.")
    folds = 2
    while 2.0 / 2.0**folds >= level:
        folds += 1
    return folds


#: :func:`min_paired_folds` at the 5 % level: 6 folds. With fewer, the front ends run no paired test
#: and highlight no "best" method (:func:`shown_best`), and say why (:func:`too_few_folds`).
MIN_PAIRED_FOLDS = min_paired_folds(0.05)


def too_few_folds(n_folds: int, level: float = 0.05) -> str | None:
    """Why paired tests over ``n_folds`` folds cannot show any difference, in one sentence; None when
    they can (at least :func:`min_paired_folds` folds)."""
    need = min_paired_folds(level)
    if n_folds >= need:
        return None
    smallest = 2.0 / 2.0 ** max(int(n_folds), 1)
    return (f"With {n_folds} fold{'s' if n_folds != 1 else ''} no difference between methods can be shown: the "
            f"Wilcoxon signed-rank test's smallest possible p-value is 2/2^{n_folds} = {smallest:.3g}, not below "
            f"{level:g}, whatever the results. Run at least {need} folds to test differences and name a best method.")


def shown_best(table: pd.DataFrame, metric: str = "ece", *, level: float = 0.05,
               reference: str = "uncalibrated") -> str | None:
    """The method that the folds show to be the best in ``metric``, or None when they do not.

    "Best" is a claim, so it needs the paired tests' support, not only the lowest mean (highest for
    accuracy): the method with the best mean is returned only when, against EVERY other method with
    results, its paired test gives ``pair_p`` < ``level`` in its favour, the Wilcoxon test agreeing
    (the same tests as :func:`paired_tests`' ``better``: the corrected resampled t-test for
    overlapping folds), over at least :func:`min_paired_folds` folds. Otherwise None: too
    few folds, or a difference to some method within the fold-to-fold noise.

    No correction for the number of methods is needed here, unlike ``better``'s Holm correction
    over a table's rows: "better than every other" is ONE claim, an intersection of the pairwise
    claims, and it is false only when some method k is at least as good; it is then made only if the
    test of (best, k) rejects, which happens with probability at most ``level`` (intersection-union
    test). Each row of a paired table, in contrast, is a claim of its own. So a green cell can stand
    next to a table row vs the best whose Holm-corrected ``decisive_p`` is not below ``level``.

    Simulated with known truth (tests/test_paired.py, 600-row binary files, n_re = 300, 10 folds):
    on perfectly calibrated predictions, where no recalibrator is better than none, the lowest mean
    ECE picked one of temperature, Platt or isotonic in 5 of 20 files, this rule in 0 of 20; with
    outcomes 15 points above the predictions it named Platt scaling in 8 of 10 (the old rule, with
    the plain t-test, 10 of 10). With four equally good methods on overlapping folds (per-row
    losses exchangeable) it named one best in 1 of 150 data sets.

    ``table`` is a per-fold table (:func:`~pbr_core.experiments.compare`), failed fits (an ``error``)
    left out.
    """
    ok = table[table["error"].isna()] if "error" in table else table
    ok = ok[ok[metric].notna()]
    methods = list(dict.fromkeys(ok["method"]))
    if len(methods) < 2 or ok["fold"].nunique() < min_paired_folds(level):
        return None
    means = _means(ok, metric)
    if not np.isfinite(means).any():
        return None
    best = means.idxmax() if metric in HIGHER_IS_BETTER else means.idxmin()
    tests = paired_tests(ok, metric, [(best, m) for m in methods if m != best], level=level, reference=reference)
    if (tests["n_folds"] < min_paired_folds(level)).any():
        return None
    # Each pair at ``level``, uncorrected (intersection-union, above): ``better`` is Holm-corrected.
    wins = (tests["mean_diff"] > 0) if metric in HIGHER_IS_BETTER else (tests["mean_diff"] < 0)
    # A method whose NLL is infinite on some fold loses to one finite on every fold without a test.
    finite_win = (tests["b_infinite_folds"] > 0) & (tests["a_infinite_folds"] == 0)
    return best if (((tests["pair_p"] < level) & (tests["wilcoxon_p"] < level) & wins) | finite_win).all() else None


def _means(table: pd.DataFrame, metric: str) -> pd.Series:
    """Each method's mean ``metric`` over its folds, infinite for a method whose NLL is infinite on
    some fold (:data:`INFINITE_COLUMN`): its floored mean would rank it by the floor."""
    means = table.groupby("method", sort=False)[metric].mean()
    infinite = _infinite_folds(table, metric)
    if infinite.size:
        hit = infinite.any(axis=0)
        means[hit[hit].index.intersection(means.index)] = math.inf
    return means


def paired_test(a: Sequence[float], b: Sequence[float], confidence: float = 0.95,
                test_fraction: float | None = None) -> dict[str, float]:
    """The paired tests of one pair of per-fold values ``a[f]``, ``b[f]`` (see the module docstring).

    Parameters
    ----------
    a, b : sequences of float, same length F >= 2
        The metric of method A and of method B on the same folds, in the same order.
    confidence : float
        Level of the interval of the mean difference.
    test_fraction : float, optional
        n_te / n_re of the folds, for the corrected resampled t-test (NaN when None).

    Returns
    -------
    dict
        ``n_folds, mean_diff, ci_low, ci_high, t_statistic, t_p, wilcoxon_statistic, wilcoxon_p,
        corrected_t_p``. The interval is the corrected test's, mean ± t_{F-1} · sd · sqrt(1/F +
        ``test_fraction``), when ``test_fraction`` is given (it excludes 0 exactly when
        ``corrected_t_p`` < 1 - ``confidence``), else scipy's t interval (folds assumed
        independent). When every difference is exactly 0 the interval is [0, 0] and every p-value
        is 1 (no evidence of any difference); otherwise scipy's values, unchanged.

    Examples
    --------
    >>> r = paired_test([.02, .03, .025, .04], [.03, .04, .03, .05])
    >>> round(r["mean_diff"], 4), round(r["t_p"], 4), r["wilcoxon_p"]
    (-0.0088, 0.006, 0.125)
    """
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    if a.shape != b.shape or a.ndim != 1:
        raise ValueError(f"Expected two 1-D arrays of the same length, but got shapes {a.shape} and {b.shape}.")
    if not 0 < confidence < 1:
        raise ValueError(f"Expected argument `confidence` in (0, 1), but got {confidence!r}.")
    if a.size < 2:
        raise ValueError(f"A paired test needs at least 2 folds, but got {a.size}.")
    if not (np.all(np.isfinite(a)) and np.all(np.isfinite(b))):
        raise ValueError("Expected finite metric values on every fold (drop the failed folds first).")
    d = a - b
    n = d.size
    out = {"n_folds": int(n), "mean_diff": float(d.mean())}
    if np.all(d == 0):
        return {**out, "ci_low": 0.0, "ci_high": 0.0, "t_statistic": 0.0, "t_p": 1.0, "wilcoxon_statistic": 0.0,
                "wilcoxon_p": 1.0, "corrected_t_p": 1.0}
    with warnings.catch_warnings():
        # Equal differences on every fold (std 0, d != 0): scipy warns and returns an infinite t; keep its values.
        warnings.simplefilter("ignore", RuntimeWarning)
        t = stats.ttest_rel(a, b)
        w = stats.wilcoxon(a, b)
    low, high = _interval(d, confidence, test_fraction)
    corrected = math.nan if test_fraction is None else _corrected_p(d, test_fraction)
    return {**out, "ci_low": low, "ci_high": high, "t_statistic": float(t.statistic),
            "t_p": float(t.pvalue), "wilcoxon_statistic": float(w.statistic), "wilcoxon_p": float(w.pvalue),
            "corrected_t_p": corrected}


def _interval(d: np.ndarray, confidence: float, test_fraction: float | None) -> tuple[float, float]:
    """The interval of the mean of fold differences ``d`` that matches the test deciding on them.

    With ``test_fraction`` (n_te / n_re) the corrected test's, mean ± t_{F-1} · sd · sqrt(1/F +
    test_fraction): the plain one treats overlapping folds as independent and is too narrow (it
    excluded 0 where the corrected p was 0.081, a user audit). Without, the plain t interval.
    [0, 0] when every difference is 0.
    """
    n = d.size
    if np.all(d == 0):
        return 0.0, 0.0
    factor = 1.0 / n if test_fraction is None else 1.0 / n + float(test_fraction)
    q = float(stats.t.ppf(0.5 + confidence / 2.0, n - 1))
    half = q * float(d.std(ddof=1)) * math.sqrt(factor)
    return float(d.mean()) - half, float(d.mean()) + half


def _corrected_p(d: np.ndarray, test_fraction: float) -> float:
    """The corrected resampled t-test's p-value of fold differences ``d`` (not all 0)."""
    n = d.size
    sd = float(d.std(ddof=1))
    if sd == 0:
        return 0.0
    t_c = d.mean() / (sd * math.sqrt(1.0 / n + float(test_fraction)))
    return float(2.0 * stats.t.sf(abs(t_c), n - 1))


def default_pairs(table: pd.DataFrame, metric: str = "ece", reference: str = "uncalibrated") -> list[tuple[str, str]]:
    """Each method against ``reference`` (when present) and against the method with the best mean.

    The best is the lowest mean of ``metric`` (highest for accuracy) over the table's rows; a pair
    is listed once, in the order (method, reference) or (method, best).
    """
    means = _means(table, metric).dropna()
    methods = list(means.index)
    if not methods:
        return []
    best = means.idxmax() if metric in HIGHER_IS_BETTER else means.idxmin()
    pairs: list[tuple[str, str]] = []
    seen: set[frozenset[str]] = set()
    for other in ([reference] if reference in methods else []) + [best]:
        for m in methods:
            key = frozenset((m, other))
            if m != other and key not in seen:
                seen.add(key)
                pairs.append((m, other))
    return pairs


def paired_tests(table: pd.DataFrame, metric: str = "ece", pairs: Sequence[tuple[str, str]] | None = None,
                 *, group_by: Sequence[str] = (), confidence: float = 0.95, level: float = 0.05,
                 reference: str = "uncalibrated", holm_family: str | None = None) -> pd.DataFrame:
    """Paired tests over folds for pairs of methods of a per-fold table (see the module docstring).

    Parameters
    ----------
    table : pandas.DataFrame
        A per-fold table with columns ``method``, ``fold`` and ``metric`` (e.g. from
        :func:`~pbr_core.experiments.compare`). ``n_re`` and ``n_te`` columns, when present, give the
        corrected resampled t-test.
    metric : str
        The column compared (default ``"ece"``).
    pairs : sequence of (A, B), optional
        The pairs to test, A - B. Default: :func:`default_pairs` (each method against
        ``reference`` and against the best mean) within each group.
    group_by : sequence of str
        Columns tested separately (e.g. ``["model"]`` or ``["n_re"]``): methods are paired only
        within a group.
    confidence : float
        Joint level of the intervals of the mean difference of a family of pairs (default 0.95):
        each at 1 - (1 - confidence) / ``ci_pairs``.
    level : float
        Significance level of the ``better`` column (default 0.05), after Holm's correction over
        the pairs of each group.
    reference : str
        The baseline of the default pairs.
    holm_family : {None, "all"}
        The family of Holm's correction. None: the pairs asked for (``pairs``), or every pair of the
        group's methods for the default pairs. ``"all"``: every pair of the group's methods whatever
        ``pairs`` is: for a pair picked after seeing the results (a dashboard's pair picker), whose
        ``decisive_p`` and ``better`` are then those of the same pair in the default table.

    Returns
    -------
    pandas.DataFrame
        One row per (group, pair): the group keys, then :data:`PAIRED_COLUMNS`: the folds where both
        methods have a finite value (``n_folds``), both means, ``mean_diff`` = mean of A - B with its
        interval (``ci_low``, ``ci_high``; the ``ci_pairs`` intervals of the family hold together at
        ``confidence``, Bonferroni), the t statistic and p-value, the Wilcoxon statistic and
        p-value, the corrected p-value (NaN without ``n_re`` / ``n_te``), ``pair_p`` (the corrected
        p-value; the plain t-test's when there is none; the interval is that test's), ``decisive_p``
        (``pair_p`` after Holm's
        correction over the family of pairs), ``holm_pairs`` (the family's size),
        ``folds_assumed_independent`` (True where no corrected test could be run), the folds on
        which A is better than B, and ``better``: the name of the better method when ``decisive_p``
        < ``level``, the Wilcoxon p < ``level`` and the mean difference is not 0, else None ("no
        difference shown"). See the module docstring for why this test decides. ``a_infinite_folds``,
        ``b_infinite_folds``: for the NLL, the paired folds where A's (B's) NLL is infinite (a test row
        given a probability of 0, or below the floor 2.2e-16, for what happened: the per-fold
        ``nll_infinite_rows``). Above 0, no test is run (p-values and interval NaN, out of Holm's
        family), the means are the floored numbers, and ``better`` is the method finite on every fold
        (None when both are infinite somewhere): :func:`infinite_nll_verdict` says it in words.

    Examples
    --------
    >>> t = pd.DataFrame({"method": ["a"] * 4 + ["b"] * 4, "fold": [0, 1, 2, 3] * 2,
    ...                   "ece": [.02, .03, .025, .04, .03, .04, .03, .05]})
    >>> paired_tests(t, pairs=[("a", "b")])[["a", "b", "n_folds", "better"]]
       a  b  n_folds better
    0  a  b        4   None
    """
    if not isinstance(table, pd.DataFrame):
        raise TypeError(f"Expected a pandas DataFrame, but got {type(table).__name__}.")
    group_by = list(group_by)
    needed = ["method", "fold", metric, *group_by]
    missing = [c for c in needed if c not in table.columns]
    if missing:
        raise ValueError(f"Columns {missing} are not in the table (columns: {list(table.columns)}).")
    if not 0 < level < 1:
        raise ValueError(f"Expected argument `level` in (0, 1), but got {level!r}.")
    if holm_family not in (None, "all"):
        raise ValueError(f"Expected argument `holm_family` None or 'all', but got {holm_family!r}.")
    lower_better = metric not in HIGHER_IS_BETTER
    rows = []
    groups = table.groupby(group_by, sort=False) if group_by else [((), table)]
    for key, part in groups:
        key = key if isinstance(key, tuple) else (key,)
        known = set(part["method"])
        todo = default_pairs(part, metric, reference) if pairs is None else [tuple(p) for p in pairs]
        for a, b in todo:
            unknown = [m for m in (a, b) if m not in known]
            if unknown:
                raise ValueError(f"Methods {unknown} are not in the table{_where(group_by, key)} "
                                 f"(methods: {sorted(known)}).")
            if a == b:
                raise ValueError(f"A pair needs two different methods, but got ({a!r}, {b!r}).")
        wide_all = part.pivot_table(index="fold", columns="method", values=metric, aggfunc="first", dropna=False)
        infinite = _infinite_folds(part, metric)
        sizes = _fold_sizes(part)
        group_rows, wides = [], []
        for a, b in todo:
            wide = wide_all.reindex(columns=[a, b]).dropna()
            inf_a, inf_b = (int(infinite.reindex(index=wide.index, columns=[m]).fillna(False).to_numpy().sum())
                            for m in (a, b))
            wides.append(wide)
            row = dict(zip(group_by, key))
            row.update(metric=metric, a=a, b=b, mean_a=float(wide[a].mean()) if len(wide) else math.nan,
                       mean_b=float(wide[b].mean()) if len(wide) else math.nan, confidence=confidence)
            row.update(_pair_row(wide, a, b, sizes, confidence, lower_better) if not (inf_a or inf_b)
                       else _infinite_row(wide, a, inf_a, b, inf_b))
            # The NLL is infinite on some folds: the means stay the floored numbers (JSON-safe, as the
            # library's ``nll``) beside these counts, which every front end reads first.
            row.update(a_infinite_folds=inf_a, b_infinite_folds=inf_b)
            group_rows.append(row)
        # Every row is its own claim: Holm over the family of pairs. The default pairs against the best
        # mean are chosen after looking at the data, so their family is every pair of the group's
        # methods (Holm over the pairs shown alone falsely named a winner among 4 equally good methods
        # in 6.6 % of 1000 simulated data sets at the 5 % level; over every pair, 3.4 %).
        # A pair picked after seeing the results (holm_family="all") is as chosen as the default ones:
        # Holm over a family of its own would announce a winner that the default table rejects.
        everything = pairs is None or holm_family == "all"
        family = _family(group_rows, _all_pairs(wide_all) if everything else todo, wide_all, sizes, infinite)
        adjusted = dict(zip(family, holm(list(family.values()))))
        m = int(sum(np.isfinite(list(family.values()))))
        for r, wide in zip(group_rows, wides):
            p = adjusted.get(frozenset((r["a"], r["b"])), math.nan)
            r["decisive_p"], r["holm_pairs"] = float(p), m
            # The interval holds for the whole family at once (Bonferroni: each at 1 - (1 - confidence)/m),
            # so it cannot leave out 0 while the verdict's Holm-corrected p says "no difference shown":
            # leaving out 0 means pair_p < (1 - confidence)/m, hence decisive_p <= m * pair_p < 1 - confidence.
            # Each pair's own interval left out 0 beside "no difference shown" (an audit of the paired table).
            r["ci_pairs"] = max(m, 1)
            if r["a_infinite_folds"] or r["b_infinite_folds"]:  # no test, no interval: read without one
                r["better"] = _infinite_better(r)
                continue
            if r["n_folds"] >= 2 and m > 1:
                d = wide[r["a"]].to_numpy() - wide[r["b"]].to_numpy()
                r["ci_low"], r["ci_high"] = _interval(d, 1.0 - (1.0 - confidence) / m,
                                                      None if r["folds_assumed_independent"]
                                                      else _test_fraction(sizes, wide.index))
            # The Wilcoxon test must agree (p < level): one fold far from the others cannot carry a
            # normal-theory claim, and fewer than min_paired_folds folds never name a winner.
            shown = p < level and r["wilcoxon_p"] < level and r["mean_diff"] != 0
            a_wins = (r["mean_diff"] < 0) == lower_better
            r["better"] = (r["a"] if a_wins else r["b"]) if shown else None
        rows += group_rows
    out = pd.DataFrame(rows, columns=[*group_by, *PAIRED_COLUMNS])
    # None (not NaN, which is truthy) where no method is shown better, whatever dtype pandas infers.
    out["better"] = pd.Series([b if isinstance(b, str) else None for b in out["better"]], index=out.index, dtype=object)
    return out


def verdict_kind(better: str | None, decisive_p: float, wilcoxon_p: float, level: float = 0.05,
                 a_infinite_folds: int = 0, b_infinite_folds: int = 0) -> str:
    """Which verdict a row of :func:`paired_tests` gives, for the front ends' words: ``"better"`` (a
    method is named), ``"wilcoxon_disagrees"`` (``decisive_p`` is below ``level`` but the Wilcoxon
    test is not, so no method is named) or ``"no_difference"``.

    >>> verdict_kind(None, 0.01, 0.08)
    'wilcoxon_disagrees'

    Where the NLL of one method or both is infinite on some folds (``a_infinite_folds``,
    ``b_infinite_folds``), no test is read: ``"infinite"`` (one side only: the finite one is named
    better) or ``"both_infinite"``.
    """
    if a_infinite_folds or b_infinite_folds:
        return "both_infinite" if a_infinite_folds and b_infinite_folds else "infinite"
    if isinstance(better, str) and better:
        return "better"
    if decisive_p == decisive_p and decisive_p < level and not wilcoxon_p < level:
        return "wilcoxon_disagrees"
    return "no_difference"


def _pair_row(wide: pd.DataFrame, a: str, b: str, sizes: pd.DataFrame | None, confidence: float,
              lower_better: bool) -> dict:
    """One pair's tests on its paired folds ``wide`` (columns a, b), ``pair_p`` included."""
    if len(wide) < 2:
        return dict(n_folds=len(wide), mean_diff=math.nan, ci_low=math.nan, ci_high=math.nan, t_statistic=math.nan,
                    t_p=math.nan, wilcoxon_statistic=math.nan, wilcoxon_p=math.nan, corrected_t_p=math.nan,
                    pair_p=math.nan, folds_assumed_independent=False, a_better_folds=0)
    row = paired_test(wide[a].to_numpy(), wide[b].to_numpy(), confidence, _test_fraction(sizes, wide.index))
    diff = wide[a].to_numpy() - wide[b].to_numpy()
    row["a_better_folds"] = int(np.sum(diff < 0) if lower_better else np.sum(diff > 0))
    independent = math.isnan(row["corrected_t_p"])
    row["folds_assumed_independent"] = independent
    row["pair_p"] = row["t_p"] if independent else row["corrected_t_p"]
    return row


def _infinite_folds(part: pd.DataFrame, metric: str) -> pd.DataFrame:
    """fold x method: True where ``metric`` is infinite on that fold (the NLL of a fold where a test row
    was given a probability that counts as 0 for what happened: :data:`INFINITE_COLUMN`); all False
    for other metrics and for tables without the count."""
    column = INFINITE_COLUMN.get(metric)
    if column is None or column not in part.columns:
        return pd.DataFrame(index=pd.Index([], name="fold"))
    flags = part.assign(_inf=part[column].fillna(0) > 0)
    return flags.pivot_table(index="fold", columns="method", values="_inf", aggfunc="max", fill_value=False)


def _infinite_row(wide: pd.DataFrame, a: str, inf_a: int, b: str, inf_b: int) -> dict:
    """A pair where the NLL of one method or both is infinite on some folds: no test is run (the
    numbers there are set by the floor, not by the data). ``mean_diff`` is the floored numbers'
    difference, kept for JSON beside ``a_infinite_folds`` / ``b_infinite_folds``: the true one is
    infinite (undefined when both are), and the front ends say so."""
    diff = float((wide[a] - wide[b]).mean()) if len(wide) else math.nan
    return dict(n_folds=len(wide), mean_diff=diff, ci_low=math.nan, ci_high=math.nan, t_statistic=math.nan,
                t_p=math.nan, wilcoxon_statistic=math.nan, wilcoxon_p=math.nan, corrected_t_p=math.nan,
                pair_p=math.nan, folds_assumed_independent=False,
                a_better_folds=int(np.sum(wide[a].to_numpy() < wide[b].to_numpy())))


def _infinite_better(row: dict) -> str | None:
    """The verdict of a pair whose NLL is infinite on some folds, read without a test: the method
    whose NLL is finite on every fold is better than one that gave an outcome that happened a
    probability of 0 on some held-out row (its NLL there is infinite: no finite loss is worse). Both
    infinite somewhere: None (the floor would decide, not the data)."""
    if row["a_infinite_folds"] and row["b_infinite_folds"]:
        return None
    return row["b"] if row["a_infinite_folds"] else row["a"]


def infinite_nll_verdict(a: str, a_folds: int, b: str, b_folds: int, folds: int) -> str:
    """The verdict of a pair whose NLL is infinite on some folds (a held-out row was given a probability
    of 0, or below the floor of 2.2e-16, for what happened), read without a test: the folds' numbers are
    set by the floor, not by the data. A method finite on every fold is better than one infinite on some.

    >>> infinite_nll_verdict("Temperature scaling", 0, "Uncalibrated", 2, 10)
    "Temperature scaling better: Uncalibrated's NLL is infinite on 2 of 10 folds (it gave outcomes that happened a probability of 0), Temperature scaling's is finite on every fold; no test is needed"
    """
    if a_folds and b_folds:
        return (f"no test: both NLLs are infinite on some folds ({a} on {a_folds}, {b} on {b_folds} of {folds}: "
                "each gave outcomes that happened a probability of 0), so neither can be called better")
    worse, k, good = (a, a_folds, b) if a_folds else (b, b_folds, a)
    return (f"{good} better: {worse}'s NLL is infinite on {k} of {folds} folds (it gave outcomes that happened a "
            f"probability of 0), {good}'s is finite on every fold; no test is needed")


def _all_pairs(wide_all: pd.DataFrame) -> list[tuple[str, str]]:
    methods = [m for m in wide_all.columns if wide_all[m].notna().any()]
    return [(m, o) for i, m in enumerate(methods) for o in methods[i + 1:]]


def _family(rows: list[dict], pairs: Sequence[tuple[str, str]], wide_all: pd.DataFrame,
            sizes: pd.DataFrame | None, infinite: pd.DataFrame) -> dict[frozenset, float]:
    """pair -> pair_p over Holm's family ``pairs`` (each unordered pair once), reusing ``rows``' tests.
    A pair with an infinite NLL on some fold has no test (NaN), so it is not counted in the family."""
    known = {frozenset((r["a"], r["b"])): r["pair_p"] for r in rows}
    family: dict[frozenset, float] = {}
    for a, b in pairs:
        k = frozenset((a, b))
        if k not in family:
            # A pair in the family but not shown: the same tests as a shown row (its interval unused).
            folds = wide_all.reindex(columns=[a, b]).dropna()
            if k not in known and bool(infinite.reindex(index=folds.index, columns=[a, b]).fillna(False).any(axis=None)):
                family[k] = math.nan
                continue
            family[k] = known[k] if k in known else _pair_row(folds, a, b, sizes, 0.95, True)["pair_p"]
    return family


def _fold_sizes(part: pd.DataFrame) -> pd.DataFrame | None:
    """The distinct (fold, n_re, n_te) of a group, once for all its pairs; None without those columns."""
    if "n_re" not in part.columns or "n_te" not in part.columns:
        return None
    return part[["fold", "n_re", "n_te"]].dropna().drop_duplicates()


def _test_fraction(fold_sizes: pd.DataFrame | None, folds: pd.Index) -> float | None:
    """n_te / n_re of the paired folds (the corrected test's factor), or None when not one value."""
    if fold_sizes is None:
        return None
    sizes = fold_sizes[fold_sizes["fold"].isin(folds)][["n_re", "n_te"]].drop_duplicates()
    if len(sizes) != 1:
        return None
    n_re, n_te = float(sizes["n_re"].iloc[0]), float(sizes["n_te"].iloc[0])
    return n_te / n_re if n_re > 0 else None


def _where(group_by: list[str], key: tuple) -> str:
    return "" if not group_by else " for " + ", ".join(f"{k} = {v}" for k, v in zip(group_by, key))
