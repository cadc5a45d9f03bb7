"""Choosing PBR's KL weight alpha by k-fold cross-validation inside the recalibration data (GP_SPEC section 5).

The paper (Appendix F) picks alpha from {0, .01, .1, .25, .5, .75, .9, 1} by grid search without
saying on which data. Decision (GP_SPEC section 5): k-fold cross-validation INSIDE the
recalibration set only, never on test data. Each (alpha, fold) fit is scored on its held-out fold
with ECE (B = floor(n_val^(1/3)), the paper's choice), Brier or NLL; the alpha with the lowest
mean score wins (ties: the larger alpha, i.e. the stronger KL regularisation and tighter bound).

Speed. The (alpha, fold) fits are the expensive part of the product. Two ways to run them:

* ``batched=False``: one fit after another, each exactly as ``PBR(...).fit`` would do it (the
  default optimiser, an Adam warm-up then L-BFGS).
* ``batched=True``: all fits in one batched GPyTorch model (:func:`pbr_core.gp.batch.fit_batch`),
  which requires ``optimizer="adam"`` (batched Adam is element-wise, so each fit follows exactly
  the path it would follow alone; a test checks this). On a GPU this turns dozens of small kernel
  launches into one; on a CPU the arithmetic is the same and batching does not pay (measured in
  benchmarks/RESULTS_gp.md).

``batched="auto"`` batches on CUDA with Adam, and runs sequentially otherwise.

Warm starts (``warm_start=True``, the default of the sequential fits). Within a fold every alpha
is fitted on the same rows, so the fold's fits run in ascending alpha, each starting from the
previous alpha's solution (:meth:`~pbr_core.recalibrators.gp.PBR.fit_continued`: continuation
along the grid) instead of from the prior; only the fold's smallest alpha is fitted from the
prior. A continued fit skips the Adam warm-up and the restarts from smaller alpha of a fit that
ends at the prior (the continuation is such a restart), so it takes a fraction of a cold fit's
iterations. It minimises the same objective with the same draws and may end at another local
optimum; measured against fits from the prior on every alpha of the paper's grid in
``benchmarks/RESULTS_fast_pbr.md`` (the cold-vs-warm sections; summary in
``docs/gp_measurements.md``): 1.4x less CPU time for the paper's grid x 5 folds on 1000 CIFAR-10
rows (same chosen alpha), 1.8x at K = 100. The rows of ``scores`` keep the grid's order either way.
"""

from __future__ import annotations

import time
import warnings
from dataclasses import dataclass, field
from typing import Any, Literal, Sequence

import numpy as np
import pandas as pd

from pbr_core.cancel import CancelCallback, Cancelled, cancel_when
from pbr_core.evaluation import CV_SCORES, evaluation_metrics
from pbr_core.metrics import BINARY_TARGET, BinaryTarget
from pbr_core.paper import PAPER_ALPHAS
from pbr_core.gp.grid import GridFit, fit_grid, fit_grid_batched
from pbr_core.parallel import check_n_jobs
from pbr_core.predictions import Predictions
from pbr_core.progress import Progress
from pbr_core.recalibrators.base import as_predictions

__all__ = ["AlphaSelection", "kfold_indices", "select_alpha", "select_alpha_of"]

Metric = Literal["ece", "brier", "nll"]


@dataclass
class AlphaSelection:
    """Result of :func:`select_alpha`.

    Attributes
    ----------
    best_alpha : float
        The grid value with the lowest mean held-out score.
    scores : pandas.DataFrame
        One row per (alpha, fold): ``alpha``, ``fold``, ``n_train``, ``n_val``, ``score`` (the
        selection metric), ``ece``, ``brier``, ``nll`` (all on the held-out fold), ``kl``,
        ``objective`` (the fit's final training objective), ``iterations``, ``converged``, ``warm_start`` (the fit continued from the fold's previous alpha),
        ``error`` (None, or why the fit failed: its metrics are then NaN).
    summary : pandas.DataFrame
        One row per alpha: ``mean`` and ``std`` of the score over folds (and of ece / brier / nll, kl),
        ``failed`` (folds whose fit failed; such an alpha's means are NaN and it cannot be chosen).
    metric, objective, n_splits, seed, batched, wall_time_s
        How the selection was run.
    warm_start : bool
        Whether the fits of each fold were continued along the grid (see the module docstring).
    notes : list of str
        One sentence per failed fit (also issued as a ``RuntimeWarning``).
    """

    best_alpha: float
    scores: pd.DataFrame
    summary: pd.DataFrame
    metric: str
    objective: str
    n_splits: int
    seed: int
    batched: bool
    wall_time_s: float
    warm_start: bool = False
    notes: list[str] = field(default_factory=list)


def kfold_indices(n: int, n_splits: int, seed: int = 0) -> list[tuple[np.ndarray, np.ndarray]]:
    """Shuffled k-fold (train, validation) index pairs; fold sizes differ by at most one."""
    if isinstance(n_splits, bool) or not isinstance(n_splits, (int, np.integer)) or n_splits < 2:
        raise ValueError(f"Expected argument `n_splits` to be an integer of at least 2, but got {n_splits!r}.")
    if n_splits > n:
        raise ValueError(f"Expected argument `n_splits` <= the number of samples ({n}), but got {n_splits}.")
    perm = np.random.default_rng(seed).permutation(n)
    folds = np.array_split(perm, n_splits)
    return [(np.sort(np.concatenate(folds[:i] + folds[i + 1:])), np.sort(folds[i])) for i in range(n_splits)]


@dataclass(frozen=True)
class _HeldOut:
    """The selection's scorer (:data:`pbr_core.gp.grid.Scorer`): a fit scored on its fold's held-out
    rows with the protocols' metrics (ECE with B = floor(n_val^(1/3)), Brier, NLL), its KL and what its
    optimiser did. A fit that failed, or whose prediction failed, gets NaN scores and the reason."""

    folds: tuple[tuple[np.ndarray, np.ndarray], ...]
    binary_ece: str

    def __call__(self, fit: GridFit, data: Predictions) -> dict[str, Any]:
        tr, va = self.folds[fit.fold]
        where = {"alpha": fit.alpha, "fold": fit.fold, "n_train": len(tr), "n_val": len(va)}
        error = fit.error
        if error is None:
            val_part = data.subset(va)
            try:
                probs = fit.predict_proba(val_part)
            except Cancelled:
                raise
            except Exception as exc:  # noqa: BLE001 - recorded in the row; select_alpha warns and skips this alpha
                error = f"{type(exc).__name__}: {exc}"
        if error is not None:
            return {**where, **dict.fromkeys((*CV_SCORES, "kl", "objective", "iterations"), np.nan),
                    "converged": False, "warm_start": False, "error": error}
        kind = "binary" if probs.shape[1] == 2 else "multiclass"
        metrics = evaluation_metrics(probs, val_part.labels, kind, self.binary_ece)
        report = fit.report
        return {**where, **{k: metrics[k] for k in CV_SCORES}, "kl": fit.kl, "objective": report["objective"],
                "iterations": report["iterations"], "converged": report["converged"], "warm_start": fit.continued,
                "error": None}


def select_alpha(preds: Predictions | np.ndarray, grid: Sequence[float] = PAPER_ALPHAS,
                 objective: Literal["pbr", "pbr_total"] = "pbr", n_splits: int = 5, metric: Metric = "ece",
                 seed: int = 0, progress: Progress | None = None, *, labels: np.ndarray | None = None,
                 batched: bool | Literal["auto"] = "auto", cancel: CancelCallback | None = None,
                 binary_ece: BinaryTarget = BINARY_TARGET.default, warm_start: bool = True, n_jobs: int = 1,
                 **pbr_params: Any) -> AlphaSelection:
    """Choose PBR's alpha by k-fold cross-validation on the recalibration data.

    Parameters
    ----------
    preds : Predictions or array of shape (n, K)
        The recalibration set (only this data is used); with an array, pass ``labels=``.
    grid : sequence of float
        Candidate alpha values (default: the paper's grid).
    objective : {"pbr", "pbr_total"}
        Paper Eq. vi_obj2 or vi_obj3.
    n_splits : int
        Number of folds k.
    metric : {"ece", "brier", "nll"}
        Held-out score to minimise; ECE uses B = floor(n_val^(1/3)).
    seed : int
        Seeds the fold assignment (the fits use ``random_state`` from ``pbr_params``, default 0).
    progress : callable(done, total, message), optional
        Called after each fit (sequential) or during the batched fit.
    labels : array of shape (n,), optional (keyword only)
        Labels when ``preds`` is an array.
    batched : bool or "auto"
        See the module docstring.
    cancel : callable ``cancel() -> bool``, optional (keyword only)
        Checked before each fit and within it (every optimiser evaluation and prediction batch, see
        :mod:`pbr_core.cancel`); when it returns True, :class:`~pbr_core.experiments.Cancelled` is
        raised within about a second and nothing is selected.
    binary_ece : {"positive", "top_label"} (keyword only)
        For binary data, the ECE of p(y=1) (paper Appendix A; the default, as in
        :func:`~pbr_core.experiments.compare`: the app's one choice) or the top-label ECE (the paper's
        tables). Multiclass: always top-label.
    warm_start : bool, default True (keyword only)
        Sequential fits: within a fold, fit the grid in ascending alpha, each fit starting from the
        previous one's solution (see the module docstring); False fits every (alpha, fold) from the
        prior. A batched fit always starts at the prior. Not with ``prior_split``.
    n_jobs : int, default 1 (keyword only)
        Sequential fits: folds fitted at the same time, each in a worker process
        (:mod:`pbr_core.parallel`; -1: one per available core). The scores are the same numbers as
        with 1. Worth it from a few folds on (a worker pays 1-2 CPU s to import torch).
    **pbr_params
        Passed to :class:`pbr_core.recalibrators.gp.PBR` (``n_mc``, ``max_iter``, ``optimizer``,
        ``device``, ``mean_approx``, ``random_state``, ...).

    Returns
    -------
    AlphaSelection

    A fit that fails (its optimisation diverged even after the training code's recoveries, or any
    other error) does not end the selection: its row's metrics are NaN and ``error`` says why, a
    ``RuntimeWarning`` names it, a warm-started fold fits its next alpha from the prior, and its
    alpha cannot be chosen (its mean over the folds would rest on fewer rows). Only when every
    alpha has a failed fold is ``RuntimeError`` raised.

    Examples
    --------
    >>> import numpy as np
    >>> from pbr_core.alpha_selection import select_alpha
    >>> d = np.load("sample_data/cifar10_resnet110.npz")
    >>> sel = select_alpha(d["logits"][:150].astype(float), grid=(0.1, 1.0), n_splits=2,
    ...                    labels=d["labels"][:150], max_iter=30, n_mc=10)
    >>> sel.best_alpha in (0.1, 1.0), sorted(sel.scores.alpha.unique().tolist())
    (True, [0.1, 1.0])
    """
    from pbr_core.recalibrators.gp import PBR  # late import: the recalibrators import this module's parents

    grid = _check_grid(grid, metric)
    data = as_predictions(preds, labels)
    return select_alpha_of(PBR(alpha=grid[0], objective=objective, **pbr_params), data,
                           kfold_indices(data.n, n_splits, seed), grid, metric=metric, seed=seed, progress=progress,
                           batched=batched, cancel=cancel, binary_ece=binary_ece, warm_start=warm_start,
                           n_jobs=n_jobs)


def _check_grid(grid: Sequence[float], metric: str) -> list[float]:
    if metric not in CV_SCORES:
        raise ValueError(f"Expected argument `metric` to be 'ece', 'brier' or 'nll', but got {metric!r}.")
    grid = [float(a) for a in grid]
    if not grid or any(not np.isfinite(a) or a < 0 for a in grid):
        raise ValueError(f"Expected argument `grid` to be a non-empty list of finite values >= 0, but got {grid!r}.")
    return grid


def select_alpha_of(template: Any, data: Predictions, folds: Sequence[tuple[np.ndarray, np.ndarray]],
                    grid: Sequence[float] = PAPER_ALPHAS, *, metric: Metric = "ece", seed: int = 0,
                    progress: Progress | None = None, batched: bool | Literal["auto"] = "auto",
                    cancel: CancelCallback | None = None, binary_ece: BinaryTarget = BINARY_TARGET.default,
                    warm_start: bool = True, n_jobs: int = 1) -> AlphaSelection:
    """:func:`select_alpha` for an unfitted PBR-family recalibrator ``template`` (its class and every
    parameter but alpha kept in each fit) on given (train, validation) folds of ``data``, e.g. from
    a scikit-learn splitter: what :class:`~pbr_core.recalibrators.PBRCV` runs. ``seed`` is only
    recorded (the folds are given)."""
    grid = _check_grid(grid, metric)
    template._validate_params()
    n_splits = len(folds)
    if batched == "auto":
        from pbr_core.gp.device import resolve_device

        batched = (template.optimizer == "adam" and resolve_device(template.device).type == "cuda"
                   and not template.prior_split)
    BINARY_TARGET.check(binary_ece, "binary_ece")
    if batched and template.prior_split:
        raise ValueError("batched=True cannot split off rows for the prior (prior_split); use batched=False.")
    if batched and template.optimizer != "adam":
        raise ValueError("batched=True needs optimizer='adam' (a batched fit is always Adam; see the module docstring).")
    if not isinstance(warm_start, (bool, np.bool_)):
        raise ValueError(f"Expected argument `warm_start` to be True or False, but got {warm_start!r}.")
    n_jobs = check_n_jobs(n_jobs)
    t0 = time.perf_counter()
    with cancel_when(cancel):
        if batched:
            rows = _batched_rows(data, folds, grid, template, progress, cancel=cancel, binary_ece=binary_ece)
        else:
            rows = _sequential_rows(data, folds, grid, template, progress, binary_ece=binary_ece,
                                    warm_start=bool(warm_start) and not template.prior_split, n_jobs=n_jobs)
    scores = pd.DataFrame(rows)
    if "error" not in scores:
        scores["error"] = None
    scores["score"] = scores[metric]
    scores = scores[["alpha", "fold", "n_train", "n_val", "score", "ece", "brier", "nll", "kl", "objective",
                     "iterations", "converged", "warm_start", "error"]]
    failed = scores["error"].notna()
    # The training code's own failures (RuntimeError) say what happened in words; other errors keep their type.
    notes = [f"The PBR fit for alpha = {r.alpha:g} on fold {r.fold + 1} of {n_splits} failed "
             f"({r.error.removeprefix('RuntimeError: ')}); alpha = {r.alpha:g} is left out of the selection."
             for r in scores[failed].itertuples()]
    for note in notes:
        warnings.warn(note, RuntimeWarning, stacklevel=2)
    summary = scores.groupby("alpha")[["score", "ece", "brier", "nll", "kl"]].agg(["mean", "std"])
    summary.columns = [f"{a}_{b}" if a != "score" else b for a, b in summary.columns]
    summary["failed"] = failed.groupby(scores["alpha"]).sum().astype(int)
    summary.loc[summary["failed"] > 0, [c for c in summary.columns if c != "failed"]] = np.nan
    summary = summary.reset_index()
    eligible = summary[summary["failed"] == 0]
    if eligible.empty:
        raise RuntimeError(f"Every alpha of the grid had a failed fit, so none can be chosen. {notes[0]}")
    # Lowest mean score; ties (to 1e-12) go to the larger alpha.
    best = eligible.sort_values(["mean", "alpha"], ascending=[True, False], kind="stable")
    best_alpha = float(best[best["mean"] <= best["mean"].iloc[0] + 1e-12]["alpha"].max())
    return AlphaSelection(best_alpha=best_alpha, scores=scores, summary=summary, metric=metric,
                          objective=template.objective, n_splits=n_splits, seed=seed, batched=bool(batched),
                          wall_time_s=time.perf_counter() - t0, warm_start=bool(scores["warm_start"].any()),
                          notes=notes)


def _sequential_rows(data: Predictions, folds, grid, template, progress, *, binary_ece,
                     warm_start: bool, n_jobs: int = 1) -> list[dict]:
    rows: dict[tuple[int, int], dict] = {}
    total = len(grid) * len(folds)

    def on_fit(f: int, i: int, row: dict) -> None:
        rows[f, i] = row
        if progress is not None:
            message = f"alpha={grid[i]:g}, fold {f + 1}/{len(folds)}"
            progress(len(rows), total, message + (" failed" if row["error"] is not None else ""))

    try:
        fit_grid(data, template, grid, [tr for tr, _ in folds], _HeldOut(tuple(folds), binary_ece), on_fit,
                 warm_start=warm_start, n_jobs=n_jobs)
    except Cancelled:  # stopped between or inside fits: say how far the selection got
        raise Cancelled(done=len(rows), total=total) from None
    return [rows[key] for key in sorted(rows)]


def _batched_rows(data: Predictions, folds, grid, template, progress, *, cancel, binary_ece) -> list[dict]:
    n_pairs = len(folds) * len(grid)
    if cancel is not None and cancel():
        raise Cancelled(done=0, total=n_pairs)
    cb = None
    if progress is not None or cancel is not None:
        def cb(it: int, max_it: int, message: str = "") -> None:
            if progress is not None:
                progress(it, max_it, f"batched fit of {n_pairs} GPs, iteration {it}")
            if cancel is not None and cancel():
                raise Cancelled(done=0, total=n_pairs)
    # Predictions (and the training-set check) use draws independent of the fit's (see prediction_seed).
    return [row for _, _, row in fit_grid_batched(data, template, grid, [tr for tr, _ in folds],
                                                  _HeldOut(tuple(folds), binary_ece), progress=cb)]
