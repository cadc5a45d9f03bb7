"""Fitting the GP recalibration model: full-batch L-BFGS or Adam, made robust (GP_SPEC section 3).

The types of a fit (:class:`FitData`, :class:`TrainSettings`, :class:`TrainCheck`,
:class:`FitReport`) live in :mod:`pbr_core.gp.problem`, the optimisers in
:mod:`pbr_core.gp.optimizers`; this module is the policy around them. Why each rule is as it is,
with the measurements: ``docs/gp_measurements.md``.

Optimisers
----------
* ``"lbfgs"`` (default; Wenger used scipy's L-BFGS-B): ``warmup_iter`` (100) Adam steps on the
  first ``warmup_mc`` (10) of the S fixed draws, then L-BFGS with strong-Wolfe line search
  (:class:`~pbr_core.gp.optimizers.LBFGS`, ``torch.optim.LBFGS``'s algorithm) on all parameters,
  run in chunks of ``CHUNK`` iterations so that progress is reported and a known-good snapshot is
  kept. Stops when torch's tolerances fire (|Delta f| <= tol_change, max |grad| <= tol_grad) or
  when a chunk improves the objective by less than ``rtol * max(1, |f|)``. The curvature history
  (``lbfgs_history``, 100) is longer than the model's parameter vector (3M + 3 = 33 at M = 10):
  the slow end of a fit is inducing points drifting together along directions of near-zero
  curvature, which a history of 20 pairs forgot (benchmarks/RESULTS_fast_pbr.md, round 4).
  Why the warm-up: from the prior, L-BFGS's long first steps collapse the outputscale (g = 0, the
  uncalibrated map) and it stays in that basin although better optima exist; Adam's
  per-parameter steps leave it, and L-BFGS then converges in fewer evaluations than Adam alone.
  Multi-fidelity (opt-in, ``lbfgs_coarse_mc`` > 0, e.g. 10): L-BFGS first converges on the first
  ``lbfgs_coarse_mc`` draws, then finishes on all S from there; the objective minimised last,
  reported and checked is the one of the S draws. Off by default: it missed the quality bar of
  issue 15 once and made some fits slower (docs/gp_measurements.md).
* ``"adam"``: a vectorised Adam written here (not ``torch.optim.Adam``) because every GP of a batch
  gets its own step size, best-so-far snapshot and stopping rule. The update is element-wise, so
  a batch of GPs fitted together follows the same path as each GP fitted alone (exactly, or to
  ~1e-12 where the interpolated marginals of a batch use other nodes than the fit alone; a test
  pins this). Batched models are therefore always fitted with Adam: one L-BFGS line search over
  the SUM of independent objectives couples the fits (a shared step length and curvature
  history), so a batched L-BFGS fit is not the fit alone and one hard fit can stall the others.

Robustness (every failure is either recovered or raised, never returned)
------------------------------------------------------------------------
* Non-PD K_uu: restore the last good parameters, multiply the jitter by 10, retry
  (``max_retries`` times), then ``RuntimeError`` naming the cause.
* NaN / inf objective or gradient: restore the last good parameters and retry with smaller steps
  (L-BFGS: halve lr; after ``max_retries`` switch to Adam); Adam: restore that GP's best
  parameters and divide its step size by 4 (``ADAM_BACKOFF``); after ``2 * max_retries``
  restarts of one GP, ``RuntimeError``.
* Objective increasing (Adam): a jump above the best value by more than a margin counts as
  divergence (as NaN). L-BFGS with strong Wolfe never accepts an increase.
* Ending at the prior (``escape_prior``, on by default): even after the warm-up, a fit can end at
  (or next to) the prior: the outputscale collapses, q returns to N(0, I), KL ~ 0, and the GP's
  mean moves no training score by ``PRIOR_SHIFT`` (the uncalibrated map), although better optima
  exist. A fit from the prior at a smaller alpha does not collapse where the real one does, so a
  collapsed fit is redone from fits at alpha/2, alpha/4 and 0 in turn (one ``max_iter`` budget
  for all; the alpha = 0 fit at most ``ZERO_RUNG_MAX_ITER``), each continued at the real alpha,
  and the first that ends lower by more than the convergence tolerance is kept. A rung whose fit
  left the prior but whose continuation went back to it ends the restarts (the later rungs' did
  too, wherever measured). Otherwise (e.g. a well-calibrated model, where every start ends
  at the prior) the first fit stays, bit for bit. The report's ``stop_reason`` says what
  happened. A GP of a batch is redone alone, the same way.
* Final check on the training data: the recalibrated prediction must not be worse than the input
  (NLL for GP calibration, Brier for PBR, both for PBR total; :mod:`pbr_core.metrics`) by more than
  ``max(check_rtol * uncalibrated, check_atol)``. On failure the fit is redone from the prior with
  Adam; if it still fails, ``RuntimeError``.

Whether the fit ended at the prior is decided once, at the end, on the final model (the same
``PRIOR_SHIFT`` rule), and reported as ``FitReport.ended_at_prior``: what the CLI, the dashboard
and the experiments read.
"""

from __future__ import annotations

import math
import time
import warnings
from dataclasses import asdict, replace
from typing import Mapping

import numpy as np
import torch

from pbr_core.gp.model import GPRecalibrationModel, NotPositiveDefiniteError
from pbr_core.gp.objectives import MC_TAIL_TOLERANCE
from pbr_core.gp.optimizers import (
    ADAM_BACKOFF,
    CHUNK,
    DivergenceError,
    batch_size,
    restore,
    run_adam,
    run_lbfgs,
    snapshot,
)
from pbr_core.gp.predict import predict_proba
from pbr_core.gp.problem import FitData, FitReport, Optimizer, TrainCheck, TrainSettings
from pbr_core.progress import Progress
from pbr_core.metrics import brier_score, nll
from pbr_core.predictions import softmax

#: A fit whose GP mean moves no training score (logit or log-probability) by this much is the
#: uncalibrated map: it ended at (or next to) the prior. See "Ending at the prior" above.
PRIOR_SHIFT = 0.01

#: Iteration budget of the alpha = 0 restart's fit from the prior (the last rung of "Ending at the
#: prior"): warm-up + 100 L-BFGS iterations. Without a KL term the objective is flat, so that fit
#: crept on for 285-501 iterations (PBR, CIFAR-10, 1000 rows) towards an optimum of huge KL that the
#: continuation at the real alpha then undid; the rung only has to leave the prior's basin. Measured
#: in docs/gp_measurements.md ("Why a fit that ends at the prior is redone from smaller alpha").
ZERO_RUNG_MAX_ITER = 200

#: How a stop reason says what the restarts from the prior did (kept when the fit then continues with
#: more classes drawn, :func:`_refine_split`): a restart kept, or none that did better.
RESTARTED = " (restarted: "
NOT_RESTARTED = " (ended at the prior; restarts from smaller alpha did not do better)"

#: Floor of the true-class probability in the training check's NLL: the smallest positive float64
#: (at most 708 nats per row), as the check has always used, not :func:`pbr_core.metrics.nll`'s
#: default (machine epsilon, at most 36 nats). With the default, rows with p_y < 2.2e-16 (an
#: over-confident wrong prediction, in the uncalibrated input or the fit) would count less and
#: could flip the check's verdict.
CHECK_NLL_EPS = float(np.finfo(np.float64).tiny)

__all__ = ["FitData", "FitReport", "TrainCheck", "TrainSettings", "fit_gp", "training_check", "DivergenceError",
           "CHUNK", "CHECK_MAX_ROWS", "PRIOR_SHIFT", "at_prior", "prior_shift"]


# ---------------------------------------------------------------------- the training-set check
def _metric(probs: np.ndarray, labels: np.ndarray, metric: str) -> float:
    if not np.all(np.isfinite(probs)):
        return math.nan  # a fit that predicts NaN fails the check (pbr_core.metrics would raise)
    values = {}
    if metric in ("nll", "nll+brier"):
        values["nll"] = nll(probs, labels, eps=CHECK_NLL_EPS)
    if metric in ("brier", "nll+brier"):
        # the multiclass score of the vector (the PBR objective's term), as the check has always used
        values["brier"] = brier_score(probs, labels, binary_target="top_label")
    return values["nll"] + values["brier"] if metric == "nll+brier" else values[metric]


#: The training-set check of a fit on more rows than this compares the two metrics on this many rows
#: drawn at random (seeded with the check's seed): the J-draw prediction of 10^5 rows took 3.8 CPU s,
#: a quarter of a staged fit's time (pbr_core.gp.staged). Both metrics are means over the same rows;
#: at 20,000 rows the standard error of their difference (~1e-4 for the Brier score of CIFAR-10
#: logits) is a small fraction of the check's margin (2 % of the metric, at least 2e-3).
CHECK_MAX_ROWS = 20_000


def training_check(model: GPRecalibrationModel, z: np.ndarray, labels: np.ndarray, check: TrainCheck,
                   settings: TrainSettings) -> dict:
    """Compare the recalibrated and the uncalibrated training-set metric (one unbatched GP), on
    ``CHECK_MAX_ROWS`` rows drawn at random where there are more (the result's ``rows`` then says
    how many)."""
    sampled = len(z) > CHECK_MAX_ROWS
    if sampled:
        rows = np.sort(np.random.default_rng(check.seed).choice(len(z), CHECK_MAX_ROWS, replace=False))
        z, labels = z[rows], labels[rows]
    recal = _metric(predict_proba(model, z, check.mean_approx, check.n_samples, check.seed), labels, check.metric)
    uncal = _metric(softmax(z), labels, check.metric)
    margin = max(settings.check_rtol * abs(uncal), settings.check_atol)
    result = {"metric": check.metric, "uncalibrated": uncal, "recalibrated": recal, "margin": margin,
              "passed": bool(np.isfinite(recal) and recal <= uncal + margin)}
    if sampled:
        result["rows"] = CHECK_MAX_ROWS
    return result


# ---------------------------------------------------------------------- the public entry point
def _member_arrays(data: FitData, index: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    z = data.z[index].detach().cpu().numpy()
    y = data.labels[index].detach().cpu().numpy()
    if data.weights is not None:
        keep = data.weights[index].detach().cpu().numpy() > 0
        z, y = z[keep], y[keep]
    return z, y


def _note_adam_restarts(member_restarts: torch.Tensor, notes: list[str]) -> None:
    counts = member_restarts.reshape(-1).tolist()
    for j, c in enumerate(counts):
        if c:
            who = f"GP {j}: " if len(counts) > 1 else ""
            notes.append(f"{who}Adam diverged {c} time(s) (NaN or a jump of the objective); restarted from "
                         f"the best parameters with {1 / ADAM_BACKOFF:g}x smaller steps each time.")


def _optimise(model: GPRecalibrationModel, data: FitData, settings: TrainSettings, optimizer: Optimizer,
              progress: Progress | None, notes: list[str]) -> tuple[int, np.ndarray, list[str], int, int]:
    """Run the optimiser with the retry policy. Returns (iterations, converged per GP, reasons,
    restarts, evaluations)."""
    b = batch_size(model)
    counters = {"evaluations": 0, "iterations": 0}
    done, restarts, lr, warmed, coarse_done = 0, 0, settings.lbfgs_lr, False, False
    while True:
        budget = settings.max_iter - done
        if budget <= 0:
            return done, np.zeros(b, dtype=bool), [f"reached max_iter={settings.max_iter}"] * b, restarts, counters["evaluations"]
        try:
            if optimizer == "lbfgs":
                if not warmed and settings.warmup_iter > 0:
                    # Adam warm-up: from the prior, L-BFGS's first long steps shrink the outputscale
                    # towards 0 (g = 0, the uncalibrated map) and it stays in that basin (measured on
                    # CIFAR-100, see docs/gp_measurements.md); Adam's per-parameter steps grow the
                    # variational mean at the same time and leave that basin.
                    # The warm-up only has to leave that basin, so it uses the first `warmup_mc` of
                    # the S fixed draws (10x cheaper steps); L-BFGS then minimises the full objective.
                    it, _, _, r = run_adam(model, data.with_mc_draws(settings.warmup_mc).objective(model), settings,
                                           done, min(settings.warmup_iter, budget), progress, counters)
                    done, warmed = done + it, True
                    restarts += int(r.sum())
                    _note_adam_restarts(r, notes)
                    continue
                coarse = data.with_mc_draws(settings.lbfgs_coarse_mc) if settings.lbfgs_coarse_mc > 0 else data
                if not coarse_done and coarse is not data:
                    # Multi-fidelity (opt-in): L-BFGS first minimises the objective on the first
                    # `lbfgs_coarse_mc` of the S fixed draws (an evaluation ~3x cheaper), then
                    # finishes on all S from there: the reported objective, and the stopping rule,
                    # are those of the S draws (docs/gp_measurements.md says why it is not the default).
                    it, _, _ = run_lbfgs(model, coarse.objective(model), settings, lr, done, budget, progress, counters)
                    done, coarse_done = done + it, True
                    continue
                it, conv, reason = run_lbfgs(model, data.objective(model), settings, lr, done, budget, progress,
                                             counters)
                return done + it, np.full(b, conv), [reason] * b, restarts, counters["evaluations"]
            it, conv_mask, reasons, member_restarts = run_adam(model, data.objective(model), settings, done, budget,
                                                               progress, counters)
            _note_adam_restarts(member_restarts, notes)
            return (done + it, conv_mask.cpu().numpy(), reasons, restarts + int(member_restarts.sum()),
                    counters["evaluations"])
        except NotPositiveDefiniteError as exc:
            done = counters["iterations"]
            restarts += 1
            if restarts > settings.max_retries:
                raise RuntimeError(
                    f"GP fit failed: {exc}, even after {settings.max_retries} retries with 10x more jitter."
                ) from exc
            model.jitter = model.jitter * 10.0
            notes.append(f"K_uu was not positive definite at iteration {done}; retried with jitter {model.jitter:g}.")
        except DivergenceError as exc:
            done = counters["iterations"]
            restarts += 1
            if optimizer == "adam":
                raise RuntimeError(f"GP fit diverged and could not be recovered: {exc}.") from exc
            if restarts <= settings.max_retries:
                lr /= 2.0
                notes.append(f"L-BFGS diverged at iteration {done} ({exc}); restarted from the last good "
                             f"parameters with lr={lr:g}.")
            else:
                optimizer = "adam"
                notes.append(f"L-BFGS diverged at iteration {done} ({exc}) {restarts} times; switched to Adam "
                             f"from the last good parameters.")


def fit_gp(model: GPRecalibrationModel, data: FitData, settings: TrainSettings | None = None,
           progress: Progress | None = None, check: TrainCheck | None = None,
           start: Mapping[str, torch.Tensor] | None = None, start_jitter: float | None = None) -> list[FitReport]:
    """Minimise ``data.spec`` over all parameters of ``model`` in place (GP_SPEC section 3).

    Parameters
    ----------
    model : GPRecalibrationModel
        Initialised at the prior; a batched model is fitted with Adam (see the module docstring).
    data : FitData
    settings : TrainSettings, optional
    progress : callable(iteration, max_iter, objective), optional
        Called every ``CHUNK`` iterations (the dashboard's progress bar, the CLI's tqdm).
    check : TrainCheck, optional
        The final training-set check; recommended (the recalibrators always pass one).
    start : mapping of parameter name to tensor, optional
        Continue from these parameters (a fit of the same model at a smaller alpha: continuation
        along an alpha grid, :meth:`pbr_core.recalibrators.gp.PBR.fit_continued`) instead of from the
        prior. Such a start is already what the escape from the prior does (a fit at a smaller alpha
        continued at the real one), so neither the Adam warm-up (it only has to leave the prior's
        basin) nor the restarts from smaller alpha run. A continued fit that fails (its training
        check, or a RuntimeError of the optimiser) is abandoned and redone from the prior
        (``model``'s parameters and jitter when called) exactly as the same call without ``start``
        would fit it, so continuing never fails where a fit from the prior would not; its report
        then has ``continued=False`` and a warning naming the failed continuation. Unbatched
        models only.
    start_jitter : float, optional
        The jitter the start's K_uu needed: the continued fit uses at least that much (a fit
        redone from the prior goes back to ``model``'s own).

    Returns
    -------
    list of FitReport
        One per GP of the batch (one element for an unbatched model).

    Raises
    ------
    RuntimeError
        When the fit cannot be made to converge (the message names the cause). A diverged model is
        never returned silently.
    """
    settings = settings or TrainSettings()
    if start is None:
        return _fit_body(model, data, settings, progress, check, None, time.perf_counter())
    if len(model.batch_shape) > 0:
        raise ValueError("fit_gp(start=...) continues one GP; a batched model always starts at its prior.")
    t0 = time.perf_counter()
    init, cold_jitter = snapshot(model), model.jitter
    if start_jitter is not None:
        model.jitter = max(model.jitter, float(start_jitter))
    try:
        return _fit_body(model, data, settings, progress, check, start, t0)
    except _ContinuationFailed as failed:
        why, notes, done = failed.why, failed.notes, failed.done
    except RuntimeError as exc:
        why, notes, done = f"the fit continued from another fit's solution failed ({exc}); refitted from the prior.", [], (0, 0, 0)
    for w in notes:
        warnings.warn(w, RuntimeWarning, stacklevel=2)
    warnings.warn(why, RuntimeWarning, stacklevel=2)
    restore(model, init)
    model.jitter = cold_jitter
    reports = _fit_body(model, data, settings, progress, check, None, time.perf_counter())
    iterations, evaluations, restarts = done
    return [replace(r, iterations=r.iterations + iterations, evaluations=r.evaluations + evaluations,
                    restarts=r.restarts + restarts + 1, wall_time_s=time.perf_counter() - t0,
                    warnings=[*notes, why, *r.warnings]) for r in reports]


class _ContinuationFailed(Exception):
    """A continued fit failed its training check (``_fit_body``): ``fit_gp`` redoes it from the prior."""

    def __init__(self, why: str, notes: list[str], done: tuple[int, int, int]):
        super().__init__(why)
        self.why, self.notes, self.done = why, notes, done


def _fit_body(model: GPRecalibrationModel, data: FitData, settings: TrainSettings, progress: Progress | None,
            check: TrainCheck | None, start: Mapping[str, torch.Tensor] | None, t0: float) -> list[FitReport]:
    """The body of :func:`fit_gp`: one fit from ``model``'s parameters or (``start``) continued."""
    b = batch_size(model)
    batched = len(model.batch_shape) > 0
    optimizer: Optimizer = settings.optimizer
    notes: list[str] = []
    if batched and optimizer == "lbfgs":
        optimizer = "adam"
    init = snapshot(model)
    continued = start is not None
    if continued:
        restore(model, start)
        settings = replace(settings, warmup_iter=0, escape_prior=False)
    iterations, converged, reasons, restarts, evaluations = _optimise(model, data, settings, optimizer, progress, notes)
    index_of = [tuple(int(i) for i in np.unravel_index(j, tuple(model.batch_shape))) if batched else () for j in range(b)]
    reasons = list(reasons)
    restart_notes = [""] * b  # per GP, what the restarts from the prior did (RESTARTED ... or NOT_RESTARTED)
    collapsed = _at_prior_members(model, data) if settings.escape_prior else [False] * b
    for j, idx in enumerate(index_of):
        if not collapsed[j]:
            continue
        # A GP of a batch is redone alone, exactly as the same fit alone would be.
        single = model.member(idx) if batched else model
        sub = data.member(idx) if batched else data
        start = {k: (v[idx] if batched else v) for k, v in init.items()}
        it2, e2, escaped = _escape_prior(single, sub, settings, optimizer, start, progress, iterations, notes)
        iterations, evaluations = iterations + it2, evaluations + e2
        if escaped is None:
            reasons[j] += NOT_RESTARTED
            restart_notes[j] = NOT_RESTARTED
            continue
        if batched:
            model.set_member(idx, single)
        conv, why, restart_notes[j] = escaped
        converged[j], reasons[j] = bool(conv[0]), why + restart_notes[j]
        restarts += 1
    counts = [iterations, evaluations, restarts]
    data, tail, converged, reasons = _refine_split(model, data, settings, optimizer, progress, notes, counts,
                                                   converged, reasons, restart_notes)
    iterations, evaluations, restarts = counts
    with torch.no_grad():
        terms = data.terms(model, exact=True)
    if not bool(torch.isfinite(terms.total).all()):
        raise RuntimeError(f"GP fit ended with a non-finite objective {terms.total.tolist()}; refusing to return it.")
    checks: list[dict] = [{} for _ in range(b)]
    refitted = False  # a GP was refitted after a failed training check
    if check is not None:
        for j, idx in enumerate(index_of):
            single = model.member(idx) if batched else model
            z, y = _member_arrays(data, idx)
            result = training_check(single, z, y, check, settings)
            if not result["passed"] and continued:
                raise _ContinuationFailed(
                    f"the fit continued from another fit's solution failed the training check (training "
                    f"{check.metric} {result['recalibrated']:.5g}, uncalibrated {result['uncalibrated']:.5g}); "
                    f"refitted from the prior.", notes, (int(iterations), int(evaluations), int(restarts)))
            if not result["passed"]:
                # Recovery: redo this GP from the prior with Adam, then check again.
                notes.append(f"GP {j}: training {check.metric} {result['recalibrated']:.5g} worse than the "
                             f"uncalibrated {result['uncalibrated']:.5g}; refitting from the prior with Adam.")
                single = model.member(idx) if batched else model
                restore(single, {k: (v[idx] if batched else v) for k, v in init.items()})
                sub = data.member(idx) if batched else data
                adam = TrainSettings(**{**asdict(settings), "optimizer": "adam"})
                it2, conv2, reasons2, r2, e2 = _optimise(single, sub, adam, "adam", None, notes)
                result = training_check(single, z, y, check, settings)
                if not result["passed"]:
                    raise RuntimeError(
                        f"GP fit diverged: on its own training data the recalibrated {check.metric} is "
                        f"{result['recalibrated']:.5g}, worse than the uncalibrated {result['uncalibrated']:.5g} "
                        f"(allowed margin {result['margin']:.3g}), even after refitting with Adam."
                    )
                if batched:
                    model.set_member(idx, single)
                iterations, evaluations, restarts = iterations + it2, evaluations + e2, restarts + 1 + r2
                converged[j], reasons[j] = bool(conv2[0]), "refit with Adam after a failed training check: " + reasons2[0]
                restart_notes[j] = ""  # the refit from the prior replaced what the restarts did
                refitted = True
            checks[j] = result
        if refitted:  # a GP refitted after its failed check: its split may now need more classes too
            counts = [iterations, evaluations, restarts]
            data, tail, converged, reasons = _refine_split(model, data, settings, optimizer, progress, notes, counts,
                                                           converged, reasons, restart_notes)
            iterations, evaluations, restarts = counts
        with torch.no_grad():
            terms = data.terms(model, exact=True)
    ended = _at_prior_members(model, data)
    wall = time.perf_counter() - t0
    device = str(model.variational_strategy.inducing_points.device)
    reports = []
    for j, idx in enumerate(index_of):
        vals = terms.as_floats(idx)
        own = [w for w in notes if not w.startswith("GP ") or w.startswith(f"GP {j}:")]
        if not converged[j]:
            own.append(f"the optimiser stopped before converging ({reasons[j]}).")
        reports.append(FitReport(
            iterations=int(iterations), evaluations=int(evaluations), objective=vals["objective"], ce=vals["ce"],
            brier=vals["brier"], kl=vals["kl"], wall_time_s=wall, device=device, optimizer=optimizer,
            converged=bool(converged[j]), stop_reason=reasons[j], jitter=model.jitter, restarts=int(restarts),
            train_check=checks[j], warnings=own, ended_at_prior=bool(ended[j]), continued=continued,
            mc_classes=None if data.split is None else data.split.n_exact,
            mc_tail_error=None if tail is None else tail[j],
        ))
    for w in notes:
        warnings.warn(w, RuntimeWarning, stacklevel=2)
    return reports


def _refine_split(model: GPRecalibrationModel, data: FitData, settings: TrainSettings, optimizer: Optimizer,
                  progress: Progress | None, notes: list[str], counts: list[int], converged: np.ndarray,
                  reasons: list[str], restart_notes: list[str],
                  ) -> tuple[FitData, list[float] | None, np.ndarray, list[str]]:
    """Where a :class:`~pbr_core.gp.objectives.ClassSplit`'s error at the fitted parameters is not
    negligible (more than ``MC_TAIL_TOLERANCE`` of the objective: a heavy tail, large variances),
    continue the fit from there drawing twice as many classes (or all), each time with a budget of
    its own, until it is. Not a warning: the result is then as accurate as asked; the stop reason
    (the continuation's, with each GP's ``restart_notes`` kept) and the report's ``mc_classes`` say
    what was done. ``counts`` (iterations, evaluations,
    restarts) is updated in place. Returns (the problem the fit ended on, its error estimates per
    GP or None, converged, reasons)."""
    tail = _tail_errors(model, data)
    while tail is not None and max(tail) > MC_TAIL_TOLERANCE:
        finer = data.refined()
        drawn = "every class" if finer.split is None else f"{finer.split.n_exact} classes per row"
        it, conv, why, r, e = _optimise(model, finer, replace(settings, warmup_iter=0), optimizer, progress, notes)
        counts[0], counts[1], counts[2] = counts[0] + it, counts[1] + e, counts[2] + r
        converged = np.asarray(conv, dtype=bool).copy()
        reasons = [f"{x}{note} (continued drawing {drawn})" for x, note in zip(why, restart_notes)]
        data = finer
        tail = _tail_errors(model, data)
    return data, tail, converged, reasons


def _tail_errors(model: GPRecalibrationModel, data: FitData) -> list[float] | None:
    """Per GP (flat batch order), the :class:`~pbr_core.gp.objectives.ClassSplit`'s error estimate
    relative to the objective, or None for a fit that draws every class."""
    rel = data.tail_error(model)
    if rel is None:
        return None
    # An estimate that overflowed (NaN or inf) counts as too large: the fit then draws more classes.
    return torch.where(torch.isfinite(rel), rel, torch.full_like(rel, math.inf)).reshape(-1).tolist()


def prior_shift(model: GPRecalibrationModel, z: torch.Tensor, weights: torch.Tensor | None = None) -> torch.Tensor:
    """Per GP of the batch (shape ``batch_shape``), the largest move |E g| of a training score ``z``
    by the GP's mean; rows of weight 0 (a batch's padding) do not count."""
    with torch.no_grad():
        mu, _ = model.marginals(z)
        shift = (mu - z).abs().amax(-1)
        if weights is not None:
            shift = shift * (weights > 0)
        return shift.amax(-1)


def at_prior(model: GPRecalibrationModel, z: torch.Tensor) -> bool:
    """Whether an unbatched fit is (nearly) the identity map on its training scores ``z``: the GP's
    mean moves no score by ``PRIOR_SHIFT`` or more (the fit collapsed towards the prior)."""
    return bool((prior_shift(model, z) < PRIOR_SHIFT).all())


def _at_prior_members(model: GPRecalibrationModel, data: FitData) -> list[bool]:
    """:func:`at_prior` for every GP of a (possibly batched) fit on its own rows, in flat batch order:
    the one definition of "ended at the prior", for the restarts and for ``FitReport.ended_at_prior``."""
    return (prior_shift(model, data.z, data.weights) < PRIOR_SHIFT).reshape(-1).tolist()


def _escape_prior(model: GPRecalibrationModel, data: FitData, settings: TrainSettings, optimizer: Optimizer,
                  init: dict[str, torch.Tensor], progress: Progress | None, offset: int,
                  notes: list[str]) -> tuple[int, int, tuple[np.ndarray, str] | None]:
    """Redo a fit that ended at the prior (see the module docstring): for a = alpha/2, alpha/4, 0,
    fit from the prior at a (at a = 0 for at most ``ZERO_RUNG_MAX_ITER`` iterations); if that fit
    is away from the prior, continue it at the real alpha and keep the result when its objective
    is lower by more than the convergence tolerance; stop when that continuation went back to the
    prior. One ``max_iter`` budget covers all of it. Returns (iterations, evaluations, None or
    (converged, stop reason, the restart's note: ``RESTARTED`` ... ")") of the kept restart); the
    model holds the kept parameters."""
    alpha = float(data.spec.alpha)
    rungs = [a for a in dict.fromkeys((alpha / 2, alpha / 4, 0.0)) if a < alpha]
    with torch.no_grad():
        first_value = float(data.terms(model).total)
    first, jitter = snapshot(model), model.jitter
    margin = settings.rtol * max(1.0, abs(first_value))
    used = evaluations = 0

    def shifted(start: int) -> Progress | None:
        return None if progress is None else (lambda it, mx, message: progress(start + it, mx, message))

    for a in rungs:
        budget = min(settings.max_iter - used, max(1, settings.max_iter // 2))
        if a == 0.0:
            budget = min(budget, ZERO_RUNG_MAX_ITER)
        if budget <= 0:
            break
        restore(model, init)
        easier = data.with_alpha(a)
        try:
            it1, _, _, _, e1 = _optimise(model, easier, replace(settings, max_iter=budget), optimizer,
                                         shifted(offset + used), notes)
            used, evaluations = used + it1, evaluations + e1
            if at_prior(model, data.z):
                continue
            rest = min(settings.max_iter - used, max(1, settings.max_iter // 2))
            if rest <= 0:
                break
            it2, conv, reasons, _, e2 = _optimise(model, data, replace(settings, max_iter=rest, warmup_iter=0),
                                                  optimizer, shifted(offset + used), notes)
            used, evaluations = used + it2, evaluations + e2
            with torch.no_grad():
                value = float(data.terms(model).total)
        except RuntimeError as exc:  # a restart can fail where the real fit did not: try the next
            notes.append(f"The fit ended at the prior; a restart from an alpha = {a:g} fit failed ({exc}).")
            continue
        if np.isfinite(value) and value < first_value - margin:
            return used, evaluations, (conv, reasons[0], f"{RESTARTED}the first fit ended at the prior, objective "
                                                         f"{first_value:.6g}; from an alpha = {a:g} fit it "
                                                         f"reached {value:.6g})")
        if at_prior(model, data.z):
            # This rung's fit left the prior and its continuation at alpha went back to it: the
            # later rungs' fits start farther from the prior, and in every ladder measured their
            # continuations went back too (docs/gp_measurements.md), so the restarts stop here.
            break
    restore(model, first)
    model.jitter = jitter
    return used, evaluations, None
