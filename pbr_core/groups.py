"""Calibration by group: is the model calibrated for everyone, not only on average?

:func:`calibration_by_group` takes the predictions and one or two grouping columns (a segment, a
demographic attribute, the true class, or a date bucketed by day, week or month) and returns, per
group: n, the base rate or accuracy, the paper's ECE with its bootstrap interval, the MCE, the Brier
score, and a statistical test of calibration with a p-value corrected for the number of groups;
plus each group's reliability-diagram table and the largest gap in ECE between two groups with an
interval.

The test is Spiegelhalter's z-test (Spiegelhalter 1986, "Probabilistic prediction in patient
management and clinical trials"): z = sum_i (y_i - p_i)(1 - 2 p_i) / sqrt(sum_i (1 - 2 p_i)^2
p_i (1 - p_i)), standard normal when the probabilities p_i are calibrated. It needs no bins (the
Hosmer-Lemeshow test's result changes with the binning, the very choice the paper studies), works
from a few dozen rows, and is established in the clinical-prediction literature. It tests
calibration through the Brier score's decomposition, so it can miss miscalibration that cancels
out across confidence levels; read it next to the ECE and the diagram. The p-values are corrected
with Holm's method (family-wise error, valid whatever the dependence between groups).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal, Sequence

import numpy as np
import pandas as pd

from pbr_core import metrics as M
from pbr_core.metrics import BinaryTarget
from pbr_core.predictions import Predictions

Target = BinaryTarget
Bucket = Literal["day", "week", "month"]

#: Groups with fewer rows are flagged: their reliability diagram has floor(n^(1/3)) <= 4 bins of
#: ~25 rows or fewer, too few to read, and their ECE is dominated by its estimation bias.
MIN_ROWS = 100
#: More groups than this are refused: a column with a value per row or nearly (an id, a timestamp
#: not bucketed) gives groups of a few rows whose ECE is noise, a table nobody can read, and, on a
#: streamed dataset, per-group bootstrap sums that grow with the number of groups.
MAX_GROUPS = 1000

__all__ = ["GroupReport", "MAX_GROUPS", "MIN_ROWS", "bucket_dates", "calibration_by_group", "check_group_count",
           "group_keys", "holm", "spiegelhalter_z"]


def spiegelhalter_z(p: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """Spiegelhalter's z statistic and its two-sided p-value for probabilities ``p`` of 0/1 outcomes ``y``."""
    p = np.asarray(p, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    return spiegelhalter_from_sums(float(np.sum((y - p) * (1 - 2 * p))), float(np.sum((1 - 2 * p) ** 2 * p * (1 - p))))


def spiegelhalter_from_sums(numerator: float, variance: float) -> tuple[float, float]:
    """Spiegelhalter's z and two-sided p-value from sum (y - p)(1 - 2p) and sum (1 - 2p)^2 p (1 - p),
    sums that add up over batches (:mod:`pbr_core.stream`)."""
    from scipy.stats import norm

    if variance <= 0:  # every p is 0, 1/2 or 1: the statistic is undefined
        return float("nan"), float("nan")
    z = float(numerator / np.sqrt(variance))
    return z, float(2 * norm.sf(abs(z)))


def holm(p_values: Sequence[float]) -> np.ndarray:
    """Holm's step-down adjustment of p-values (NaN stays NaN and is not counted)."""
    p = np.asarray(p_values, dtype=np.float64)
    out = np.full(p.shape, np.nan)
    ok = np.flatnonzero(np.isfinite(p))
    if ok.size == 0:
        return out
    order = ok[np.argsort(p[ok], kind="stable")]
    m = order.size
    adjusted = np.maximum.accumulate(np.minimum((m - np.arange(m)) * p[order], 1.0))
    out[order] = adjusted
    return out


def bucket_dates(values: pd.Series | np.ndarray, every: Bucket = "week") -> pd.Series:
    """Dates (or text that parses as dates) as the start of their day, week (Monday) or month, as text
    ``YYYY-MM-DD``, for calibration over time. Values that are not dates are an error naming the first."""
    s = pd.Series(values)
    if every not in ("day", "week", "month"):
        raise ValueError(f"Expected argument `every` to be 'day', 'week' or 'month', but got {every!r}")
    if pd.api.types.is_datetime64_any_dtype(s.dtype) and not isinstance(s.dtype, pd.ArrowDtype):
        parsed = s
    else:  # text, or Arrow dates / timestamps (the loader keeps date columns as Arrow dates)
        text = not (isinstance(s.dtype, pd.ArrowDtype) or pd.api.types.is_datetime64_any_dtype(s.dtype))
        parsed = _parse_dates(s.astype(object).where(s.notna(), None), text)
    bad = parsed.isna() & s.notna()
    if bad.any():
        r = int(np.flatnonzero(bad.to_numpy())[0])
        raise ValueError(f"value {str(s.iloc[r])!r} at row {r} is not a date.")
    suffix = ""
    tz = getattr(parsed.dt, "tz", None)
    if tz is not None:  # the wall-clock date in the column's own time zone; a UTC column says so
        suffix = " (UTC)" if str(tz) in ("UTC", "utc", "+00:00") else ""
        parsed = parsed.dt.tz_localize(None)
    freq = {"day": "D", "week": "W-SUN", "month": "M"}[every]
    starts = parsed.dt.to_period(freq).dt.start_time
    return (starts.dt.strftime("%Y-%m-%d") + suffix).where(parsed.notna(), other="(no date)")


#: A UTC offset or zone letter at the end of a written date-time ("...T21:00:00-05:00", "...Z").
_OFFSET_RE = re.compile(r"(?<=\d)\s*(?:Z|UTC|GMT|[+-]\d{2}:?\d{2})$", re.IGNORECASE)
_SLASH_DATE_RE = re.compile(r"^(\d{1,2})[/.](\d{1,2})[/.]\d{2,4}\b")


def _parse_dates(objects: pd.Series, text: bool) -> pd.Series:
    """Dates of a column (NaT where a value is not one). Written text is read as written: a UTC
    offset is dropped (the day is the one written, not UTC's), ISO dates (2024-03-10) as ISO, the
    others (12/03/2024) day-first where the column shows it (dateutil's day-first would also read
    2024-03-10 as 3 October)."""
    if not text:
        return pd.to_datetime(objects, errors="coerce", format="mixed")
    objects = objects.map(lambda v: _OFFSET_RE.sub("", v.strip()) if isinstance(v, str) else v)
    iso = objects.map(lambda v: isinstance(v, str) and bool(_ISO_DATE_RE.match(v))).to_numpy(dtype=bool)
    parsed = pd.Series(pd.NaT, index=objects.index, dtype="datetime64[ns]")
    if iso.any():
        parsed[iso] = pd.to_datetime(objects[iso], errors="coerce", format="ISO8601")
    if (~iso).any():
        rest = objects[~iso]
        parsed[~iso] = pd.to_datetime(rest, errors="coerce", format="mixed", dayfirst=_day_first(rest))
    return parsed


_ISO_DATE_RE = re.compile(r"^\d{4}-\d{2}-\d{2}")


def _day_first(values: pd.Series) -> bool:
    """Whether dates written as a/b/yyyy are day-first: some first number above 12 (16/03/2024).
    Both orders in one column (16/03/2024 and 03/16/2024) are an error, not a guess per value."""
    firsts, seconds = [], []
    for v in values.dropna().head(10_000):
        if not isinstance(v, str):
            continue
        m = _SLASH_DATE_RE.match(v.strip())
        if m:
            firsts.append(int(m.group(1)))
            seconds.append(int(m.group(2)))
    day_first = any(a > 12 for a in firsts)
    if day_first and any(b > 12 for b in seconds):
        raise ValueError("the dates are written both day-first (e.g. 16/03/2024) and month-first (03/16/2024); "
                         "write them one way, e.g. as 2024-03-16.")
    return day_first


@dataclass
class GroupReport:
    """What :func:`calibration_by_group` found; ``table`` has one row per group, largest first."""

    table: pd.DataFrame
    diagrams: dict[str, pd.DataFrame]      # group -> reliability_diagram table (its own B)
    by: list[str]                          # what the groups are
    target: Target                         # what is calibrated
    largest_gap: dict[str, float | str] = field(default_factory=dict)
    test: str = "Spiegelhalter's z-test, Holm-corrected over the groups"
    level: float = 0.95
    #: How each group's ECE interval was obtained (the streamed pass uses the Poisson bootstrap).
    interval: str = "bootstrap interval"

    @property
    def small(self) -> list[str]:
        return self.table.loc[self.table["too_small"], "group"].tolist()


def _inputs(preds: Predictions, target: Target) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """(confidence or p(y=1), outcome, probability matrix for the Brier score or None)."""
    conf, out = M.confidence_and_outcome(*M.ece_inputs(*preds.metric_inputs(),
                                                       target if preds.kind == "binary" else "top_label"))
    return conf, out, preds.probs


def group_keys(preds: Predictions, by: Sequence[str] | str, every: Bucket | None = None) -> tuple[np.ndarray, list[str]]:
    """The group of every row (text; two columns joined with ' × ') and the column names used."""
    names = by_names(by)
    parts, dates = [], []
    for name in names:
        if name == "true class":
            parts.append(class_keys(preds))
            continue
        if preds.metadata is None or name not in preds.metadata.columns:
            have = [] if preds.metadata is None else list(preds.metadata.columns)
            raise ValueError(f"no column {name!r} to group by; the file's other columns are {have or 'none'} "
                             "(or 'true class').")
        col = preds.metadata[name]
        dated = every is not None and is_date_column(col)
        dates.append(dated)
        parts.append(column_keys(col, every, dated))
    check_every(every, names, dates)
    return join_keys(parts), names


def check_every(every: Bucket | None, names: Sequence[str], dates: Sequence[bool]) -> None:
    """``every`` buckets dates: an error when none of the columns grouped by holds dates (it would be
    ignored without a word)."""
    if every is not None and not any(dates):
        shown = ", ".join(repr(n) for n in names)
        raise ValueError(f"every={every!r} groups dates by {every}, but {shown} hold{'s' if len(names) == 1 else ''} "
                         "no dates.")


def by_names(by: Sequence[str] | str) -> list[str]:
    """``by`` as a list of one or two column names (an error naming the count otherwise)."""
    names = [by] if isinstance(by, str) else list(by)
    if not names or len(names) > 2:
        raise ValueError(f"Expected one or two group columns, but got {len(names)}.")
    return names


def class_keys(preds: Predictions) -> pd.Series:
    """The true class of every row as its name (or its id as text), for grouping by the true class."""
    if not preds.has_class_ids:
        raise ValueError("these records have no classes (confidence and correctness only).")
    cn = preds.class_names
    return pd.Series([cn[i] if cn and i < len(cn) else str(i) for i in preds.labels])


def column_keys(col: pd.Series, every: Bucket | None, is_date: bool) -> pd.Series:
    """A column's values as group names: text, '(missing)' for missing values, dates bucketed by
    ``every`` when ``is_date``. The one rule for a whole file and for each batch of a stream."""
    if every is not None and is_date:
        return bucket_dates(col, every)
    return col.astype(str).where(col.notna(), "(missing)")


def join_keys(parts: Sequence[pd.Series]) -> np.ndarray:
    keys = parts[0] if len(parts) == 1 else parts[0].reset_index(drop=True) + " × " + parts[1].reset_index(drop=True)
    return keys.to_numpy(dtype=object)


def is_date_column(col: pd.Series) -> bool:
    """Whether ``every`` buckets this column as dates: a date / time type, or text of which more
    than 90 % of the first 200 values that are not missing parse as dates."""
    return pd.api.types.is_datetime64_any_dtype(col) or _looks_like_dates(col)


def _looks_like_dates(col: pd.Series) -> bool:
    sample = col.dropna().astype(str).head(200).astype(object)
    if len(sample) == 0:
        return False
    try:  # as bucket_dates reads them: offsets dropped (mixed offsets would stop pandas), ISO apart
        parsed = _parse_dates(sample, text=True)
    except ValueError:  # both day orders: dates, which bucket_dates then refuses in words
        return True
    return bool(parsed.notna().mean() > 0.9)


def check_group_count(n_groups: int, names: Sequence[str], every: Bucket | None = None,
                      max_groups: int = MAX_GROUPS, more: bool = False) -> None:
    """A ``ValueError`` in plain words when grouping by ``names`` gives more than ``max_groups`` groups
    (``more``: counting stopped there, there are at least that many)."""
    if n_groups <= max_groups:
        return
    what = " × ".join(names)
    count = f"more than {max_groups:,}" if more else f"{n_groups:,}"
    advice = ("a wider bucket of dates (every='week' or 'month')" if every is not None else
              "a column with fewer values (a segment, a category, a model version), or a date with every='day', "
              "'week' or 'month'")
    raise ValueError(f"grouping by {what} gives {count} groups (at most {max_groups:,} can be measured): a column "
                     f"with a value for (nearly) every row, such as an id or a time stamp, leaves a few rows per "
                     f"group, too few to measure calibration. Group by {advice}.")


def calibration_by_group(preds: Predictions, by: Sequence[str] | str, *, target: Target = "positive",
                         every: Bucket | None = None, n_boot: int = 1000, level: float = 0.95, seed: int = 0,
                         min_rows: int = MIN_ROWS, max_groups: int = MAX_GROUPS) -> GroupReport:
    """Calibration of each group of rows.

    Parameters
    ----------
    preds : Predictions
        With the group columns in ``preds.metadata`` (see ``load_predictions(group_columns=...)``).
    by : str or list of one or two str
        Column names of ``preds.metadata``, or "true class". Two columns give their combinations.
    target : {"positive", "top_label"}
        Binary data: calibration of p(y=1) (default) or of the top label. Other data: top label.
    every : {"day", "week", "month"}, optional
        Bucket a date column: calibration over time.
    n_boot, level, seed
        Bootstrap of each group's ECE interval and of the largest gap's interval.
    min_rows : int
        Groups with fewer rows are flagged ``too_small`` (kept in the table, never hidden).
    max_groups : int
        More groups than this are a ``ValueError`` (an id column, a time stamp not bucketed).

    Returns
    -------
    GroupReport
        ``table`` (largest group first; in time order for dates) columns: group, n, share, rate (accuracy, or the frequency of y = 1), mean_predicted,
        n_bins (floor(n_g^(1/3))), ece, ece_low, ece_high, mce, brier, z, p_value, p_holm, too_small.

    See Also
    --------
    pbr_core.stream.compute_group_statistics : the same numbers for a dataset beyond memory, in one
        streamed pass.
    """
    conf, out, probs = _inputs(preds, target)
    keys, names = group_keys(preds, by, every)
    is_binary_target = preds.kind == "binary" and target == "positive"
    rows, diagrams, indices = [], {}, {}
    groups, inverse = np.unique(keys.astype(str), return_inverse=True)
    check_group_count(groups.size, names, every, max_groups)
    for g, name in enumerate(groups):
        idx = np.flatnonzero(inverse == g)
        indices[name] = idx
        c, o = conf[idx], out[idx]
        B = M.optimal_n_bins(idx.size) if idx.size else 1
        lo, hi = M.ece_bootstrap_ci(c, o, n_bins=B, n_boot=n_boot, level=level, seed=seed)
        z, p = spiegelhalter_z(c, o)
        brier = (M.brier_score(probs[idx], preds.labels[idx]) if probs is not None
                 else float(np.mean((c - o) ** 2)))
        rows.append({"group": name, "n": int(idx.size), "share": idx.size / conf.size, "rate": float(o.mean()),
                     "mean_predicted": float(c.mean()), "n_bins": B, "ece": M.ece(c, o, n_bins=B),
                     "ece_low": lo, "ece_high": hi, "mce": M.mce(c, o, n_bins=B), "brier": brier,
                     "z": z, "p_value": p, "too_small": idx.size < min_rows})
        diagrams[name] = M.reliability_diagram(c, o, n_bins=B)
    report = group_report(rows, diagrams, names, "positive" if is_binary_target else "top_label", level, every)

    def gap_replicates(worst: str, b_worst: int, best: str, b_best: int, rng: np.random.Generator) -> np.ndarray:
        iw, ib = indices[worst], indices[best]
        reps = np.empty(n_boot)
        for b in range(n_boot):
            sw, sb = rng.choice(iw, iw.size), rng.choice(ib, ib.size)
            reps[b] = M.ece(conf[sw], out[sw], b_worst) - M.ece(conf[sb], out[sb], b_best)
        return reps

    report.largest_gap = largest_gap(report.table, level, seed, gap_replicates)
    return report


def group_report(rows: list[dict], diagrams: dict[str, pd.DataFrame], names: list[str], target: Target,
                 level: float, every: Bucket | None) -> GroupReport:
    """The :class:`GroupReport` of per-group ``rows`` (dicts of the table's columns but p_holm):
    Holm's correction over the groups, and the order (time order for dates, else largest first)."""
    table = pd.DataFrame(rows)
    table["p_holm"] = holm(table["p_value"])
    # Over time: in time order (ISO dates sort as text); otherwise the largest groups first.
    order = (["group"], [True]) if every is not None else (["n", "group"], [False, True])
    table = table.sort_values(order[0], ascending=order[1], kind="stable").reset_index(drop=True)
    cols = ["group", "n", "share", "rate", "mean_predicted", "n_bins", "ece", "ece_low", "ece_high", "mce",
            "brier", "z", "p_value", "p_holm", "too_small"]
    return GroupReport(table=table[cols], diagrams=diagrams, by=list(names), target=target, level=level)


def largest_gap(table: pd.DataFrame, level: float, seed: int,
                replicates) -> dict[str, float | str]:
    """ECE(worst group) - ECE(best group) among the groups that are not too small, with a percentile
    bootstrap interval (rows resampled within each of the two groups, their B kept fixed). The two
    groups are picked on the data, so the interval is for the gap between these two groups.

    ``replicates(worst, B_worst, best, B_best, rng)`` gives the bootstrap replicates of the gap (each
    group at its own B): resamples of the rows in memory, Poisson-bootstrap replicates on a stream."""
    ok = table[~table["too_small"]]
    if len(ok) < 2:
        return {}
    worst, best = ok.loc[ok["ece"].idxmax()], ok.loc[ok["ece"].idxmin()]
    rng = np.random.default_rng(seed)
    reps = replicates(worst["group"], int(worst["n_bins"]), best["group"], int(best["n_bins"]), rng)
    lo, hi = np.quantile(reps, [(1 - level) / 2, (1 + level) / 2])
    return {"worst": worst["group"], "best": best["group"], "gap": float(worst["ece"] - best["ece"]),
            "low": float(lo), "high": float(hi)}
