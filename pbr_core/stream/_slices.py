"""Finding the slices (:func:`pbr_core.slices.find_slices`) on a dataset beyond memory.

Everything the search and the confirmation need is a sum over rows, so the rows stream by batch by
batch (or unit by unit on Dask, partial results merged):

1. **Planning** reads only the slice columns: per column its value counts (at most
   :data:`pbr_core.slices.MAX_LEVELS` kept), the numbers of the rows with the smallest hashes (the
   quantile bands' sample) and the total rows; whether a text column holds dates is decided first on
   its first 200 values, as in memory. This fixes the candidate slices.
2. **Searching** reads the predictions and the slice columns once: the rows of every candidate cell
   in each half (memory bounded by :data:`pbr_core.slices.MAX_CELLS`, a cap the report states when it
   is reached), and the search half's rows with the smallest hashes, at most
   :data:`pbr_core.slices.SEARCH_ROWS` (their slice codes, p and y: ~36 MB for 1M rows of 10 columns;
   the report says when the search scored a sample). The search then chooses at most ``max_slices``
   slices, one at a time, the rows of those chosen set aside.
3. **Confirming** reads the predictions and the chosen slices' columns once: on each slice's own rows
   (in no slice chosen before it) of the confirmation half, the sums of the test of calibration and
   the reliability bins; the whole file's sums and bins; and the own confirmation rows of the slices
   small enough for the exact test (at most :data:`pbr_core.significance.EXACT_MAX_ROWS` each: 16 bytes
   a row, 8 MB at most for 10 slices).

Each row's half is a hash of (seed, file, row in the file), so a single file streamed and the same
file in memory get the same halves, plan, choice and p-values.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Callable, Sequence

import numpy as np
import pandas as pd

from pbr_core import metrics as _m
from pbr_core.groups import MIN_ROWS
from pbr_core.outcome_columns import _EPS, OutcomeColumn, restating_from_sums
from pbr_core.progress import Progress
from pbr_core.predictions import PredictionsError
from pbr_core.slices import MAX_SLICES, SCREEN, SliceReport, assemble, candidate_columns, check_settings
from pbr_core.slices._confirm import ConfirmSums, bin_ranges, columns_used, masks
from pbr_core.slices._plan import (DATE_HEAD, N_BANDS, ColumnSummary, Plan, band_numbers, build_plan, date_columns,
                                   halves, row_hash, summarize)
from pbr_core.slices._search import Candidate, SearchSample, choose
from pbr_core.stream._groups import _outcome_names
from pbr_core.stream._passes import merged_pass, with_client
from pbr_core.stream._source import Dataset, Unit
from pbr_core.stream._stats import confidence_outcome

__all__ = ["compute_slices"]

#: How a streamed search looks for columns that restate the outcome (a note of its report).
STREAM_RESTATING_NOTE = ("columns that restate the outcome (every value holds a single outcome, as a 'grade' from "
                         "which 'correct' is made) are looked for by their values (the rare ones together; a number "
                         "with more than 5,000 values by its quintile bands only) and for the measured outcome only; "
                         "the same file loaded in memory also looks at every outcome")



def _frames(dataset: Dataset, unit: Unit, names: Sequence[str]):
    """(first row, the columns as a DataFrame) of every batch of ``unit``, as the loader reads them."""
    import pyarrow as pa

    from pbr_core.loading._tables import _arrow_frame

    for start, rb in dataset.raw_batches(unit, list(names)):
        if rb.num_rows:
            yield start, _arrow_frame(pa.Table.from_batches([rb]), csv=unit.fmt != "parquet")


def _heads(dataset: Dataset, names: Sequence[str]) -> dict[str, pd.Series]:
    """Each column's first :data:`DATE_HEAD` values that are not missing, in file order."""
    seen: dict[str, list[pd.Series]] = {n: [] for n in names}
    done: set[str] = set()
    for unit in dataset.units():
        for _, frame in _frames(dataset, unit, names):
            for n in names:
                if n not in done:
                    seen[n].append(frame[n].dropna())
                    if sum(len(s) for s in seen[n]) >= DATE_HEAD:
                        done.add(n)
            if len(done) == len(names):
                break
        if len(done) == len(names):
            break
    return {n: (pd.concat(v, ignore_index=True).head(DATE_HEAD) if v else pd.Series([], dtype=object))
            for n, v in seen.items()}


# --------------------------------------------------------------------------------- planning
@dataclass
class _Summaries:
    columns: dict[str, ColumnSummary] = field(default_factory=dict)
    rows: int = 0

    def merge(self, other: "_Summaries") -> "_Summaries":
        for k, v in other.columns.items():
            if k in self.columns:
                self.columns[k].merge(v)
            else:
                self.columns[k] = v
        self.rows += other.rows
        return self


def unit_summaries(dataset: Dataset, unit: Unit, names: tuple[str, ...], dates: dict[str, bool], seed: int,
                   on_rows: Callable[[int], None] | None = None) -> _Summaries:
    """The column summaries of one unit (a Dask task of the planning pass)."""
    out = _Summaries()
    for start, frame in _frames(dataset, unit, names):
        h = row_hash(seed, unit.file_index, start, len(frame))
        part = _Summaries({n: summarize(frame[n], dates[n], h) for n in names}, len(frame))
        out.merge(part)
        if on_rows is not None:
            on_rows(len(frame))
    return out


# --------------------------------------------------------------------------------- the two passes over rows
def _batches(dataset: Dataset, unit: Unit, columns: Sequence[str], target: str):
    """(first row, p, y, the columns, p as the file wrote them) of every validated batch of ``unit``."""
    for start, preds in dataset.predictions(unit, tuple(columns)):
        conf, out = confidence_outcome(preds, target)
        conf = np.asarray(conf, dtype=np.float64)
        yield start, conf, np.asarray(out, dtype=np.float64), preds.metadata, preds.as_written(conf)


def _codes(plan: Plan, which: Sequence[int], meta: pd.DataFrame, unit: Unit, start: int) -> dict[int, np.ndarray]:
    try:
        return {i: plan.columns[i].codes(meta[plan.columns[i].name]) for i in which}
    except ValueError as exc:
        group = f"row group {unit.row_group + 1}, " if unit.row_group is not None else ""
        raise PredictionsError(f"{unit.path}: {group}rows from {start + 1}: {exc}") from None


#: A number cut into bands is also judged by its values (as in memory) while it has at most this many.
VALUE_CAP = 5000


@dataclass
class _Searched:
    """The search pass's result: the search rows and cell counts (``sample``), and for every code of every
    plan column the sums that tell whether the column restates the outcome (``sums``, (4, codes): rows,
    outcomes, sum of log P(outcome 0) and of log P(outcome 1); :func:`restating_from_sums`); for a number
    cut into bands the same sums per value (``values``: column index -> value -> 4 sums, or None past
    :data:`VALUE_CAP` values)."""

    sample: SearchSample
    sums: np.ndarray = field(repr=False)
    values: dict = field(default_factory=dict, repr=False)

    def merge(self, other: "_Searched") -> "_Searched":
        self.sample.merge(other.sample)
        self.sums += other.sums
        for i, theirs in other.values.items():
            self.values[i] = _merge_values(self.values.get(i, {}), theirs)
        return self


def _merge_values(mine: dict | None, theirs: dict | None) -> dict | None:
    if mine is None or theirs is None:
        return None
    for k, v in theirs.items():
        mine[k] = mine[k] + v if k in mine else v
    return mine if len(mine) <= VALUE_CAP else None


def _value_sums(col: pd.Series, weights: tuple) -> dict | None:
    """Per value of a batch of a number column: its rows and the other three sums (None past the cap)."""
    x = band_numbers(col)   # the values the plan's bands cut
    keys, inverse = np.unique(x, return_inverse=True)
    if keys.size > VALUE_CAP:
        return None
    sums = np.stack([np.bincount(inverse, weights=w, minlength=keys.size) for w in weights], axis=1)
    return {("(missing)" if np.isnan(k) else float(k)): row for k, row in zip(keys.tolist(), sums)}


def _code_offsets(plan: Plan) -> np.ndarray:
    return np.concatenate([[0], np.cumsum([c.n_codes for c in plan.columns])]).astype(np.intp)


def unit_search(dataset: Dataset, unit: Unit, plan: Plan, target: str, seed: int,
                on_rows: Callable[[int], None] | None = None) -> _Searched:
    """The search rows and cell counts of one unit, and its sums per column code and per value of a
    banded number (a Dask task of the search pass)."""
    out = _Searched(SearchSample.empty(plan), np.zeros((4, int(_code_offsets(plan)[-1]))))
    off = _code_offsets(plan)
    which = range(len(plan.columns))
    for start, p, y, meta, _ in _batches(dataset, unit, plan.names, target):
        codes = _codes(plan, which, meta, unit, start)
        matrix = np.stack([codes[i] for i in which], axis=1) if plan.columns else np.zeros((p.size, 0), np.intp)
        h = row_hash(seed, unit.file_index, start, p.size)
        out.sample.update(matrix, halves(h), h, p, y)
        q = np.clip(p, _EPS, 1 - _EPS)
        weights = (np.ones(p.size), y, np.log1p(-q), np.log(q))
        for i in which:
            L = plan.columns[i].n_codes
            for k, w in enumerate(weights):
                out.sums[k, off[i]:off[i + 1]] += np.bincount(codes[i], weights=w, minlength=L)
            if plan.columns[i].how == "bands" and out.values.get(i, {}) is not None:
                out.values[i] = _merge_values(out.values.get(i, {}),
                                              _value_sums(meta[plan.columns[i].name], weights))
        if on_rows is not None:
            on_rows(p.size)
    return out


def _restating(plan: Plan, searched: _Searched, target: str, names: tuple[str, str]) -> list[OutcomeColumn]:
    """The plan's columns that restate the measured outcome, judged on their codes' sums and a banded
    number's values' sums, as :func:`pbr_core.outcome_columns.outcome_columns` judges values and bands
    (:data:`STREAM_RESTATING_NOTE`)."""
    off = _code_offsets(plan)
    what = "the label" if target == "positive" else "whether the prediction was right"
    found = []
    for i, col in enumerate(plan.columns):
        hit = None
        by_value = searched.values.get(i)
        if by_value:
            words = [k if isinstance(k, str) else f"{k:g}" for k in by_value]
            part = np.stack(list(by_value.values()), axis=1)
            hit = restating_from_sums(col.name, words, part[0], part[1], part[2:], what, names)
        if hit is None:
            part = searched.sums[:, off[i]:off[i + 1]]
            hit = restating_from_sums(col.name, [*col.levels, "(rare values)"], part[0], part[1], part[2:],
                                      what, names)
            if hit is not None and col.how == "bands":
                hit = dataclasses.replace(hit, cut="quintile bands")
        if hit is not None:
            found.append(hit)
    return found


def unit_confirm(dataset: Dataset, unit: Unit, plan: Plan, chosen: tuple[Candidate, ...],
                 ranges: tuple[tuple[int, int], ...], n_rows: int, target: str, seed: int,
                 edges: tuple[float, ...] = (),
                 on_rows: Callable[[int], None] | None = None) -> ConfirmSums:
    """The confirmation sums of one unit (a Dask task of the confirmation pass); ``edges``: the inner
    edges of the score's strata, from the search half (:attr:`pbr_core.slices._search.Choice.edges`)."""
    out = ConfirmSums.empty(ranges, n_rows, edges)
    used = columns_used(list(chosen))
    for start, p, y, meta, written in _batches(dataset, unit, [plan.columns[i].name for i in used], target):
        codes = _codes(plan, used, meta, unit, start)
        out.update(masks(plan, list(chosen), codes, p.size), halves(row_hash(seed, unit.file_index, start, p.size)),
                   p, y, written)
        if on_rows is not None:
            on_rows(p.size)
    return out


def compute_slices(
    dataset: Dataset,
    columns: Sequence[str] | str | None = None,
    max_order: int = 2,
    *,
    target: str = "positive",
    min_rows: int = MIN_ROWS,
    max_slices: int = MAX_SLICES,
    screen: float = SCREEN,
    n_bands: int = N_BANDS,
    level: float = 0.95,
    seed: int = 0,
    progress: Progress | None = None,
    scheduler: str | None = None,
    local_cluster: int | None = None,
    client=None,
) -> SliceReport:
    """:func:`pbr_core.slices.find_slices` on every row of ``dataset``, in streamed passes (see the
    module docstring); on Dask when a scheduler, a local cluster or a client is given.

    Examples
    --------
    >>> import pbr_core.stream as ps
    >>> ds = ps.open_dataset("sample_data/adult_gradient_boosting.csv.gz")
    >>> ps.compute_slices(ds, ["sex", "race"]).scored
    13
    """
    level = check_settings(max_order, min_rows, max_slices, screen, n_bands, level)
    _m.check_binary_target(target, "target")
    lay = dataset.layout()
    available = [c for c, role in lay.column_roles if role in ("group", "metadata")]
    if columns is not None:  # a column named that some files lack (not read): the message naming such a file
        named = [columns] if isinstance(columns, str) else [str(c) for c in columns]
        dataset.require_columns([c for c in named if c in dataset.columns and c not in available])
    if not available:
        raise ValueError("finding slices needs columns besides the predictions (a segment, a region, an age, a date...): "
                         "this dataset has none.")
    names, skipped = candidate_columns(available, columns)
    what = _m.BINARY_TARGET.measured(lay.kind, target)
    units = dataset.units()

    def run(label: str, task: Callable, args: tuple, total: int | None, c=None):
        return merged_pass(dataset, units, task, args, what=label, progress=progress, total=total, client=c)

    def passes(c=None) -> SliceReport:
        dates = date_columns(_heads(dataset, names)) if names else {}
        summaries = run("planning the slices", unit_summaries, (tuple(names), dates, int(seed)), dataset.num_rows(), c)
        n = summaries.rows
        if n == 0:
            raise PredictionsError(f"{dataset.spec}: the dataset has no data rows.")
        plan = build_plan(names, summaries.columns, dates, n_rows=n, min_rows=min_rows, max_order=max_order,
                          n_bands=n_bands, skipped=skipped)
        searched = run("searching the slices", unit_search, (plan, what, int(seed)), n, c)
        restating = _restating(plan, searched, what, _outcome_names(lay, what))
        if restating:  # planned again without them, and searched again (a pass more, only then)
            gone = {f.column for f in restating}
            kept = [col for col in names if col not in gone]
            plan = build_plan(kept, {k: v for k, v in summaries.columns.items() if k in kept}, dates, n_rows=n,
                              min_rows=min_rows, max_order=max_order, n_bands=n_bands, skipped=skipped)
            searched = run("searching the slices", unit_search, (plan, what, int(seed)), n, c)
        search = searched.sample
        choice = choose(plan, search, min_rows=min_rows, max_slices=max_slices, screen=screen)
        ranges = bin_ranges(plan, choice.chosen, search.counts[1])
        confirm = run("confirming the slices", unit_confirm,
                      (plan, tuple(choice.chosen), ranges, n, what, int(seed), choice.edges), n, c)
        report = assemble(plan, choice, confirm, target=what, level=level, seed=int(seed), max_order=max_order,
                          min_rows=min_rows, max_slices=max_slices, screen=screen)
        report.restating = restating
        if plan.columns or restating:
            report.notes.append(STREAM_RESTATING_NOTE)
        return report

    if not units:
        raise PredictionsError(f"{dataset.spec}: the dataset has no data rows.")
    return with_client(scheduler, local_cluster, client, passes)
