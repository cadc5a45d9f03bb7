"""Mergeable calibration statistics: one pass over record batches, any number of machines.

Every diagnostic of :mod:`pbr_core.metrics` that :func:`pbr_core.cli.evaluation_table` reports is a
function of sums over rows, so it can be accumulated batch by batch and the partial sums of
different batches (or Dask partitions) added. What is kept (nothing grows with the number of rows):

* **Cells.** The ECE curve needs the bins of every B in a range at once. All bin edges k/B
  (k = 1..B) of all those B, computed as in :func:`pbr_core.metrics.bin_boundaries`, are merged
  into one sorted list; consecutive edges bound *cells* (e_{j-1}, e_j], and every bin of every B is
  a union of whole cells (B = 1..200 gives ~12,000 cells, the Farey sequence of order 200). Per
  cell: row count, sum of confidence, sum of outcome, sum of (confidence - outcome). A row costs
  one binary search among the cells, whatever the number of B values. Regrouping cells into the
  bins of B gives exactly the bins of :func:`pbr_core.metrics.bin_index` (the same float edges and
  comparisons), so ECE, MCE and reliability statistics equal the in-memory ones up to the order of
  float additions (~1e-15).
* **Scalars.** n, number correct, sums of the Brier and NLL terms of what the ECE measures.
* **Classwise ECE** at the evaluation B: per (class, bin) sums of p_k - 1[y = k].
* **Interval of the ECE** at the evaluation B, without a second pass (see
  :meth:`CalibrationStatistics.ece_interval`): per (half, bin) gap sums of a random split and of
  ``n_boot`` Poisson-bootstrap replicates.

Two statistics built with the same :class:`StatsConfig` merge by addition (:meth:`merge`).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Iterable

import numpy as np
import pandas as pd

from pbr_core import metrics as _m
from pbr_core import significance as _sig
from pbr_core.loading._duplicates import RowHashes, streamed_duplicate_note
from pbr_core.predictions import Predictions

__all__ = ["CalibrationStatistics", "StatsConfig", "confidence_outcome", "poisson_weights"]

#: Poisson(1) CDF P(X <= k), k = 0..11, times 2^32 rounded down: thresholds on uniform uint32.
_POISSON_T = np.floor(np.cumsum(np.exp(-1.0) / np.cumprod(np.r_[1.0, np.arange(1, 12)])) * 2.0**32)
_POISSON_T = _POISSON_T[_POISSON_T < 2.0**32].astype(np.uint32)
#: Elements (replicates x rows) per temporary block of the bootstrap: 16 MB of float64.
_BOOT_BLOCK = 1 << 21


def poisson_weights(rng: np.random.Generator, shape: tuple[int, int]) -> np.ndarray:
    """Poisson(1) bootstrap weights as uint8: one uniform 32-bit integer per weight compared with
    the Poisson(1) CDF thresholds (quantised to 2^-32; weights above 12 are cut to 12, probability
    1e-10). Three times faster than ``rng.poisson`` and the same distribution to that precision."""
    u = rng.integers(0, 2**32, size=shape, dtype=np.uint32)
    w = np.zeros(shape, dtype=np.uint8)
    for t in _POISSON_T:
        w += u >= t
    return w


def confidence_outcome(preds: Predictions, target: str) -> tuple[np.ndarray, np.ndarray]:
    """The (confidence, outcome) pairs the ECE of a batch bins: p(y = 1) and y on binary data with
    ``target == "positive"``, else the top-label confidence and whether it was correct."""
    if _m.BINARY_TARGET.measured(preds.kind, target) == "positive":
        conf, labels = _m.ece_inputs(preds.probs, preds.labels, "positive")
        return conf, labels.astype(np.float64)
    return preds.confidence, preds.correct


@dataclass(frozen=True)
class StatsConfig:
    """What the statistics are kept for; two statistics merge only with equal configs."""

    kind: str                       # "multiclass" | "binary" | "top_label"
    n_classes: int
    n_bins: int                     # B of the headline ECE, MCE, classwise ECE and interval
    curve_bins: tuple[int, ...]     # every B whose per-bin statistics are kept (includes n_bins)
    n_boot: int = 200
    seed: int = 0
    #: Binary data only: "positive" measures p(y=1) (paper Appendix A), "top_label" the confidence
    #: max(p, 1 - p) of the predicted class (the dashboard offers both).
    target: str = "positive"
    #: Keep the rows' hashes to look for exact copies (:meth:`CalibrationStatistics.duplicate_note`); a pass
    #: measuring two targets of the same rows keeps them in one.
    copies: bool = True

    @property
    def has_vector(self) -> bool:
        return self.kind != "top_label"

    @property
    def measures_vector(self) -> bool:
        """Whether the ECE measures the probability vector (multiclass data, binary data by its top
        label), so that the Brier score and NLL are the multiclass ones; else one probability per
        row (p(y=1), or a top-label confidence) is scored against its 0/1 outcome
        (:func:`pbr_core.metrics.target_brier_nll`)."""
        return self.has_vector and _m.BINARY_TARGET.measured(self.kind, self.target) != "positive"


def _cell_edges(bins: Iterable[int]) -> np.ndarray:
    return np.unique(np.concatenate([_m.bin_boundaries(int(B)) for B in bins]))


@dataclass
class CalibrationStatistics:
    """Sufficient statistics of a set of rows for the calibration diagnostics; see the module docstring.

    Build an empty one with :meth:`empty`, feed validated batches with :meth:`update`, combine with
    :meth:`merge`; then read :meth:`ece`, :meth:`ece_curve`, :meth:`reliability_diagram`,
    :meth:`ece_interval`, :meth:`summary`.
    """

    config: StatsConfig
    edges: np.ndarray
    cells: np.ndarray = field(repr=False)       # (4, F): count, sum conf, sum outcome, sum gap
    n: int = 0
    n_correct: int = 0
    brier_sum: float = 0.0
    nll_sum: float = 0.0
    classwise: np.ndarray | None = field(default=None, repr=False)   # (K * B,)
    halves: np.ndarray | None = field(default=None, repr=False)      # (2 * B,)
    boot: np.ndarray | None = field(default=None, repr=False)        # (n_boot, 2 * B)
    # (n_boot, 1): each replicate's total Poisson weight (its "rows"); None in statistics made before
    # it was kept (their replicates are divided by n).
    boot_n: np.ndarray | None = field(default=None, repr=False)
    n_batches: int = 0
    #: The sums of the test of calibration (:data:`pbr_core.significance.SUM_NAMES`); None in
    #: statistics made before they were kept.
    tests: np.ndarray | None = field(default=None, repr=False)
    #: The rows' hashes kept to look for exact copies (:class:`pbr_core.loading._duplicates.RowHashes`,
    #: 4-8 MB at most); None where the config does not keep them (``StatsConfig.copies``) or in statistics made before.
    copies: RowHashes | None = field(default=None, repr=False)
    #: The (confidence, outcome) rows of each batch by its key, while there are at most
    #: :data:`pbr_core.significance.EXACT_MAX_ROWS` rows (None beyond, or in statistics made before they
    #: were kept): a dataset whose rows carry little information is tested by Monte Carlo as in memory.
    kept: dict | None = field(default=None, repr=False)

    @classmethod
    def empty(cls, config: StatsConfig) -> "CalibrationStatistics":
        bins = sorted(set(config.curve_bins) | {config.n_bins})
        config = replace(config, curve_bins=tuple(bins))
        edges = _cell_edges(bins)
        B = config.n_bins
        return cls(
            config=config, edges=edges, cells=np.zeros((4, edges.size)),
            classwise=np.zeros(config.n_classes * B) if config.has_vector else None,
            halves=np.zeros(2 * B), boot=np.zeros((config.n_boot, 2 * B)), boot_n=np.zeros((config.n_boot, 1)),
            tests=np.zeros(_sig.N_SUMS), copies=RowHashes() if config.copies else None, kept={},
        )

    # ------------------------------------------------------------------ accumulate
    def update(self, preds: Predictions, key: tuple[int, ...]) -> "CalibrationStatistics":
        """Add a validated batch. ``key`` (e.g. (file number, first row)) seeds the batch's random
        split and bootstrap weights with ``config.seed``: the same batch gives the same draws in any
        process, so the single-process stream and a Dask run agree."""
        cfg = self.config
        if preds.kind != cfg.kind:
            raise ValueError(f"Expected a batch of kind {cfg.kind!r}, but got {preds.kind!r}.")
        if preds.kind == "multiclass" and preds.probs.shape[1] != cfg.n_classes:
            raise ValueError(f"Expected {cfg.n_classes} classes, but a batch has {preds.probs.shape[1]}.")
        conf, out = confidence_outcome(preds, cfg.target)
        rows = conf.shape[0]
        gap = conf - out
        cell = _m.assign_bins(conf, self.edges)
        F = self.edges.size
        self.cells[0] += np.bincount(cell, minlength=F)
        self.cells[1] += np.bincount(cell, weights=conf, minlength=F)
        self.cells[2] += np.bincount(cell, weights=out, minlength=F)
        self.cells[3] += np.bincount(cell, weights=gap, minlength=F)
        self.n += rows
        self.n_correct += int(np.count_nonzero(preds.predicted == preds.labels))
        if self.tests is not None:
            self.tests += _sig.calibration_sums(conf, out, preds.as_written(conf))
        if cfg.measures_vector:
            p2, y = preds.probs, preds.labels
            self.brier_sum += float(_m._brier_terms(p2, y).sum())
            self.nll_sum += float(_m._nll_terms(p2, y).sum())
        else:  # what the ECE bins: p(y=1) against y, or a confidence against correctness
            self.brier_sum += float(_m._brier_terms(conf, out).sum())
            self.nll_sum += float(_m._nll_terms(conf, out).sum())
        if cfg.has_vector:
            self._add_classwise(preds.probs, preds.labels)
        self._add_bootstrap(conf, gap, key)
        if self.copies is not None:
            self.copies.add(preds)
        if self.kept is not None:
            self.kept[tuple(map(int, key))] = np.stack([np.asarray(conf, dtype=np.float64), out.astype(np.float64)])
            self._bound_kept()
        self.n_batches += 1
        return self

    def _add_classwise(self, p: np.ndarray, y: np.ndarray) -> None:
        B, K = self.config.n_bins, p.shape[1]
        offsets = np.arange(K, dtype=np.intp) * B
        for rows in _m._row_chunks(p.shape[0], K):
            pc = p[rows]
            idx = _m.bin_index(pc, B)
            idx += offsets
            resid = pc.copy()
            resid[np.arange(pc.shape[0]), y[rows]] -= 1.0
            self.classwise += np.bincount(idx.ravel(), weights=resid.ravel(), minlength=K * B)

    def _add_bootstrap(self, conf: np.ndarray, gap: np.ndarray, key: tuple[int, ...]) -> None:
        cfg = self.config
        B = cfg.n_bins
        rng = np.random.default_rng(np.random.SeedSequence([cfg.seed & 0xFFFFFFFF, *map(int, key)]))
        half = rng.integers(0, 2, size=conf.shape[0], dtype=np.intp)
        add_split_bootstrap(self.halves, self.boot, _m.bin_index(conf, B) + B * half, gap, rng, self.boot_n)

    def merge(self, other: "CalibrationStatistics") -> "CalibrationStatistics":
        """The statistics of both sets of rows (in place; returns self)."""
        if other.config != self.config:
            raise ValueError(f"Cannot merge statistics kept for {other.config} into statistics kept for {self.config}.")
        self.cells += other.cells
        self.n += other.n
        self.n_correct += other.n_correct
        self.brier_sum += other.brier_sum
        self.nll_sum += other.nll_sum
        if self.classwise is not None:
            self.classwise += other.classwise
        self.halves += other.halves
        self.boot += other.boot
        self.boot_n = None if self.boot_n is None or other.boot_n is None else self.boot_n + other.boot_n
        self.tests = None if self.tests is None or other.tests is None else self.tests + other.tests
        self.copies = None if self.copies is None or other.copies is None else self.copies.merge(other.copies)
        if self.kept is not None:
            if other.kept is None:
                self.kept = None
            else:
                self.kept.update(other.kept)
                self._bound_kept()
        self.n_batches += other.n_batches
        return self

    # ------------------------------------------------------------------ results
    def duplicate_note(self) -> str:
        """The loader's note on rows that are exact copies of another row, far beyond chance
        (:func:`pbr_core.loading._duplicates.streamed_duplicate_note`), else ""."""
        return streamed_duplicate_note(self.copies)

    def _check(self) -> None:
        if self.n == 0:
            raise ValueError("No rows: the statistics are empty.")

    def _bin_of_cell(self, B: int) -> np.ndarray:
        if B not in self.config.curve_bins:
            raise ValueError(f"Expected `n_bins` among the B values these statistics were kept for "
                             f"({_describe_bins(self.config.curve_bins)}), but got {B}.")
        return _m.bin_index(self.edges, B)

    def bin_sums(self, n_bins: int | None = None) -> np.ndarray:
        """(4, B) per-bin count, sum of confidence, sum of outcome, sum of gap at B (default ``config.n_bins``)."""
        self._check()
        B = self.config.n_bins if n_bins is None else _m._check_n_bins(n_bins)
        idx = self._bin_of_cell(B)
        return np.stack([np.bincount(idx, weights=row, minlength=B) for row in self.cells])

    def ece(self, n_bins: int | None = None) -> float:
        """Top-label (or binary) ECE at B, paper Eq. 2; equals :func:`pbr_core.metrics.ece` on the same rows."""
        return _m._ece_from_sums(self.bin_sums(n_bins)[3], self.n)

    def mce(self, n_bins: int | None = None) -> float:
        """Largest |mean confidence - accuracy| over non-empty bins (:func:`pbr_core.metrics.mce`)."""
        count, s_conf, s_out, _ = self.bin_sums(n_bins)
        nz = count > 0
        return float(np.max(np.abs(s_conf[nz] - s_out[nz]) / count[nz]))

    def ece_curve(self, n_bins: Iterable[int] | None = None) -> np.ndarray:
        """ECE for every B in ``n_bins`` (default: every B kept), regrouped from the cells in one
        vectorised step (no loop over rows or over B)."""
        self._check()
        Bs = np.asarray(self.config.curve_bins if n_bins is None else _m._check_bin_list(n_bins), dtype=np.int64)
        missing = [int(B) for B in Bs if int(B) not in self.config.curve_bins]
        if missing:
            raise ValueError(f"Expected every `n_bins` among the B values these statistics were kept for "
                             f"({_describe_bins(self.config.curve_bins)}), but got {missing[:5]}.")
        if Bs.size == 0:
            return np.zeros(0)
        F = self.edges.size
        # Bin of every cell for every B: ceil(e B) - 1 corrected at the float edges, as in bin_index.
        B_col = Bs[:, None].astype(np.float64)
        t = np.ceil(self.edges[None, :] * B_col).astype(np.int64) - 1
        np.clip(t, 0, Bs[:, None] - 1, out=t)
        upper = (t + 1) / B_col
        t += self.edges[None, :] > upper
        t = np.minimum(t, Bs[:, None] - 1)
        lower = np.where(t > 0, t / B_col, -1.0)
        t -= self.edges[None, :] <= lower
        offsets = np.concatenate([[0], np.cumsum(Bs)[:-1]])
        keys = (t + offsets[:, None]).ravel()
        sums = np.bincount(keys, weights=np.broadcast_to(self.cells[3], (Bs.size, F)).ravel(), minlength=int(Bs.sum()))
        return np.add.reduceat(np.abs(sums), offsets) / self.n

    def reliability_diagram(self, n_bins: int | None = None, level: float = 0.95) -> pd.DataFrame:
        """The table of :func:`pbr_core.metrics.reliability_diagram` (same columns, Clopper-Pearson intervals)."""
        level = _m._check_level(level)
        count, s_conf, s_out, _ = self.bin_sums(n_bins)
        return reliability_table(count, s_conf, s_out, self.n, level)

    @property
    def accuracy(self) -> float:
        self._check()
        return self.n_correct / self.n

    @property
    def brier(self) -> float:
        """Brier score of what the ECE measures (:func:`pbr_core.metrics.target_brier_nll`): p(y=1)
        or a top-label confidence against its outcome, or the multiclass Brier score of the vector
        (:attr:`StatsConfig.measures_vector`)."""
        self._check()
        return self.brier_sum / self.n

    @property
    def nll(self) -> float:
        """NLL of what the ECE measures, with the default floor (:func:`pbr_core.metrics.target_brier_nll`)."""
        self._check()
        return self.nll_sum / self.n

    def classwise_ece(self, reduce: bool = True) -> float | np.ndarray | None:
        """:func:`pbr_core.metrics.classwise_ece` at ``config.n_bins``; None for top-label-only data."""
        self._check()
        if self.classwise is None:
            return None
        per_class = np.abs(self.classwise.reshape(self.config.n_classes, self.config.n_bins)).sum(axis=1) / self.n
        return float(per_class.mean()) if reduce else per_class

    def ece_interval(self, level: float = 0.95) -> tuple[float, float]:
        """Interval at ``level`` for CE_B (B = ``config.n_bins``), from the one pass.

        The same construction as the in-memory default (:func:`pbr_core.metrics.ece_bootstrap_ci`,
        ``method="split"``): [split estimate - z sd*, plug-in ECE + z sd*], cut to [0, 1], where the
        split estimate sum_b (sign(a_b) b_b + sign(b_b) a_b) / n is built from the per-bin gap sums
        of two random halves. Two things differ, because a stream cannot permute or resample rows
        it has not seen yet:

        * the halves are drawn row by row (each row in half 0 or 1 with probability 1/2), so their
          sizes are Binomial(n, 1/2) instead of exactly ceil(n/2) and floor(n/2);
        * sd* comes from the **Poisson bootstrap**: replicate r weights every row by an
          independent Poisson(1) count instead of drawing n rows with replacement (the
          multinomial counts of the ordinary bootstrap are, for large n, independent Poisson(1);
          Hanley & MacGibbon 2006, Chamandy et al. 2012 "Estimating uncertainty for massive
          data streams"). Replicates then do not hold exactly n rows; each replicate's sums are
          divided by its own total weight (its number of rows), as the ordinary bootstrap's by n.

        Both are the same distribution as the in-memory interval up to O(1/n) terms; a coverage
        test on data with known CE_B (tests/stream) and the comparison in
        benchmarks/RESULTS_stream.md check it. Random draws are seeded per batch (seed, file,
        first row), so the interval does not depend on how the batches were spread over processes.
        """
        level = _m._check_level(level)
        self._check()
        B = self.config.n_bins
        count, _, s_out, _ = self.bin_sums(B)
        return _m._split_interval(self.halves[:B], self.halves[B:], self.boot[:, :B], self.boot[:, B:], self.n, level,
                                  boot_n=None if self.boot_n is None else self.boot_n[:, 0],
                                  noise=_m.outcome_noise(count, s_out))

    def _bound_kept(self) -> None:
        if self.kept is not None and self.n > _sig.EXACT_MAX_ROWS:
            self.kept = None  # too many rows to draw: the analytic test, as in memory

    def calibration_test(self, alpha: float = _sig.ALPHA_TEST) -> "_sig.CalibrationTest | None":
        """The test of calibration of all rows: on at most :data:`~pbr_core.significance.EXACT_MAX_ROWS`
        rows, :func:`pbr_core.significance.calibration_test` of the kept rows in file order, as in memory
        (Monte Carlo with a drawn detectable shift where the rows carry little information; audit 10b: the
        stream's normal bound stated a shift detected 73-78 % of the time as "at least 80 %" on constant
        scores); on more, the analytic test from the sums
        (:func:`~pbr_core.significance.calibration_test_from_sums`), which then says "too many to draw"
        where it is approximate. None for statistics made before its sums were kept."""
        self._check()
        if self.tests is None:
            return None
        if not self.kept:
            return _sig.calibration_test_from_sums(self.tests, 1, alpha)
        p, y = np.concatenate([self.kept[k] for k in sorted(self.kept)], axis=1)
        return _sig.calibration_test(p, y, alpha=alpha, evidence=_sig.file_evidence(self.tests))

    def summary(self, level: float = 0.95) -> dict[str, float | int | str | None]:
        """ECE, its interval, MCE, Brier, NLL, accuracy, classwise ECE, n and B, as one dict."""
        lo, hi = self.ece_interval(level)
        return {
            "ece": self.ece(), "ece_ci_low": lo, "ece_ci_high": hi, "ci_level": level,
            "ci_method": "split, Poisson bootstrap", "mce": self.mce(), "brier": self.brier, "nll": self.nll,
            "accuracy": self.accuracy, "classwise_ece": self.classwise_ece(), "n": self.n,
            "n_bins": self.config.n_bins, "n_boot": self.config.n_boot,
        }


def add_split_bootstrap(halves: np.ndarray, boot: np.ndarray, keys: np.ndarray, gap: np.ndarray,
                        rng: np.random.Generator, boot_n: np.ndarray | None = None,
                        key_group: np.ndarray | None = None) -> None:
    """Add a batch to the split interval's sums: ``halves[k]`` += the gaps of the rows of key k (a bin
    of one half), ``boot[r, k]`` += the same sums weighted by Poisson(1) draws of replicate r, and
    ``boot_n[r, g]`` += those weights themselves over the keys of group g (replicate r's rows of the
    group; ``key_group[k]``, non-decreasing in k, is key k's group; None: one group)."""
    halves += np.bincount(keys, weights=gap, minlength=halves.size)
    order = np.argsort(keys, kind="stable")
    k_sorted, g_sorted = keys[order], gap[order]
    starts = np.flatnonzero(np.r_[True, k_sorted[1:] != k_sorted[:-1]])
    used = k_sorted[starts]
    if boot_n is not None:  # the groups' runs in the sorted keys (contiguous: key_group is non-decreasing)
        grp = np.zeros(k_sorted.size, dtype=np.intp) if key_group is None else key_group[k_sorted]
        g_starts = np.flatnonzero(np.r_[True, grp[1:] != grp[:-1]])
        g_used = grp[g_starts]
    n_boot = boot.shape[0]
    step = max(1, _BOOT_BLOCK // max(gap.shape[0], 1))
    for r0 in range(0, n_boot, step):
        m = min(step, n_boot - r0)
        w = poisson_weights(rng, (m, gap.shape[0]))
        boot[r0:r0 + m, used] += np.add.reduceat(w * g_sorted, starts, axis=1)
        if boot_n is not None:
            boot_n[r0:r0 + m, g_used] += np.add.reduceat(w, g_starts, axis=1, dtype=np.float64)


def reliability_table(count: np.ndarray, s_conf: np.ndarray, s_out: np.ndarray, n: int, level: float) -> pd.DataFrame:
    """The :func:`pbr_core.metrics.reliability_diagram` table from per-bin sums (the same function)."""
    return _m.reliability_table(count, s_conf, s_out, n, level)


def _describe_bins(bins: tuple[int, ...]) -> str:
    if len(bins) > 6:
        return f"{len(bins)} values from {bins[0]} to {bins[-1]}"
    return ", ".join(map(str, bins))
