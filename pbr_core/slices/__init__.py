"""Where is the model miscalibrated? Find the slices of the rows whose calibration departs from the
rest, and report only those that hold up on rows the search never saw: calibrated differently from
the rest there, and miscalibrated.

An auditor rarely knows which groups to name: the harm hides in combinations nobody listed (women
aged 25-34, a product line in one month). :func:`find_slices` searches the file's other columns
itself and says which slices are miscalibrated, with a guarantee that does not depend on how many
slices it looked at.

The search
----------
* **Candidate slices.** Every column besides the predictions, except those whose name says they are
  an identifier, a data split, a weight or a per-record measurement (as
  :func:`pbr_core.groups.default_group_column`: a slice of one row, a split of the data, or rows
  selected by something measured with the outcome, which would make any model look miscalibrated,
  as grouping by the true class does), and those that restate the outcome on these rows (every value
  holds a single outcome, as an LLM benchmark's ``grade`` of which ``correct`` is made:
  :func:`pbr_core.outcome_columns.outcome_columns`; slices by them are miscalibrated by construction,
  so they are left out even when named, and the report says so in ``restating``). Text and
  categorical values as they are; numbers with more
  than 10 values in 5 quantile bands (quintiles, "age 25–34"); dates by month. Single columns and,
  with ``max_order=2``, every pair of them (each value of one with each value of the other). A slice
  needs at least ``min_rows`` rows (default 100); values with fewer rows are never a slice, alone or
  in a pair.
* **The split.** Each row goes to the *search half* or the *confirmation half* by a seeded hash of its
  position in the file (:func:`pbr_core.slices._plan.row_hash`): independent random halves that a
  stream reads the same way (file and row, never the row's values or outcome).
* **The score** (search half only): how far the slice's calibration departs from the rest's, the Wald
  statistic of the difference between their recalibration lines (calibration in the large and the
  slope, Cox 1958; :mod:`pbr_core.slices._search`), about chi^2(2) when the slice is calibrated like
  the rest. It ranks the slices whose miscalibration is *theirs* first, not the largest slices of a
  file miscalibrated everywhere alike (which the overall test already says). A slice is proposed when
  it is calibrated worse than the rest (its chi^2 per row above the rest's) and departs from it at
  p < ``screen`` (0.05) on the search half.
* **Not the same finding twice** (forward selection, :mod:`pbr_core.slices._search`): the slices are
  chosen one at a time, at most ``max_slices`` (10); each is the best ranked (its departure's p-value
  times the number of slices of its order: a pair must beat a single column by about tenfold, so a
  finding is named by its simplest description), and once chosen its rows are set aside and every
  other slice is scored again on its remaining rows. A part of a chosen slice then has nothing left;
  an overlapping slice is judged by its other rows. Each chosen slice is confirmed and described on
  its **own rows**, those in no slice chosen before it (its sentence says so).
* **Bounded work.** The search scores the search half's rows with the smallest hashes, at most
  :data:`SEARCH_ROWS` (1M; every row of a file up to 2M), the slices' sizes come from counts over
  every row; at most :data:`MAX_CELLS` cells are summed (the pairs of the columns with the most values
  are dropped first, and the report says so).

The guarantee
-------------
Only the kept slices are tested, on the **confirmation half**, twice, each family corrected with
**Holm's method over the slices tested**:

* **Does it differ from the rest?** Its outcomes against the rest's **at the same predicted
  probability** (:mod:`pbr_core.slices._strata`): within fine strata of the score cut on the search
  half (about 25 held-out rows each), the slice's outcomes against its share of the stratum's
  (Cochran-Mantel-Haenszel), an overall shift and one that grows along the score (2 df), exact
  (hypergeometric draws given each stratum's margins) where the chi^2 tail is below 0.1 and its variance
  below 100 (few outcomes). The rest is
  the held-out rows in neither it nor a slice chosen before it (the rest the search compared it
  with). This tests what the sentence says, E[y | p, slice] = E[y | p, rest], whatever shape the file's
  shared miscalibration has. Before audit 12b it compared logistic recalibration lines around one
  line fitted on the search half: under one shared curve not linear in logit p (p + 0.08, a bend),
  slices whose scores lie elsewhere got other lines, and 42-100 % of such files named a slice.
* **Is it miscalibrated?** The test of calibration of :mod:`pbr_core.significance` (Cox's test with
  Spiegelhalter's z; exact Monte Carlo p-values where a slice carries little information).

A slice **holds up** when both corrected p-values are below 1 - level. Why both: "miscalibrated"
alone is true of every slice of a file miscalibrated everywhere alike (an audit's 40 of 40 such
files named a slice, 4.9 on average, under a heading of slices departing from the rest); "different
from the rest" alone would name a calibrated slice of a file miscalibrated elsewhere. The search saw
none of these rows, so given what it chose, each test is valid as it stands (the rows are independent
draws; the split does not look at them), and Holm's correction holds whatever their dependence.
Hence, whatever the truth, the chance that the search names even one slice as calibrated differently
from the rest when it is in fact calibrated like the rest of the file is at most 1 - level (5 %), and the
chance that it names even one slice as miscalibrated when it is in fact calibrated is at most the same,
however many slices were searched (each by its family's Holm correction, which controls the
family-wise error in the strong sense; the rest's line is a large-sample approximation).
This is a property of the procedure, not a posterior probability that a given reported slice is
calibrated. The price is power: each slice is tested on half its rows, and a slice the search did not
rank among the first ``max_slices`` is not tested at all. A slice that is not reported is not shown to
be calibrated; the report says how large a miscalibration the tested slices would have shown.

What a held-up slice reports comes from its confirmation rows (unbiased: the search, which picks
the largest departures, would overstate them): its calibration in the large (mean prediction minus
observed frequency, in points), the calibration slope (one Newton step from calibration), the calibration
in the large of the rest it was compared with on the same half, its reliability diagram and ECE, and
the two tests.

The same numbers on a dataset beyond memory: :func:`pbr_core.stream.compute_slices` (a pass over the
slice columns to plan, one over the rows for the search sums, one for the chosen slices; the sums
merge across batches and Dask tasks; the plan, split, choice and p-values equal the in-memory ones).

References
----------
Cox, D. R. (1958). Two further applications of a model for binary regression. Biometrika 45.
Holm, S. (1979). A simple sequentially rejective multiple test procedure. Scand. J. Statist. 6.
Cox, D. R. (1975). A note on data-splitting for the evaluation of significance levels. Biometrika 62.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np
import pandas as pd

from pbr_core import metrics as M
from pbr_core import significance as S
from pbr_core.groups import MIN_ROWS, TRUE_CLASS, TRUE_CLASS_REFUSED, Target, _inputs, group_tests, holm
from pbr_core.outcome_columns import OutcomeColumn, outcome_columns
from pbr_core.predictions import Predictions
from pbr_core.slices._confirm import ConfirmSums, bin_ranges, masks, own
from pbr_core.slices._plan import (DATE_HEAD, MAX_CELLS, MAX_LEVELS, N_BANDS, Plan, build_plan, date_columns, halves,
                                   row_hash, skip_by_name, summarize)
from pbr_core.slices._search import SEARCH_ROWS, Choice, SearchSample, choose
from pbr_core.slices._strata import compare

__all__ = ["MAX_CELLS", "MAX_LEVELS", "MAX_SLICES", "SCREEN", "SEARCH_ROWS", "SliceReport", "find_slices",
           "guarantee_statement", "searched", "slice_headline", "slice_mask", "slice_statements", "slice_words",
           "slices_json", "slices_text", "left_out_words"]

#: Slices sent to confirmation (the Holm correction is over this many at most).
MAX_SLICES = 10
#: A slice is proposed when its departure from the rest has p below this on the search half.
SCREEN = 0.05
#: Slope words: outside this range the sentence says the predictions are too extreme or too timid.
SLOPE_WORDS = (0.8, 1.25)

TABLE_COLUMNS = ["slice", "apart_from", "rank", "n", "n_search", "n_confirm", "search_chi2", "search_p", "mean_predicted", "rate", "gap",
                 "n_rest", "rest_gap", "slope", "slope_se", "n_bins", "ece", "z", "chi2_cox", "p_value", "p_holm", "test_method",
                 "detectable_shift", "rest_chi2", "rest_p", "rest_p_holm", "held_up"]



@dataclass
class SliceReport:
    """What :func:`find_slices` found. ``table`` has one row per slice tested on the confirmation
    half, in the order the search chose them; ``diagrams`` each one's reliability table on its confirmation
    rows; ``overall`` the whole file's."""

    table: pd.DataFrame
    diagrams: dict[str, pd.DataFrame]
    overall: pd.DataFrame
    overall_test: S.CalibrationTest
    target: Target
    level: float = 0.95
    seed: int = 0
    columns: list[tuple[str, str]] = field(default_factory=list)   # (column, how it was cut)
    skipped: list[tuple[str, str]] = field(default_factory=list)   # (column, why not)
    notes: list[str] = field(default_factory=list)
    #: The columns left out because they restate the outcome (each value one outcome; ``.why`` says so)
    restating: list[OutcomeColumn] = field(default_factory=list)
    scored: int = 0            # slices with enough rows, scored on the search half
    screened: int = 0          # of which proposed (worse than the rest, p < screen)
    n_rows: int = 0
    n_search: int = 0
    n_confirm: int = 0
    max_order: int = 2
    min_rows: int = MIN_ROWS
    max_slices: int = MAX_SLICES
    screen: float = SCREEN
    conditions: dict[str, list[tuple[str, int]]] = field(default_factory=dict, repr=False)
    plan: Plan | None = field(default=None, repr=False)

    @property
    def alpha(self) -> float:
        return _alpha(self.level)

    @property
    def held_up(self) -> list[str]:
        """The slices that hold up on the confirmation half: calibrated differently from the rest and
        miscalibrated, each beyond chance (Holm over those tested)."""
        return self.table.loc[self.table["held_up"], "slice"].tolist()

    @property
    def tested(self) -> int:
        return len(self.table)


# --------------------------------------------------------------------------------- the search in memory
def candidate_columns(available: Sequence[str], columns: Sequence[str] | str | None
                      ) -> tuple[list[str], list[tuple[str, str]]]:
    """The columns to slice and (column, why not) for those left out. ``columns=None``: every column
    whose name does not say it is an identifier, a split, a weight or a per-record measurement."""
    available = [str(c) for c in available]
    if columns is None:
        names, skipped = [], []
        for c in available:
            why = skip_by_name(c)
            (skipped.append((c, why)) if why else names.append(c))
        return names, skipped
    wanted = [columns] if isinstance(columns, str) else [str(c) for c in columns]
    for c in wanted:
        if c not in available:
            if c == TRUE_CLASS:
                raise ValueError(TRUE_CLASS_REFUSED)
            raise ValueError(f"no column {c!r} to slice by; the file's other columns are {available or 'none'}.")
    return list(dict.fromkeys(wanted)), []


def check_settings(max_order: int, min_rows: int, max_slices: int, screen: float, n_bands: int, level: float) -> float:
    if max_order not in (1, 2):
        raise ValueError(f"Expected argument `max_order` to be 1 (single columns) or 2 (pairs too), but got {max_order!r}")
    for name, v, lo in (("min_rows", min_rows, 2), ("max_slices", max_slices, 1), ("n_bands", n_bands, 2)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < lo:
            raise ValueError(f"Expected argument `{name}` to be an integer of at least {lo}, but got {v!r}")
    if not (isinstance(screen, (int, float)) and 0 < screen <= 1):
        raise ValueError(f"Expected argument `screen` to be in (0, 1], but got {screen!r}")
    return M._check_level(level)


def find_slices(preds: Predictions, columns: Sequence[str] | str | None = None, max_order: int = 2, *,
                target: Target = "positive", min_rows: int = MIN_ROWS, max_slices: int = MAX_SLICES,
                screen: float = SCREEN, n_bands: int = N_BANDS, level: float = 0.95, seed: int = 0) -> SliceReport:
    """Slices of the rows whose calibration departs from the rest, confirmed on held-out rows.

    Parameters
    ----------
    preds : Predictions
        With the columns to search in ``preds.metadata`` (any column of the file besides the scores
        and the label is kept there by :func:`pbr_core.load_predictions`).
    columns : list of str, optional
        The columns to slice (default: every column but identifiers, splits, weights and per-record
        measurements, see the module docstring).
    max_order : {1, 2}
        Single columns only, or pairs of columns too.
    target : {"positive", "top_label"}
        Binary data: calibration of p(y=1) (default) or of the top label. Other data: top label.
    min_rows : int
        The fewest rows a slice may have (both halves together).
    max_slices : int
        The most slices tested on the confirmation half (Holm's correction is over those tested).
    screen : float
        A slice is proposed when it departs from the rest with p below this on the search half.
    n_bands : int
        Quantile bands of a numeric column.
    level : float
        The report's confidence: a slice holds up when both its corrected p-values (differs from the
        rest; miscalibrated) are below 1 - level.
    seed : int
        Seeds the split into halves and the Monte Carlo tests.

    Returns
    -------
    SliceReport
        ``held_up``: the slices calibrated differently from the rest of the file, and miscalibrated,
        beyond chance on rows the search never saw;
        :func:`slice_statements` / :func:`guarantee_statement` say what they mean.

    Examples
    --------
    >>> import pbr_core
    >>> from pbr_core.groups import find_slices
    >>> adult = pbr_core.load_predictions("sample_data/adult_gradient_boosting.csv.gz")
    >>> report = find_slices(adult)
    >>> report.scored > 500, report.n_rows
    (True, 16281)
    """
    level = check_settings(max_order, min_rows, max_slices, screen, n_bands, level)
    meta = preds.metadata
    if meta is None or meta.shape[1] == 0:
        raise ValueError("finding slices needs columns besides the predictions (a segment, a region, an age, a date...): "
                         "this file has none.")
    conf, out, _ = _inputs(preds, target)
    what: Target = M.BINARY_TARGET.measured(preds.kind, target)
    names, skipped = candidate_columns(list(meta.columns), columns)
    # Left out even when named: a slice by a column whose every value holds one outcome is
    # miscalibrated by construction (audit 9a: 'grade' made all 5 slices of an LLM file "hold up").
    restating = list(outcome_columns(preds, names).values())
    names = [c for c in names if c not in {found.column for found in restating}]
    n = conf.size
    h = row_hash(seed, 0, 0, n)
    half = halves(h)
    dates = date_columns({c: meta[c].dropna().head(DATE_HEAD) for c in names})
    summaries = {c: summarize(meta[c], dates[c], h) for c in names}
    plan = build_plan(names, summaries, dates, n_rows=n, min_rows=min_rows, max_order=max_order, n_bands=n_bands,
                      skipped=skipped)
    codes = {i: col.codes(meta[col.name]) for i, col in enumerate(plan.columns)}
    matrix = np.stack([codes[i] for i in range(len(plan.columns))], axis=1) if plan.columns else np.zeros((n, 0), np.intp)
    search = SearchSample.empty(plan).update(matrix, half, h, conf, out)
    choice = choose(plan, search, min_rows=min_rows, max_slices=max_slices, screen=screen)
    confirm = ConfirmSums.empty(bin_ranges(plan, choice.chosen, search.counts[1]), n, choice.edges)
    confirm.update(masks(plan, choice.chosen, codes, n), half, conf, out, preds.as_written(conf))
    report = assemble(plan, choice, confirm, target=what, level=level, seed=seed, max_order=max_order,
                      min_rows=min_rows, max_slices=max_slices, screen=screen)
    report.restating = restating
    return report


def slice_mask(preds: Predictions, report: SliceReport, name: str) -> np.ndarray:
    """Which rows of ``preds`` (the rows the report was made from) the slice ``name`` was measured on:
    its rows that are in no slice the search chose before it."""
    if report.plan is None or name not in report.conditions:
        raise ValueError(f"no slice {name!r} in this report; its slices are {list(report.conditions)}.")
    by_name = {c.name: c for c in report.plan.columns}
    names = list(report.conditions)
    inside = np.ones((preds.n, names.index(name) + 1), dtype=bool)
    for s, other in enumerate(names[:inside.shape[1]]):
        for column, code in report.conditions[other]:
            inside[:, s] &= by_name[column].codes(preds.metadata[column]) == code
    return own(inside)[:, -1]


# --------------------------------------------------------------------------------- the report
def assemble(plan: Plan, choice: Choice, confirm: ConfirmSums, *, target: Target, level: float, seed: int,
             max_order: int, min_rows: int, max_slices: int, screen: float) -> SliceReport:
    """The :class:`SliceReport` from the plan, the choice and the confirmation sums (in memory and
    streamed alike). Each slice is measured and tested on its own rows: those in no slice chosen
    before it (``apart_from`` names the earlier slices it shares rows with)."""
    alpha = _alpha(level)
    chosen = choice.chosen
    names = [" and ".join(plan.columns[i].condition(code) for i, code in c.conditions) for c in chosen]
    sums = confirm.sums
    # every slice reads how finely the file wrote its values from the whole file's rows, not its own
    tests = group_tests(sums, names, confirm.rows, level, seed, evidence=S.file_evidence(confirm.overall))
    p_holm = holm([t.p_value for t in tests]) if tests else np.zeros(0)
    # Does the slice differ from the rest? Its outcomes against the rest's at the same predicted
    # probability, within strata of the score cut on the search half (pbr_core.slices._strata), the rest
    # being the held-out rows in neither it nor a slice chosen before it (the rest the search compared it
    # with when it chose it; its own rows are disjoint from theirs, so that rest is the total less the
    # running sum). Miscalibrated alone is not enough: a file miscalibrated everywhere alike has every
    # slice miscalibrated (audit 5: 40 of 40 such files named a slice, 4.9 on average). Nor is a
    # different recalibration line, the test before audit 12b: under one shared curve not linear in
    # logit p, slices whose scores lie elsewhere get other best lines (42-100 % of such files named one).
    rests = confirm.confirm_total[:, None] - np.cumsum(sums, axis=1) if len(chosen) else np.zeros((S.N_SUMS, 0))
    strata = confirm.strata
    vs_rest = compare(strata, confirm.strata_total[:, :, None] - np.cumsum(strata, axis=2), seed)
    rest_p = np.where(np.isfinite(vs_rest["p"]), vs_rest["p"], 1.0)   # nothing to compare: no evidence
    rest_holm = holm(list(rest_p)) if len(chosen) else np.zeros(0)
    rows, diagrams = [], {}
    for s, (cand, name, test) in enumerate(zip(chosen, names, tests)):
        su = sums[:, s]
        n_c = su[0]
        rest = rests[:, s]
        count, s_p, s_y = confirm.slice_bins(s)
        apart = [names[i] for i in range(s) if confirm.overlap[i, s] > 0]
        with np.errstate(invalid="ignore", divide="ignore"):
            rows.append({"slice": name, "apart_from": apart, "rank": s + 1, "n": int(confirm.own_rows[:, s].sum()),
                         "n_search": int(confirm.own_rows[0, s]), "n_confirm": int(n_c), "search_chi2": cand.chi2,
                         "search_p": cand.p, "mean_predicted": su[9] / n_c, "rate": (su[9] + su[2]) / n_c,
                         "gap": -su[2] / n_c, "n_rest": int(round(rest[0])),
                         "rest_gap": -rest[2] / rest[0] if rest[0] > 0 else float("nan"),
                         "slope": _slope(su, confirm.moments[:, s]),
                         "slope_se": _slope_se(su, confirm.moments[:, s]), "n_bins": int(count.size), "ece": float(np.sum(np.abs(s_p - s_y)) / n_c)
                         if n_c else np.nan, "z": test.z, "chi2_cox": test.chi2_cox, "p_value": test.p_value,
                         "p_holm": float(p_holm[s]), "test_method": test.method,
                         "detectable_shift": test.detectable_shift, "rest_chi2": float(vs_rest["chi2"][s]),
                         "rest_p": float(rest_p[s]), "rest_p_holm": float(rest_holm[s]),
                         # both: calibrated differently from the rest, and miscalibrated itself
                         "held_up": bool(p_holm[s] < alpha and rest_holm[s] < alpha)})
        diagrams[name] = M.reliability_table(count, s_p, s_y, int(n_c), level)
    table = pd.DataFrame(rows, columns=TABLE_COLUMNS)
    if len(table):
        # in the order the search chose them: a slice's rows in the slices before it are set aside,
        # so the one it is "apart from" are listed above it
        table = table.sort_values("rank", kind="stable").reset_index(drop=True)
    count, s_p, s_y = confirm.overall_sums
    n_rows = int(round(confirm.overall[0]))
    how = {"values": "by value", "months": "by month"}
    return SliceReport(
        table=table, diagrams=diagrams, overall=M.reliability_table(count, s_p, s_y, n_rows, level),
        overall_test=_overall_test(confirm, seed, alpha), target=target, level=level, seed=seed,
        columns=[(c.name, how.get(c.how, f"{len(c.levels) - c.missing} quantile bands")) for c in plan.columns],
        skipped=list(plan.skipped), notes=list(plan.notes) + _sample_note(choice), scored=choice.scored,
        screened=choice.screened, n_rows=n_rows, n_search=n_rows - int(round(confirm.confirm_total[0])),
        n_confirm=int(round(confirm.confirm_total[0])), max_order=max_order, min_rows=min_rows,
        max_slices=max_slices, screen=screen,
        conditions={name: [(plan.columns[i].name, code) for i, code in c.conditions] for name, c in zip(names, chosen)},
        plan=plan)


def _sample_note(choice: Choice) -> list[str]:
    if choice.sample >= choice.search_rows:
        return []
    return [f"the search scored {choice.sample:,} of the search half's {choice.search_rows:,} rows (a uniform sample, "
            f"SEARCH_ROWS = {SEARCH_ROWS:,}); the slices' sizes and the confirmation use every row"]


def _alpha(level: float) -> float:
    """1 - level as written (1 - 0.95 is 0.050000000000000044 in floating point: a Monte Carlo p-value of
    exactly 0.05 after correction would pass as below it)."""
    return round(1.0 - level, 12)


def _slope(s: np.ndarray, moments: np.ndarray) -> float:
    """The calibration slope: the least-squares slope of the outcome on the prediction, cov(y, p) /
    var(p), from sums (1: right; below 1 the predictions spread further than the outcomes follow, too
    extreme; above 1 too timid). NaN when the predictions hardly vary. Unlike the logistic slope it
    stays finite for probabilities of exactly 0 or 1 (verbal confidences of 100 %)."""
    n, sp = s[0], s[9]
    sy = sp + s[2]
    if n < 2:
        return float("nan")
    var = moments[0] - sp * sp / n
    if not var > 1e-12 * n:
        return float("nan")
    return float((moments[1] - sy * sp / n) / var)


def _slope_se(s: np.ndarray, moments: np.ndarray) -> float:
    """The slope's standard error if the slice were calibrated: sqrt(mean p(1 - p) / sum (p - mean p)^2)
    (the least-squares formula, with each outcome's variance p(1 - p) averaged)."""
    n, sp = s[0], s[9]
    if n < 2:
        return float("nan")
    var = moments[0] - sp * sp / n
    return float(np.sqrt(s[4] / n / var)) if var > 1e-12 * n else float("nan")


def _overall_test(confirm: ConfirmSums, seed: int, alpha: float) -> S.CalibrationTest:
    """The whole file's test of calibration: exact where it needs to be, on the rows in a canonical
    order (a stream meets them in another)."""
    rows = confirm.all_rows()
    if rows is None:
        return S.calibration_test_from_sums(confirm.overall, alpha=alpha)
    p, y = rows
    order = np.lexsort((y, p))
    return S.calibration_test(p[order], y[order], alpha=alpha, seed=seed, evidence=S.file_evidence(confirm.overall))


# --------------------------------------------------------------------------------- the sentences
def _pts(v: float) -> str:
    return f"{100 * abs(v):.1f} points"


def slice_words(row: Any) -> str:
    """A slice as the report measured it: its conditions, and which rows of earlier slices it leaves out.

    The earlier slices are named (``apart_from``), not counted as "listed before it": a sentence or a
    table row may be read where they are listed after it, or not at all (the page lists the held-up
    slices' sentences only)."""
    apart = list(row.apart_from)
    if not apart:
        return row.slice
    if len(apart) == 1:
        return f"{row.slice} (apart from its rows in the slice {apart[0]}, chosen before it)"
    return (f"{row.slice} (apart from its rows in the {len(apart)} slices chosen before it: "
            + "; ".join(apart) + ")")


def slice_sentence(report: SliceReport, row: Any) -> str:
    """One held-up slice in plain words: what is wrong, by how much, on how many rows, confirmed how."""
    top = report.target == "top_label"
    high = row.gap > 0
    if top:
        what = f"{_pts(row.gap)} too {'confident' if high else 'cautious'}"
        seen = f"right {row.rate:.1%} of the time on them at a mean confidence of {row.mean_predicted:.1%}"
    else:
        what = f"{_pts(row.gap)} too {'high' if high else 'low'}"
        seen = f"y = 1 in {row.rate:.1%} of them, {row.mean_predicted:.1%} predicted on average"
    lo, hi = SLOPE_WORDS
    slope = ""
    # the spread only when it is clearly off: outside [0.8, 1.25] and two standard errors from 1
    if np.isfinite(row.slope) and not lo <= row.slope <= hi and abs(row.slope - 1) > 2 * row.slope_se:
        slope = (f"with predictions spread too {'far apart' if row.slope < lo else 'little'} (calibration slope "
                 f"{row.slope:.2f}; 1 is right)")
    if abs(row.gap) < 0.01 and slope:
        lead = f"are right on average ({_pts(row.gap)} off) but {slope}"
    else:
        lead = f"are {what}" + (f", {slope}" if slope else "")
    rest = (f" (the rest of the file's held-out rows{_outside(row)}: {_pts(row.rest_gap)} too "
            f"{_dir(row.rest_gap, top)})" if np.isfinite(row.rest_gap) else "")
    # Every number is on the slice's held-out rows (the search, which picks the largest departures,
    # would overstate them on its own half), and the sentence says so: the Groups table's figures for
    # the same rows are on all of them and differ a little.
    return (f"Predictions for {slice_words(row)}, on its {int(row.n_confirm):,} held-out rows (of "
            f"{int(row.n):,} in all), {lead}: {seen}{rest}; confirmed there, calibrated differently from that rest "
            f"({S.p_words(row.rest_p_holm)}) and miscalibrated ({S.p_words(row.p_holm, S.at_floor(row.p_value, row.test_method))}), after correcting for the "
            f"{report.tested} slice{'s' if report.tested != 1 else ''} tested.")


def _outside(row: Any) -> str:
    """Which held-out rows the slice was compared with: the rest of the file, less the slices chosen
    before it (the rest the search compared it with when it chose it)."""
    return "" if int(getattr(row, "rank", 1)) == 1 else " outside the slices chosen before it"


def _dir(gap: float, top: bool) -> str:
    if top:
        return "confident" if gap > 0 else "cautious"
    return "high" if gap > 0 else "low"


def slice_statements(report: SliceReport) -> list[str]:
    """One sentence per held-up slice (then one line per slice tested that did not hold up)."""
    out = [slice_sentence(report, row) for row in report.table.itertuples() if row.held_up]
    for row in report.table.itertuples():
        if not row.held_up:
            out.append(f"{slice_words(row)} ({int(row.n):,} rows): proposed by the search, not confirmed on "
                       f"{int(row.n_confirm):,} held-out rows (after correction: different from the rest, "
                       f"{S.p_words(row.rest_p_holm)}; miscalibrated, {S.p_words(row.p_holm, S.at_floor(row.p_value, row.test_method))}).")
    return out


def slice_headline(report: SliceReport) -> str:
    """What the search found, in one or two sentences (never 'calibrated')."""
    pairs = " and their pairs" if report.max_order >= 2 and len(report.columns) > 1 else ""
    searched = (f"{report.scored:,} slice{'s' if report.scored != 1 else ''} of {len(report.columns)} "
                f"column{'s' if len(report.columns) != 1 else ''}"
                f"{pairs}")
    held = report.held_up
    if held:
        return (f"{len(held)} slice{'s hold' if len(held) != 1 else ' holds'} up: calibrated differently from the "
                f"rest of the file, and miscalibrated, beyond chance on rows the search never saw (searched: "
                f"{searched}; {report.tested} tested).")
    if not report.columns:
        if report.restating and not report.skipped:
            return ("No column was searched: every column restates the outcome (see below), and slices by such a "
                    "column would be miscalibrated by construction.")
        return "No column could be cut into slices (see why below), so nothing was searched."
    if report.scored == 0:  # columns were cut, but no value, band or pair has min_rows rows (a tiny file)
        return _none_formed(report)
    if report.tested == 0:
        return (f"No slice holds up: none of the {searched} departed from the rest of the file on the search half "
                f"(p < {report.screen:g}) while calibrated worse than it, so none was tested. This is not proof "
                "that every slice is calibrated.")
    shifts = report.table["detectable_shift"].dropna()
    shown = (f" The slices tested would have shown a shift of about {S.shift_words(shifts.min())}"
             + (f" to {S.shift_words(shifts.max())}" if shifts.max() > shifts.min() + 5e-4 else "")
             + " at least 80 % of the time." if len(shifts) else "")
    return (f"No slice holds up: of the {searched}, the search proposed {report.tested}, and none was both "
            f"calibrated differently from the rest and miscalibrated beyond chance on the held-out rows. This is not "
            f"proof that every slice is calibrated, nor calibrated like the rest."
            + shown)


def _none_formed(report: SliceReport) -> str:
    """The headline when no slice has ``min_rows`` rows: how many a slice needs and how many the file
    has, in plain words (audit 12a: a 12-row file read "none of the 0 slices of 3 columns departed ...
    two halves of 8 and 4 rows", as if a search had run)."""
    n, m, k = report.n_rows, report.min_rows, len(report.columns)
    why = (f"a slice needs at least {m:,} rows, and this file has {n:,}" if n <= m else
           f"a slice needs at least {m:,} rows, and no value or band of the {k} column{'s' if k != 1 else ''} "
           f"that could be cut{' (nor any pair of them)' if report.max_order >= 2 and k > 1 else ''} holds that "
           f"many of this file's {n:,} rows")
    return (f"No slice could be formed, so nothing was searched or tested: {why}. This says nothing about "
            "whether parts of the file are calibrated; a larger file can be searched.")


def searched(report: SliceReport) -> bool:
    """Whether a search ran: some column could be cut into slices and some slice had ``min_rows`` rows
    (False on a file too small for any such slice: then nothing was scored or tested, and no split
    into halves is described)."""
    return bool(report.columns) and report.scored > 0


def guarantee_statement(report: SliceReport) -> str | None:
    """What the report's claims are guarded by, in words; None when nothing was searched (there is then
    no search and no claim to guard, and describing one would contradict the headline)."""
    if not searched(report):
        return None
    return (f"How the search is guarded: the rows were split at random (seed {report.seed}) into two halves of "
            f"{report.n_search:,} and {report.n_confirm:,} rows. The search scored every slice on the first half "
            f"only and sent the ones that departed most from the rest (at most {report.max_slices}) to be tested on "
            "the second half, which it never saw. A slice is reported only when, there, it is calibrated "
            "differently from the rest (its outcomes against the rest's at the same predicted probabilities) and miscalibrated (the test of calibration, exact "
            "for small slices), each test corrected for the number of slices tested. So, whatever the search "
            "picked and whatever the truth, the chance that a search like this names even one slice as calibrated "
            "differently from the rest when it is in fact calibrated like the rest of the file is at most "
            f"{report.alpha:.0%}, and the chance that it names even one slice as miscalibrated when it is in fact "
            f"calibrated is at most {report.alpha:.0%} (a property of the procedure, not the probability that a "
            "given slice here is calibrated). "
            "A slice not reported is not shown to be calibrated: each was tested on half its rows, and only the "
            "ones the search ranked first.")


def overall_sentence(report: SliceReport) -> str:
    return f"Over the whole file ({report.n_rows:,} rows): {S.verdict(report.overall_test, alpha=report.alpha)}"


# --------------------------------------------------------------------------------- text and JSON
def slices_json(report: SliceReport) -> dict[str, Any]:
    """The report as JSON-ready values (``pbr-calib evaluate --find-slices --format json``)."""
    return {"held_up": report.held_up, "headline": slice_headline(report), "statements": slice_statements(report),
            "guarantee": guarantee_statement(report), "overall": overall_sentence(report),
            "target": report.target, "level": report.level, "seed": report.seed, "n_rows": report.n_rows,
            "n_search": report.n_search, "n_confirm": report.n_confirm, "scored": report.scored,
            "tested": report.tested, "max_order": report.max_order, "min_rows": report.min_rows,
            "columns": [{"column": c, "cut": how} for c, how in report.columns],
            "skipped": [{"column": c, "why": why} for c, why in report.skipped],
            "restating": [{"column": f.column, "why": f.why} for f in report.restating], "notes": report.notes,
            "rows": json.loads(report.table.to_json(orient="records", double_precision=15)),
            "diagrams": {k: json.loads(v.to_json(orient="records", double_precision=15))
                         for k, v in report.diagrams.items()}}


def left_out_words(column: str, why: str) -> str:
    """One column left out because it restates the outcome, as the terminal shows it."""
    return f"left out {column!r}: {why}"


def slices_text(report: SliceReport) -> str:
    """The report as the terminal shows it."""
    t = report.table
    what = "p(y=1)" if report.target == "positive" else "top label"
    how = (f"searched on {report.n_search:,} rows, confirmed on the other {report.n_confirm:,}" if searched(report)
           else "not searched")
    lines = [f"slices whose calibration departs from the rest ({what}; {how})", slice_headline(report)]
    if len(t):
        shown = t[["slice", "n", "n_confirm", "mean_predicted", "rate"]].copy()
        shown.columns = ["slice", "n", "held out", "mean predicted*", "observed*"]
        # in points and named by their sign, as the sentences ("8.1 points too low") and the dashboard say them
        shown["gap: pred - obs (points)*"] = 100 * t["gap"]
        shown["rest: pred - obs (points)*"] = 100 * t["rest_gap"]
        shown["slope*"] = t["slope"]
        shown["p vs rest (Holm)"] = [S.format_p(p) for p in t["rest_p_holm"]]
        shown["p (Holm)"] = [S.format_p(p, S.at_floor(v, m)) for p, v, m in zip(t["p_holm"], t["p_value"], t["test_method"])]
        shown["holds up"] = ["yes" if h else "no" for h in t["held_up"]]
        lines.append(shown.to_string(index=False, float_format=lambda v: f"{v:.4g}"))
        lines.append("* on the held-out rows only (the search's half would overstate the gaps); n: all the "
                     "slice's rows, in the order the search chose the slices; gap: the mean prediction minus the "
                     "observed frequency, in points (below 0: predictions too low; above 0: too high); rest: the "
                     "same for the rest of the file (outside the slices chosen before it); p vs rest: is the slice "
                     "calibrated differently from that rest; p: is it miscalibrated; a slice holds up when both are "
                     f"below {report.alpha:g}")
    guarantee = guarantee_statement(report)
    lines += [*(f"  {s}" for s in slice_statements(report)), overall_sentence(report),
              *([guarantee] if guarantee else [])]
    if report.columns:
        lines.append(("columns searched: " if searched(report) else "columns cut, with no slice of enough rows: ")
                     + ", ".join(f"{c} ({how})" for c, how in report.columns))
    if report.skipped:
        lines.append("not searched: " + "; ".join(f"{c} ({why})" for c, why in report.skipped))
    lines += [left_out_words(f.column, f.why) for f in report.restating]
    lines += [f"note: {n}" for n in report.notes]
    return "\n".join(lines)
