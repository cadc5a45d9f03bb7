"""The recalibration pages' jobs: the library's runs with the page's progress, words and downloads.

The settings a page fills in and the runs that compute its numbers are ``pbr_core``'s
(:mod:`pbr_core.experiments.settings`, :mod:`pbr_core.experiments.runs`): which method, which
parameters, which checks, which ECE. Each ``run_*`` here calls one of them with a :class:`Reporter`
(progress in the page's words, the steps for the time-left estimate, Stop) and returns the library's
result with what the page adds (the data's name, downloads: :class:`Downloads`), which the page, the
figure and table builders and the HTML report read. No formula, default or method fact lives here.

A run that is stopped part-way returns its partial result with ``stopped=True`` (the protocols
keep the finished fits); a stopped single fit raises :class:`~pbr_core.experiments.Cancelled`.
Everything a run computes happens inside :func:`watched`, so Stop acts at the library's next
:func:`pbr_core.cancel.checkpoint` (every optimiser evaluation, every prediction batch): within
about a second, wherever the run is.
"""

from __future__ import annotations

import contextlib
import os
import time
from dataclasses import dataclass, field, fields
from typing import Any, Iterator, Protocol, Sequence

import numpy as np

from pbr_core import Predictions, loading
from pbr_core.cancel import cancel_when
from pbr_core.experiments.runs import CompareRun, FitRun, GroupGapRun, KLGapRun, PBRRun, SweepRun
from pbr_core.experiments.runs import run_apply as run_apply_study
from pbr_core.experiments.runs import run_compare as run_compare_study
from pbr_core.experiments.runs import run_fit as run_fit_study
from pbr_core.experiments.runs import run_group_gaps as run_group_gaps_study
from pbr_core.experiments.runs import run_kl_gap as run_kl_gap_study
from pbr_core.experiments.runs import run_pbr as run_pbr_study
from pbr_core.experiments.runs import run_sweep as run_sweep_study
# The settings the pages fill in live in pbr_core (the CLI and the scripts fill the same ones).
from pbr_core.experiments.settings import (HOLDOUT_MAX, HOLDOUT_STEP, CompareSettings, FitSettings,  # noqa: F401
                                           GroupGapSettings, KLGapSettings, PBRSettings, SweepSettings,
                                           default_holdout_percent, method_settings, min_holdout_percent)
from pbr_core.fit_rows import FitRowOverlap
from pbr_core.loading import save_predictions
from pbr_core.metrics import BINARY_TARGET
from pbr_core.progress import report_progress
from pbr_core.recalibrators import Recalibrator, available_methods, method_family


#: One step that ``Reporter.progress`` counts: its cost classes (e.g. the method; the step is
#: estimated from the first, its time counts for all) and its size (e.g. the rows it fits), for the
#: time-left estimate (``dashboard.jobs.time_left``).
PlannedStep = tuple[tuple[str, ...], float]


class Reporter(Protocol):
    """Progress and stop requests (``dashboard.jobs.JobContext`` implements it)."""

    def plan(self, steps: Sequence[PlannedStep]) -> None: ...

    def progress(self, done: int, total: int, message: str = "") -> None: ...

    def step(self, message: str) -> None: ...

    def cancelled(self) -> bool: ...

    def fit_progress(self, done: int, total: int, message: str = "") -> None: ...


class NullReporter:
    """A reporter that reports nothing and never stops (scripts, tests)."""

    def plan(self, steps: Sequence[PlannedStep]) -> None:
        pass

    def progress(self, done: int, total: int, message: str = "") -> None:
        pass

    def step(self, message: str) -> None:
        pass

    def cancelled(self) -> bool:
        return False

    def fit_progress(self, done: int, total: int, message: str = "") -> None:
        pass


# --------------------------------------------------------------------------- environment
def device_label() -> str:
    """Where a GP fit with ``device="auto"`` runs: the GPU's name, or "CPU"."""
    try:
        import torch

        if torch.cuda.is_available():
            return f"GPU: {torch.cuda.get_device_name(torch.cuda.current_device())}"
    except Exception:  # noqa: BLE001 - a broken CUDA set-up still leaves the CPU
        pass
    return "CPU"


def preload_gp() -> None:
    """Import the GP family (torch, gpytorch: required dependencies) and what torch imports lazily
    inside the first GP fit (see :func:`_preload_torch`), while a page that offers GP fits is drawn."""
    available_methods()
    _preload_torch()


def _preload_torch() -> None:
    """Import sympy (torch.fx's shape machinery, first used by a GPyTorch kernel) and torch._dynamo
    (first used by ``torch.utils.checkpoint``) now, while a page is drawn, rather than inside the
    server's first GP fit: there they took 3 to 10 s on a loaded two-core machine, time in which no
    Stop can act (an import cannot be interrupted). Once per server process; a no-op afterwards."""
    try:
        import torch._dynamo  # noqa: F401
        import torch.fx.experimental.symbolic_shapes  # noqa: F401
    except Exception:  # noqa: BLE001 - only an optimisation of the first fit's Stop latency
        pass


def _label(method: str, multiclass: bool = False) -> str:
    from dashboard.texts import method_label

    return method_label(method, multiclass)


def _progress(reporter: Reporter, multiclass: bool, total: int | None = None, prefix: str = ""):
    """A library ``progress(done, total, message)`` callback that reports in page words
    (``texts.people_progress``: "pbr alpha=0.5, fold 1/10" -> "PBR, α = 0.5, fold 1 of 10")."""
    from dashboard.texts import people_progress

    def progress(done: int, of: int, message: str = "") -> None:
        reporter.progress(done, of if total is None else total, prefix + people_progress(message, multiclass))

    return progress


#: The calibrated-predictions downloads mark the rows the recalibrator was fitted on in this column
#: (True / False), after the scores and the label; the loader reads it back as metadata, by its name.
FIT_ROWS_COLUMN = loading.FIT_ROWS_COLUMN


def refuse_small_test_set(s: Any, n: int, rows: int | None = None) -> None:
    """The settings' own check for a file of ``n`` rows (``s.check``: ``SmallTestSetError`` when the
    test part is below ``MIN_TEST_ROWS`` rows), with what to do in the page's words; ``rows``: a test
    set of that many rows instead (a saved recalibrator applied to every row). The pages refuse such
    settings before a run starts; this keeps a run started otherwise (a script, a test) from
    reporting a meaningless result."""
    from dashboard.texts import fewer_fit_rows_todo, more_fit_rows_todo
    from pbr_core.experiments import (MIN_FIT_ROWS, MIN_TEST_ROWS, SmallTestSetError, check_test_rows, max_n_re,
                                      small_file_problem)

    todo = fewer_fit_rows_todo(n, max_n_re(n), MIN_TEST_ROWS, min_fit=MIN_FIT_ROWS)
    if isinstance(s, GroupGapSettings) and small_file_problem(n) is not None:
        # The file's one sentence, as the Compare page says it; not a test-set problem with it appended
        # (audit 4: "A test set of 75 rows is too small ... This file has 150 rows, too few ...").
        raise SmallTestSetError(todo)
    if rows is not None:
        check_test_rows(rows, todo)
    elif isinstance(s, (PBRSettings, CompareSettings)):  # a recalibration set of n_re rows: MIN_FIT_ROWS too
        s.check(n, todo, more_fit_rows_todo(max_n_re(n), MIN_FIT_ROWS, MIN_TEST_ROWS))
    else:
        s.check(n, todo)


@contextlib.contextmanager
def watched(reporter: Reporter) -> Iterator[None]:
    """Within the block the library reports its loops to ``reporter.fit_progress`` (``report_progress``)
    and stops at its next checkpoint once ``reporter.cancelled()`` is True (``cancel_when``)."""
    with report_progress(reporter.fit_progress), cancel_when(reporter.cancelled):
        yield


# --------------------------------------------------------------------------- results: the library's, with the page's
class Downloads:
    """Downloads of a result holding ``preds`` (the whole loaded file), a fitted ``recalibrator`` and
    ``fit_rows``, the indices of the rows it was fitted on (None: not known, e.g. a saved file)."""

    preds: Predictions
    recalibrator: Recalibrator
    fit_rows: np.ndarray | None

    def calibrated_csv(self, as_written: Any = None) -> bytes:
        """The whole loaded file recalibrated by the recalibrator, as CSV (save_predictions), under the
        file's own column names and order (``headers_from``).

        A Venn-Abers predictor's interval (p0, p1) of each class follows its probability column
        (``<column>_low``, ``<column>_high``). When the fitted rows are known, a last column
        :data:`FIT_ROWS_COLUMN` says for every row
        whether the recalibrator was fitted on it (True) or not (False: the test part of the PBR
        page, the held-out rows of Fit & apply), so nobody scores it on its own training rows.

        ``as_written``: the file's label and other columns as the text written in them (a CSV upload,
        ``state.as_written_for``), written in place of their values as read (a ZIP code 01234, not
        1234); used only when it has a row for each row.
        """
        probs = self.recalibrator.predict_proba(self.preds)
        if as_written is not None and len(as_written) != self.preds.n:
            as_written = None
        extra = None
        if self.fit_rows is not None:
            used = np.zeros(self.preds.n, dtype=bool)
            used[np.asarray(self.fit_rows, dtype=np.int64)] = True
            extra = {FIT_ROWS_COLUMN: used}
        # A Venn-Abers predictor's (p0, p1) of each class beside its column (<column>_low, <column>_high).
        intervals = self.recalibrator.predict_interval(self.preds) if hasattr(self.recalibrator, "predict_interval") \
            else None
        # Under the user's column names (p_dem, won, not 0, 1, label), in the file's column order.
        return save_predictions(self.preds.with_probs(probs, source="recalibrated"), extra_columns=extra,
                                headers_from=self.preds, intervals=intervals, as_written=as_written)

    def recalibrator_json(self, fit_rows: bool = True) -> bytes:
        """The recalibrator's saved file; ``fit_rows=False`` leaves out the fingerprint of its fit rows,
        which tells whoever holds the file whether a row was a fit row and, from a fit row's scores, its
        label (:mod:`pbr_core.fit_rows`)."""
        import json

        return json.dumps(self.recalibrator.to_dict(fit_rows=fit_rows)).encode()


@dataclass
class _OnPage:
    """What a page adds to a study's result: which data it was computed on, and when (listed first
    among a result's bases, so that these defaulted fields come after the study's own)."""

    data_name: str = ""
    data_key: str = ""
    created: float = field(default_factory=time.time)


@dataclass
class PBRResult(_OnPage, PBRRun, Downloads):
    preds: Predictions | None = None     # the whole file the recalibrator was fitted on (for downloads)
    stopped: bool = False


@dataclass
class CompareResult(_OnPage, CompareRun):
    pass


@dataclass
class SweepResult(_OnPage, SweepRun):
    pass


@dataclass
class GenResult(_OnPage, KLGapRun):
    pass


@dataclass
class ApplyResult(_OnPage, FitRun, Downloads):
    """A recalibrator fitted on the Fit & apply page, or loaded from a file and applied to the data."""

    preds: Predictions | None = None     # the whole loaded file (downloads)
    origin: str = ""                     # how the recalibrator came to be, one sentence
    evaluated_on: str = ""               # which rows before / after are measured on
    stopped: bool = False

    @property
    def unmeasured_small_file(self) -> bool:
        """Fitted here on a file below ``MIN_MEASURED_ROWS`` rows, the size the other pages need for a
        measured result: the page and the report say the recalibrator is unmeasured
        (``texts.ship_small_file_warning``); the download stays."""
        from pbr_core.experiments import small_file_problem

        return self.settings is not None and self.preds is not None and small_file_problem(self.preds.n) is not None


@dataclass
class GroupGapResult(_OnPage, GroupGapRun):
    pass


def _page(run: Any, cls: type, **page: Any) -> Any:
    """The library's result ``run`` as the page's result ``cls`` (the same fields, and the page's)."""
    return cls(**{f.name: getattr(run, f.name) for f in fields(run)}, **page)


def fold_jobs(n_folds: int) -> int:
    """Worker processes for a job's folds (the PBR page's alpha selection, the Compare page's
    protocol with GP methods): one per fold, at most one per CPU core this server may use
    (``PBR_CALIB_JOBS=n`` caps it; 1 fits in the job's own thread)."""
    from pbr_core.parallel import available_cores

    cap = available_cores()
    env = os.environ.get("PBR_CALIB_JOBS", "").strip()
    if env.isdigit() and int(env) >= 1:
        cap = int(env)
    return max(1, min(int(n_folds), cap))


# --------------------------------------------------------------------------- the jobs
def run_pbr(preds: Predictions, s: PBRSettings, reporter: Reporter, *, data_name: str = "",
            data_key: str = "") -> PBRResult:
    """:func:`pbr_core.experiments.runs.run_pbr` with the page's progress: each cross-validation fit of
    an automatic alpha, the choice, the final fit, the predictions; the time it took, for the next
    run's estimate (``dashboard.fit_estimate``)."""
    from dashboard.texts import people_progress

    n_fit = s.n_fit(preds.n)
    refuse_small_test_set(s, preds.n)
    steps = s.n_fits
    if not s.auto_alpha:
        reporter.plan([(("fit",), float(n_fit))])
        progress = None
    else:
        from pbr_core.alpha_selection import kfold_indices

        # The CV fits run fold by fold, in ascending alpha, each continuing from the previous one
        # (pbr_core.gp.grid); a fit costs about its rows times a rate measured per alpha. The final
        # fit's alpha is chosen only after the CV; until then its cost is unknown ("about N min left
        # before the last fit").
        cv = [((f"α={a:g}",), float(len(tr))) for tr, _ in kfold_indices(n_fit, s.cv_folds, s.seed)
              for a in sorted(s.alpha_grid)]
        reporter.plan(cv + [(("final fit",), float(n_fit))])
        reporter.progress(0, steps)
        reporter.step("Choosing α by cross-validation on the recalibration set")

        def progress(done: int, total: int, message: str) -> None:
            chosen = message.startswith("alpha=") and message.endswith(" chosen")
            if done == total - 1 and chosen:   # alpha is chosen: the final fit is at it
                alpha = float(message.removeprefix("alpha=").removesuffix(" chosen"))
                reporter.plan(cv + [((f"α={alpha:g}",), float(n_fit))])
                reporter.progress(steps - 1, steps, f"α = {alpha:g} chosen")
                reporter.step(f"Fitting {_label(s.method)} on {n_fit:,} rows (α = {alpha:g})")
                return
            reporter.progress(done, steps, f"cross-validation fit: {people_progress(message)}")
            reporter.step("Choosing α by cross-validation on the recalibration set")

    def on_stage(stage: str) -> None:
        if stage == "predict":
            reporter.step("Predicting on the test part")
        elif not s.auto_alpha:
            alpha = f" (α = {s.alpha:g})" if s.uses_alpha else ""
            reporter.step(f"Fitting {_label(s.method)} on {n_fit:,} rows{alpha}")

    with watched(reporter):  # the predictions too: J draws on every test row take seconds
        run = run_pbr_study(preds, s, progress=progress, on_stage=on_stage)
    report = run.fit_report
    if report.get("wall_time_s"):  # the next run's estimate on the PBR page follows this machine
        from dashboard import fit_estimate

        fit_estimate.record(n_fit, preds.n_classes, float(report["wall_time_s"]),
                            gpu=str(report.get("device", "cpu")).startswith("cuda"))
    reporter.progress(steps, steps, "Done")
    return _page(run, PBRResult, data_name=data_name, data_key=data_key, preds=preds)


def run_compare(preds: Predictions, s: CompareSettings, reporter: Reporter, *, data_name: str = "",
                data_key: str = "") -> CompareResult:
    """:func:`pbr_core.experiments.runs.run_compare`, each fit reported in the page's words."""
    refuse_small_test_set(s, preds.n)
    reporter.plan([((m,), 1.0) for _ in range(s.n_folds) for m in s.methods])  # compare's order
    reporter.progress(0, s.planned)  # the count shows before the first fit ends
    with watched(reporter):
        run = run_compare_study(preds, s, progress=_progress(reporter, preds.kind == "multiclass", total=s.planned),
                                cancel=reporter.cancelled)
    gp = run.table[run.table["method"].map(lambda m: method_family(m) == "gp")] if len(run.table) else run.table
    _record_fits(gp, s.n_re, preds.n_classes)
    return _page(run, CompareResult, data_name=data_name, data_key=data_key)


def _record_fits(table: Any, n_re: int, k: int) -> None:
    """The GP fits' measured seconds (a comparison's or a KL-gap study's ``fit_seconds``), so that the
    next estimate on any page follows this machine, as a PBR fit's does (HAM, 1,500 rows x 7 classes:
    its fits end at the prior and are redone, 4.3 s each against the model's 1.9)."""
    from dashboard import fit_estimate

    if "fit_seconds" not in table:
        return
    for seconds in table["fit_seconds"].dropna():
        fit_estimate.record(int(n_re), int(k), float(seconds), gpu=device_label() != "CPU")


def run_sweep(preds: Predictions, s: SweepSettings, reporter: Reporter, *, data_name: str = "",
              data_key: str = "") -> SweepResult:
    """:func:`pbr_core.experiments.runs.run_sweep` (paper Figure 3), each fit reported in the page's words."""
    values = sorted(set(s.n_re_values))  # n_re_sweep's order: fold, n_re ascending, method
    reporter.plan([((f"{m}, n_re={v}",), float(v)) for _ in range(s.n_folds) for v in values for m in s.methods])
    reporter.progress(0, s.planned)
    with watched(reporter):
        run = run_sweep_study(preds, s, progress=_progress(reporter, preds.kind == "multiclass"),
                              cancel=reporter.cancelled)
    return _page(run, SweepResult, data_name=data_name, data_key=data_key)


def run_generalization(preds: Predictions, s: KLGapSettings, reporter: Reporter, *, data_name: str = "",
                       data_key: str = "") -> GenResult:
    """:func:`pbr_core.experiments.runs.run_kl_gap` (paper Section 6.1, Figure 2)."""
    refuse_small_test_set(s, preds.n)  # the gap's test subset has n_re rows
    reporter.plan([((f"α={a:g}",), 1.0) for _ in range(s.n_folds) for a in s.alphas])
    reporter.progress(0, s.planned)
    with watched(reporter):
        run = run_kl_gap_study(preds, s, progress=_progress(reporter, False), cancel=reporter.cancelled)
    if not s.batched:  # batched on a GPU, a fit's seconds are not one fit's
        _record_fits(run.result.table, s.n_re, preds.n_classes)
    return _page(run, GenResult, data_name=data_name, data_key=data_key)


def run_ship(preds: Predictions, s: FitSettings, reporter: Reporter, *, data_name: str = "",
             data_key: str = "") -> ApplyResult:
    """:func:`pbr_core.experiments.runs.run_fit`: fit ``s.method`` on the file (less the held-out share)
    and measure it on the held-out rows (or, with nothing held out, on the rows it was fitted on)."""
    from dashboard.texts import evaluated_on_words, fitted_origin

    refuse_small_test_set(s, preds.n)
    reporter.progress(0, 1)

    def on_stage(stage: str, fit_set: Predictions, held_out: Predictions | None) -> None:
        if stage == "fit":
            reporter.step(f"Fitting {_label(s.method)} on {fit_set.n:,} rows")
        else:
            reporter.step("Measuring it" + (" on the held-out rows" if held_out is not None else ""))

    with watched(reporter):
        run = run_fit_study(preds, s, on_stage=on_stage)
    reporter.progress(1, 1, "Done")
    n_fit = len(run.fit_rows)
    return _page(run, ApplyResult, data_name=data_name, data_key=data_key, preds=preds,
                 origin=fitted_origin(s.method, n_fit, data_name),
                 evaluated_on=evaluated_on_words(run.n_eval, n_fit, run.in_sample))


def run_apply(preds: Predictions, recalibrator: Recalibrator, source: str, reporter: Reporter, *,
              binary_ece: str = BINARY_TARGET.default, data_name: str = "", data_key: str = "",
              check: FitRowOverlap | None = None) -> ApplyResult:
    """:func:`pbr_core.experiments.runs.run_apply`: a saved (fitted) recalibrator applied to the loaded
    file and measured on its rows that are not rows it was fitted on (``check``: its
    ``fit_row_overlap`` of ``preds``, computed here when not given)."""
    from dashboard.texts import applied_origin, evaluated_on_all

    if check is None:
        check = recalibrator.fit_row_overlap(preds)
    rows = check.n_other if check.state == "some" else preds.n
    refuse_small_test_set(FitSettings(holdout=0.0), preds.n, rows=rows)
    reporter.progress(0, 1)
    reporter.step(f"Applying {_label(recalibrator.method)} to {preds.n:,} rows")
    with watched(reporter):
        run = run_apply_study(preds, recalibrator, binary_ece=binary_ece, check=check)
    reporter.progress(1, 1, "Done")
    return _page(run, ApplyResult, data_name=data_name, data_key=data_key, preds=preds,
                 origin=applied_origin(recalibrator.method, source),
                 evaluated_on=evaluated_on_all(preds.n, data_name, check))


def run_group_gaps(preds: Predictions, s: GroupGapSettings, reporter: Reporter, *, data_name: str = "",
                   data_key: str = "") -> GroupGapResult:
    """:func:`pbr_core.experiments.runs.run_group_gaps` on the loaded data."""
    refuse_small_test_set(s, preds.n)
    reporter.progress(0, 0)
    with report_progress(reporter.fit_progress):
        run = run_group_gaps_study(preds, s, progress=lambda d, t, m: reporter.progress(d, t, m),
                                   cancel=reporter.cancelled)
    return _page(run, GroupGapResult, data_name=data_name, data_key=data_key)


#: What a job of the recalibration pages returns (``dashboard.jobs.Job.result``); the pages, the
#: figure and table builders and the report read these.
JobResult = PBRResult | CompareResult | SweepResult | GenResult | ApplyResult | GroupGapResult
