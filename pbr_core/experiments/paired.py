"""Paired tests over folds: does method A really differ from method B, or is it fold-to-fold noise?

The comparison protocol (:func:`~pbr_core.experiments.compare`) fits every method on the same
random splits, so each fold gives one difference d_f = metric(A, fold f) - metric(B, fold f).
:func:`paired_tests` reports, per pair of methods, the mean difference with a t confidence
interval and three p-values for "the two methods have the same expected metric":

* **paired t-test** (``scipy.stats.ttest_rel``): assumes the F differences are independent draws
  from one normal distribution. With 10 folds normality cannot be checked and matters (one
  outlying fold moves the mean and inflates the std); the interval of the mean difference is the
  matching t interval.
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

All three say how surprising the observed differences would be if A and B were equally good on
this data; none says how large a difference matters. Read the interval for that.

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

__all__ = ["MIN_PAIRED_FOLDS", "PAIRED_COLUMNS", "TEST_NAMES", "default_pairs", "min_paired_folds", "paired_test",
           "paired_tests", "shown_best", "too_few_folds"]

#: Columns of :func:`paired_tests` after the grouping keys.
PAIRED_COLUMNS = (
    "metric", "a", "b", "n_folds", "mean_a", "mean_b", "mean_diff", "ci_low", "ci_high", "confidence",
    "t_statistic", "t_p", "wilcoxon_statistic", "wilcoxon_p", "corrected_t_p", "a_better_folds", "better",
)

#: How the tests are named wherever their p-values are shown.
TEST_NAMES = {
    "t_p": "paired t-test",
    "wilcoxon_p": "Wilcoxon signed-rank test",
    "corrected_t_p": "corrected resampled t-test (Nadeau & Bengio)",
}


def min_paired_folds(level: float = 0.05) -> int:
    """The fewest folds with which the paired tests can show a difference at ``level``.

    A difference is shown only when both the t-test and the Wilcoxon signed-rank test give
    p < ``level`` (:func:`paired_tests`' ``better``). The Wilcoxon test's smallest two-sided p-value
    over F folds is 2 / 2^F (every difference of one sign), so with fewer folds it can never fall
    below ``level``, whatever the data: at 0.05, 5 folds give at least 0.0625 and 6 folds 0.031.
    Running the tests with fewer folds can only say "no difference shown", which reads like a finding.
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
    accuracy): the method with the best mean is returned only when :func:`paired_tests` shows it
    better (``better``: both the t-test and the Wilcoxon test at p < ``level``) than EVERY other
    method with results, over at least :func:`min_paired_folds` folds. Otherwise None: too few
    folds, or a difference to some method within the fold-to-fold noise. Simulated with known truth
    (tests/test_paired.py, 600-row binary files, n_re = 300, 10 folds): on perfectly calibrated
    predictions, where no recalibrator is better than none, the lowest mean ECE picked one of
    temperature, Platt or isotonic in 5 of 20 files, this rule in 0 of 20 (it named the uncalibrated
    model in 2); with outcomes 15 points above the predictions it named Platt scaling in 10 of 10.

    ``table`` is a per-fold table (:func:`~pbr_core.experiments.compare`), failed fits (an ``error``)
    left out.
    """
    ok = table[table["error"].isna()] if "error" in table else table
    ok = ok[ok[metric].notna()]
    methods = list(dict.fromkeys(ok["method"]))
    if len(methods) < 2 or ok["fold"].nunique() < min_paired_folds(level):
        return None
    means = ok.groupby("method", sort=False)[metric].mean()
    best = means.idxmax() if metric in HIGHER_IS_BETTER else means.idxmin()
    tests = paired_tests(ok, metric, [(best, m) for m in methods if m != best], level=level, reference=reference)
    if (tests["n_folds"] < min_paired_folds(level)).any():
        return None
    return best if (tests["better"] == best).all() else None


def paired_test(a: Sequence[float], b: Sequence[float], confidence: float = 0.95,
                test_fraction: float | None = None) -> dict[str, float]:
    """The paired tests of one pair of per-fold values ``a[f]``, ``b[f]`` (see the module docstring).

    Parameters
    ----------
    a, b : sequences of float, same length F >= 2
        The metric of method A and of method B on the same folds, in the same order.
    confidence : float
        Level of the t interval of the mean difference.
    test_fraction : float, optional
        n_te / n_re of the folds, for the corrected resampled t-test (NaN when None).

    Returns
    -------
    dict
        ``n_folds, mean_diff, ci_low, ci_high, t_statistic, t_p, wilcoxon_statistic, wilcoxon_p,
        corrected_t_p``. When every difference is exactly 0 the interval is [0, 0] and every
        p-value is 1 (no evidence of any difference); otherwise scipy's values, unchanged.

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
        ci = t.confidence_interval(confidence)
        w = stats.wilcoxon(a, b)
    corrected = math.nan
    if test_fraction is not None:
        sd = float(d.std(ddof=1))
        if sd > 0:
            t_c = d.mean() / (sd * math.sqrt(1.0 / n + float(test_fraction)))
            corrected = float(2.0 * stats.t.sf(abs(t_c), n - 1))
        else:
            corrected = 0.0
    return {**out, "ci_low": float(ci.low), "ci_high": float(ci.high), "t_statistic": float(t.statistic),
            "t_p": float(t.pvalue), "wilcoxon_statistic": float(w.statistic), "wilcoxon_p": float(w.pvalue),
            "corrected_t_p": corrected}


def default_pairs(table: pd.DataFrame, metric: str = "ece", reference: str = "uncalibrated") -> list[tuple[str, str]]:
    """Each method against ``reference`` (when present) and against the method with the best mean.

    The best is the lowest mean of ``metric`` (highest for accuracy) over the table's rows; a pair
    is listed once, in the order (method, reference) or (method, best).
    """
    means = table.groupby("method", sort=False)[metric].mean().dropna()
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
                 reference: str = "uncalibrated") -> pd.DataFrame:
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
        Level of the interval of the mean difference (default 0.95).
    level : float
        Significance level of the ``better`` column (default 0.05).
    reference : str
        The baseline of the default pairs.

    Returns
    -------
    pandas.DataFrame
        One row per (group, pair): the group keys, then :data:`PAIRED_COLUMNS`: the folds where both
        methods have a finite value (``n_folds``), both means, ``mean_diff`` = mean of A - B with its
        interval (``ci_low``, ``ci_high``), the t statistic and p-value, the Wilcoxon statistic and
        p-value, the corrected p-value (NaN without ``n_re`` / ``n_te``), the folds on which A is
        better than B, and ``better``: the name of the better method when BOTH the t-test and the
        Wilcoxon test give p < ``level``, else None ("no difference shown").

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
            wide = (part[part["method"].isin([a, b])].pivot_table(index="fold", columns="method", values=metric,
                                                                    aggfunc="first", dropna=False)
                    .reindex(columns=[a, b]).dropna())
            row = dict(zip(group_by, key))
            row.update(metric=metric, a=a, b=b, mean_a=float(wide[a].mean()) if len(wide) else math.nan,
                       mean_b=float(wide[b].mean()) if len(wide) else math.nan, confidence=confidence)
            if len(wide) < 2:
                row.update(n_folds=len(wide), mean_diff=math.nan, ci_low=math.nan, ci_high=math.nan,
                           t_statistic=math.nan, t_p=math.nan, wilcoxon_statistic=math.nan, wilcoxon_p=math.nan,
                           corrected_t_p=math.nan, a_better_folds=0, better=None)
                rows.append(row)
                continue
            row.update(paired_test(wide[a].to_numpy(), wide[b].to_numpy(), confidence,
                                   _test_fraction(part, wide.index)))
            diff = wide[a].to_numpy() - wide[b].to_numpy()
            row["a_better_folds"] = int(np.sum(diff < 0) if lower_better else np.sum(diff > 0))
            shown = max(row["t_p"], row["wilcoxon_p"]) < level and row["mean_diff"] != 0
            a_wins = (row["mean_diff"] < 0) == lower_better
            row["better"] = (a if a_wins else b) if shown else None
            rows.append(row)
    out = pd.DataFrame(rows, columns=[*group_by, *PAIRED_COLUMNS])
    # None (not NaN, which is truthy) where no method is shown better, whatever dtype pandas infers.
    out["better"] = pd.Series([b if isinstance(b, str) else None for b in out["better"]], index=out.index, dtype=object)
    return out


def _test_fraction(part: pd.DataFrame, folds: pd.Index) -> float | None:
    """n_te / n_re of the paired folds (the corrected test's factor), or None when not one value."""
    if "n_re" not in part.columns or "n_te" not in part.columns:
        return None
    sizes = part[part["fold"].isin(folds)][["n_re", "n_te"]].dropna().drop_duplicates()
    if len(sizes) != 1:
        return None
    n_re, n_te = float(sizes["n_re"].iloc[0]), float(sizes["n_te"].iloc[0])
    return n_te / n_re if n_re > 0 else None


def _where(group_by: list[str], key: tuple) -> str:
    return "" if not group_by else " for " + ", ".join(f"{k} = {v}" for k, v in zip(group_by, key))
