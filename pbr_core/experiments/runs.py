"""The run of each study of :mod:`pbr_core.experiments.settings`: settings in, a typed result out.

Each ``run_*`` takes the predictions and a settings value, calls the protocols and the
recalibrators, and returns a result that carries what a front end needs to draw it and to say what
it is: the numbers, which ECE they are (:attr:`ece_target`: "positive" for p(y=1), "top_label"),
whether a fit ended at its prior (``at_prior``), whether the run was stopped part-way (``stopped``:
the protocols keep the fits that finished). A front end adds only its own words and pictures.

Progress: ``progress(done, total, message)`` (:data:`pbr_core.progress.Progress`) hears each
finished fit; the fits' own loops report to what :func:`pbr_core.progress.report_progress` installs,
and Stop is :func:`pbr_core.cancel.cancel_when` around the run (or ``cancel=``), as everywhere.
"""

from __future__ import annotations

import time
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
import pandas as pd

from pbr_core.cancel import CancelCallback, Cancelled
from pbr_core.evaluation import ece_change_shown, ece_rise_shown, evaluation_metrics, measured_calibration_test, reliability_table
from pbr_core.experiments._protocol import check_test_rows, ended_at_prior, split_indices
from pbr_core.experiments.compare import compare
from pbr_core.experiments.holdout import Stage, fit_and_test
from pbr_core.experiments.kl_gap import KLGapResult, kl_vs_ece_gap
from pbr_core.experiments.settings import (CompareSettings, FitSettings, GroupGapSettings, KLGapSettings,
                                           PBRSettings, SweepSettings)
from pbr_core.experiments.sweep import n_re_sweep
from pbr_core.fit_rows import FitRowOverlap
from pbr_core.metrics import BINARY_TARGET, ece_inputs, nll_infinite_rows
from pbr_core.predictions import Predictions
from pbr_core.progress import Progress
from pbr_core.recalibrators import Recalibrator, get_recalibrator

__all__ = ["CompareRun", "FitRun", "GroupGapRun", "IntervalSummary", "KLGapRun", "PBRRun", "SweepRun", "fit_report",
           "fit_warnings_ahead",
           "interval_summary", "run_apply", "run_compare", "run_fit", "run_group_gaps", "run_kl_gap", "run_pbr", "run_sweep"]


def fit_report(recalibrator: Any) -> dict[str, Any]:
    """A fitted recalibrator's ``fit_report_`` as a plain dict (empty for methods without one)."""
    report = getattr(recalibrator, "fit_report_", None)
    return report.to_dict() if hasattr(report, "to_dict") else dict(report or {})


@dataclass
class _Measured:
    """What every result of data of some kind says about its ECE."""

    @property
    def ece_target(self) -> str:
        """What the ECE (and the Brier score, NLL, reliability tables) of this result measure:
        "positive" (p(y=1), binary data) or "top_label" (:data:`pbr_core.metrics.BINARY_TARGET`)."""
        return BINARY_TARGET.measured(self.kind, self.settings_binary_ece)

    @property
    def settings_binary_ece(self) -> str:
        """The binary-ECE choice the result was made with: its settings' (FitRun, which may have no
        settings, keeps its own)."""
        return self.settings.binary_ece

    @property
    def binary_positive(self) -> bool:
        """Whether the ECE here is p(y=1)'s (binary data, the app's default choice)."""
        return self.ece_target == "positive"


# ---------------------------------------------------------------------------- one PBR fit
@dataclass
class PBRRun(_Measured):
    """One PBR / GP fit of :func:`run_pbr`."""

    settings: PBRSettings
    recalibrator: Recalibrator           # fitted on the recalibration rows (the best estimator with automatic alpha)
    alpha: float | None                  # the alpha used (None for GP calibration)
    alpha_scores: pd.DataFrame | None    # automatic selection: AlphaSelection.summary, one row per alpha
    before: dict[str, float]
    after: dict[str, float]
    reliability_before: pd.DataFrame
    reliability_after: pd.DataFrame
    ece_re: float                        # ECE on the recalibration set after recalibration
    n_bins_re: int
    kl: float
    bounds: dict[str, float]
    fit_report: dict[str, Any]
    n_te: int
    seconds: float
    fit_rows: np.ndarray | None = None   # the recalibration set (indices into the predictions); the rest is the test part
    n_bound: int = 0                     # rows the bounds are evaluated on (n_re, or fewer with a prior split)
    bound_prior: str = "same_rows"       # "split": prior chosen on other rows (valid as stated); "same_rows"
    kind: str = "multiclass"
    #: Whether the test rows show the fit worse calibrated than no recalibration beyond the ECE's noise
    #: (:func:`pbr_core.evaluation.ece_rise_shown`); None when its test ECE did not rise at all.
    worse_shown: bool | None = None
    #: The same rule the other way (:func:`pbr_core.evaluation.ece_change_shown` is "better"): whether
    #: the test rows show the fit better calibrated beyond the ECE's noise; None when its ECE did not fall.
    better_shown: bool | None = None

    @property
    def at_prior(self) -> bool | None:
        """The fit's own record that it ended at the prior (None: the method has no prior)."""
        return ended_at_prior(self.fit_report)


def run_pbr(preds: Predictions, s: PBRSettings, *, progress: Progress | None = None,
            on_stage: Callable[[Stage], None] | None = None) -> PBRRun:
    """Fit ``s.method`` on fold 0's recalibration set and test it on the rest
    (:func:`~pbr_core.experiments.fit_and_test`), alpha fixed or chosen by
    :class:`~pbr_core.recalibrators.PBRCV` inside the recalibration set (``progress`` hears each of
    its fits and the choice). The split is :func:`~pbr_core.experiments.compare`'s fold 0 with the
    same seed, so the numbers line up with a comparison's first fold."""
    start = time.perf_counter()
    recalibrator = s.recalibrator()
    h = fit_and_test(preds, recalibrator, s.n_re, seed=s.seed, binary_ece=s.binary_ece, eps=s.eps,
                     lipschitz=s.lipschitz, on_stage=on_stage,
                     fit_params={"progress": progress} if s.auto_alpha else None)
    alpha, scores = (s.alpha if s.uses_alpha else None), None
    if s.auto_alpha:
        alpha, scores = recalibrator.alpha_, pd.DataFrame(recalibrator.cv_results_)
        recalibrator = recalibrator.best_estimator_  # what to ship: a plain PBR
    kind, test_set = preds.kind, h.test_set
    # A change of test ECE is said to be worse (better) only beyond the two ECEs' noise on these rows:
    # on 150 test rows a fit truly better calibrated had the higher ECE in 42 % of simulated files.
    before_ece, after_ece = h.before["ece"], h.after["ece"]
    change = (ece_change_shown(test_set.probs, h.test_probs, test_set.labels, kind, s.binary_ece, seed=s.seed)
              if after_ece != before_ece else None)
    worse = change == "worse" if after_ece > before_ece else None
    better = change == "better" if after_ece < before_ece else None
    return PBRRun(
        settings=s, recalibrator=recalibrator, alpha=alpha, alpha_scores=scores, before=h.before, after=h.after,
        reliability_before=reliability_table(test_set.probs, test_set.labels, kind, s.binary_ece),
        reliability_after=reliability_table(h.test_probs, test_set.labels, kind, s.binary_ece),
        ece_re=h.ece_re, n_bins_re=h.n_bins_re, kl=h.kl,
        bounds={k: h.bounds[k] for k in ("corollary1", "corollary2")} if h.bounds else {},
        fit_report=h.fit_report, n_te=test_set.n, seconds=time.perf_counter() - start, fit_rows=h.fit_rows,
        n_bound=h.n_bound, bound_prior=h.bound_prior, kind=kind, worse_shown=worse, better_shown=better)


# ---------------------------------------------------------------------------- comparison, sweep, KL gap
@dataclass
class CompareRun(_Measured):
    """:func:`~pbr_core.experiments.compare`'s table (maybe partial: ``stopped``) and, with
    ``settings.diagrams``, each method's reliability table on fold 1's test set."""

    settings: CompareSettings
    table: pd.DataFrame
    diagrams: dict[str, pd.DataFrame]
    planned: int
    kind: str = "multiclass"
    stopped: bool = False


def run_compare(preds: Predictions, s: CompareSettings, *, progress: Progress | None = None,
                cancel: CancelCallback | None = None) -> CompareRun:
    """:func:`~pbr_core.experiments.compare` with ``s``; each method's reliability table on fold 1's test
    set comes from that fold's own predictions (no extra fit). A stop keeps the finished folds."""
    result = CompareRun(settings=s, table=pd.DataFrame(), diagrams={}, planned=s.planned, kind=preds.kind)

    def keep_diagram(fold: int, method: str, test_set: Predictions, probs: np.ndarray) -> None:
        if fold == 0:
            result.diagrams[method] = reliability_table(probs, test_set.labels, preds.kind, s.binary_ece)

    try:
        result.table = compare(preds, list(s.methods), n_re=s.n_re, n_folds=s.n_folds, seed=s.seed, n_te=s.n_te,
                               method_params=s.method_params() or None, progress=progress, cancel=cancel,
                               binary_ece=s.binary_ece, on_error=s.on_error,
                               on_predictions=keep_diagram if s.diagrams else None, n_jobs=s.n_jobs)
    except Cancelled as exc:
        result.table, result.stopped = exc.partial, True
    return result


@dataclass
class SweepRun(_Measured):
    """:func:`~pbr_core.experiments.n_re_sweep`'s table (maybe partial: ``stopped``)."""

    settings: SweepSettings
    table: pd.DataFrame
    kind: str = "multiclass"
    stopped: bool = False


def run_sweep(preds: Predictions, s: SweepSettings, *, progress: Progress | None = None,
              cancel: CancelCallback | None = None) -> SweepRun:
    """:func:`~pbr_core.experiments.n_re_sweep` with ``s`` (a fit that fails: NaN metrics, the sweep goes on)."""
    try:
        table = n_re_sweep(preds, list(s.methods), n_re_values=list(s.n_re_values), n_folds=s.n_folds, seed=s.seed,
                           progress=progress, cancel=cancel, method_params={m: dict(p) for m, p in s.params} or None,
                           binary_ece=s.binary_ece, on_error="warn")
        stopped = False
    except Cancelled as exc:
        table, stopped = exc.partial, True
    return SweepRun(settings=s, table=table, kind=preds.kind, stopped=stopped)


@dataclass
class KLGapRun(_Measured):
    """:func:`~pbr_core.experiments.kl_vs_ece_gap`'s result (maybe partial: ``stopped``), the data's
    number of classes (which KLs are extreme: :func:`~pbr_core.experiments.extreme_kl`) and rows
    (whether the folds share too many rows for their verdict: :func:`~pbr_core.experiments.folds_overlap_too_much`)."""

    settings: KLGapSettings
    result: KLGapResult
    n_classes: int | None = None
    kind: str = "multiclass"
    stopped: bool = False
    n_rows: int | None = None


def run_kl_gap(preds: Predictions, s: KLGapSettings, *, progress: Progress | None = None,
               cancel: CancelCallback | None = None) -> KLGapRun:
    """:func:`~pbr_core.experiments.kl_vs_ece_gap` with ``s``; too few fits for a correlation is a
    property of the result (its NaN correlations), not a warning."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        try:
            res = kl_vs_ece_gap(preds, alphas=list(s.alphas), objective=s.objective, n_re=s.n_re, n_folds=s.n_folds,
                                seed=s.seed, progress=progress, cancel=cancel, eps=s.eps, binary_ece=s.binary_ece,
                                on_error="warn", n_jobs=1 if s.batched else s.n_jobs, batched=s.batched,
                                **s.params())
            stopped = False
        except Cancelled as exc:
            res, stopped = KLGapResult.from_table(exc.partial, objective=s.objective, eps=s.eps), True
    return KLGapRun(settings=s, result=res, n_classes=preds.n_classes, kind=preds.kind, stopped=stopped,
                    n_rows=preds.n)


# ---------------------------------------------------------------------------- a recalibrator to take away
@dataclass
class FitRun(_Measured):
    """A recalibrator fitted (:func:`run_fit`) or given (:func:`run_apply`), measured on some rows."""

    recalibrator: Recalibrator
    before: dict[str, float]
    after: dict[str, float]
    reliability_before: pd.DataFrame
    reliability_after: pd.DataFrame
    n_eval: int
    binary_ece: str
    fit_report: dict[str, Any]
    seconds: float
    in_sample: bool = False              # measured on the rows it was fitted on (flattering)
    settings: FitSettings | None = None  # None: a recalibrator given (loaded from a file)
    notes: list[str] = field(default_factory=list)
    fit_rows: np.ndarray | None = None   # rows it was fitted on (None: not known, e.g. a saved file)
    kind: str = "multiclass"
    interval: IntervalSummary | None = None  # a Venn-Abers predictor's (p0, p1) on the measured rows
    #: The test of calibration (pbr_core.significance) of the measured rows before and after; None when
    #: they are the rows it was fitted on. What says whether a change of ECE on a few hundred rows is more
    #: than chance: the ECE change alone cannot.
    tests: tuple[Any, Any] | None = None
    #: Whether the measured rows show it worse calibrated than no recalibration beyond the ECE's noise
    #: (:func:`pbr_core.evaluation.ece_rise_shown`, as :class:`PBRRun`'s); None when its ECE did not
    #: rise or the rows are the ones it was fitted on. What alone may colour the page's "ECE after" card.
    worse_shown: bool | None = None
    #: A recalibrator given (:func:`run_apply`): which of the file's rows are rows it was fitted on
    #: (:meth:`Recalibrator.fit_row_overlap`); the measured rows leave them out. None for a fit here.
    fit_row_check: FitRowOverlap | None = None

    @property
    def settings_binary_ece(self) -> str:
        return self.binary_ece

    @property
    def method(self) -> str:
        return self.recalibrator.method

    @property
    def at_prior(self) -> bool | None:
        """The fit's own record that it ended at the prior (None: the method has no prior)."""
        return ended_at_prior(self.fit_report)

    @property
    def n_fit(self) -> int:
        """Rows the recalibrator was fitted on (a saved GP file records it; otherwise 0: not known)."""
        if self.fit_rows is not None:
            return len(self.fit_rows)
        return int((getattr(self.recalibrator, "bounds_", None) or {}).get("n", 0))


@dataclass(frozen=True)
class IntervalSummary:
    """The widths p1 - p0 of a Venn-Abers predictor's intervals around the probability the ECE
    measures (p(y=1) on binary data by default, else the recalibrated top class) on some rows."""

    #: "positive" (p(y=1)) or "top_label" (the class each row's recalibrated probabilities rank first).
    target: str
    mean_width: float
    median_width: float
    #: 90 % of the rows have an interval at most this wide.
    p90_width: float
    #: The share of rows whose probability lies inside its interval: 1.0 for the inductive predictor
    #: on binary data or top-label; below it where ``outside_reason`` says why.
    inside: float
    #: Why a probability can lie outside its interval: "renormalised" (one-vs-all: the K probabilities
    #: were divided by their sum), "folds" (cross Venn-Abers: the probability merges the folds by
    #: geometric means, the interval is their arithmetic mean) or "" (it cannot).
    outside_reason: str = ""
    #: A cross Venn-Abers predictor: its interval is the average of the folds' intervals, for which the
    #: method has no validity guarantee (audit 6: on 50-row files of an over-confident model the true
    #: label's averaged probability failed the test of calibration, p = 6e-11 with 2 folds).
    cross: bool = False


def interval_summary(recalibrator: Any, data: Predictions, after: np.ndarray, target: str) -> IntervalSummary | None:
    """:class:`IntervalSummary` of ``recalibrator``'s ``predict_interval`` on ``data`` (None for a
    recalibrator without intervals); ``after`` are its probabilities on ``data``."""
    if not hasattr(recalibrator, "predict_interval"):
        return None
    low, high = recalibrator.predict_interval(data)
    col = np.full(data.n, 1) if target == "positive" else after.argmax(axis=1)
    rows = np.arange(data.n)
    lo, hi, p = low[rows, col], high[rows, col], after[rows, col]
    width = hi - lo
    # Inductive, binary or top-label: p1 / (1 - p0 + p1) lies in [p0, p1] (the other classes' in its
    # image). One-vs-all: the K probabilities were renormalised, which can move p out of its class's
    # interval. Cross: the probability merges the folds' (p0, p1) by geometric means, the interval is
    # their arithmetic mean, so p can lie just outside it (1.8 % of CIFAR-10 rows, 2 folds).
    inside = float(np.mean((p >= lo - 1e-12) & (p <= hi + 1e-12)))
    one_vs_all = data.n_classes > 2 and getattr(recalibrator, "multiclass", "one_vs_all") == "one_vs_all"
    cross = hasattr(recalibrator, "n_splits")
    reason = "renormalised" if one_vs_all else "folds" if cross else ""
    return IntervalSummary(target=target, mean_width=float(width.mean()), median_width=float(np.median(width)),
                           p90_width=float(np.quantile(width, 0.9)), inside=inside, outside_reason=reason,
                           cross=cross)


def _measure(recalibrator: Recalibrator, data: Predictions, binary_ece: str, notes: list[str],
             test: bool = True, seed: int = 0) -> dict[str, Any]:
    """Before / after metrics and reliability tables of ``recalibrator`` on ``data`` (and the
    summary of its intervals, for a Venn-Abers predictor); warnings go to ``notes``. With ``test``
    (rows the recalibrator was not fitted on), the test of calibration before and after, and whether
    a rise of the ECE is shown beyond its noise (``worse_shown``, bootstrap ``seed``)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        after = recalibrator.predict_proba(data)
        interval = interval_summary(recalibrator, data, after, BINARY_TARGET.measured(data.kind, binary_ece))
    notes += list(dict.fromkeys(str(w.message) for w in caught if not issubclass(w.category, DeprecationWarning)))
    kind = data.kind
    target = BINARY_TARGET.measured(kind, binary_ece)
    # rows given probability 0 for what happened: the NLL is infinite, and its floored value (and any
    # change computed from it) is set by the floor; the pages say "infinite" instead
    before, after_m = (dict(evaluation_metrics(p, data.labels, kind, binary_ece),
                            nll_infinite_rows=nll_infinite_rows(*ece_inputs(p, data.labels, target)))
                       for p in (data.probs, after))
    return {"before": before,
            "after": after_m,
            "reliability_before": reliability_table(data.probs, data.labels, kind, binary_ece),
            "reliability_after": reliability_table(after, data.labels, kind, binary_ece), "n_eval": data.n,
            "interval": interval,
            "tests": (measured_calibration_test(data.probs, data.labels, kind, binary_ece,
                                                row_sums_as_written=data.row_sums_as_written),
                      measured_calibration_test(after, data.labels, kind, binary_ece)) if test else None,
            # A higher ECE after is called worse only beyond the ECE's noise (the PBR page's rule): on
            # 144 held-out rows of calibrated data a temperature scaling's ECE rose in 55 % of files.
            "worse_shown": (ece_rise_shown(data.probs, after, data.labels, kind, binary_ece, seed=seed)
                            if test and after_m["ece"] > before["ece"] else None)}


def fit_warnings_ahead(preds: Predictions, s: FitSettings) -> list[str]:
    """The warnings :func:`run_fit`'s fit would give that the data alone decide, to say before fitting
    (the Fit & apply page, before Fit is clicked; the fit's own notes repeat them after): a logistic map
    (Platt, beta) on fit rows whose probabilities of exactly 0 or 1 were sometimes wrong
    (:func:`pbr_core.recalibrators._logistic.hard_scores_warning`, which the CLI's ``fit`` prints).
    The fit rows are :func:`run_fit`'s (the same split), so the counts are the fit's."""
    from pbr_core.recalibrators._logistic import TargetsRecalibrator, hard_scores_warning

    recalibrator = get_recalibrator(s.method, **s.params())
    if not isinstance(recalibrator, TargetsRecalibrator) or preds.logits is not None or preds.probs is None:
        return []
    n_fit, n_held = s.split(preds.n)
    fit_set = preds.subset(split_indices(preds.n, n_fit, fold=0, seed=s.seed)[0]) if n_held else preds
    message = hard_scores_warning(fit_set, type(recalibrator).__name__, top_label=recalibrator._top_label())
    return [message] if message else []


def run_fit(preds: Predictions, s: FitSettings, *,
            on_stage: Callable[[Stage, Predictions, Predictions | None], None] | None = None) -> FitRun:
    """Fit ``s.method`` on the file less the held-out share (split as :func:`~pbr_core.experiments.split_indices`'s
    fold 0) and measure it on the held-out rows, or, with nothing held out, on the rows it was fitted on
    (``in_sample``). ``on_stage(stage, fit set, held-out set or None)`` hears "fit" and "predict"."""
    start = time.perf_counter()
    n_fit, n_held = s.split(preds.n)
    if n_held:
        re_idx, te_idx = split_indices(preds.n, n_fit, fold=0, seed=s.seed)
        fit_set, eval_set = preds.subset(re_idx), preds.subset(te_idx)
    else:
        fit_set = eval_set = preds
        re_idx = np.arange(preds.n)
    recalibrator = get_recalibrator(s.method, **s.params())
    if on_stage is not None:
        on_stage("fit", fit_set, eval_set if n_held else None)
    with warnings.catch_warnings(record=True) as caught:  # the fit's own warnings go to the page's notes
        warnings.simplefilter("always")
        recalibrator.fit(fit_set)
    if on_stage is not None:
        on_stage("predict", fit_set, eval_set if n_held else None)
    report = fit_report(recalibrator)
    notes: list[str] = list(report.get("warnings", []) or [])
    notes += [m for m in dict.fromkeys(str(w.message) for w in caught if not issubclass(w.category, DeprecationWarning))
              if m not in notes]
    # On the rows it was fitted on, a test of calibration after is no test (a fit calibrates its own rows).
    measured = _measure(recalibrator, eval_set, s.binary_ece, notes, test=bool(n_held), seed=s.seed)
    return FitRun(recalibrator=recalibrator, binary_ece=s.binary_ece, fit_report=report,
                  seconds=time.perf_counter() - start, in_sample=not n_held, settings=s, notes=notes,
                  fit_rows=np.asarray(re_idx), kind=preds.kind, **measured)


def run_apply(preds: Predictions, recalibrator: Recalibrator, *, binary_ece: str = BINARY_TARGET.default,
              check: FitRowOverlap | None = None) -> FitRun:
    """A fitted recalibrator (e.g. loaded from a file) applied to ``preds`` and measured on its rows
    that are not rows it was fitted on (``check``: :meth:`Recalibrator.fit_row_overlap` of ``preds``,
    computed here when not given). When every row is a fit row, it is measured on them all and the
    result is ``in_sample`` (no test of calibration); when the file records no fit rows, on every row.

    Raises
    ------
    pbr_core.fit_rows.FitRowsUnknownError
        A sampled fingerprint found fit rows among ``preds`` but cannot say which.
    SmallTestSetError
        Fewer than ``MIN_TEST_ROWS`` rows are left once the fit rows are left out.
    """
    start = time.perf_counter()
    notes: list[str] = []
    if check is None:
        check = recalibrator.fit_row_overlap(preds)
    rows = check.rows_to_measure()
    data = preds if rows is None else preds.subset(rows)
    in_sample = check.state == "all"
    if rows is not None:  # a check on the other rows: as few as a held-out part may be, no fewer
        check_test_rows(data.n)
    # On the rows it was fitted on, a test of calibration after is no test (a fit calibrates its own rows).
    measured = _measure(recalibrator, data, binary_ece, notes, test=not in_sample)
    return FitRun(recalibrator=recalibrator, binary_ece=binary_ece, fit_report=fit_report(recalibrator),
                  seconds=time.perf_counter() - start, notes=notes, kind=preds.kind, in_sample=in_sample,
                  fit_row_check=check, **measured)


# ---------------------------------------------------------------------------- groups
@dataclass
class GroupGapRun(_Measured):
    """:func:`~pbr_core.experiments.group_gaps.recalibration_by_group`'s table (maybe partial: ``stopped``)."""

    settings: GroupGapSettings
    table: pd.DataFrame
    planned: int
    kind: str = "multiclass"
    stopped: bool = False


def run_group_gaps(preds: Predictions, s: GroupGapSettings, *, progress: Progress | None = None,
                   cancel: CancelCallback | None = None) -> GroupGapRun:
    """:func:`~pbr_core.experiments.group_gaps.recalibration_by_group` with ``s``: per fold, one fit for
    every row and one per group (``planned`` = folds x (1 + groups) fits)."""
    from pbr_core.experiments.group_gaps import recalibration_by_group
    from pbr_core.groups import group_keys

    groups = len(set(group_keys(preds, s.by)[0].tolist()))
    planned = s.n_folds * (1 + groups)
    try:
        table = recalibration_by_group(preds, s.method, s.by, n_re=s.n_re, n_folds=s.n_folds, seed=s.seed,
                                       params=dict(s.params) or None, binary_ece=s.binary_ece,
                                       progress=progress, cancel=cancel)
        stopped = False
    except Cancelled as exc:
        table, stopped = exc.partial, True
    return GroupGapRun(settings=s, table=table, planned=planned, kind=preds.kind, stopped=stopped)
