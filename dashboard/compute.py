"""Cached calls into `pbr_core` for the pages.

Every function takes a :class:`~dashboard.state.MetricView`, whose ``key`` (content hash of the
file + reading options + what is measured + subsample) is the cache key. The arrays themselves
are passed as underscore arguments, which ``st.cache_data`` does not hash: hashing a 10,000 x 100
matrix on every slider move would cost as much as the metric itself.

No formula lives here; this module only decides what to cache (and, for the Reliability chart,
shares the built figure: :func:`reliability_chart`).

A view of a dataset on the server carries the streamed statistics of all its rows
(``view.stats``, :class:`pbr_core.stream.CalibrationStatistics`): the ECE, MCE, Brier, NLL,
accuracy, reliability table, ECE curve and classwise ECE come from them (regrouping a few
thousand per-cell sums: nothing to cache); what needs the rows themselves (equal-mass bins, the
smoothed curve, other estimators) uses the view's random sample.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Callable

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import streamlit as st

import pbr_core
from dashboard import figures
from dashboard.state import MetricView


@st.cache_data(show_spinner=False, max_entries=256)
def _summary(key: str, _probs: np.ndarray, _labels: np.ndarray, n_bins: int, top_label_only: bool) -> dict:
    # pbr_core's default interval (split method, seed 0) with the command line's number of
    # resamples, so the dashboard and `pbr-calib evaluate` show the same interval (~0.3 s on 10,000
    # rows, then cached). The bootstrap costs O(n x resamples): large files get fewer resamples so a
    # 10M-row file stays interactive (the interval is then very narrow anyway).
    # The view's arrays are what its target measures already (metric_view): two columns left are the top label.
    return pbr_core.calibration_summary(_probs, _labels, n_bins=n_bins, top_label_only=top_label_only,
                                        binary_target="top_label", n_boot=bootstrap_resamples(len(_labels)))


def bootstrap_resamples(n: int) -> int:
    """1000 resamples up to 200,000 rows, then fewer (about 2e8 / n), never under 50: the command
    line's rule too (``pbr_core.default_n_boot``), so both show the same interval."""
    return pbr_core.default_n_boot(n)


def summary(view: MetricView, n_bins: int) -> dict:
    """ECE (with its bootstrap 95% interval), MCE, Brier, NLL, accuracy at ``n_bins`` bins.

    From streamed statistics the interval exists only at the B it was computed for (floor(n^(1/3)),
    one pass cannot resample for every B): ``ece_ci_low`` / ``ece_ci_high`` are None at other B.
    """
    if view.stats is not None:
        st_ = view.stats
        at_eval = int(n_bins) == st_.config.n_bins
        lo, hi = st_.ece_interval() if at_eval else (None, None)
        return {"ece": st_.ece(int(n_bins)), "ece_ci_low": lo, "ece_ci_high": hi, "mce": st_.mce(int(n_bins)),
                "brier": st_.brier, "nll": st_.nll, "accuracy": st_.accuracy, "n": st_.n, "n_bins": int(n_bins),
                "interval_bins": st_.config.n_bins}
    return _summary(view.key, view.probs, view.labels, int(n_bins), view.top_label_only)


@st.cache_data(show_spinner=False, max_entries=256)
def _reliability(key: str, _probs: np.ndarray, _labels: np.ndarray, n_bins: int) -> pd.DataFrame:
    # the view's arrays are what its target measures already (metric_view): two columns left are the top label
    return pbr_core.reliability_diagram(_probs, _labels, n_bins=n_bins, binary_target="top_label")


def reliability(view: MetricView, n_bins: int) -> pd.DataFrame:
    """Per-bin statistics of the reliability diagram (Clopper-Pearson 95% intervals)."""
    if view.stats is not None:
        return view.stats.reliability_diagram(int(n_bins))
    return _reliability(view.key, view.probs, view.labels, int(n_bins))


@st.cache_data(show_spinner=False, max_entries=64)
def _calibration_test(key: str, _probs: np.ndarray, _labels: np.ndarray, _row_sums: np.ndarray | None = None):
    from pbr_core import metrics as M
    from pbr_core.significance import calibration_test

    conf, out = M.confidence_and_outcome(_probs, _labels)
    # renormalised rows: how finely the file rounded is read from the values as written
    return calibration_test(conf, out, written=None if _row_sums is None else conf * _row_sums)


def calibration_test(view: MetricView):
    """The test of calibration of all the rows the page measures (pbr_core.significance): exact Monte
    Carlo p-values where the rows carry little information; a server dataset's from its streamed sums."""
    if view.stats is not None:
        return view.stats.calibration_test()
    return _calibration_test(view.key, view.probs, view.labels, view.row_sums_as_written)


@st.cache_data(show_spinner=False, max_entries=64)
def _ece_curve(key: str, _probs: np.ndarray, _labels: np.ndarray, max_bins: int) -> np.ndarray:
    return pbr_core.ece_curve(_probs, _labels, n_bins=range(1, max_bins + 1), binary_target="top_label")


def ece_curve(view: MetricView, max_bins: int) -> np.ndarray:
    """ECE for B = 1..max_bins in one vectorised pass."""
    if view.stats is not None:
        return view.stats.ece_curve(range(1, int(max_bins) + 1))
    return _ece_curve(view.key, view.probs, view.labels, int(max_bins))


@st.cache_data(show_spinner=False, max_entries=64)
def _classwise(key: str, _probs: np.ndarray, _labels: np.ndarray, n_bins: int) -> tuple[float, np.ndarray]:
    return (pbr_core.classwise_ece(_probs, _labels, n_bins=n_bins),
            pbr_core.classwise_ece(_probs, _labels, n_bins=n_bins, reduce=False))


def classwise(view: MetricView, n_bins: int) -> tuple[float, np.ndarray]:
    """Classwise ECE: (mean over classes, per-class values). Needs the full probability matrix.

    Streamed statistics hold it at B = floor(n^(1/3)) only; at another B the view's sample is used.
    """
    if view.stats is not None and int(n_bins) == view.stats.config.n_bins and view.stats.classwise is not None:
        return view.stats.classwise_ece(), view.stats.classwise_ece(reduce=False)
    return _classwise(view.key, view.probs, view.labels, int(n_bins))


_SUBSAMPLE_STEPS = (100, 200, 300, 500, 1_000, 2_000, 3_000, 5_000, 10_000, 20_000, 50_000, 100_000,
                   200_000, 500_000, 1_000_000, 2_000_000, 5_000_000, 10_000_000)


def subsample_sizes(n_total: int) -> list[int]:
    """The n values offered by the teaching control: round numbers below n_total, then n_total."""
    return [s for s in _SUBSAMPLE_STEPS if s < n_total] + [int(n_total)]


def subsample_index(n_total: int, n: int, seed: int) -> np.ndarray:
    """A fixed random subset of ``n`` of ``n_total`` rows (sorted; the same for the same seed)."""
    if n >= n_total:
        return np.arange(n_total)  # not cached: as cheap to make as to unpickle, and n_total * 8 bytes
    return _subsample_index(n_total, n, seed)


#: Shared by every session: at most 128 MB of indices (10 million rows each take 80 MB), so that the
#: teaching control on large files does not fill the server (st.cache_data's max_size counts pickled bytes).
@st.cache_data(show_spinner=False, max_entries=16, max_size="128MB")
def _subsample_index(n_total: int, n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.sort(rng.choice(n_total, size=n, replace=False))


def ece_at(view: MetricView, n_bins: int, curve: np.ndarray | None = None) -> float:
    """ECE at one B: read from an already computed ``ece_curve`` (B = 1..len) when it covers B."""
    if curve is not None and 1 <= n_bins <= curve.size:
        return float(curve[n_bins - 1])
    if view.stats is not None:
        return view.stats.ece(int(n_bins))
    return float(pbr_core.ece(view.probs, view.labels, n_bins=int(n_bins), binary_target="top_label"))


@dataclass(frozen=True)
class Theorem1Reading:
    """Theorem 1 at n rows, L and ε as the Bins & bias page and its report part show it: the paper's
    B = floor(n^(1/3)) with the ECE and the bound there, and the bound-minimising B with its bound."""

    n: int
    lipschitz: float
    eps: float
    b_opt: int
    b_min: int
    ece_opt: float
    bound_opt: float
    bound_min: float

    @property
    def tce_range(self) -> tuple[float, float]:
        """Where the true calibration error lies with probability 1 − ε: ECE ± bound at B = floor(n^(1/3)),
        cut to [0, 1]."""
        return max(0.0, self.ece_opt - self.bound_opt), min(1.0, self.ece_opt + self.bound_opt)


def theorem1_reading(view: MetricView, curve: np.ndarray, lipschitz: float, eps: float) -> Theorem1Reading:
    """:class:`Theorem1Reading` of ``view`` (``curve``: its ``ece_curve``, read for the ECE at floor(n^(1/3)))."""
    n = view.rows
    b_opt = pbr_core.optimal_n_bins(n)
    b_min = pbr_core.bound_minimizing_n_bins(n, lipschitz=lipschitz, eps=eps)
    return Theorem1Reading(n=n, lipschitz=lipschitz, eps=eps, b_opt=b_opt, b_min=b_min,
                           ece_opt=ece_at(view, b_opt, curve),
                           bound_opt=float(pbr_core.theorem1_bound(n, b_opt, lipschitz=lipschitz, eps=eps)),
                           bound_min=float(pbr_core.theorem1_bound(n, b_min, lipschitz=lipschitz, eps=eps)))


def ece_vs_bins_chart(curve: np.ndarray, bmax: int, t: Theorem1Reading, **figure_kwargs) -> go.Figure:
    """ECE against B = 1..bmax with Theorem 1's band and its two terms at the reading's n, L and ε
    (:func:`pbr_core.plot.theorem1_figure`, what ``pbr_core.plot.ece_vs_bins`` draws in a notebook;
    ``figure_kwargs``: its title, log_y, reference_ece)."""
    from pbr_core.plot import theorem1_figure

    return theorem1_figure(t.n, np.asarray(curve)[:bmax], lipschitz=t.lipschitz, eps=t.eps, **figure_kwargs)


@st.cache_data(show_spinner=False, max_entries=32)
def _default_group_column(key: str, _preds) -> str | None:
    from pbr_core.groups import default_group_column

    return default_group_column(_preds)


def default_group_column(loaded) -> str | None:
    """:func:`pbr_core.groups.default_group_column` of the loaded file, once per file: it counts the values
    of every column (0.4 s on a million rows), and the Groups page and Compare's group gaps ask on every run."""
    return _default_group_column(loaded.key, loaded.preds)


@st.cache_data(show_spinner=False, max_entries=32)
def _group_report(key: str, by: tuple[str, ...], every: str, target: str, _preds):
    from pbr_core.groups import calibration_by_group

    return calibration_by_group(_preds, list(by), target=target, every=every or None)


class _SharedResults:
    """Results shared by every session, at most ``size`` of them, the least recently used dropped
    first. Not ``st.cache_data``: the passes that make them report their progress to a bar the page drew
    outside the cached function, which a cached function may not touch."""

    def __init__(self, size: int) -> None:
        self._entries: "OrderedDict[tuple, object]" = OrderedDict()
        self._size = size
        self._lock = threading.Lock()

    def get(self, key: tuple):
        with self._lock:
            if key in self._entries:
                self._entries.move_to_end(key)
                return self._entries[key]
        return None

    def put(self, key: tuple, value):
        with self._lock:
            self._entries[key] = value
            while len(self._entries) > self._size:
                self._entries.popitem(last=False)
        return value


def _server_dataset(loaded):
    """The loaded dataset on the server opened again for another pass over every row (no row cap)."""
    from pbr_core.stream import open_dataset

    return open_dataset(list(loaded.stream.files), **loaded.options.dataset_kwargs())


#: Group reports of datasets on the server (the key holds the files' sizes and times): each costs a
#: pass over the whole dataset.
_STREAM_GROUPS = _SharedResults(16)


def group_report(loaded, view: MetricView, by: tuple[str, ...], every: str = "",
                 progress: Callable[[str, int, "int | None"], None] | None = None, cached_only: bool = False):
    """Calibration by group (``pbr_core.groups.calibration_by_group``) of the loaded data, measured as
    ``view`` measures it (p(y=1) or the top label).

    A dataset on the server is measured on every row, in a streamed pass
    (``pbr_core.stream.compute_group_statistics``; ``progress(rows_done, rows_total, what)``);
    with ``cached_only`` None unless that pass was already made."""
    target = "positive" if view.binary_positive else "top_label"
    if loaded.stream is None:
        return _group_report(loaded.key, tuple(by), every or "", target, loaded.preds)
    key = (loaded.key, tuple(by), every or "", target)
    report = _STREAM_GROUPS.get(key)
    if report is not None or cached_only:
        return report
    from pbr_core.stream import compute_group_statistics

    groups, _ = compute_group_statistics(_server_dataset(loaded), list(by), every=every or None, target=target,
                                         progress=progress)
    return _STREAM_GROUPS.put(key, groups.report())


#: Slice reports (``pbr_core.slices``): a server dataset's costs three passes over its rows; the audit
#: report reads the one the Groups page found (``cached_only``).
_SLICES = _SharedResults(16)


def slice_report(loaded, view: MetricView, progress: Callable[[str, int, "int | None"], None] | None = None,
                 cached_only: bool = False):
    """The slices whose calibration departs from the rest (``pbr_core.slices.find_slices``), measured as
    ``view`` measures it; a dataset on the server on every row, in streamed passes
    (``pbr_core.stream.compute_slices``; ``progress(rows_done, rows_total, what)``). With
    ``cached_only`` None unless the search was already made."""
    target = "positive" if view.binary_positive else "top_label"
    key = (loaded.key, target)
    report = _SLICES.get(key)
    if report is not None or cached_only:
        return report
    if loaded.stream is None:
        from pbr_core.slices import find_slices

        report = find_slices(loaded.preds, target=target)
    else:
        from pbr_core.stream import compute_slices

        report = compute_slices(_server_dataset(loaded), target=target, progress=progress)
    return _SLICES.put(key, report)


@st.cache_data(show_spinner=False, max_entries=64)
def _reliability_equal_mass(key: str, _probs: np.ndarray, _labels: np.ndarray, n_bins: int) -> pd.DataFrame:
    from pbr_core.estimators import reliability_equal_mass

    return reliability_equal_mass(_probs, _labels, n_bins=n_bins, binary_target="top_label")


def reliability_equal_mass(view: MetricView, n_bins: int) -> pd.DataFrame:
    """Per-bin statistics with equal-mass bins (pbr_core.estimators.reliability_equal_mass)."""
    return _reliability_equal_mass(view.key, view.probs, view.labels, int(n_bins))


@st.cache_data(show_spinner=False, max_entries=16)
def _smooth(key: str, _probs: np.ndarray, _labels: np.ndarray) -> pd.DataFrame:
    from pbr_core.estimators import smooth_reliability

    return smooth_reliability(_probs, _labels, binary_target="top_label")


def smooth_curve(view: MetricView) -> pd.DataFrame:
    """The smoothed reliability curve with its pointwise 95% interval for the smoothed curve
    (pbr_core.estimators.smooth_reliability)."""
    return _smooth(view.key, view.probs, view.labels)


@st.cache_data(show_spinner=False, max_entries=16)
def _conventions(key: str, _probs: np.ndarray, _labels: np.ndarray, target: str, one_dim: str) -> pd.DataFrame:
    from pbr_core.estimators import library_conventions

    return library_conventions(_probs, _labels, binary_target=target, one_dimensional=one_dim)


def conventions(view: MetricView) -> pd.DataFrame:
    """The ECE as each estimator and library reports it (pbr_core.estimators.library_conventions), on
    what the view measures (p(y=1), the top label of a full vector, or (confidence, correct))."""
    target = "positive" if view.binary_positive else "top_label"
    return _conventions(view.key, view.probs, view.labels, target,
                        "confidence" if view.top_label_only else "positive")


@st.cache_data(show_spinner=False, max_entries=8)
def estimator_convergence(shift: float, repeats: int = 20) -> pd.DataFrame:
    """How each estimator approaches a known true calibration error on simulated data
    (pbr_core.estimators.estimator_convergence; cached: the same for every user)."""
    from pbr_core.estimators import estimator_convergence as run

    return run(shift=shift, repeats=repeats)


@st.cache_resource(show_spinner=False, max_entries=64)
def _reliability_chart(key: str, n_bins: int, binning: str, smooth: bool, x_title: str, y_title: str,
                       binary_positive: bool, _view: MetricView) -> go.Figure:
    table = reliability_equal_mass(_view, n_bins) if binning == "mass" else reliability(_view, n_bins)
    return figures.reliability_figure(table, x_title=x_title, y_title=y_title, binary_positive=binary_positive,
                                      smooth=smooth_curve(_view) if smooth else None)


def reliability_chart(view: MetricView, n_bins: int, binning: str = "width", smooth: bool = False) -> go.Figure:
    """The Reliability page's chart (:func:`pbr_core.plot.reliability_figure` of the per-bin table,
    equal-width or equal-mass bins, with or without the smoothed curve), built once per (data, B,
    binning, smoothing) and shared by every session.

    Why shared (st.cache_resource, not a copy per session): building the figure is ~40 ms of plotly's
    validation, most of which is copying its template, the largest part of what the server does for a
    new visitor of this page once the numbers are cached (benchmarks/RESULTS_load.md); a pickled copy
    per session would be validated again when unpickled. The figure is read-only by convention: pass
    it to ``st.plotly_chart``, which only reads it (``Figure.to_dict`` copies it); never change it.
    """
    return _reliability_chart(view.key, int(n_bins), binning, bool(smooth), view.x_title, view.y_title,
                              view.binary_positive, view)


# --------------------------------------------------------------------------- CORP (issue 37)
@st.cache_data(show_spinner=False, max_entries=16)
def _corp(key: str, _probs: np.ndarray, _labels: np.ndarray):
    from pbr_core import metrics as M
    from pbr_core.corp import corp_reliability, outside_band_share, score_decomposition

    conf, out = M.confidence_and_outcome(_probs, _labels)
    diagram = corp_reliability(conf, out)
    return (diagram, score_decomposition(conf, out, "brier"), score_decomposition(conf, out, "log"),
            outside_band_share(diagram, conf))


@st.cache_data(show_spinner=False, max_entries=16)
def _corp_grid(key: str, _probs: np.ndarray, _labels: np.ndarray) -> str:
    from pbr_core import metrics as M
    from pbr_core.resolution import coarse_grid_words

    return coarse_grid_words(M.confidence_and_outcome(_probs, _labels)[0])


def corp_grid(view: MetricView) -> str:
    """How coarsely the scores :func:`corp` reads were written ("written with at most 1 decimal"), "" for
    scores on no coarse grid (:func:`pbr_core.resolution.coarse_grid_words`): the CORP reading's caveat."""
    return _corp_grid(view.key, view.probs, view.labels)


@st.cache_data(show_spinner=False, max_entries=16)
def _mcb_chance(key: str, _probs: np.ndarray, _labels: np.ndarray):
    from pbr_core import metrics as M
    from pbr_core.corp import mcb_against_chance

    return mcb_against_chance(*M.confidence_and_outcome(_probs, _labels))


def mcb_chance(view: MetricView) -> dict:
    """The miscalibration MCB of :func:`corp`'s decompositions against what calibrated predictions of
    this size give by chance (:func:`pbr_core.corp.mcb_against_chance`, seeded, at most 10^5 rows:
    about 2 s of CPU at that size, cached), keyed "brier" and "log"."""
    return _mcb_chance(view.key, view.probs, view.labels)


def corp(view: MetricView):
    """(CORP reliability diagram, Brier decomposition, log-loss decomposition, share of the rows where the
    curve is outside its band) of what the page measures (:mod:`pbr_core.corp`: p(y=1) against y, or the
    confidence against correctness), on the rows in memory (a server dataset's sample: the PAV fit needs
    the rows)."""
    return _corp(view.key, view.probs, view.labels)


@st.cache_data(show_spinner=False, max_entries=16)
def _log_loss_split(key: str, _scores: np.ndarray, _labels: np.ndarray) -> dict[str, float]:
    from pbr_core.corp import log_loss_split as split

    return split(_scores, _labels)


def log_loss_split(preds: pbr_core.Predictions, key: str) -> tuple[dict[str, float] | None, str | None]:
    """(:func:`pbr_core.corp.log_loss_split` of the full probability vector, None) or (None, why not):
    a top-label-only file has no vector, and probabilities of exactly 0 have no logarithm."""
    from dashboard import texts

    if preds.probs is None:
        return None, texts.LOG_LOSS_SPLIT_TOP_LABEL
    if preds.logits is not None:
        scores = preds.logits
    else:
        with np.errstate(divide="ignore"):
            scores = np.log(preds.probs)
    if not np.all(np.isfinite(scores)):
        return None, texts.LOG_LOSS_SPLIT_ZEROS
    return _log_loss_split(key, scores, preds.labels), None
