"""Mean and standard deviation over folds, as the paper reports them (Table 1: "mean ± std").

:func:`summarize` gives a tidy table (one row per group and metric, with a ``best`` flag);
:func:`summary_table` turns it into the display form (one row per method, "mean ± std" cells) and
:func:`best_mask` into the matching boolean table for highlighting the best value per column.
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np
import pandas as pd

from pbr_core.evaluation import METRICS

__all__ = ["HIGHER_IS_BETTER", "LOWER_IS_BETTER", "best_mask", "summarize", "summary_table"]

#: Metrics where a smaller mean is better (used for the ``best`` flag): from :data:`pbr_core.evaluation.METRICS`.
LOWER_IS_BETTER = frozenset(m.name for m in METRICS.values() if not m.higher_is_better)
#: Metrics where a larger mean is better.
HIGHER_IS_BETTER = frozenset(m.name for m in METRICS.values() if m.higher_is_better)
_GROUP_KEYS = ("method", "alpha", "n_re")


def _default_by(table: pd.DataFrame) -> list[str]:
    by = [k for k in ("method", "alpha") if k in table.columns]
    # n_re is a grouping key only where it varies (the n_re sweep), not in a plain comparison.
    if "n_re" in table.columns and table["n_re"].nunique() > 1:
        by.append("n_re")
    if not by:
        raise ValueError(f"Cannot tell how to group this table: it has none of the columns {list(_GROUP_KEYS)}.")
    return by


def summarize(table: pd.DataFrame, metrics: Sequence[str] | None = None, by: Sequence[str] | None = None,
              ddof: int = 1) -> pd.DataFrame:
    """Mean and standard deviation over folds of each metric, per method (paper Table 1).

    Parameters
    ----------
    table : pandas.DataFrame
        A per-fold table from :func:`compare`, :func:`n_re_sweep` or :func:`kl_vs_ece_gap` (``.table``).
    metrics : sequence of str, optional
        Columns to summarise. Default: the known metric columns present in ``table`` that are not
        all NaN (so ``kl`` disappears when no method exposes one).
    by : sequence of str, optional
        Grouping columns. Default: ``method`` (and ``alpha``) plus ``n_re`` when it varies.
    ddof : int
        Delta degrees of freedom of the std (1: the sample std, as ``DataFrame.groupby().std()``).

    Returns
    -------
    pandas.DataFrame
        Tidy: one row per (group, metric) with columns ``*by, metric, mean, std, n`` (non-NaN folds)
        and ``best``: True where the mean is the best of its column (lowest, or highest for
        accuracy) among the methods compared at the same other keys (e.g. the same ``n_re``);
        ties are all best. NaN means are never best.

    See Also
    --------
    pbr_core.experiments.paired_tests : whether the best mean is better than another method beyond
        the fold-to-fold spread (paired t-test, Wilcoxon signed-rank, corrected t-test over folds).
        ``best`` only marks the lowest mean.

    Examples
    --------
    >>> import pandas as pd
    >>> t = pd.DataFrame({"method": ["a", "a", "b", "b"], "fold": [0, 1, 0, 1], "ece": [.1, .3, .1, .1]})
    >>> summarize(t)[["method", "metric", "mean", "std", "best"]]
      method metric  mean       std   best
    0      a    ece   0.2  0.141421  False
    1      b    ece   0.1  0.000000   True
    """
    if not isinstance(table, pd.DataFrame):
        raise TypeError(f"Expected a pandas DataFrame, but got {type(table).__name__}.")
    by = list(by) if by is not None else _default_by(table)
    missing = [c for c in by if c not in table.columns]
    if missing:
        raise ValueError(f"Grouping columns {missing} are not in the table (columns: {list(table.columns)}).")
    if metrics is None:
        metrics = [m for m in METRICS if m in table.columns and m not in by and table[m].notna().any()]
    else:
        metrics = list(metrics)
        missing = [m for m in metrics if m not in table.columns]
        if missing:
            raise ValueError(f"Metrics {missing} are not in the table (columns: {list(table.columns)}).")
    if table.empty or not metrics:
        return pd.DataFrame(columns=[*by, "metric", "mean", "std", "n", "best"])

    grouped = table.groupby(by, sort=False)[metrics]
    parts = []
    for stat, frame in (("mean", grouped.mean()), ("std", grouped.std(ddof=ddof)), ("n", grouped.count())):
        parts.append(frame.melt(ignore_index=False, var_name="metric", value_name=stat).set_index("metric", append=True))
    tidy = pd.concat(parts, axis=1).reset_index()
    tidy["n"] = tidy["n"].astype(int)
    tidy["infinite_folds"] = _infinite_folds(table, tidy, by)
    tidy["best"] = _best_flags(tidy, by)
    return tidy


def _infinite_folds(table: pd.DataFrame, tidy: pd.DataFrame, by: list[str]) -> np.ndarray:
    """Per row of the tidy summary: the folds on which its metric is infinite. Only the NLL can be, on a
    fold where a test row was given a probability that counts as 0 for what happened (the per-fold
    ``nll_infinite_rows``, :func:`pbr_core.metrics.nll_infinite_rows`): its mean and std are then those
    of numbers set by the floor, which the display form shows as "infinite", never as a mean."""
    out = np.zeros(len(tidy), dtype=np.int64)
    if "nll_infinite_rows" not in table.columns or not (tidy["metric"] == "nll").any():
        return out
    hit = (table["nll_infinite_rows"].fillna(0) > 0).groupby([table[k] for k in by], sort=False).sum()
    for i in np.flatnonzero((tidy["metric"] == "nll").to_numpy()):
        key = tuple(tidy.iloc[i][k] for k in by)
        out[i] = int(hit.get(key if len(by) > 1 else key[0], 0))
    return out


def _best_flags(tidy: pd.DataFrame, by: list[str]) -> pd.Series:
    # Compare methods against each other at equal values of the other keys (e.g. per n_re).
    peers = [k for k in by if k != "method"] if "method" in by else []
    keys = [*peers, "metric"]
    sign = tidy["metric"].map(lambda m: -1.0 if m in HIGHER_IS_BETTER else 1.0)
    score = (tidy["mean"] * sign).where(tidy["infinite_folds"] == 0)  # an infinite NLL is never best
    best_score = score.groupby([tidy[k] for k in keys], sort=False).transform("min")
    directional = tidy["metric"].isin(LOWER_IS_BETTER | HIGHER_IS_BETTER)
    return (directional & score.notna() & np.isclose(score, best_score, rtol=0.0, atol=0.0)).astype(bool)


def _wide(summary: pd.DataFrame, values: str) -> pd.DataFrame:
    by = list(summary.columns[: summary.columns.get_loc("metric")])  # summarize puts the keys first
    metrics = list(dict.fromkeys(summary["metric"]))
    groups = list(dict.fromkeys(map(tuple, summary[by].itertuples(index=False))))
    wide = summary.set_index([*by, "metric"])[values].unstack("metric")
    wide = wide.reindex(index=pd.MultiIndex.from_tuples(groups, names=by) if len(by) > 1 else
                        pd.Index([g[0] for g in groups], name=by[0]), columns=metrics)
    wide.columns.name = None
    return wide


def summary_table(summary: pd.DataFrame, precision: int = 4) -> pd.DataFrame:
    """Display form of :func:`summarize`: one row per method, one "mean ± std" string per metric.

    A metric with a single fold shows its mean only; a metric the method does not have shows "–".
    Accepts a per-fold table too (it is summarised first).
    """
    if "metric" not in summary.columns:
        summary = summarize(summary)
    text = summary.apply(lambda r: _format(r["mean"], r["std"], precision, int(r.get("infinite_folds", 0) or 0),
                                           int(r["n"])), axis=1)
    return _wide(summary.assign(text=text), "text")


def best_mask(summary: pd.DataFrame) -> pd.DataFrame:
    """Booleans with the shape of :func:`summary_table`: True where the mean is the column's best."""
    if "metric" not in summary.columns:
        summary = summarize(summary)
    return _wide(summary, "best").fillna(False).astype(bool)


def _format(mean: float, std: float, precision: int, infinite_folds: int = 0, n: int = 0) -> str:
    if infinite_folds:  # the NLL is infinite on these folds: a mean of floored numbers would hide it
        return f"infinite (on {infinite_folds} of {n} folds)"
    if mean is None or (isinstance(mean, float) and math.isnan(mean)):
        return "–"
    if std is None or (isinstance(std, float) and math.isnan(std)):
        return f"{mean:.{precision}f}"
    return f"{mean:.{precision}f} ± {std:.{precision}f}"
