"""What the recalibration pages compute: one function per job, pure (no Streamlit).

Each ``run_*`` function takes the loaded :class:`~pbr_core.Predictions`, a frozen settings value
and a :class:`Reporter` (progress, stop), calls ``pbr_core`` and returns a result value that the
page, the figures and the HTML report read. No formula lives here: splits, fits, metrics, bounds
and the experiment protocols all come from ``pbr_core``; this module only strings them together.

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
from dataclasses import dataclass, field
from typing import Any, Iterable, Iterator, Literal, Mapping, Protocol, Sequence, TypedDict

import numpy as np
import pandas as pd

import pbr_core
from pbr_core import Predictions
from pbr_core.experiments import (
    DEFAULT_BINARY_ECE,
    PAPER_ALPHAS,
    Cancelled,
    KLGapResult,
    compare,
    ended_at_prior,
    evaluation_metrics,
    fit_and_test,
    kl_vs_ece_gap,
    n_re_sweep,
    split_indices,
)
from pbr_core.cancel import cancel_when
from pbr_core.evaluation import reliability_table
from pbr_core.loading import save_predictions
from pbr_core.metrics import BinaryTarget as BinaryECE
from pbr_core.progress import report_progress
from pbr_core.recalibrators import (Recalibrator, accepted_params, available_methods, get_recalibrator,
                                    method_family, takes)

Objective = Literal["pbr", "pbr_total", "gp"]


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


def _labels(methods: Iterable[str], multiclass: bool = False) -> str:
    return ", ".join(_label(m, multiclass) for m in methods)


def _params(params: Mapping[str, Any]) -> str:
    from dashboard.texts import params_text

    return params_text(dict(params))


def _progress(reporter: Reporter, multiclass: bool, total: int | None = None, prefix: str = ""):
    """A library ``progress(done, total, message)`` callback that reports in page words
    (``texts.people_progress``: "pbr alpha=0.5, fold 1/10" -> "PBR, α = 0.5, fold 1 of 10")."""
    from dashboard.texts import people_progress

    def progress(done: int, of: int, message: str = "") -> None:
        reporter.progress(done, of if total is None else total, prefix + people_progress(message, multiclass))

    return progress


#: The calibrated-predictions downloads mark the rows the recalibrator was fitted on in this column
#: (True / False), after the scores and the label.
FIT_ROWS_COLUMN = "used_for_fit"


def refuse_small_test_set(n_te: int, n: int) -> None:
    """Raise ``pbr_core.experiments.SmallTestSetError`` (why, and what to do) for a test set of fewer
    than ``MIN_TEST_ROWS`` rows of a file of ``n`` rows. The pages refuse such settings before a run
    starts; this keeps a run started otherwise (a script, a test) from reporting a meaningless result."""
    from dashboard.texts import fewer_fit_rows_todo
    from pbr_core.experiments import MIN_TEST_ROWS, check_test_rows, max_n_re

    check_test_rows(n_te, fewer_fit_rows_todo(n, max_n_re(n), MIN_TEST_ROWS))


@contextlib.contextmanager
def watched(reporter: Reporter) -> Iterator[None]:
    """Within the block the library reports its loops to ``reporter.fit_progress`` (``report_progress``)
    and stops at its next checkpoint once ``reporter.cancelled()`` is True (``cancel_when``)."""
    with report_progress(reporter.fit_progress), cancel_when(reporter.cancelled):
        yield


# --------------------------------------------------------------------------- PBR page
@dataclass(frozen=True)
class PBRSettings:
    objective: Objective = "pbr"
    mean_approx: bool = False
    alpha: float | None = 0.5            # None: choose automatically on the recalibration data
    alpha_grid: tuple[float, ...] = PAPER_ALPHAS
    cv_folds: int = 5
    cv_score: str = "ece"
    n_re: int = 1000
    seed: int = 0
    eps: float = 0.05
    lipschitz: float = 1.0
    max_iter: int | None = None
    binary_ece: BinaryECE = DEFAULT_BINARY_ECE
    prior_split: float = 0.0             # > 0: share of the n_re rows that choose the prior (bounds valid as stated)
    n_jobs: int = 1                      # automatic alpha: folds fitted at once, in worker processes

    @property
    def method(self) -> str:
        from pbr_core.recalibrators import gp_method

        return gp_method(self.objective, self.mean_approx)

    @property
    def uses_alpha(self) -> bool:
        return self.objective != "gp"

    def describe(self) -> dict[str, Any]:
        """Settings as the report lists them, in the page's words."""
        out: dict[str, Any] = {"Method": _label(self.method), "Recalibration rows (n_re)": f"{self.n_re:,}",
                               "Split seed": self.seed, "ε (failure probability)": f"{self.eps:g}",
                               "Lipschitz constant L": f"{self.lipschitz:g}"}
        if self.uses_alpha:
            from dashboard.texts import CV_SCORE_LABELS

            score = CV_SCORE_LABELS.get(self.cv_score, self.cv_score)
            out["α (weight of the KL term)"] = (
                f"chosen by {self.cv_folds}-fold cross-validation on the recalibration rows (score: {score}) "
                f"from {', '.join(f'{a:g}' for a in self.alpha_grid)}" if self.alpha is None else f"{self.alpha:g}")
        if self.max_iter:
            out["Max optimiser iterations"] = self.max_iter
        out["Prior of the bounds"] = (
            f"chosen on {self.prior_split:.0%} of the recalibration rows, bounds on the others (valid as stated)"
            if self.prior_split else "fitted on the same rows as the posterior (bounds approximate)")
        return out


class Downloads:
    """Downloads of a result holding ``preds`` (the whole loaded file), a fitted ``recalibrator`` and
    ``fit_rows``, the indices of the rows it was fitted on (None: not known, e.g. a saved file)."""

    preds: Predictions
    recalibrator: Recalibrator
    fit_rows: np.ndarray | None

    def calibrated_csv(self) -> bytes:
        """The whole loaded file recalibrated by the recalibrator, as CSV (save_predictions), under the
        file's own column names and order (``headers_from``).

        When the fitted rows are known, a last column :data:`FIT_ROWS_COLUMN` says for every row
        whether the recalibrator was fitted on it (True) or not (False: the test part of the PBR
        page, the held-out rows of Fit & apply), so nobody scores it on its own training rows.
        """
        probs = self.recalibrator.predict_proba(self.preds)
        extra = None
        if self.fit_rows is not None:
            used = np.zeros(self.preds.n, dtype=bool)
            used[np.asarray(self.fit_rows, dtype=np.int64)] = True
            extra = {FIT_ROWS_COLUMN: used}
        # Under the user's column names (p_dem, won, not 0, 1, label), in the file's column order.
        return save_predictions(self.preds.with_probs(probs, source="recalibrated"), extra_columns=extra,
                                headers_from=self.preds)

    def recalibrator_json(self) -> bytes:
        import json

        return json.dumps(self.recalibrator.to_dict()).encode()


@dataclass
class PBRResult(Downloads):
    settings: PBRSettings
    data_name: str
    data_key: str
    preds: Predictions                   # the whole file the recalibrator was fitted on (for downloads)
    recalibrator: Recalibrator
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
    fit_rows: np.ndarray | None = None   # the recalibration set (indices into preds); the rest is the test part
    created: float = field(default_factory=time.time)
    stopped: bool = False
    n_bound: int = 0                     # rows the bounds are evaluated on (n_re, or fewer with a prior split)
    bound_prior: str = "same_rows"       # "split": prior chosen on other rows (valid as stated); "same_rows"

    @property
    def at_prior(self) -> bool | None:
        """The fit's own record that it ended at the prior (None: the method has no prior)."""
        return ended_at_prior(self.fit_report)


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


def _pbr_recalibrator(s: PBRSettings, n_fit: int, reporter: Reporter) -> tuple[Any, int, dict[str, Any]]:
    """The page's recalibrator: ``s.method`` at ``s.alpha``, or with automatic alpha a
    :class:`~pbr_core.recalibrators.PBRCV` whose k-fold selection inside the recalibration rows
    reports each fit, and the choice, to ``reporter``. Returns (recalibrator, steps, its fit's
    keyword arguments)."""
    params = accepted_params(s.method, max_iter=s.max_iter, prior_split=s.prior_split or None)
    if not (s.uses_alpha and s.alpha is None):
        if s.uses_alpha:
            params["alpha"] = s.alpha
        reporter.plan([(("fit",), float(n_fit))])
        return get_recalibrator(s.method, **params), 1, {}
    from dashboard.texts import people_progress
    from pbr_core.alpha_selection import kfold_indices
    from pbr_core.recalibrators import PBRCV

    rec = PBRCV(get_recalibrator(s.method, **params), alphas=list(s.alpha_grid), cv=s.cv_folds, scoring=s.cv_score,
                cv_seed=s.seed, binary_ece=s.binary_ece, n_jobs=s.n_jobs)
    steps = len(s.alpha_grid) * s.cv_folds + 1   # fits: the CV grid, then the final one
    # The CV fits run fold by fold, in ascending alpha, each continuing from the previous one
    # (alpha_selection._sequential_rows); a fit costs about its rows times a rate measured per
    # alpha. The final fit's alpha is chosen only after the CV; until then its cost is unknown
    # ("about N min left before the last fit").
    cv = [((f"α={a:g}",), float(len(tr))) for tr, _ in kfold_indices(n_fit, s.cv_folds, s.seed)
          for a in sorted(s.alpha_grid)]
    reporter.plan(cv + [(("final fit",), float(n_fit))])
    reporter.progress(0, steps)
    reporter.step("Choosing α by cross-validation on the recalibration set")

    def progress(done: int, total: int, message: str) -> None:
        if done == total - 1 and getattr(rec, "alpha_", None) is not None:   # alpha is chosen
            reporter.plan(cv + [((f"α={rec.alpha_:g}",), float(n_fit))])     # the final fit is at it
            reporter.progress(steps - 1, steps, f"α = {rec.alpha_:g} chosen")
            reporter.step(f"Fitting {_label(s.method)} on {n_fit:,} rows (α = {rec.alpha_:g})")
            return
        reporter.progress(done, steps, f"cross-validation fit: {people_progress(message)}")
        reporter.step("Choosing α by cross-validation on the recalibration set")

    return rec, steps, {"progress": progress}


def run_pbr(preds: Predictions, s: PBRSettings, reporter: Reporter, *, data_name: str = "",
            data_key: str = "") -> PBRResult:
    """Fit PBR / GP calibration on fold 0's recalibration set and evaluate on its test set
    (:func:`pbr_core.experiments.fit_and_test`), alpha fixed or chosen by
    :class:`~pbr_core.recalibrators.PBRCV` inside the recalibration set.

    The split is the one :func:`pbr_core.experiments.compare` uses for fold 0 with the same seed,
    so the numbers line up with the Compare page's first fold.
    """
    start = time.perf_counter()
    n_fit = split_indices(preds.n, s.n_re, fold=0, seed=s.seed)[0].shape[0]
    refuse_small_test_set(preds.n - n_fit, preds.n)
    recalibrator, steps, fit_params = _pbr_recalibrator(s, n_fit, reporter)
    auto = steps > 1

    def on_stage(stage: str) -> None:
        if stage == "predict":
            reporter.step("Predicting on the test part")
        elif not auto:
            alpha = f" (α = {s.alpha:g})" if s.uses_alpha else ""
            reporter.step(f"Fitting {_label(s.method)} on {n_fit:,} rows{alpha}")

    with watched(reporter):  # the predictions too: J draws on every test row take seconds
        h = fit_and_test(preds, recalibrator, s.n_re, seed=s.seed, binary_ece=s.binary_ece, eps=s.eps,
                         lipschitz=s.lipschitz, on_stage=on_stage, fit_params=fit_params)
    alpha, scores = (s.alpha if s.uses_alpha else None), None
    if auto:
        alpha, scores = recalibrator.alpha_, pd.DataFrame(recalibrator.cv_results_)
        recalibrator = recalibrator.best_estimator_  # what the downloads ship: a plain PBR file
    report = h.fit_report
    if report.get("wall_time_s"):  # the next run's estimate on the PBR page follows this machine
        from dashboard import fit_estimate

        fit_estimate.record(h.fit_set.n, preds.n_classes, float(report["wall_time_s"]),
                            gpu=str(report.get("device", "cpu")).startswith("cuda"))
    reporter.progress(steps, steps, "Done")
    kind, test_set = preds.kind, h.test_set
    return PBRResult(
        settings=s, data_name=data_name, data_key=data_key, preds=preds, recalibrator=recalibrator,
        alpha=alpha, alpha_scores=scores, before=h.before, after=h.after,
        reliability_before=reliability_table(test_set.probs, test_set.labels, kind, s.binary_ece),
        reliability_after=reliability_table(h.test_probs, test_set.labels, kind, s.binary_ece),
        ece_re=h.ece_re, n_bins_re=h.n_bins_re, kl=h.kl,
        bounds={k: h.bounds[k] for k in ("corollary1", "corollary2")} if h.bounds else {},
        fit_report=h.fit_report, n_te=test_set.n, seconds=time.perf_counter() - start, fit_rows=h.fit_rows,
        n_bound=h.n_bound, bound_prior=h.bound_prior,
    )


# --------------------------------------------------------------------------- Compare page
@dataclass(frozen=True)
class CompareSettings:
    methods: tuple[str, ...] = ("uncalibrated", "temperature")
    n_re: int = 1000
    n_folds: int = 10
    seed: int = 0
    n_te: int | None = None              # test rows per fold; None: all rows not used to fit
    diagrams: bool = True                # keep each method's reliability table on fold 1's test set
    binary_ece: BinaryECE = DEFAULT_BINARY_ECE
    params: tuple[tuple[str, tuple[tuple[str, Any], ...]], ...] = ()   # hashable method_params
    n_jobs: int = 1                      # folds fitted at once, in worker processes

    def method_params(self) -> dict[str, dict[str, Any]]:
        return {m: dict(p) for m, p in self.params}

    def fits_per_fold(self) -> tuple[int, int]:
        """(fits, of which GP fits) per fold: methods with the same ``Recalibrator.fit_key`` (e.g.
        ``pbr`` and ``pbr_app`` with the same settings) share one fit in ``compare``; alpha by
        cross-validation (``pbr_cv``) counts every fit of its selection (``Recalibrator.n_fits``)."""
        params = self.method_params()
        fits: dict[Any, tuple[str, int]] = {}
        for m in self.methods:
            rec = get_recalibrator(m, **dict(params.get(m) or {}))
            key = rec.fit_key()
            fits.setdefault(("own", m) if key is None else key, (m, rec.n_fits()))
        return (sum(n for _, n in fits.values()), sum(n for m, n in fits.values() if method_family(m) == "gp"))

    def describe(self, multiclass: bool = False) -> dict[str, Any]:
        """Settings as the report lists them, in the page's words."""
        out: dict[str, Any] = {"Methods": _labels(self.methods, multiclass),
                               "Recalibration rows (n_re)": f"{self.n_re:,}", "Folds": self.n_folds,
                               "Split seed": self.seed}
        if self.n_te is not None:
            out["Test rows per fold"] = f"{self.n_te:,}"
        for m, p in self.params:
            out[f"{_label(m, multiclass)} settings"] = _params(dict(p))
        return out


@dataclass
class CompareResult:
    settings: CompareSettings
    data_name: str
    data_key: str
    table: pd.DataFrame                          # compare()'s per-fold table (maybe partial)
    diagrams: dict[str, pd.DataFrame]            # method -> reliability table on fold 1's test set
    planned: int
    kind: str = "multiclass"                     # the data's kind (labels, axis titles)
    created: float = field(default_factory=time.time)
    stopped: bool = False


def _params_tuple(params: Mapping[str, Mapping[str, Any]]) -> tuple:
    return tuple((m, tuple(sorted(p.items()))) for m, p in params.items() if p)


def gp_params(methods: Sequence[str], alpha: float = 0.5, max_iter: int | None = None) -> tuple:
    """Hashable per-method parameters: alpha for the PBR methods, max_iter where accepted."""
    return _params_tuple({m: recalibrator_params(m, alpha, max_iter) for m in methods})


def recalibrator_params(method: str, alpha: float | None = None, max_iter: int | None = None) -> dict[str, Any]:
    """``method``'s page settings: alpha for the PBR methods (unless None), max_iter where accepted."""
    p = accepted_params(method, max_iter=max_iter)
    if alpha is not None and takes(method, "alpha"):
        p["alpha"] = alpha
    return p


def compare_settings(methods: Sequence[str], n_re: int, n_folds: int, seed: int, *, n_te: int | None = None,
                     diagrams: bool = True, binary_ece: BinaryECE = DEFAULT_BINARY_ECE, alpha: float = 0.5,
                     max_iter: int | None = None, n_jobs: int = 1) -> CompareSettings:
    """Settings with the GP methods' parameters filled in (alpha, and max_iter where accepted)."""
    return CompareSettings(methods=tuple(methods), n_re=int(n_re), n_folds=int(n_folds), seed=int(seed),
                           n_te=None if n_te is None else int(n_te), diagrams=diagrams, binary_ece=binary_ece,
                           params=gp_params(methods, alpha, max_iter), n_jobs=int(n_jobs))


def run_compare(preds: Predictions, s: CompareSettings, reporter: Reporter, *, data_name: str = "",
                data_key: str = "") -> CompareResult:
    """pbr_core.experiments.compare; with ``s.diagrams``, each method's reliability table on fold 1's
    test set is taken from that fold's own predictions (no extra fit)."""
    refuse_small_test_set(preds.n - s.n_re if s.n_te is None else s.n_te, preds.n)
    planned = s.n_folds * len(s.methods)
    result = CompareResult(settings=s, data_name=data_name, data_key=data_key, table=pd.DataFrame(),
                           diagrams={}, planned=planned, kind=preds.kind)

    progress = _progress(reporter, preds.kind == "multiclass", total=planned)

    def keep_diagram(fold: int, method: str, test_set: Predictions, probs: np.ndarray) -> None:
        if fold == 0:
            result.diagrams[method] = reliability_table(probs, test_set.labels, preds.kind, s.binary_ece)

    reporter.plan([((m,), 1.0) for _ in range(s.n_folds) for m in s.methods])  # compare's order
    reporter.progress(0, planned)  # the count shows before the first fit ends
    try:
        with watched(reporter):
            result.table = compare(preds, list(s.methods), n_re=s.n_re, n_folds=s.n_folds, seed=s.seed,
                                   n_te=s.n_te, method_params=s.method_params() or None, progress=progress,
                                   cancel=reporter.cancelled, binary_ece=s.binary_ece, on_error="warn",
                                   on_predictions=keep_diagram if s.diagrams else None, n_jobs=s.n_jobs)
    except Cancelled as exc:
        result.table, result.stopped = exc.partial, True
    return result


# --------------------------------------------------------------------------- n_re sweep
@dataclass(frozen=True)
class SweepSettings:
    methods: tuple[str, ...] = ("uncalibrated", "temperature")
    n_re_values: tuple[int, ...] = (10, 50, 100, 250, 500, 1000)
    n_folds: int = 3
    seed: int = 0
    binary_ece: BinaryECE = DEFAULT_BINARY_ECE
    params: tuple = ()

    def describe(self, multiclass: bool = False) -> dict[str, Any]:
        """Settings as the report lists them, in the page's words."""
        out: dict[str, Any] = {"Methods": _labels(self.methods, multiclass),
                               "Recalibration rows (n_re) tried": ", ".join(f"{v:,}" for v in self.n_re_values),
                               "Folds": self.n_folds, "Split seed": self.seed}
        for m, p in self.params:
            out[f"{_label(m, multiclass)} settings"] = _params(dict(p))
        return out


@dataclass
class SweepResult:
    settings: SweepSettings
    data_name: str
    data_key: str
    table: pd.DataFrame
    kind: str = "multiclass"
    created: float = field(default_factory=time.time)
    stopped: bool = False


def run_sweep(preds: Predictions, s: SweepSettings, reporter: Reporter, *, data_name: str = "",
              data_key: str = "") -> SweepResult:
    """pbr_core.experiments.n_re_sweep (paper Figure 3)."""
    params = {m: dict(p) for m, p in s.params} or None
    values = sorted(set(s.n_re_values))  # n_re_sweep's order: fold, n_re ascending, method
    reporter.plan([((f"{m}, n_re={v}",), float(v)) for _ in range(s.n_folds) for v in values for m in s.methods])
    reporter.progress(0, len(s.methods) * len(values) * s.n_folds)
    try:
        with watched(reporter):
            table = n_re_sweep(preds, list(s.methods), n_re_values=list(s.n_re_values), n_folds=s.n_folds,
                               seed=s.seed, progress=_progress(reporter, preds.kind == "multiclass"),
                               cancel=reporter.cancelled, method_params=params, binary_ece=s.binary_ece,
                               on_error="warn")
        stopped = False
    except Cancelled as exc:
        table, stopped = exc.partial, True
    return SweepResult(settings=s, data_name=data_name, data_key=data_key, table=table, kind=preds.kind,
                       stopped=stopped)


# --------------------------------------------------------------------------- Generalization page
@dataclass(frozen=True)
class GenSettings:
    objective: str = "pbr"
    alphas: tuple[float, ...] = PAPER_ALPHAS
    n_re: int = 1000
    n_folds: int = 10
    seed: int = 0
    eps: float = 0.05
    max_iter: int | None = None
    binary_ece: BinaryECE = DEFAULT_BINARY_ECE
    n_jobs: int = 1                      # folds fitted at once, in worker processes
    batched: bool = False                # every fit in one batch on the GPU (Adam; kl_vs_ece_gap(batched=True))

    def describe(self) -> dict[str, Any]:
        """Settings as the report lists them, in the page's words."""
        out: dict[str, Any] = {"Method": _label(self.objective), "α values": ", ".join(f"{a:g}" for a in self.alphas),
                               "Recalibration rows n_re (= test subset size)": f"{self.n_re:,}",
                               "Folds": self.n_folds, "Split seed": self.seed, "ε (failure probability)": f"{self.eps:g}"}
        if self.max_iter:
            out["Max optimiser iterations"] = self.max_iter
        if self.batched:
            out["Fitting"] = "all fits together on the GPU (Adam optimiser)"
        return out


@dataclass
class GenResult:
    settings: GenSettings
    data_name: str
    data_key: str
    result: KLGapResult
    created: float = field(default_factory=time.time)
    stopped: bool = False
    n_classes: int | None = None         # K of the data: which KLs are extreme (pbr_core.experiments.extreme_kl)


def run_generalization(preds: Predictions, s: GenSettings, reporter: Reporter, *, data_name: str = "",
                       data_key: str = "") -> GenResult:
    """pbr_core.experiments.kl_vs_ece_gap (paper Section 6.1, Figure 2)."""
    import warnings

    refuse_small_test_set(s.n_re, preds.n)  # the gap's test subset has n_re rows
    extra = accepted_params(s.objective, max_iter=s.max_iter, optimizer="adam" if s.batched else None)
    reporter.plan([((f"α={a:g}",), 1.0) for _ in range(s.n_folds) for a in s.alphas])
    reporter.progress(0, len(s.alphas) * s.n_folds)
    with warnings.catch_warnings():
        # Too few fits for a correlation is said on the page, not as a console warning.
        warnings.simplefilter("ignore", RuntimeWarning)
        try:
            with watched(reporter):
                res = kl_vs_ece_gap(preds, alphas=list(s.alphas), objective=s.objective, n_re=s.n_re,
                                    n_folds=s.n_folds, seed=s.seed, progress=_progress(reporter, False),
                                    cancel=reporter.cancelled, eps=s.eps, binary_ece=s.binary_ece,
                                    on_error="warn", n_jobs=1 if s.batched else s.n_jobs, batched=s.batched,
                                    **extra)
            stopped = False
        except Cancelled as exc:
            res, stopped = KLGapResult.from_table(exc.partial, objective=s.objective, eps=s.eps), True
    return GenResult(settings=s, data_name=data_name, data_key=data_key, result=res, stopped=stopped,
                     n_classes=preds.n_classes)


# --------------------------------------------------------------------------- Fit & apply page
@dataclass(frozen=True)
class ShipSettings:
    """Fit one recalibrator to take away: on every row, or with a share of rows held out to check it."""

    method: str = "temperature"
    alpha: float | None = None           # the PBR methods' alpha; None: the method's default
    holdout: float = 0.2                 # share of the rows held out to check the fit; 0: fit on every row
    seed: int = 0
    max_iter: int | None = None
    binary_ece: BinaryECE = DEFAULT_BINARY_ECE

    def params(self) -> dict[str, Any]:
        return recalibrator_params(self.method, self.alpha, self.max_iter)

    def split(self, n: int) -> tuple[int, int]:
        """(rows to fit on, rows held out) for a file of n rows; at least 2 to fit, 1 held out if any."""
        held = 0 if self.holdout <= 0 else min(max(1, int(round(self.holdout * n))), n - 2)
        return n - held, held

    def describe(self) -> dict[str, Any]:
        """Settings as the report lists them, in the page's words."""
        out: dict[str, Any] = {"Method": _label(self.method)}
        if self.params():
            out["Settings"] = _params(self.params())
        out["Held out"] = f"{self.holdout:.0%} (split seed {self.seed})" if self.holdout > 0 else "nothing"
        return out


#: The Fit & apply page's holdout slider: its step and largest value, in percent.
HOLDOUT_STEP, HOLDOUT_MAX = 5, 50


def min_holdout_percent(n: int) -> int | None:
    """The smallest share held out (a multiple of :data:`HOLDOUT_STEP` %, at most :data:`HOLDOUT_MAX` %)
    whose rows reach ``pbr_core.experiments.MIN_TEST_ROWS`` in a file of ``n`` rows; None when none does."""
    from pbr_core.experiments import MIN_TEST_ROWS

    for percent in range(HOLDOUT_STEP, HOLDOUT_MAX + 1, HOLDOUT_STEP):
        if ShipSettings(holdout=percent / 100).split(n)[1] >= MIN_TEST_ROWS:
            return percent
    return None


def default_holdout_percent(n: int) -> int:
    """The Fit & apply page's default share held out: 20 %, or the smallest share that holds out
    ``MIN_TEST_ROWS`` rows when 20 % does not (30 % of a 504-row file: 151 rows), or 0 % (fit on every
    row, measured on them, said so) when no share up to 50 % does."""
    least = min_holdout_percent(n)
    return 0 if least is None else max(20, least)


@dataclass
class ApplyResult(Downloads):
    """A recalibrator fitted on the Fit & apply page, or loaded from a file and applied to the data."""

    data_name: str
    data_key: str
    preds: Predictions                   # the whole loaded file (downloads)
    recalibrator: Recalibrator
    origin: str                          # how the recalibrator came to be, one sentence
    evaluated_on: str                    # which rows before / after are measured on
    in_sample: bool                      # measured on the rows it was fitted on (flattering)
    before: dict[str, float]
    after: dict[str, float]
    reliability_before: pd.DataFrame
    reliability_after: pd.DataFrame
    n_eval: int
    binary_ece: BinaryECE
    fit_report: dict[str, Any]
    seconds: float
    settings: ShipSettings | None = None  # None: loaded from a file
    notes: list[str] = field(default_factory=list)
    fit_rows: np.ndarray | None = None    # rows of preds it was fitted on (None: a saved file, not known)
    created: float = field(default_factory=time.time)
    stopped: bool = False

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


class Measured(TypedDict):
    """A recalibrator measured on some rows: the :class:`ApplyResult` fields :func:`_evaluate` fills."""

    before: dict[str, float]
    after: dict[str, float]
    reliability_before: pd.DataFrame
    reliability_after: pd.DataFrame
    n_eval: int


def _evaluate(recalibrator: Recalibrator, data: Predictions, binary_ece: BinaryECE, notes: list[str]) -> Measured:
    """Before / after metrics and reliability tables of ``recalibrator`` on ``data``; warnings go to ``notes``."""
    import warnings

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        after = recalibrator.predict_proba(data)
    notes += list(dict.fromkeys(str(w.message) for w in caught if not issubclass(w.category, DeprecationWarning)))
    kind = data.kind
    return Measured(before=evaluation_metrics(data.probs, data.labels, kind, binary_ece),
                    after=evaluation_metrics(after, data.labels, kind, binary_ece),
                    reliability_before=reliability_table(data.probs, data.labels, kind, binary_ece),
                    reliability_after=reliability_table(after, data.labels, kind, binary_ece), n_eval=data.n)


def _fit_report(recalibrator: Recalibrator) -> dict[str, Any]:
    report = getattr(recalibrator, "fit_report_", None)
    return report.to_dict() if hasattr(report, "to_dict") else dict(report or {})


def run_ship(preds: Predictions, s: ShipSettings, reporter: Reporter, *, data_name: str = "",
             data_key: str = "") -> ApplyResult:
    """Fit ``s.method`` on the file (less the held-out share) and measure it on the held-out rows
    (or, with nothing held out, on the rows it was fitted on)."""
    start = time.perf_counter()
    n_fit, n_held = s.split(preds.n)
    if n_held:  # nothing held out: measured on the fitted rows, which the page says
        refuse_small_test_set(n_held, preds.n)
    if n_held:
        re_idx, te_idx = split_indices(preds.n, n_fit, fold=0, seed=s.seed)
        fit_set, eval_set = preds.subset(re_idx), preds.subset(te_idx)
    else:
        fit_set = eval_set = preds
        re_idx = np.arange(preds.n)
    recalibrator = get_recalibrator(s.method, **s.params())
    reporter.progress(0, 1)
    reporter.step(f"Fitting {_label(s.method)} on {fit_set.n:,} rows")
    with watched(reporter):
        recalibrator.fit(fit_set)
        reporter.step("Measuring it" + (" on the held-out rows" if n_held else ""))
        report = _fit_report(recalibrator)
        notes: list[str] = list(report.get("warnings", []) or [])
        measured = _evaluate(recalibrator, eval_set, s.binary_ece, notes)
    reporter.progress(1, 1, "Done")
    where = (f"the {eval_set.n:,} held-out rows" if n_held else f"the {fit_set.n:,} rows it was fitted on")
    return ApplyResult(data_name=data_name, data_key=data_key, preds=preds, recalibrator=recalibrator,
                       origin=f"{_label(s.method)} fitted on {fit_set.n:,} rows of {data_name or 'the loaded file'}",
                       evaluated_on=where, in_sample=not n_held, binary_ece=s.binary_ece,
                       fit_report=report, seconds=time.perf_counter() - start, settings=s,
                       notes=notes, fit_rows=np.asarray(re_idx), **measured)


def run_apply(preds: Predictions, recalibrator: Recalibrator, source: str, reporter: Reporter, *,
              binary_ece: BinaryECE = DEFAULT_BINARY_ECE, data_name: str = "", data_key: str = "") -> ApplyResult:
    """Apply a saved (fitted) recalibrator to every row of the loaded file and measure it there."""
    start = time.perf_counter()
    refuse_small_test_set(preds.n, preds.n)
    reporter.progress(0, 1)
    reporter.step(f"Applying {_label(recalibrator.method)} to {preds.n:,} rows")
    notes: list[str] = []
    with watched(reporter):
        measured = _evaluate(recalibrator, preds, binary_ece, notes)
    reporter.progress(1, 1, "Done")
    return ApplyResult(data_name=data_name, data_key=data_key, preds=preds, recalibrator=recalibrator,
                       origin=f"{_label(recalibrator.method)} loaded from {source}",
                       evaluated_on=f"all {preds.n:,} rows of {data_name or 'the loaded file'}", in_sample=False,
                       binary_ece=binary_ece, fit_report=_fit_report(recalibrator),
                       seconds=time.perf_counter() - start, notes=notes, **measured)



# --------------------------------------------------------------------------- Compare page: group gaps
@dataclass(frozen=True)
class GroupGapSettings:
    """Does recalibration close the gaps between groups? One method, one grouping, the splits of Compare."""

    method: str = "temperature"
    by: tuple[str, ...] = ()
    n_re: int = 1000
    n_folds: int = 5
    seed: int = 0
    binary_ece: BinaryECE = DEFAULT_BINARY_ECE
    params: tuple[tuple[str, Any], ...] = ()

    def describe(self, multiclass: bool = False) -> dict[str, Any]:
        out: dict[str, Any] = {"Method": _label(self.method, multiclass), "Grouped by": " × ".join(self.by),
                               "Recalibration rows (n_re)": f"{self.n_re:,}", "Folds": self.n_folds,
                               "Split seed": self.seed}
        if self.params:
            out["Settings"] = _params(dict(self.params))
        return out


@dataclass
class GroupGapResult:
    settings: GroupGapSettings
    data_name: str
    data_key: str
    table: pd.DataFrame                  # experiments.group_gaps: one row per (fold, group, strategy)
    planned: int
    kind: str = "multiclass"
    created: float = field(default_factory=time.time)
    stopped: bool = False


def run_group_gaps(preds: Predictions, s: GroupGapSettings, reporter: Reporter, *, data_name: str = "",
                   data_key: str = "") -> GroupGapResult:
    """pbr_core.experiments.group_gaps.recalibration_by_group on the loaded data."""
    from pbr_core.experiments.group_gaps import recalibration_by_group
    from pbr_core.groups import group_keys

    refuse_small_test_set(preds.n - s.n_re, preds.n)
    groups = len(set(group_keys(preds, s.by)[0].tolist()))
    planned = s.n_folds * (1 + groups)
    reporter.progress(0, planned)
    try:
        with report_progress(reporter.fit_progress):
            table = recalibration_by_group(preds, s.method, s.by, n_re=s.n_re, n_folds=s.n_folds, seed=s.seed,
                                           params=dict(s.params) or None, binary_ece=s.binary_ece,
                                           progress=lambda d, t, m: reporter.progress(d, t, m),
                                           cancel=reporter.cancelled)
        stopped = False
    except Cancelled as exc:
        table, stopped = exc.partial, True
    return GroupGapResult(settings=s, data_name=data_name, data_key=data_key, table=table, planned=planned,
                          kind=preds.kind, stopped=stopped)


#: What a job of the recalibration pages returns (``dashboard.jobs.Job.result``); the pages, the
#: figure and table builders and the report read these.
JobResult = PBRResult | CompareResult | SweepResult | GenResult | ApplyResult | GroupGapResult
