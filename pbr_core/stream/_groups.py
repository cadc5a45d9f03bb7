"""Calibration by group on a dataset beyond memory: :func:`pbr_core.groups.calibration_by_group`'s
table from streamed, mergeable per-group sums.

What a group's row of the table needs is a sum over its rows, once its B = floor(n_g^(1/3)) is
known: n, the sums of confidence and outcome (rate, mean predicted), of the Brier terms and of the
test of calibration (:data:`pbr_core.significance.SUM_NAMES`), and per bin of its B the count and
the sums of confidence, outcome and gap (ECE, MCE, the reliability diagram). The ECE interval and
the bias-corrected estimate come from the split sums of :meth:`CalibrationStatistics.ece_interval`
(random halves, Poisson bootstrap) at the group's B. The exact (Monte Carlo) test of a group that
carries little information needs its rows: the groups that may need it
(:func:`pbr_core.groups.exact_eligible`, at most 5 million rows in all) keep their (p, y) pairs, so
that the p-values equal those of the whole file in memory. B depends on the group's final n, so the
run makes two passes:

1. **Counting** reads only the group columns (and the scores when grouping by the predicted class):
   the groups and their n, hence each B, and the refusal of a column with too many values
   (:data:`pbr_core.groups.MAX_GROUPS`) before the expensive pass. Whether a text column holds
   dates is decided first on its first 200 values, as a whole-file read decides.
2. **Measuring** reads the predictions once, validated as every streamed pass validates them, and
   adds each batch to :class:`GroupStatistics` (and, when asked, to the overall
   :class:`CalibrationStatistics` in the same pass). Partial statistics of different units add up,
   so a Dask cluster runs one task per unit and merges them.

Each class against the rest ("each class") counts every row once per class.

Memory: per group (4 + 2 n_boot) B_g + 12 numbers, plus the kept rows of small groups (16 bytes a
row, at most 80 MB); with 1000 groups and 1000 bootstrap replicates under 200 MB, much less for
large datasets (fewer replicates, :func:`pbr_core.metrics.default_n_boot`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Callable, Sequence

import numpy as np
import pandas as pd

from pbr_core import metrics as _m
from pbr_core.bounds import optimal_n_bins
from pbr_core import significance as _sig
from pbr_core.groups import (EACH_CLASS, MAX_GROUPS, MIN_ROWS, PREDICTED_CLASS, GroupReport, brier_terms, by_names,
                             check_every, check_group_count, check_not_outcome, class_keys, column_keys,
                             exact_eligible, group_report, group_tests, is_date_column, join_keys, largest_gap,
                             test_columns)
from pbr_core.metrics import BINARY_TARGET, default_n_boot
from pbr_core.outcome_columns import _EPS, OutcomeColumn, restating_from_sums
from pbr_core.progress import Progress
from pbr_core.predictions import Predictions, PredictionsError
from pbr_core.stream._passes import merged_pass, with_client
from pbr_core.stream._source import Dataset, Unit
from pbr_core.stream._stats import (CalibrationStatistics, StatsConfig, add_split_bootstrap, confidence_outcome,
                                    reliability_table)

__all__ = ["GroupStatistics", "GroupsConfig", "compute_group_statistics"]

#: The one key of every row when each class is measured against the rest (the counting pass only counts rows).
_ALL_ROWS = "(all rows)"
#: Mixed into the seed of a batch's group draws, so that they are not the overall statistics' draws.
_SEED_TAG = 0x67726F75



@dataclass(frozen=True)
class KeySpec:
    """How a batch's rows become group names, fixed for the whole dataset before the first pass."""

    by: tuple[str, ...]
    every: str | None
    dates: tuple[bool, ...]      # per column of `by`: its values are dates bucketed by `every`
    as_float: tuple[bool, ...]   # per column: whole numbers with missing values somewhere, shown as a
    #                              whole-file read shows them (25.0), whatever this batch holds

    @property
    def columns(self) -> tuple[str, ...]:
        """The columns to read (the predicted class comes from the scores)."""
        return tuple(n for n in self.by if n not in (PREDICTED_CLASS, EACH_CLASS))

    def keys(self, frame: pd.DataFrame | None, preds: Predictions | None, unit: Unit, start: int) -> np.ndarray:
        """The group of every row of a batch (``frame``: its group columns; ``preds``: its predictions)."""
        parts = []
        for name, is_date, as_float in zip(self.by, self.dates, self.as_float):
            if name == PREDICTED_CLASS:
                parts.append(class_keys(preds))
                continue
            if name == EACH_CLASS:
                return np.full(preds.n, _ALL_ROWS, dtype=object)
            col = frame[name]
            if as_float and pd.api.types.is_integer_dtype(col.dtype):
                col = col.astype(np.float64)
            try:
                parts.append(column_keys(col, self.every, is_date))
            except ValueError as exc:  # a value that is not a date: name the file and its row
                msg = re.sub(r"at row (\d+)", lambda m: f"at row {start + int(m.group(1)) + 1} of the file",
                             str(exc))
                group = f"row group {unit.row_group + 1}, " if unit.row_group is not None else ""
                raise PredictionsError(f"{unit.path}: {group}column {name!r}: {msg}") from None
        return join_keys(parts)


@dataclass(frozen=True)
class GroupsConfig:
    """What the group statistics are kept for; two statistics merge only with equal configs."""

    kind: str                       # "multiclass" | "binary" | "top_label"
    target: str                     # "positive" (p(y=1) of binary data) | "top_label"
    spec: KeySpec
    groups: tuple[str, ...]         # group names, sorted
    counts: tuple[int, ...]         # rows per group, from the counting pass
    n_boot: int
    seed: int = 0
    #: The measured 0/1 outcome in words (the binary file's classes, or wrong / right).
    outcome_names: tuple[str, str] = ("0", "1")

    @property
    def n_bins(self) -> np.ndarray:
        """B = floor(n_g^(1/3)) of every group."""
        return np.array([optimal_n_bins(n) for n in self.counts], dtype=np.intp)

    @property
    def exact(self) -> np.ndarray:
        """The groups whose rows are kept for the exact test (:func:`pbr_core.groups.exact_eligible`)."""
        return exact_eligible(self.counts)


@dataclass
class GroupStatistics:
    """Per-group sums of a set of rows; build with :meth:`empty`, feed batches with :meth:`update`,
    combine with :meth:`merge`, read with :meth:`report`."""

    config: GroupsConfig
    offsets: np.ndarray = field(repr=False)      # (G,) first bin of each group in `bins`
    n: np.ndarray = field(repr=False)            # (G,) rows
    sums: np.ndarray = field(repr=False)         # (3, G) conf, outcome, Brier
    tests: np.ndarray = field(repr=False)        # (N_SUMS, G) the sums of the test of calibration
    bins: np.ndarray = field(repr=False)         # (4, T) count, sum conf, sum outcome, sum gap; T = sum B_g
    halves: np.ndarray = field(repr=False)       # (2T,) per group: gap sums of half 0 (B_g), then half 1
    boot: np.ndarray = field(repr=False)         # (n_boot, 2T) the same, Poisson-weighted per replicate
    boot_n: np.ndarray | None = field(default=None, repr=False)  # (n_boot, G) each replicate's rows per group
    #: (2, G) the sums of log P(outcome 0) and log P(outcome 1): whether the column restates the outcome
    logs: np.ndarray | None = field(default=None, repr=False)
    #: (p, y) blocks of the groups that may get the exact test (:func:`pbr_core.groups.exact_eligible`)
    kept: dict[int, list[np.ndarray]] = field(default_factory=dict, repr=False)

    @classmethod
    def empty(cls, config: GroupsConfig) -> "GroupStatistics":
        nb = config.n_bins
        G, T = nb.size, int(nb.sum())
        offsets = np.concatenate([[0], np.cumsum(nb)[:-1]]).astype(np.intp)
        return cls(config=config, offsets=offsets, n=np.zeros(G, dtype=np.int64), sums=np.zeros((3, G)),
                   tests=np.zeros((_sig.N_SUMS, G)), bins=np.zeros((4, T)), halves=np.zeros(2 * T),
                   boot=np.zeros((config.n_boot, 2 * T)), boot_n=np.zeros((config.n_boot, G)),
                   logs=np.zeros((2, G)))

    def update(self, preds: Predictions, codes: np.ndarray, key: tuple[int, ...]) -> "GroupStatistics":
        """Add a validated batch whose row i belongs to group ``codes[i]`` (an index into
        ``config.groups``). ``key`` seeds the batch's random halves and bootstrap weights. Measuring
        each class against the rest, every row counts once for every class (``codes`` unused)."""
        cfg = self.config
        if cfg.spec.by == (EACH_CLASS,):
            for k in range(len(cfg.groups)):
                p = np.asarray(preds.probs[:, k], dtype=np.float64)
                y = (preds.labels == k).astype(np.float64)
                self._add(p, y, (p - y) ** 2, np.full(preds.n, k, dtype=np.intp), (*key, k), preds.as_written(p))
            return self
        conf, out = confidence_outcome(preds, cfg.target)
        conf = np.asarray(conf, dtype=np.float64)
        out = np.asarray(out, dtype=np.float64)
        self._add(conf, out, brier_terms(preds, cfg.target), codes, key, preds.as_written(conf))
        return self

    def _add(self, conf: np.ndarray, out: np.ndarray, brier: np.ndarray, codes: np.ndarray,
             key: tuple[int, ...], written: np.ndarray | None = None) -> None:
        cfg = self.config
        G, T = self.n.size, self.bins.shape[1]
        nb = cfg.n_bins
        B_row = nb[codes]
        bin_ = np.empty(codes.size, dtype=np.intp)
        for B in np.unique(B_row):  # a few distinct B values: the same bins as metrics.bin_index
            rows = B_row == B
            bin_[rows] = _m.bin_index(conf[rows], int(B))
        gap = conf - out
        flat = self.offsets[codes] + bin_
        self.bins[0] += np.bincount(flat, minlength=T)
        for i, w in enumerate((conf, out, gap), start=1):
            self.bins[i] += np.bincount(flat, weights=w, minlength=T)
        self.n += np.bincount(codes, minlength=G)
        for i, w in enumerate((conf, out, brier)):
            self.sums[i] += np.bincount(codes, weights=w, minlength=G)
        clipped = np.clip(conf, _EPS, 1 - _EPS)
        for i, w in enumerate((np.log1p(-clipped), np.log(clipped))):
            self.logs[i] += np.bincount(codes, weights=w, minlength=G)
        self.tests += _sig.calibration_sums_by(codes, G, conf, out, written)
        for g in np.flatnonzero(cfg.exact & (np.bincount(codes, minlength=G) > 0)):
            rows = codes == g
            self.kept.setdefault(int(g), []).append(np.stack([conf[rows], out[rows]]))
        rng = np.random.default_rng(np.random.SeedSequence([cfg.seed & 0xFFFFFFFF, *map(int, key), _SEED_TAG]))
        half = rng.integers(0, 2, size=codes.size, dtype=np.intp)
        add_split_bootstrap(self.halves, self.boot, 2 * self.offsets[codes] + bin_ + B_row * half, gap, rng,
                            self.boot_n, np.repeat(np.arange(G), 2 * nb))

    def merge(self, other: "GroupStatistics") -> "GroupStatistics":
        """The statistics of both sets of rows (in place; returns self)."""
        if other.config != self.config:
            raise ValueError("Cannot merge group statistics kept for other groups or settings.")
        self.n += other.n
        self.sums += other.sums
        self.tests += other.tests
        for g, blocks in other.kept.items():
            self.kept.setdefault(g, []).extend(blocks)
        self.bins += other.bins
        self.halves += other.halves
        self.boot += other.boot
        self.boot_n = None if self.boot_n is None or other.boot_n is None else self.boot_n + other.boot_n
        self.logs = None if self.logs is None or other.logs is None else self.logs + other.logs
        return self

    def report(self, level: float = 0.95, min_rows: int = MIN_ROWS) -> GroupReport:
        """The :class:`~pbr_core.groups.GroupReport` of :func:`pbr_core.groups.calibration_by_group`:
        every number but the intervals equal to the in-memory one on the same rows (up to the order
        of float additions); the ECE intervals are the streamed split interval (Poisson bootstrap)
        and the largest gap's interval the percentiles of the gap over the same replicates."""
        level = _m._check_level(level)
        cfg = self.config
        if not np.array_equal(self.n, np.asarray(cfg.counts, dtype=np.int64)):
            g = int(np.flatnonzero(self.n != np.asarray(cfg.counts))[0])
            raise PredictionsError(f"group {cfg.groups[g]!r} had {cfg.counts[g]:,} rows when the groups were counted "
                                   f"and {int(self.n[g]):,} when they were measured: the dataset changed while it "
                                   "was read. Run again when it no longer changes.")
        # Each class against the rest: every group holds every row.
        N = int(self.n.max()) if cfg.spec.by == (EACH_CLASS,) else int(self.n.sum())
        nb = cfg.n_bins

        def replicate_rows(g: int) -> np.ndarray | None:
            """Each bootstrap replicate's rows of group g (its total Poisson weight), >= 1."""
            return None if self.boot_n is None else np.maximum(self.boot_n[:, g], 1.0)

        def kept_rows(g: int) -> tuple[np.ndarray, np.ndarray] | None:
            if not cfg.exact[g]:
                return None
            both = np.concatenate(self.kept.get(g, [np.zeros((2, 0))]), axis=1)
            return both[0], both[1]

        tests = group_tests(self.tests, list(cfg.groups), kept_rows, level, cfg.seed, min_rows)
        rows, diagrams, corrected = [], {}, {}
        for g, name in enumerate(cfg.groups):
            n, B, o = int(self.n[g]), int(nb[g]), int(self.offsets[g])
            count, s_conf, s_out, s_gap = self.bins[:, o:o + B]
            a, b = 2 * o, 2 * o + B
            est = _m.split_estimates_from_sums(self.halves[a:b], self.halves[b:b + B], self.boot[:, a:b],
                                               self.boot[:, b:b + B], n, boot_n=replicate_rows(g),
                                               noise=_m.outcome_noise(count, s_out))
            lo, hi = est.interval(level)
            corrected[name] = (est.split, est.sd_split, est.ece, est.sd_ece)
            nz = count > 0
            rows.append({"group": name, "n": n, "share": n / N, "rate": float(self.sums[1, g] / n),
                         "mean_predicted": float(self.sums[0, g] / n), "n_bins": B,
                         "ece": _m._ece_from_sums(s_gap, n), "ece_low": lo, "ece_high": hi,
                         "ece_corrected": est.split,
                         "mce": float(np.max(np.abs(s_conf[nz] - s_out[nz]) / count[nz])),
                         "brier": float(self.sums[2, g] / n), **test_columns(tests[g]), "too_small": n < min_rows})
            diagrams[name] = reliability_table(count, s_conf, s_out, n, level)
        target = "top_label" if cfg.spec.by == (EACH_CLASS,) else cfg.target
        report = group_report(rows, diagrams, list(cfg.spec.by), target, level, cfg.spec.every)
        report.interval = f"split interval, Poisson bootstrap ({cfg.n_boot} replicates)"
        report.largest_gap = largest_gap(report.table, level, corrected)
        report.restating = self._restating(target)
        return report

    def _restating(self, target: str) -> list[OutcomeColumn]:
        """The grouping column when it restates the measured outcome (``GroupReport.restating``), from the
        groups' sums; one column of values only (not the predicted class, each class, or date buckets)."""
        spec = self.config.spec
        if self.logs is None or len(spec.by) != 1 or spec.by[0] in (PREDICTED_CLASS, EACH_CLASS) or spec.dates[0]:
            return []
        what = "the label" if target == "positive" else "whether the prediction was right"
        found = restating_from_sums(spec.by[0], self.config.groups, self.n, self.sums[1], self.logs, what,
                                    self.config.outcome_names)
        return [] if found is None else [found]


# ---------------------------------------------------------------------------------------- counting
@dataclass
class _Counts:
    """Rows per group name of some units, and the dtype kinds each group column showed."""

    cap: int = MAX_GROUPS
    counts: dict[str, int] = field(default_factory=dict)
    kinds: dict[str, set] = field(default_factory=dict)
    more: bool = False   # counting stopped: more groups than the cap (the counts are then cut)

    def merge(self, other: "_Counts") -> "_Counts":
        for k, v in other.counts.items():
            self.counts[k] = self.counts.get(k, 0) + v
        for c, kinds in other.kinds.items():
            self.kinds.setdefault(c, set()).update(kinds)
        self.more |= other.more
        self._cut()
        return self

    def _cut(self) -> None:
        # Beyond the cap only "too many" matters: units with a few hundred values each must not
        # pile up millions of names (time stamps spread over a long log) before the refusal.
        if len(self.counts) > self.cap:
            self.more = True
            self.counts = dict(list(self.counts.items())[:self.cap + 1])


def _frames(dataset: Dataset, unit: Unit, spec: KeySpec):
    """(first row, group columns as a DataFrame, Predictions or None) for every batch of ``unit``:
    the raw group columns only, unless the predicted class is wanted or the rows are counted for each
    class against the rest (then the validated predictions)."""
    if PREDICTED_CLASS in spec.by or EACH_CLASS in spec.by:
        for start, preds in dataset.predictions(unit, spec.columns):
            yield start, preds.metadata, preds
        return
    import pyarrow as pa

    from pbr_core.loading._tables import _arrow_frame

    for start, rb in dataset.raw_batches(unit, spec.columns):
        if rb.num_rows:
            yield start, _arrow_frame(pa.Table.from_batches([rb]), csv=unit.fmt != "parquet"), None


def unit_group_counts(dataset: Dataset, unit: Unit, spec: KeySpec, max_groups: int = MAX_GROUPS,
                      on_rows: Callable[[int], None] | None = None) -> _Counts:
    """Rows per group of one unit (stops once it holds more than ``max_groups`` groups)."""
    out = _Counts(cap=max_groups)
    for start, frame, preds in _frames(dataset, unit, spec):
        for c in spec.columns:
            out.kinds.setdefault(c, set()).add(frame[c].dtype.kind)
        keys = spec.keys(frame, preds, unit, start)
        for k, v in pd.Series(keys, dtype=object).value_counts(sort=False).items():
            out.counts[k] = out.counts.get(k, 0) + int(v)
        if on_rows is not None:
            on_rows(len(keys))
        if len(out.counts) > max_groups:
            out._cut()
            break
    return out


def _key_spec(dataset: Dataset, names: list[str], every: str | None) -> KeySpec:
    """Which columns ``every`` buckets as dates, decided on each column's first 200 values that are
    not missing, in file order (what a whole-file read looks at)."""
    named = [n for n in names if n not in (PREDICTED_CLASS, EACH_CLASS)]
    dates = dict.fromkeys(named, False)
    if every is not None and named:
        import pyarrow as pa

        from pbr_core.loading._tables import _arrow_frame

        seen: dict[str, list[pd.Series]] = {n: [] for n in named}
        head: dict[str, pd.Series] = {}
        for unit in dataset.units():
            for _, rb in dataset.raw_batches(unit, named):
                frame = _arrow_frame(pa.Table.from_batches([rb]), csv=unit.fmt != "parquet")
                for n in named:
                    if n not in head:
                        seen[n].append(frame[n].dropna())
                        if sum(len(s) for s in seen[n]) >= 200:
                            head[n] = pd.concat(seen[n], ignore_index=True)
                if len(head) == len(named):
                    break
            if len(head) == len(named):
                break
        for n in named:
            col = head.get(n)
            if col is None:
                col = pd.concat(seen[n], ignore_index=True) if seen[n] else pd.Series([], dtype=object)
            dates[n] = bool(is_date_column(col))
    check_every(every, names, [dates.get(n, False) for n in names])
    return KeySpec(by=tuple(names), every=every, dates=tuple(dates.get(n, False) for n in names),
                   as_float=(False,) * len(names))


def _check_columns(dataset: Dataset, names: list[str]) -> None:
    lay = dataset.layout()
    have = [c for c, role in lay.column_roles if role in ("group", "metadata")]
    for name in names:
        if name == PREDICTED_CLASS:
            if not lay.has_class_ids:
                raise ValueError("these records have no classes (confidence and correctness only).")
        elif name == EACH_CLASS:
            if len(names) > 1:
                raise ValueError(f"{EACH_CLASS!r} (one class against the rest, over all rows) cannot be combined "
                                 "with another column.")
            if lay.kind != "multiclass" or lay.n_classes < 3:
                raise ValueError(f"{EACH_CLASS!r} needs full probability vectors of three or more classes (on "
                                 "binary data the one calibration is that of p(y=1)).")
        elif name not in have:
            check_not_outcome(name)
            if name in dataset.columns:  # a column some files lack (not read): the message naming such a file
                dataset.require_columns([name])
            raise ValueError(f"no column {name!r} to group by; the dataset's other columns are {have or 'none'} "
                             f"(or {PREDICTED_CLASS!r}, or {EACH_CLASS!r} alone).")


# ---------------------------------------------------------------------------------------- measuring
@dataclass
class _Partial:
    """The group statistics of some units and, when asked, their overall statistics."""

    groups: GroupStatistics
    overall: CalibrationStatistics | None

    def merge(self, other: "_Partial") -> "_Partial":
        self.groups.merge(other.groups)
        if self.overall is not None:
            self.overall.merge(other.overall)
        return self


def unit_group_statistics(dataset: Dataset, unit: Unit, config: GroupsConfig, overall: StatsConfig | None = None,
                          on_rows: Callable[[int], None] | None = None) -> _Partial:
    """The group statistics (and overall statistics) of one unit: the function each Dask task runs."""
    part = _Partial(GroupStatistics.empty(config), CalibrationStatistics.empty(overall) if overall else None)
    index = pd.Index(config.groups)
    for start, preds in dataset.predictions(unit, config.spec.columns):
        if config.spec.by == (EACH_CLASS,):  # every row belongs to every class's "group"
            part.groups.update(preds, np.zeros(preds.n, dtype=np.intp), (unit.file_index, start))
            if part.overall is not None:
                part.overall.update(preds, (unit.file_index, start))
            if on_rows is not None:
                on_rows(preds.n)
            continue
        keys = config.spec.keys(preds.metadata, preds, unit, start)
        codes = index.get_indexer(keys)
        if (codes < 0).any():
            new = keys[int(np.flatnonzero(codes < 0)[0])]
            raise PredictionsError(f"{unit.path}: group {new!r} was not there when the groups were counted: the "
                                   "dataset changed while it was read. Run again when it no longer changes.")
        part.groups.update(preds, codes, (unit.file_index, start))
        if part.overall is not None:
            part.overall.update(preds, (unit.file_index, start))
        if on_rows is not None:
            on_rows(preds.n)
    return part


def _n_boot(n_boot: int | None, rows: int, classes: int) -> int:
    """Replicates: default_n_boot of the rows (each class against the rest: of rows x K, what K passes
    over the rows cost; at most the number asked for, as in memory)."""
    if classes > 1:
        cap = default_n_boot(rows * classes)
        return cap if n_boot is None else min(_m._check_n_bins(n_boot, "n_boot"), cap)
    return default_n_boot(rows) if n_boot is None else _m._check_n_bins(n_boot, "n_boot")


def _outcome_names(lay, measured: str) -> tuple[str, str]:
    """The measured 0/1 outcome's two values in words: a binary file's classes, or wrong / right."""
    if measured != "positive":
        return ("wrong", "right")
    names = tuple(map(str, lay.class_names or ()))
    return names if len(names) == 2 else ("0", "1")


def compute_group_statistics(
    dataset: Dataset,
    by: Sequence[str] | str,
    *,
    every: str | None = None,
    target: str = "positive",
    n_boot: int | None = None,
    seed: int = 0,
    max_groups: int = MAX_GROUPS,
    overall: StatsConfig | None = None,
    progress: Progress | None = None,
    scheduler: str | None = None,
    local_cluster: int | None = None,
    client=None,
) -> tuple[GroupStatistics, CalibrationStatistics | None]:
    """Calibration by group of every row of ``dataset``, in a counting pass over the group columns
    and one streamed pass over the predictions (see the module docstring).

    Parameters
    ----------
    dataset : Dataset
        From :func:`pbr_core.stream.open_dataset`.
    by : str or list of one or two str
        Columns of the dataset other than the label and scores, or "true class".
    every : {"day", "week", "month"}, optional
        Bucket a date column (calibration over time), as in memory.
    target : {"positive", "top_label"}
        Binary data: calibration of p(y=1) (default) or of the top label. Other data: top label.
    n_boot : int, optional
        Poisson bootstrap replicates of each group's interval; default
        :func:`pbr_core.metrics.default_n_boot` of the dataset's rows (1000 up to 200,000 rows).
    seed : int
        Seeds every batch's random halves and weights (with the batch's file and first row).
    max_groups : int
        More groups are refused (a ``ValueError`` in plain words) after the counting pass, which stops early.
    overall : StatsConfig, optional
        Also compute the overall :class:`CalibrationStatistics` in the measuring pass (the numbers
        of :func:`pbr_core.stream.compute_statistics` with this config).
    progress : callable(rows_done, rows_total_or_None, what), optional
        :data:`pbr_core.progress.Progress`; ``what`` says which pass ("counting the groups",
        "measuring each group").
    scheduler, local_cluster, client
        Run both passes on Dask, one task per unit, as :func:`pbr_core.stream.compute_statistics`.

    Returns
    -------
    (GroupStatistics, CalibrationStatistics or None)
        Read the groups with :meth:`GroupStatistics.report`.

    Raises
    ------
    ValueError
        An unknown column, too many groups, grouping records without classes by the true class.
    PredictionsError
        A bad file or row, named with the file, row group and row (also a value that is not a date).

    Examples
    --------
    >>> import pbr_core.stream as ps
    >>> ds = ps.open_dataset("sample_data/adult_gradient_boosting.csv.gz", group_columns="sex")
    >>> groups, _ = ps.compute_group_statistics(ds, "sex", n_boot=50)
    >>> groups.report().table["group"].tolist()
    ['Male', 'Female']
    """
    names = by_names(by)
    _m.check_binary_target(target, "target")
    lay = dataset.layout()
    _check_columns(dataset, names)
    spec = _key_spec(dataset, names, every)
    units = dataset.units()

    def run(what: str, task: Callable, args: tuple, total: int | None, c=None):
        # too many groups already: no need to read on
        return merged_pass(dataset, units, task, args, what=what, progress=progress, total=total, client=c,
                           enough=lambda merged: getattr(merged, "more", False))

    def passes(c=None):
        nonlocal spec
        counted = run("counting the groups", unit_group_counts, (spec, max_groups), dataset.num_rows(), c)
        mixed = tuple(bool({"i", "u"} & counted.kinds.get(n, set()) and "f" in counted.kinds.get(n, set()))
                      for n in names)
        if any(mixed) and not counted.more:  # whole numbers with missing values in some batches only
            spec = replace(spec, as_float=mixed)
            counted = run("counting the groups", unit_group_counts, (spec, max_groups), dataset.num_rows(), c)
        check_group_count(len(counted.counts), names, every, max_groups, more=counted.more)
        if not counted.counts:
            raise PredictionsError(f"{dataset.spec}: the dataset has no data rows.")
        groups = tuple(sorted(counted.counts))
        counts = tuple(counted.counts[g] for g in groups)
        total = int(sum(counts))
        if names == [EACH_CLASS]:  # every class over all rows, in class order
            groups = tuple(lay.class_names) if lay.class_names else tuple(map(str, range(lay.n_classes)))
            counts = (total,) * len(groups)
        measured = BINARY_TARGET.measured(lay.kind, target)
        config = GroupsConfig(kind=lay.kind, target=measured, spec=spec, groups=groups, counts=counts,
                              n_boot=_n_boot(n_boot, total, len(groups) if names == [EACH_CLASS] else 1),
                              seed=int(seed), outcome_names=_outcome_names(lay, measured))
        part = run("measuring each group", unit_group_statistics, (config, overall), total, c)
        return part.groups, part.overall

    if not units:
        raise PredictionsError(f"{dataset.spec}: the dataset has no data rows.")
    return with_client(scheduler, local_cluster, client, passes)
