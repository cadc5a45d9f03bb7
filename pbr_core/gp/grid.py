"""The alpha x fold grid of PBR fits: one engine for the alpha selection and the KL-gap study.

Both fit one PBR-family recalibrator per (fold, alpha), each on its fold's rows, and score it on
other rows: :func:`pbr_core.alpha_selection.select_alpha` on the fold's held-out part (GP_SPEC
section 5), :func:`pbr_core.experiments.kl_vs_ece_gap` on the fold's recalibration rows and a test
subset (Section 6.1). This module runs the fits; each caller says what one fit is scored with (a
*scorer*: ``score(fit, data) -> row``) and keeps its own table.

Two ways to run the grid:

* :func:`fit_grid`: fold by fold, one fit after another (each exactly ``recalibrator.fit``), folds
  in worker processes with ``n_jobs`` > 1 (:func:`pbr_core.parallel.run_chains`: the same numbers
  as in one process). With ``warm_start`` a fold's alphas are fitted in ascending order
  (:func:`pbr_core.paper.continuation_order`), each continuing from the previous one's solution
  (``fit_continued``); after a failed fit the next alpha starts from the prior again.
* :func:`fit_grid_batched`: every (fold, alpha) fit in one batched GP
  (``fit_batch``: :func:`pbr_core.gp.batch.fit_batch`, Adam only), far fewer launches on a GPU.

A fit's failure is the scorer's to record: the fit is handed over with its ``error`` (and no
predictions), so that one failing fold never ends a grid unless asked (``on_error="raise"``).
"""

from __future__ import annotations

import math
import time
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable, Literal, Sequence

import numpy as np
from sklearn.base import clone

from pbr_core.cancel import Cancelled, checkpoint
from pbr_core.paper import continuation_order
from pbr_core.parallel import run_chains
from pbr_core.predictions import Predictions
from pbr_core.progress import Progress

__all__ = ["GridFit", "Scorer", "fit_grid", "fit_grid_batched"]

OnError = Literal["raise", "warn", "record"]


@dataclass
class GridFit:
    """One (fold, alpha) fit of the grid, as its scorer sees it.

    Attributes
    ----------
    fold : int
        The fold's position in the grid's ``fit_rows``.
    index : int
        The alpha's position in the grid's ``alphas``.
    alpha : float
    kl : float
        The fit's KL(q || p); NaN when it failed.
    report : dict
        The fit's report (``fit_report_``; a batched fit's :class:`~pbr_core.gp.problem.FitReport`
        as a dict); empty when it failed.
    seconds : float
        The fit's time (a batched fit's time shared equally).
    error : str or None
        Why the fit failed ("RuntimeError: ..."), None when it did not.
    """

    fold: int
    index: int
    alpha: float
    kl: float = math.nan
    report: dict[str, Any] = field(default_factory=dict)
    seconds: float = math.nan
    error: str | None = None
    _predict: Callable[[Predictions], np.ndarray] | None = None

    @property
    def continued(self) -> bool:
        """Whether the fit continued from the fold's previous alpha (``fit_report_["continued_from_alpha"]``)."""
        return "continued_from_alpha" in self.report

    def predict_proba(self, part: Predictions) -> np.ndarray:
        """This fit's recalibrated probabilities of ``part`` (rows of the grid's data), as its
        recalibrator's ``predict_proba`` gives them."""
        if self._predict is None:
            raise RuntimeError(f"The fit for alpha = {self.alpha:g} failed ({self.error}); it predicts nothing.")
        return self._predict(part)


#: ``score(fit, data) -> row``: a dict of the caller's columns for one fit (a failed one too:
#: ``fit.error``), ``data`` the grid's rows. It runs where the fit ran (a worker process with ``n_jobs``
#: > 1), so it must pickle: a module-level function, or an instance of a module-level class. A row
#: whose ``"error"`` is not None counts as a failed fit: the fold's next alpha starts from the prior.
Scorer = Callable[[GridFit, Predictions], dict]


def _with_alpha(template: Any, alpha: float) -> Any:
    """An unfitted clone of ``template`` at ``alpha`` (the same class, every other parameter equal)."""
    return clone(template).set_params(alpha=float(alpha))


def _fold_chain(data: Predictions, rows: np.ndarray, fold: int, alphas: list[float], order: list[int],
                template: Any, score: Scorer, warm_start: bool, on_error: OnError, what: list[str], *,
                emit: Callable[[tuple[int, dict]], None]) -> None:
    """One fold of :func:`fit_grid`: its alphas in ``order``, each from the prior or (warm start)
    continuing from the previous fit; ``emit((alpha index, row))`` after each. Module level, so that
    :func:`pbr_core.parallel.run_chains` can run it in a worker process."""
    part = data.subset(rows)
    previous = None
    for i in order:
        checkpoint()  # a stop asked for between two fits (in this process; workers are terminated)
        rec = _with_alpha(template, alphas[i])
        start = time.perf_counter()
        try:
            if previous is None or not hasattr(rec, "fit_continued"):  # a method that cannot continue
                rec.fit(part)
            else:
                rec.fit_continued(previous, part)
        except Cancelled:
            raise
        except Exception as exc:  # noqa: BLE001 - recorded for the scorer, or re-raised with context
            message = f"{type(exc).__name__}: {exc}"
            if on_error == "raise":
                raise RuntimeError(f"{what[i]} failed: {message}") from exc
            if on_error == "warn":
                warnings.warn(f"{what[i]} failed ({message}); its metrics are NaN.", RuntimeWarning, stacklevel=2)
            fit = GridFit(fold, i, alphas[i], seconds=time.perf_counter() - start, error=message)
        else:
            kl = getattr(rec, "kl_", None)  # a method without a KL: NaN, for the scorer to refuse
            fit = GridFit(fold, i, alphas[i], kl=math.nan if kl is None else float(kl),
                          report=dict(getattr(rec, "fit_report_", None) or {}), seconds=time.perf_counter() - start,
                          _predict=rec.predict_proba)
        row = score(fit, data)
        previous = rec if warm_start and fit.error is None and row.get("error") is None else None
        emit((i, row))


def fit_grid(data: Predictions, template: Any, alphas: Sequence[float], fit_rows: Sequence[np.ndarray],
             score: Scorer, on_fit: Callable[[int, int, dict], None], *, warm_start: bool = False,
             on_error: OnError = "record", n_jobs: int = 1, names: Sequence[str] | None = None,
             prefix: str = "") -> None:
    """Fit ``template`` at every alpha on every fold's rows, one fit after another; ``on_fit(fold,
    alpha index, row)`` hears each scored fit, in this process, as it finishes.

    Parameters
    ----------
    data : Predictions
        The rows the folds index.
    template : recalibrator taking ``alpha``
        Unfitted (the PBR family; any registered method with an ``alpha``, e.g. a test double); each
        fit is a copy of it with the alpha changed (its class and every other parameter kept).
    alphas : sequence of float
    fit_rows : sequence of int arrays
        Each fold's rows of ``data`` to fit on.
    score : :data:`Scorer`
    on_fit : callable ``on_fit(fold, index, row)``
        Rows may arrive in any order across folds (worker processes), in fitting order within one.
    warm_start : bool
        Within a fold, the alphas in ascending order, each fit continuing from the previous one.
    on_error : {"record", "warn", "raise"}
        A failing fit is handed to the scorer with its ``error`` ("record"), the same with a
        ``RuntimeWarning`` ("warn": "<what> failed (...); its metrics are NaN."), or raises
        ``RuntimeError("<what> failed: ...")``. ``<what>`` is "``prefix``alpha=A, ``names[fold]``".
    n_jobs : int
        Folds fitted at the same time, each in a worker process.
    names : sequence of str, optional
        How the folds are named in messages (default "fold 1/F", ...).
    """
    alphas = [float(a) for a in alphas]
    names = list(names) if names is not None else [f"fold {f + 1}/{len(fit_rows)}" for f in range(len(fit_rows))]
    order = continuation_order(alphas) if warm_start else list(range(len(alphas)))
    chains = [(data, np.asarray(rows), f, alphas, order, template, score, bool(warm_start), on_error,
               [f"{prefix}alpha={a:g}, {names[f]}" for a in alphas]) for f, rows in enumerate(fit_rows)]
    run_chains(_fold_chain, chains, n_jobs, lambda f, item: on_fit(f, item[0], item[1]))


def fit_grid_batched(data: Predictions, template: Any, alphas: Sequence[float], fit_rows: Sequence[np.ndarray],
                     score: Scorer, progress: Progress | None = None) -> list[tuple[int, int, dict]]:
    """Every (fold, alpha) fit of :func:`fit_grid` in one batched GP (``template.fit_batch``; Adam),
    scored as the fits one by one would be: each predicts with its recalibrator's own rule and
    prediction draws. Returns ``(fold, alpha index, row)`` in (fold, alpha) order.

    ``progress(iteration, max_iter, message)`` hears the batch's optimiser (it may raise
    :class:`~pbr_core.cancel.Cancelled` to stop). A failure of the batch raises: the caller decides
    whether to fit one by one instead.
    """
    alphas = [float(a) for a in alphas]
    pairs = [(f, i) for f in range(len(fit_rows)) for i in range(len(alphas))]
    start = time.perf_counter()
    model, reports, device = template.fit_batch(data, [np.asarray(fit_rows[f]) for f, _ in pairs],
                                                [alphas[i] for _, i in pairs], progress=progress)
    seconds = (time.perf_counter() - start) / len(pairs)
    out = []
    for p, ((f, i), report) in enumerate(zip(pairs, reports)):
        def predict(part: Predictions, p: int = p) -> np.ndarray:
            return template.predict_member(model, p, np.asarray(part.scores, dtype=np.float64), device)

        fit = GridFit(f, i, alphas[i], kl=float(report.kl), report=report.to_dict(), seconds=seconds,
                      _predict=predict)
        out.append((f, i, score(fit, data)))
    return out
