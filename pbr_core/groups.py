"""Calibration by group: is the model calibrated for everyone, not only on average?

:func:`calibration_by_group` takes the predictions and one or two grouping columns (a segment, a
demographic attribute, the predicted class, or a date bucketed by day, week or month; or every
class against the rest) and returns, per group: n, the base rate or accuracy, the paper's ECE with
its interval and a bias-corrected estimate, the MCE, the Brier score, and a test of calibration
with a p-value corrected for the number of groups; plus each group's reliability-diagram table and
the largest gap between two groups, with whether it is real.

What each statement means, and why it holds at every group size:

* **The test** (:mod:`pbr_core.significance`): Cox's recalibration test (calibration in the large
  and the calibration slope) together with Spiegelhalter's z, one p-value per group, exact Monte
  Carlo p-values where a group carries little information; corrected with Holm's method
  (family-wise error, valid whatever the dependence between groups). Below 1 - level: the group is
  miscalibrated beyond chance. Above it: no evidence at this size, with the shift the test would
  have detected 80 % of the time (``detectable_shift``), never "calibrated".
* **The largest gap** (:func:`largest_gap`): bias-corrected estimates, an interval adjusted for
  every pair of groups, and a claim only when the worst group's own test agrees.
* **No grouping by the true class**: conditioning on the outcome makes a calibrated model look
  miscalibrated (:data:`TRUE_CLASS_REFUSED`); the predicted class and each class against the rest
  are what people mean by it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal, Mapping, Sequence

import numpy as np
import pandas as pd

from pbr_core import metrics as M
from pbr_core import significance as S
from pbr_core.metrics import BinaryTarget
from pbr_core.outcome_columns import OutcomeColumn, group_warning, outcome_columns
from pbr_core.wording import rows as rows_words
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

#: Group by the class the model predicted (a function of the prediction: each group's calibration
#: is a statement about the model).
PREDICTED_CLASS = "predicted class"
#: Every class against the rest, over all rows: the reliability of p_k against 1[y = k].
EACH_CLASS = "each class"
#: Refused (see :data:`TRUE_CLASS_REFUSED`).
TRUE_CLASS = "true class"
TRUE_CLASS_REFUSED = (
    "grouping by the true class is not offered: it selects rows by their outcome, so even a perfectly "
    "calibrated model looks miscalibrated in every group (rows of class 1 all have outcome 1, whatever was "
    f"predicted). Group by {PREDICTED_CLASS!r} (rows by the class the model predicted), or use {EACH_CLASS!r} "
    "(the calibration of each class's probability against whether the row is of that class, over all rows).")
#: What each group's ECE is measured on and what its ``rate`` column counts, in the words of the CLI
#: and notebooks (the dashboard's are in dashboard/texts.py), by :attr:`GroupReport.measures`. Each
#: class against the rest measures p_k against 1[y = k], whose rate is the class's frequency, not an
#: accuracy (audit 10a: "top label" and "accuracy" headed 0.1123, class zero's frequency, where the
#: top-label accuracy was 0.9655).
MEASURED_WORDS: dict[str, tuple[str, str]] = {
    "positive": ("p(y=1)", "frequency of y=1"),
    "top_label": ("top label", "accuracy"),
    EACH_CLASS: ("p(class) against 1[y = class]", "frequency of the class"),
}
TEST_WORDS = ("Cox's recalibration test (calibration in the large and slope) with Spiegelhalter's z, exact "
              "Monte Carlo p-values for small groups, Holm-corrected over the groups")

__all__ = ["EACH_CLASS", "GroupReport", "default_every", "default_group_column", "find_slices", "MAX_GROUPS", "MIN_ROWS", "PREDICTED_CLASS", "TRUE_CLASS",
           "TRUE_CLASS_REFUSED", "MEASURED_WORDS", "bucket_dates", "calibration_by_group", "check_group_count", "group_keys", "holm",
           "largest_gap", "bins_outside_by_group", "spiegelhalter_z"]


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


def bins_outside_by_group(diagrams: dict[str, pd.DataFrame], level: float = 0.9
                          ) -> dict[str, tuple[int, int, float, float]]:
    """Per group (or slice): how many bins of its reliability diagram lie outside their ``level``
    consistency bands, and whether that is more than chance, corrected for looking at every group.

    Returns ``{name: (k, m, p, p_holm)}``: k bins outside of the m bins with rows,
    p = :func:`pbr_core.significance.bins_outside_test`'s (the Poisson-binomial tail of each bin's chance of
    lying outside, valid under calibration since bins hold disjoint rows), and p_holm its Holm correction over the diagrams with
    rows (NaN for a diagram without rows). "More than chance" is p_holm < 0.05.

    Why corrected: the pages let the reader look through the groups one by one, and each group's
    diagram has about 1 bar in 10 outside by chance. Uncorrected, "a bar outside its band" appeared in
    18.4 % of calibrated groups of 100-200 rows and in some group of every file of 30 such groups
    (audit 5); even the count test at 0.05 per group would leave some calibrated group of most such
    files reading "more than chance". Holm over the groups keeps the chance that any calibrated group
    reads so at most 5 %, as the groups' own tests (``p_holm`` of the table) do.
    """
    names = list(diagrams)
    tests = [S.bins_outside_test(diagrams[g], level) if len(diagrams[g]) else (0, 0, np.nan) for g in names]
    p = np.array([pv if m else np.nan for _, m, pv in tests])
    adjusted = holm(p)
    return {g: (k, m, float(pv), float(ph)) for g, (k, m, _), pv, ph in zip(names, tests, p, adjusted)}


def bucket_dates(values: pd.Series | np.ndarray, every: Bucket = "week") -> pd.Series:
    """Dates (or text that parses as dates) as their day ``YYYY-MM-DD``, week ``week of YYYY-MM-DD`` (its
    Monday) or month ``YYYY-MM``, as text, for calibration over time (labels that sort in time order and
    say what they are: a week labelled by its Monday alone reads as a day, a month as its first day).
    Values that are not dates are an error naming the first."""
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
    fmt = {"day": "%Y-%m-%d", "week": "week of %Y-%m-%d", "month": "%Y-%m"}[every]
    return (starts.dt.strftime(fmt) + suffix).where(parsed.notna(), other="(no date)")


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
    largest_gap: dict[str, float | str | bool] = field(default_factory=dict)
    test: str = TEST_WORDS
    level: float = 0.95
    #: How each group's ECE interval was obtained (the streamed pass uses the Poisson bootstrap).
    interval: str = "bootstrap interval"
    #: The bucket of dates (None: none, or the dates as they are); ``every_chosen``: it was chosen from
    #: the data (:func:`default_every`) because the caller named none (``evaluate --by`` without ``--every``).
    every: Bucket | None = None
    every_chosen: bool = False
    #: The grouping columns that restate the outcome on these rows (each of their values holds a single
    #: outcome, :func:`pbr_core.outcome_columns.outcome_columns`): their groups are miscalibrated by
    #: construction. Measured all the same, since they were chosen; ``warnings`` says so.
    restating: list[OutcomeColumn] = field(default_factory=list)

    @property
    def warnings(self) -> list[str]:
        """One warning per grouping column that restates the outcome (CLI text and JSON, notebooks)."""
        return [group_warning(found) for found in self.restating]

    @property
    def measures(self) -> Literal["positive", "top_label", "each class"]:
        """What each group's ECE measures: p(y=1) ("positive"), the top label ("top_label"), or, grouped
        by :data:`EACH_CLASS`, each class's probability against whether the row is of that class
        (``target`` then says "top_label", what the binary-target rule reads, but ``rate`` is the
        class's frequency). The key of :data:`MEASURED_WORDS`."""
        return EACH_CLASS if self.by == [EACH_CLASS] else self.target

    @property
    def small(self) -> list[str]:
        return self.table.loc[self.table["too_small"], "group"].tolist()

    def _repr_html_(self) -> str:
        """What a notebook shows: every group's numbers and what its test says, and the largest gap."""
        from pbr_core import _html

        t = self.table
        rows = [(r.group, f"{r.n:,}", r.ece, r.ece_corrected, S.format_p(r.p_holm, S.at_floor(r.p_value, r.test_method)),
                 S.verdict(_row_test(r), float(r.p_holm) if len(t) > 1 else None, self.alpha, scope_note=False,
                           shift_drawn=_shift_drawn_row(r)))
                for r in t.itertuples()]
        warned = "".join(f" {w[0].upper()}{w[1:]}" for w in self.warnings)
        return _html.table(["group", "rows", "ECE", "ECE without noise", "p (corrected)", "what the test says"], rows,
                           caption=f"Calibration by {' × '.join(self.by)}.{warned} Largest gap: {gap_statement(self)}")

    @property
    def alpha(self) -> float:
        """1 - level, rounded: 1 - 0.95 is 0.050000000000000044 in floating point, which would call a
        p-value of exactly 0.05 significant."""
        return round(1.0 - self.level, 12)

    @property
    def miscalibrated(self) -> list[str]:
        """The groups whose corrected test is below 1 - level: miscalibrated beyond chance."""
        return self.table.loc[self.table["p_holm"] < self.alpha, "group"].tolist()


def _inputs(preds: Predictions, target: Target) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(confidence or p(y=1), outcome, each row's Brier term) of what is measured."""
    p, y = M.ece_inputs(*preds.metric_inputs(), M.BINARY_TARGET.measured(preds.kind, target))
    conf, out = M.confidence_and_outcome(p, y)
    return conf, out, M.brier_terms(p, y)


def brier_terms(preds: Predictions, target: Target) -> np.ndarray:
    """Each row's Brier term of what is measured (:func:`pbr_core.metrics.brier_terms` of the ECE's
    inputs, as :func:`pbr_core.metrics.target_brier_nll`): one rule for a whole file and a stream's batch."""
    return M.brier_terms(*M.ece_inputs(*preds.metric_inputs(), M.BINARY_TARGET.measured(preds.kind, target)))


def group_keys(preds: Predictions, by: Sequence[str] | str, every: Bucket | None = None) -> tuple[np.ndarray, list[str]]:
    """The group of every row (text; two columns joined with ' × ') and the column names used."""
    names = by_names(by)
    parts, dates = [], []
    for name in names:
        if name == PREDICTED_CLASS:
            parts.append(class_keys(preds))
            continue
        if preds.metadata is None or name not in preds.metadata.columns:
            check_not_outcome(name)
            have = [] if preds.metadata is None else list(preds.metadata.columns)
            raise ValueError(f"no column {name!r} to group by; the file's other columns are {have or 'none'} "
                             f"(or {PREDICTED_CLASS!r}, or {EACH_CLASS!r} alone).")
        col = preds.metadata[name]
        dated = every is not None and is_date_column(col)
        dates.append(dated)
        parts.append(column_keys(col, every, dated))
    check_every(every, names, dates)
    return join_keys(parts), names


def check_not_outcome(name: str) -> None:
    """Grouping by the true class is refused, with the reason and what to use instead."""
    if name == TRUE_CLASS:
        raise ValueError(TRUE_CLASS_REFUSED)


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
    """The predicted class of every row as its name (or its id as text), for grouping by the predicted
    class (a function of the prediction alone, so each group's calibration means what it says)."""
    if not preds.has_class_ids:
        raise ValueError("these records have no classes (confidence and correctness only).")
    cn = preds.class_names
    return pd.Series([cn[i] if cn and i < len(cn) else str(i) for i in preds.predicted])


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
    than 90 % of the first 200 values that are not missing parse as dates. A column of numbers is
    grouped by its values: a year written 2018 parses as a date, but bucketed it became one group,
    1970-01-01 (2018 nanoseconds after 1970), where its values are the groups wanted."""
    if pd.api.types.is_numeric_dtype(col.dtype) and not pd.api.types.is_bool_dtype(col.dtype):
        return False
    return pd.api.types.is_datetime64_any_dtype(col) or _looks_like_dates(col)


def _looks_like_dates(col: pd.Series) -> bool:
    sample = col.dropna().astype(str).head(200).astype(object)
    if len(sample) == 0:
        return False
    try:  # as bucket_dates reads them: offsets dropped (mixed offsets would stop pandas), ISO apart
        parsed = _parse_dates(sample, text=True)
    except pd.errors.OutOfBoundsDatetime:  # '11th' read as the year 1: not dates (Adult's education)
        return False
    except ValueError as exc:  # both day orders: dates, which bucket_dates then refuses in words
        return "day-first" in str(exc)
    return bool(parsed.notna().mean() > 0.9)


#: A date column's default bucket gives at most this many groups: a table and an overlay one can read
#: (26 weeks of a half-year, 60 months of five years).
DATE_MAX_GROUPS = 60


def default_every(preds: Predictions, by: Sequence[str] | str, min_rows: int = MIN_ROWS,
                  max_groups: int = DATE_MAX_GROUPS) -> Bucket | None:
    """The bucket of dates to group by when the user has not chosen one: the finest of day, week and
    month whose groups (of ``by``, two columns crossed) hold ``min_rows`` rows or more at the median
    and number at most ``max_groups``; "month" when none does. None when no column of ``by`` holds
    dates (or its values do not all read as dates: grouping by them then says which one does not).

    Why: the dates as they are (a group a day) gave the audit's fraud file (8,000 rows, half a year)
    180 groups of ~44 rows, every one too small to compare; by week it has 26 groups of ~300 rows.
    Only the distinct values are bucketed (a million rows of a few hundred days cost what the days do).
    """
    names = by_names(by)
    meta = preds.metadata
    dated = [n for n in names if meta is not None and n in meta.columns and is_date_column(meta[n])]
    if not dated:
        return None
    frame = pd.DataFrame({n: (class_keys(preds) if n == PREDICTED_CLASS else
                              meta[n].reset_index(drop=True)) for n in names if n != EACH_CLASS})
    combos = frame.value_counts(dropna=False).rename("rows").reset_index()
    for every in ("day", "week", "month"):
        try:
            keys = [bucket_dates(combos[n], every) if n in dated else combos[n].astype(str) for n in frame.columns]
        except ValueError:
            return None
        counts = combos["rows"].groupby(pd.MultiIndex.from_arrays(keys) if len(keys) > 1 else keys[0]).sum()
        if counts.size <= max_groups and float(counts.median()) >= min_rows:
            return every
    return "month"


#: The Groups page opens on a column with at most this many values (groups worth comparing side by side).
DEFAULT_MAX_LEVELS = 20
#: What a column's name says it is, for the ones never opened on by default (each group would be one
#: row, a split of the data, or a measurement per row, not a segment of the population).
_NOT_A_SEGMENT = ("an identifier", "a data split", "a date or time", "a weight", "a per-record measurement",
                  "a per-record evaluation metric")
#: Names of a calendar period alone: the loader keeps them as dates by name, but with few values (2018,
#: 2020, 2022 of an election file) their rows are segments like a region's, unlike a date's or a
#: timestamp's instants; the values test (2..max_levels, groups of MIN_ROWS) still decides.
_PERIOD_NAMES = frozenset(("year", "month", "week", "day"))


def _never_a_segment(name: str) -> bool:
    """Whether a column's name rules it out as a default grouping, whatever its values (an id, a fold...)."""
    from pbr_core.loading._roles import metadata_by_name, name_words

    return metadata_by_name(name) in _NOT_A_SEGMENT and "_".join(name_words(name)) not in _PERIOD_NAMES


#: Words of column names audits group by: preferred as the default column.
_AUDIT_WORDS = {"sex", "gender", "race", "ethnicity", "region", "country", "state", "segment", "group",
                "cohort", "site", "model", "version", "language", "device", "channel", "branch", "dataset"}


def default_group_column(preds: Predictions, max_levels: int = DEFAULT_MAX_LEVELS) -> str | None:
    """The column a page should group by when the user has not chosen: never one the loader itself
    called an identifier (or a split, a date, a per-row measurement), and one that makes groups worth
    comparing: 2 to ``max_levels`` values, at least two of them with :data:`MIN_ROWS` rows, which
    together hold at least 80 % of the rows, preferably every one of them. Columns named as groups
    (``group_columns=``) come first, then names audits group by (sex, race, region, model...), then
    the file's order. A year or a month column (:data:`_PERIOD_NAMES`) is a segment when its values fit.
    None when no column qualifies (a page then says so and lets the user pick)."""
    from pbr_core.loading._roles import name_words

    meta = preds.metadata
    if meta is None or meta.empty:
        return None
    named = [c for c in preds.columns_with_role("group") if c in meta.columns]
    others = [c for c in meta.columns if c not in named]
    # Among the others, the words audits group by first (sex, race, region...), then the file's order.
    others.sort(key=lambda c: not (set(name_words(str(c))) & _AUDIT_WORDS))
    fits, every_group_fits = [], []
    for name in [*named, *others]:
        if _never_a_segment(str(name)):
            continue
        counts = meta[name].value_counts(dropna=False)
        if not 2 <= counts.size <= max_levels:
            continue
        big = counts[counts >= MIN_ROWS]
        if big.size >= 2 and big.sum() >= 0.8 * len(meta):
            fits.append(str(name))
            if big.size == counts.size:
                every_group_fits.append(str(name))
    # never a column that restates the outcome (its groups are miscalibrated by construction); checked
    # on the few columns that fit only (every column of a wide file took seconds on each page render)
    restating = outcome_columns(preds, fits) if fits else {}
    fits = [c for c in fits if c not in restating]
    every_group_fits = [c for c in every_group_fits if c not in restating]
    if named and fits and fits[0] in named:
        return fits[0]
    return (every_group_fits or fits or [None])[0]


def default_group_column_by_name(columns: Sequence[str], named: Sequence[str] = ()) -> str | None:
    """:func:`default_group_column` for a dataset whose values are not in memory (a server dataset):
    a column named as a group, else the first column whose name does not say it is an identifier,
    a split, a date or a per-row measurement, names audits group by (sex, race, region...) first."""
    from pbr_core.loading._roles import metadata_by_name, name_words

    others = sorted((c for c in columns if c not in named), key=lambda c: not (set(name_words(str(c))) & _AUDIT_WORDS))
    for name in [*named, *others]:
        if name in columns and metadata_by_name(str(name)) not in _NOT_A_SEGMENT:
            return str(name)
    return None


#: The buckets of dates wider than each: what a grouping with too many groups may try instead.
WIDER_BUCKETS: dict[str, tuple[str, ...]] = {"day": ("week", "month"), "week": ("month",), "month": ()}


def wider_bucket_counts(preds: Predictions, by: Sequence[str] | str, every: Bucket) -> dict[str, int]:
    """The number of groups each bucket of dates wider than ``every`` gives (for the advice of
    :func:`check_group_count`; computed only when a grouping has too many groups)."""
    counts = {}
    for wider in WIDER_BUCKETS.get(every, ()):
        keys, _ = group_keys(preds, by, wider)  # type: ignore[arg-type]
        counts[wider] = int(np.unique(keys.astype(str)).size)
    return counts


def _date_advice(every: Bucket, max_groups: int, wider: Mapping[str, int] | None) -> str:
    """What to group by instead when a bucket of dates gives too many groups: only the wider buckets that
    give at most ``max_groups`` (``wider``: their counts), or none when none does (dates over 10,000 years
    are over a thousand months: "week or month" was advised, and month failed the same way, audit 12c);
    ``wider`` None (counts not known): the wider buckets, on that condition."""
    options = WIDER_BUCKETS.get(every, ())
    fewer = "a column with fewer values (a segment, a category, a model version), or the rows of a shorter period"
    if wider is None:
        if not options:
            return f"{fewer}: a month each is the widest bucket of dates"
        named = " or ".join(f"'{o}'" for o in options)
        return f"a wider bucket of dates (every={named}) if one gives at most {max_groups:,} groups, or {fewer}"
    fits = [o for o in options if wider.get(o, max_groups + 1) <= max_groups]
    if fits:
        return "a wider bucket of dates (every=" + " or ".join(f"'{o}'" for o in fits) + ")"
    widest = options[-1] if options else "month"
    counted = f" (by {widest}, {wider[widest]:,} groups)" if widest in wider else ""
    return f"{fewer}: no bucket of dates gives few enough groups{counted}"


def check_group_count(n_groups: int, names: Sequence[str], every: Bucket | None = None,
                      max_groups: int = MAX_GROUPS, more: bool = False,
                      wider: Mapping[str, int] | None = None) -> None:
    """A ``ValueError`` in plain words when grouping by ``names`` gives more than ``max_groups`` groups
    (``more``: counting stopped there, there are at least that many). ``wider``: the groups each wider
    bucket of dates would give (:func:`wider_bucket_counts`), so that the advice names only those that
    would do."""
    if n_groups <= max_groups:
        return
    what = " × ".join(names)
    count = f"more than {max_groups:,}" if more else f"{n_groups:,}"
    advice = (_date_advice(every, max_groups, wider) if every is not None else
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
        Column names of ``preds.metadata``, or "predicted class" (rows grouped by the class the model
        predicted), or "each class" alone (one-vs-rest: for every class k, the calibration of p_k
        against 1[y = k] over all rows; full probability vectors of more than two classes). Two
        columns give their combinations. "true class" is refused: grouping by the outcome makes a
        perfectly calibrated model look miscalibrated (see :data:`TRUE_CLASS_REFUSED`).
    target : {"positive", "top_label"}
        Binary data: calibration of p(y=1) (default) or of the top label. Other data: top label.
    every : {"day", "week", "month"}, optional
        Bucket a date column: calibration over time.
    n_boot, level, seed
        Bootstrap of each group's ECE interval and of the bias-corrected estimates (each class
        against the rest: at most :func:`pbr_core.metrics.default_n_boot` of n x K rows); ``level``
        also sets the tests' significance 1 - level; ``seed`` seeds them all.
    min_rows : int
        Groups with fewer rows are flagged ``too_small`` (kept in the table and tested, never
        hidden; left out of the largest gap).
    max_groups : int
        More groups than this are a ``ValueError`` (an id column, a time stamp not bucketed).

    Returns
    -------
    GroupReport
        ``table`` (largest group first; in time order for dates) columns: group, n, share, rate
        (accuracy, or the frequency of y = 1; each class: the class's frequency, see
        :attr:`GroupReport.measures`), mean_predicted, n_bins (floor(n_g^(1/3))), ece,
        ece_low, ece_high, ece_corrected (the split estimate, see :func:`pbr_core.metrics.ece_bootstrap_ci`:
        0 on average for a calibrated group of any size), mce, brier, z (Spiegelhalter), chi2_cox,
        p_value, p_holm, test_method, detectable_shift, too_small. ``largest_gap``: see
        :func:`largest_gap`.

    Notes
    -----
    The test of each group is :func:`pbr_core.significance.calibration_test` (Cox's recalibration
    test and Spiegelhalter's z, exact Monte Carlo p-values where the group carries little
    information), Holm-corrected over the groups: a group with p_holm below 1 - level is
    miscalibrated beyond chance, and the chance that any calibrated group is called miscalibrated is
    at most 1 - level, whatever the group sizes. A group above it shows *no evidence* of
    miscalibration at its size: ``detectable_shift`` says how large a shift in its outcome rate the
    test would have found 80 % of the time.

    See Also
    --------
    pbr_core.stream.compute_group_statistics : the same numbers for a dataset beyond memory, in one
        streamed pass.
    """
    level = M._check_level(level)
    names = by_names(by)
    if EACH_CLASS in names:
        if len(names) > 1:
            raise ValueError(f"{EACH_CLASS!r} (one class against the rest, over all rows) cannot be combined "
                             "with another column.")
        parts, what = _one_vs_rest(preds), "top_label"
        as_written = [preds.as_written(p) for _, p, _, _ in parts]
        n_rows = preds.n
        # K classes over all n rows cost what n x K rows cost: as many replicates as that many rows get
        n_boot = min(int(n_boot), M.default_n_boot(n_rows * len(parts)))
    else:
        conf, out, brier = _inputs(preds, target)
        written = preds.as_written(conf)   # how finely the file rounded is read from the values as written
        keys, names = group_keys(preds, by, every)
        groups, inverse = np.unique(keys.astype(str), return_inverse=True)
        if groups.size > max_groups:
            check_group_count(groups.size, names, every, max_groups,
                              wider=wider_bucket_counts(preds, by, every) if every is not None else None)
        order = np.argsort(inverse, kind="stable")
        bounds = np.searchsorted(inverse[order], np.arange(groups.size + 1))
        idxs = [order[bounds[i]:bounds[i + 1]] for i in range(groups.size)]
        parts = [(str(g), conf[idx], out[idx], brier[idx]) for g, idx in zip(groups, idxs)]
        as_written = [written[idx] for idx in idxs]
        what = M.BINARY_TARGET.measured(preds.kind, target)
        n_rows = conf.size
    sums = np.stack([S.calibration_sums(c, o, w) for (_, c, o, _), w in zip(parts, as_written)], axis=1)
    exact = exact_eligible([c.size for _, c, _, _ in parts])
    tests = group_tests(sums, [name for name, *_ in parts],
                        lambda g: (parts[g][1], parts[g][2]) if exact[g] else None, level, seed, min_rows)
    rows, diagrams, split = [], {}, {}
    for (name, c, o, b), test in zip(parts, tests):
        B = M.optimal_n_bins(c.size) if c.size else 1
        est = M.split_estimates(c, o, n_bins=B, n_boot=n_boot, seed=seed)
        lo, hi = est.interval(level)
        split[name] = est
        rows.append({"group": name, "n": int(c.size), "share": c.size / n_rows, "rate": float(o.mean()),
                     "mean_predicted": float(c.mean()), "n_bins": B, "ece": M.ece(c, o, n_bins=B),
                     "ece_low": lo, "ece_high": hi, "ece_corrected": est.split, "mce": M.mce(c, o, n_bins=B),
                     "brier": float(b.mean()), **test_columns(test), "too_small": c.size < min_rows})
        diagrams[name] = M.reliability_diagram(c, o, n_bins=B)
    report = group_report(rows, diagrams, names, what, level, every)
    report.largest_gap = largest_gap(report.table, level,
                                     {k: (v.split, v.sd_split, v.ece, v.sd_ece) for k, v in split.items()})
    report.restating = restating_columns(preds, names)
    return report


def restating_columns(preds: Predictions, names: Sequence[str]) -> list[OutcomeColumn]:
    """The columns of ``names`` that restate the outcome on these rows (audit 9a: ``--by grade`` of an
    LLM file, whose 'Correct' / 'Wrong' groups are right always or never)."""
    columns = [c for c in names if preds.metadata is not None and c in preds.metadata.columns]
    return list(outcome_columns(preds, columns).values()) if columns else []


def _one_vs_rest(preds: Predictions) -> list[tuple[str, np.ndarray, np.ndarray, np.ndarray]]:
    """(class name, p_k, 1[y = k], (p_k - 1[y = k])^2) of every class, over all rows."""
    if preds.probs is None or preds.n_classes < 3:
        raise ValueError(f"{EACH_CLASS!r} needs full probability vectors of three or more classes (on binary data "
                         "the one calibration is that of p(y=1)).")
    cn = preds.class_names
    out = []
    for k in range(preds.n_classes):
        p = np.asarray(preds.probs[:, k], dtype=np.float64)
        y = (preds.labels == k).astype(np.float64)
        out.append((cn[k] if cn and k < len(cn) else str(k), p, y, (p - y) ** 2))
    return out


#: Rows kept per stream for the exact tests of small groups (smallest groups first): 80 MB of (p, y).
EXACT_ROWS_BUDGET = 5_000_000


def exact_eligible(counts: Sequence[int]) -> np.ndarray:
    """Which groups may get the exact (Monte Carlo) test: those of at most
    :data:`~pbr_core.significance.EXACT_MAX_ROWS` rows, smallest first while their rows fit in
    :data:`EXACT_ROWS_BUDGET`. A stream keeps exactly these groups' rows, so that a file in memory and
    the same file streamed get the same p-values."""
    counts = np.asarray(counts, dtype=np.int64)
    ok = np.zeros(counts.size, dtype=bool)
    used = 0
    for g in np.argsort(counts, kind="stable"):
        if counts[g] > S.EXACT_MAX_ROWS or used + counts[g] > EXACT_ROWS_BUDGET:
            break
        ok[g] = True
        used += int(counts[g])
    return ok


def group_tests(sums: np.ndarray, names: Sequence[str], rows_of, level: float, seed: int,
                min_rows: int = 0, evidence: np.ndarray | None = None) -> list[S.CalibrationTest]:
    """The test of every group from its sums (N_SUMS, G), Monte Carlo where a group needs it and
    ``rows_of(g)`` gives its (p, y) (None: analytic). The rows are put in a canonical order (by p,
    then y) first: the p-value does not depend on the order in which a stream met them.

    Groups of fewer than ``min_rows`` rows (flagged too small) are tested as the others (their
    p-values count in Holm's correction, and a small group off beyond chance is still named), but get
    no drawn detectable shift (:func:`shift_drawn`): those draws were 90 % of the time of 180 one-day
    groups of ~44 rows (20 of 22 s), for a figure about groups too small to compare.

    Every group reads how finely the file wrote its values from ``evidence``, the whole file's
    (:func:`pbr_core.significance.file_evidence`; None: the total over the groups, which make up the file),
    never from its own rows: in a file rounded to 3 decimals a 15-row group with a wrong 1.000 read
    "miscalibrated for certain" (too few values between 0 and 1 to show the grid) and a 41-row group of the
    same file read it within its rounding, as the whole file did."""
    alpha, G = 1.0 - level, sums.shape[1]
    evidence = S.file_evidence(sums) if evidence is None else np.asarray(evidence, dtype=np.float64)
    sums = S.with_evidence(sums, evidence)
    out = []
    for g in range(G):
        test = S.calibration_test_from_sums(sums[:, g], n_tests=G, alpha=alpha)
        rows = rows_of(g) if S.needs_exact(test.n, test.effective_n) else None
        if rows is not None:
            p, y = (np.asarray(a, dtype=np.float64) for a in rows)
            order = np.lexsort((y, p))
            test = S.calibration_test(p[order], y[order], n_tests=G, alpha=alpha, seed=seed, name=names[g],
                                      draw_shift=test.n >= min_rows, evidence=evidence,
                                      shift_work=S.GROUP_SHIFT_WORK)
        out.append(test)
    return out


def shift_drawn(n: int, too_small: bool, method: str, detectable_shift: float) -> bool:
    """Whether a group's detectable shift was worked out: False for a group too small to compare
    that :func:`group_tests` tested by Monte Carlo without drawing it (its NaN then means "not worked
    out", not "a shift of any size")."""
    return not (too_small and str(method).startswith("Monte Carlo")
                and not np.isfinite(detectable_shift))


def test_columns(test: S.CalibrationTest) -> dict[str, float | str]:
    return {"z": test.z, "chi2_cox": test.chi2_cox, "p_value": test.p_value, "test_method": test.method,
            "detectable_shift": test.detectable_shift, "rounded_rows": int(test.rounded_rows)}


TABLE_COLUMNS = ["group", "n", "share", "rate", "mean_predicted", "n_bins", "ece", "ece_low", "ece_high",
                 "ece_corrected", "mce", "brier", "z", "chi2_cox", "p_value", "p_holm", "test_method",
                 "detectable_shift", "rounded_rows", "too_small"]
#: What each column of :data:`TABLE_COLUMNS` holds, in words. The names stay short and machine-readable
#: (the Groups page's CSV download, ``evaluate --by``, notebooks: scripts read them); this is their
#: documentation, shown by the download button's "?" and in the README.
TABLE_COLUMN_MEANINGS: dict[str, str] = {
    "group": "the group's value of the grouping column(s)",
    "n": "rows in the group",
    "share": "the group's share of all rows",
    "rate": "observed frequency of the outcome (of y = 1, of a correct prediction, or of the class)",
    "mean_predicted": "mean predicted probability",
    "n_bins": "bins of the group's ECE, floor(n^(1/3))",
    "ece": "the group's ECE",
    "ece_low": "lower end of the ECE's 95 % interval",
    "ece_high": "upper end of the ECE's 95 % interval",
    "ece_corrected": ("ECE without noise (the part noise adds removed); can be below 0 for a calibrated "
                      "group: read it as about 0"),
    "mce": "largest gap of one bin (maximum calibration error)",
    "brier": "Brier score",
    "z": "Spiegelhalter's z (calibration test statistic)",
    "chi2_cox": "Cox's chi-squared statistic (calibration in the large and slope)",
    "p_value": "p-value of the group's calibration test, before the correction for several groups",
    "p_holm": "p-value corrected for the number of groups (Holm's method): below 0.05, miscalibrated",
    "test_method": "how the p-value was computed: analytic (Cox's test), Monte Carlo (outcomes redrawn) or certain",
    "detectable_shift": "smallest shift of the outcome rate the test would find 80 % of the time",
    "rounded_rows": "outcomes against a score of exactly 0 or 1 that the file's rounding may have made",
    "too_small": "True for a group with too few rows to compare (its ECE is mostly noise)",
}


def group_report(rows: list[dict], diagrams: dict[str, pd.DataFrame], names: list[str], target: Target,
                 level: float, every: Bucket | None) -> GroupReport:
    """The :class:`GroupReport` of per-group ``rows`` (dicts of the table's columns but p_holm):
    Holm's correction over the groups, and the order (time order for dates, else largest first)."""
    table = pd.DataFrame(rows)
    table["p_holm"] = holm(table["p_value"])
    # Over time: in time order (ISO dates sort as text); each class: in class order; otherwise the
    # largest groups first.
    if list(names) != [EACH_CLASS]:
        order = (["group"], [True]) if every is not None else (["n", "group"], [False, True])
        table = table.sort_values(order[0], ascending=order[1], kind="stable").reset_index(drop=True)
    return GroupReport(table=table[TABLE_COLUMNS], diagrams=diagrams, by=list(names), target=target, level=level,
                       every=every)


def largest_gap(table: pd.DataFrame, level: float,
                corrected: dict[str, tuple[float, float, float, float]]) -> dict[str, float | str | bool]:
    """The largest difference in calibration between two groups, and whether it is real.

    Why not the plug-in ECEs: a group's ECE is biased upward by noise, more the fewer its rows, so
    two perfectly calibrated groups of 135 and 13,946 rows differ by ~0.04 in ECE in every sample;
    an interval around that difference excluded 0 in 100 of 100 simulations. Here:

    * Each group's calibration error is its **bias-corrected** (split) estimate (``corrected[g]`` =
      (estimate, its bootstrap standard deviation, plain ECE, its bootstrap standard deviation);
      :func:`pbr_core.metrics.split_estimates`), whose
      mean is exactly 0 for a calibrated group of any size. The worst and best groups (among those
      not too small) are picked by it.
    * The interval of their difference is a normal interval at a level **adjusted for every pair of
      groups** (Bonferroni over k(k - 1)/2 pairs), so it holds even though the two groups were
      picked as the extremes. Its ends are built as each group's own interval is (:meth:`SplitEstimates.interval`):
      the lower end from the worst group's bias-corrected estimate and the best group's plain ECE,
      which noise can only raise; the upper end the other way round. With the bias-corrected estimate
      of both, a small group's estimate, which leans low (mean 0.036 for a true 0.0625 at 100 rows),
      let two groups sharing one miscalibration (5,000 + 100-150 rows) be called different in 88 of
      1,200 simulated files (7.3 %, nominal 5 %); with the plain ECE of the best in 7 of 1,200, at a
      cost in power (one group 8 points off, 2,000 + 2,000 rows: 77 % against 88 %).
    * The gap is called **real** only when, besides, the worst group's own corrected test finds it
      miscalibrated (p_holm < 1 - level). When every group is calibrated, the chance of that is at
      most 1 - level (Holm's family-wise guarantee), whatever the group sizes: the claim's false-alarm
      rate is at most its nominal level. (The interval alone is what guards the claim when groups are
      equally miscalibrated.)

    Returns {} with fewer than two groups that are not too small; else worst, best, ece_worst,
    ece_best (measured), corrected_worst, corrected_best, gap (corrected_worst - corrected_best),
    measured_gap, low, high, pairs, p_holm_worst, real (bool) and level.
    """
    from statistics import NormalDist

    ok = table[~table["too_small"]]
    if len(ok) < 2:
        return {}
    est = {g: corrected[g] for g in ok["group"]}
    worst = max(est, key=lambda g: est[g][0])
    best = min(est, key=lambda g: est[g][0])
    if worst == best:  # every estimate equal (e.g. all exactly 0)
        best = next(g for g in est if g != worst)
    pairs = len(ok) * (len(ok) - 1) // 2
    z = NormalDist().inv_cdf(1 - (1 - level) / (2 * pairs))
    gap = est[worst][0] - est[best][0]
    by = ok.set_index("group")
    p_worst = float(by.loc[worst, "p_holm"])
    floor_worst = S.at_floor(float(by.loc[worst, "p_value"]), str(by.loc[worst, "test_method"]))
    split_w, sd_split_w, ece_w, sd_ece_w = est[worst]
    split_b, sd_split_b, ece_b, sd_ece_b = est[best]
    # The worst's error at its lowest against the best's at its highest (the plain ECE, biased up), and
    # the other way round: the bias-corrected estimate of a small group leans low (see above).
    low = (split_w - ece_b) - z * float(np.hypot(sd_split_w, sd_ece_b))
    high = (ece_w - split_b) + z * float(np.hypot(sd_ece_w, sd_split_b))
    alpha = round(1 - level, 12)
    return {"worst": worst, "best": best, "ece_worst": float(by.loc[worst, "ece"]),
            "ece_best": float(by.loc[best, "ece"]), "corrected_worst": float(est[worst][0]),
            "corrected_best": float(est[best][0]), "gap": float(gap),
            "measured_gap": float(by.loc[worst, "ece"] - by.loc[best, "ece"]), "low": float(low), "high": float(high),
            "pairs": pairs, "p_holm_worst": p_worst, "p_worst_at_floor": floor_worst, "real": bool(p_worst < alpha and low > 0), "level": level}


# ------------------------------------------------------------------------------------ the sentences
def group_label(report: GroupReport, name: str) -> str:
    """A group named with what it is a value of ("race = Other", "sex × race = Male × White"), so that
    numeric values (a fold 4, a store 2) read as groups."""
    return f"{' × '.join(report.by)} = {name}" if report.by != [EACH_CLASS] else f"class {name}"


def gap_statement(report: GroupReport) -> str:
    """What the largest gap between groups supports, in plain words (the CLI, the Groups page and the
    audit report all say this; see :func:`largest_gap` for why each claim holds)."""
    g = report.largest_gap
    if not g:
        return "Fewer than two groups have enough rows to compare."
    worst, best = group_label(report, g["worst"]), group_label(report, g["best"])
    level = f"{g['level']:.0%}"
    interval = (f"{g['gap']:.4f} ({level} interval {g['low']:.4f} to {g['high']:.4f}, adjusted for comparing "
                f"{_n_groups(g['pairs'])} groups)")
    errors = (f"{_corrected(g['corrected_worst'])} and {_corrected(g['corrected_best'])} (measured ECE "
              f"{g['ece_worst']:.4f} and {g['ece_best']:.4f})")
    corrected = f"bias-corrected calibration errors {errors}"
    if g["real"]:
        return (f"{worst} is calibrated worse than {best}: {corrected}, a difference of {interval}; {worst} is "
                f"itself miscalibrated beyond chance ({S.p_words(g['p_holm_worst'], g.get('p_worst_at_floor', False))} after correcting for the "
                "other groups).")
    # A gap not shown real is said without its point figure: the difference of the largest and smallest
    # of k noisy estimates is large even when every group is calibrated (audit 5: 0.126 on average for 30
    # calibrated groups of 100-200 rows, true gap 0), so "differs by 0.12" would read as a finding.
    span = (f"{level} interval {g['low']:.4f} to {g['high']:.4f}, adjusted for comparing {_n_groups(g['pairs'])} "
            "groups")
    if g["p_holm_worst"] < round(1 - g["level"], 12):  # not real: so the interval reaches 0
        # The verdict in words first, then the figures (audit 12a: a reader met "-0.1062" and "-0.1354 to
        # 0.7003" before learning that the comparison says nothing either way).
        return (f"{worst} is miscalibrated beyond chance ({S.p_words(g['p_holm_worst'], g.get('p_worst_at_floor', False))} after correcting for the "
                f"other groups), but whether it is calibrated worse than {best} is inconclusive: these rows cannot "
                f"tell. Their bias-corrected calibration errors (the part of the ECE that noise adds removed) are "
                f"{errors}; the difference lies "
                f"somewhere from {g['low']:.4f} to {g['high']:.4f} ({level} interval, adjusted for comparing "
                f"{_n_groups(g['pairs'])} groups), which includes no difference at all.")
    if g["low"] <= 0:
        difference = f"is consistent with no difference from {best} ({span})"
    else:  # the interval leaves out 0, but the worst group's own test finds nothing: no gap is claimed
        difference = f"is not shown to differ from {best}, since its own test finds no miscalibration ({span})"
    # A group flagged by its own test need not be the worst by the bias-corrected error (the test weighs
    # the direction and spread of the misses, the estimate only their size once small-group noise is
    # removed): name it, or the sentence reads as if the flagged group had been forgotten.
    ok = report.table[~report.table["too_small"]]
    flagged = [group_label(report, r.group) for r in ok.itertuples()
               if r.group != g["worst"] and float(r.p_holm) < round(1 - g["level"], 12)]
    if flagged:
        many = len(flagged) > 1
        names = " and ".join(flagged) if len(flagged) <= 3 else f"{', '.join(flagged[:3])} and {len(flagged) - 3} more"
        lead = (f"No group is shown to be calibrated worse than another. {names} "
                f"{'are' if many else 'is'} miscalibrated beyond chance by {'their' if many else 'its'} own "
                f"test, but not the worst by the bias-corrected calibration error, which ranks the groups by the "
                f"size of their error once the noise of small groups is removed; by that measure {worst} is the "
                f"worst, and it shows no evidence {S.TESTED} ({S.p_words(g['p_holm_worst'], g.get('p_worst_at_floor', False))} after ")
    else:
        lead = (f"No group is shown to be calibrated worse than another: {worst}, the worst by its bias-corrected "
                f"calibration error, shows no evidence {S.TESTED} ({S.p_words(g['p_holm_worst'], g.get('p_worst_at_floor', False))} after ")
    return (lead +
            f"correcting for the other groups), and with the part of each ECE that noise adds removed (more in "
            f"smaller groups) it {difference}. Measured ECE {g['ece_worst']:.4f} and "
            f"{g['ece_best']:.4f}.")


def _corrected(value: float) -> str:
    """A bias-corrected calibration error in words. The estimate subtracts the part of the ECE that noise
    is expected to add, so for a group whose error is near 0 it falls below 0 about half the time: said
    as about 0, or "-0.1136" reads as better than perfect (the difference uses the value as it is,
    which is right)."""
    if value >= 0:
        return f"{value:.4f}"
    return (f"about 0 ({value:.4f}: its measured ECE is smaller than what noise alone is expected to add, so "
            "this measure cannot tell its error from 0)")


def _n_groups(pairs: int) -> int:
    """k from k (k - 1) / 2 pairs."""
    return int(round((1 + np.sqrt(1 + 8 * pairs)) / 2))


def group_statements(report: GroupReport) -> list[str]:
    """One sentence per group: what its test supports (:func:`pbr_core.significance.verdict`)."""
    alpha = report.alpha
    out = []
    for row in report.table.itertuples():
        out.append(f"{group_label(report, row.group)} ({rows_words(int(row.n))}): "
                   + S.verdict(_row_test(row), float(row.p_holm) if len(report.table) > 1 else None, alpha,
                               scope_note=False, shift_drawn=_shift_drawn_row(row)))
    return out


def _shift_drawn_row(row) -> bool:
    return shift_drawn(int(row.n), bool(row.too_small), str(row.test_method), float(row.detectable_shift))


def _row_test(row) -> S.CalibrationTest:
    """The test of a row of a GroupReport's table (what :func:`pbr_core.significance.verdict` reads)."""
    return S.CalibrationTest(n=int(row.n), effective_n=float("nan"), p_value=float(row.p_value),
                             method=str(row.test_method), z=float(row.z), p_spiegelhalter=float("nan"),
                             chi2_cox=float(row.chi2_cox), p_cox=float("nan"),
                             detectable_shift=float(row.detectable_shift), level=float("nan"),
                             rounded_rows=int(row.rounded_rows),
                             rounding=_rounded_words(int(row.rounded_rows)))


def _rounded_words(k: int) -> str:
    """What a group's sentence says first of its ``k`` outcomes against a score of 0 or 1 that may be the
    file's rounding ("" when none): "1 outcome went against ...", "2 outcomes went against ..."."""
    if not k:
        return ""
    return (f"{k:,} outcome{'' if k == 1 else 's'} went against a score of exactly 0 or 1 that may be the file's "
            "rounding, tested within it")


# ------------------------------------------------------------------------------------ unnamed groups
def find_slices(preds: Predictions, columns: Sequence[str] | str | None = None, max_order: int = 2, **kwargs):
    """The groups nobody named: slices of the rows (a value of a column, a quantile band of a number,
    a month, or a pair of them) whose calibration departs from the rest, found on one random half of
    the rows and reported only when confirmed on the other, held-out half (Holm-corrected over the
    slices tested: whatever the truth, the chance that the search names even one slice that is in fact
    calibrated is at most 1 - level).

    :func:`pbr_core.slices.find_slices` (this is it; its docstring has the parameters, the search and
    the guarantee), returning a :class:`pbr_core.slices.SliceReport`.
    """
    from pbr_core.slices import find_slices as search

    return search(preds, columns, max_order, **kwargs)
