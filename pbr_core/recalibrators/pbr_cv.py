"""PBR with its KL weight alpha chosen by cross-validation: scikit-learn's ``*CV`` estimator pattern.

:class:`PBRCV` is to :class:`~pbr_core.recalibrators.gp.PBR` what scikit-learn's
``LogisticRegressionCV`` is to ``LogisticRegression``: ``fit`` chooses alpha by k-fold
cross-validation INSIDE the data it is given (:func:`pbr_core.alpha_selection.select_alpha`,
GP_SPEC section 5: never on test data), then fits PBR with that alpha on all of it. The chosen
value is ``alpha_``, the grid's scores ``cv_results_``, and the refitted PBR ``best_estimator_``
(the recalibrator to ship: a ``pbr`` / ``pbr_total`` / ``pbr_app`` / ``pbr_total_app`` file).

Being registered, it runs wherever a method name is accepted: the shared recalibrator test
suite, ``compare`` (alpha chosen inside each fold's recalibration set), the CLI and the pages.
"""

from __future__ import annotations

from typing import Any, Callable, ClassVar, Literal, Sequence

import numpy as np

from pbr_core.evaluation import CV_SCORES
from pbr_core.metrics import BINARY_TARGET
from pbr_core.paper import PAPER_ALPHAS
from pbr_core.predictions import Predictions
from pbr_core.recalibrators import _state
from pbr_core.parallel import N_JOBS_WORDS, is_n_jobs
from pbr_core.recalibrators._params import BOOLEAN, MAX_FOLDS, MAX_GRID, NON_NEGATIVE_INT, Constraint, int_range, one_of
from pbr_core.recalibrators._state import StateError
from pbr_core.recalibrators.base import InputType, Recalibrator, register
from pbr_core.recalibrators.gp import _ALPHA, _OBJECTIVE, PBR, _GPRecalibrator

__all__ = ["PBRCV"]


def _is_grid(value: Any) -> bool:
    if value is None:
        return True
    if (isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple, np.ndarray))
            or not 0 < len(value) <= MAX_GRID):
        return False
    return all(_ALPHA.test(v) for v in value)


_GRID = Constraint(_is_grid, f"a non-empty list of at most {MAX_GRID} finite numbers >= 0, or None (the paper's grid)")
_FOLDS = int_range(2, MAX_FOLDS)
_BATCHED = Constraint(lambda v: isinstance(v, (bool, np.bool_)) or v == "auto", "True, False or 'auto'")
_N_JOBS = Constraint(is_n_jobs, N_JOBS_WORDS)

#: Columns of ``cv_results_`` (one entry per alpha): what :class:`~pbr_core.alpha_selection.AlphaSelection`
#: summarises over the folds.
CV_RESULT_COLUMNS = ("alpha", "mean", "std", "ece_mean", "ece_std", "brier_mean", "brier_std", "nll_mean", "nll_std",
                     "kl_mean", "kl_std", "failed")


@register
class PBRCV(_GPRecalibrator):
    __doc__ = """PAC-Bayes recalibration with alpha chosen by k-fold cross-validation on the fitting data.

    ``fit(X, y)`` scores every alpha of ``alphas`` on ``cv`` held-out folds of ``X`` (mean held-out
    ``scoring``; ties go to the larger alpha), then fits :class:`~pbr_core.recalibrators.gp.PBR`
    with the winner on all of ``X``. It predicts as that fit does.

    Parameters
    ----------
    alphas : list of float or None, default None
        Candidate KL weights; None is the paper's grid {0, .01, .1, .25, .5, .75, .9, 1}.
    cv : int, default 5
        Number of folds k (at least 2).
    scoring : {"ece", "brier", "nll"}
        Held-out score to minimise; the ECE uses B = floor(n_val^(1/3)).
    objective : {"pbr", "pbr_total"}
        Paper Eq. vi_obj2 or vi_obj3.
    mean_approx : bool, default False
        Predict with softmax(mu) (the "app." variants).
    n_inducing, variational, optimizer, max_iter, n_mc, mc_draws, mc_classes, n_predict_samples, device, random_state, staged
        As in :class:`~pbr_core.recalibrators.gp.PBR`, for every fit.
    prior_split : float, default 0
        As in :class:`~pbr_core.recalibrators.gp.PBR`, for the final fit only (the one whose bounds
        are reported); the cross-validation fits use every row of their folds.
    prob_input : {"wenger", "log"}, default "wenger"
        As in :class:`~pbr_core.recalibrators.gp.PBR` (the GP on probability inputs), for every fit.
    cv_seed : int, default 0
        Seeds the fold assignment.
    binary_ece : {"positive", "top_label"}
        Binary data: the ECE of p(y=1) (paper Appendix A; the default, the app's one choice
        :data:`pbr_core.metrics.DEFAULT_BINARY_TARGET`, as in :func:`~pbr_core.alpha_selection.select_alpha`)
        or of the top label (the paper's tables).
    batched : bool or "auto"
        Fit the (alpha, fold) grid in one batched model (needs ``optimizer="adam"``); "auto"
        batches on CUDA with Adam (see :mod:`pbr_core.alpha_selection`).
    warm_start : bool, default True
        Fit each fold's alphas in ascending order, each from the previous alpha's solution
        (continuation along the grid: 1.4-1.8x less CPU time measured, see :mod:`pbr_core.alpha_selection`);
        False fits every (alpha, fold) from the prior. The final fit on all rows always starts at
        the prior: ``best_estimator_`` is ``PBR(alpha=alpha_).fit(X)``.
    n_jobs : int, default 1
        Folds of the selection fitted at the same time, each in a worker process
        (:mod:`pbr_core.parallel`; -1: one per available core); the same numbers as with 1.

    Attributes
    ----------
    alpha_ : float
        The chosen alpha.
    cv_results_ : dict of numpy arrays
        One entry per alpha (sorted): ``alpha``, ``mean`` and ``std`` of the held-out score over
        the folds, mean / std of ``ece``, ``brier``, ``nll`` and ``kl``, and ``failed``: the folds
        whose fit failed (that alpha's means are then NaN and it is not chosen; ``fit_report_``'s
        warnings say which fits failed and why).
    selection_ : AlphaSelection
        The whole selection, every (alpha, fold) fit's scores included (after ``fit`` only: not saved).
    best_estimator_ : PBR
        The PBR fitted on all the data with ``alpha_``, as the registered method of ``objective``
        and ``mean_approx`` (``pbr``, ``pbr_total``, ``pbr_app`` or ``pbr_total_app``).
    kl_, fit_report_, bounds_, model_
        Those of ``best_estimator_``.

    Progress: besides ``report_progress`` (each fit's optimiser iterations), an optional
    ``cv_progress(done, total, message)`` attribute (not a parameter) is called after each
    cross-validation fit, with ``total`` = the grid's fits + 1 (the final fit), and once more
    when alpha is chosen: ``cv_progress(total - 1, total, "alpha=0.5 chosen")``, with ``alpha_``
    set. Stop: the fits check :func:`pbr_core.cancel.checkpoint`, like every fit.

    References
    ----------
    .. [1] H. Fujisawa and F. Futami. PAC-Bayes analysis for recalibration in classification.
       ICML 2025, Section 5.2 and Appendix F (the alpha grid).

    Examples
    --------
    >>> import numpy as np
    >>> from pbr_core.recalibrators.pbr_cv import PBRCV
    >>> d = np.load("sample_data/cifar10_resnet110.npz")
    >>> r = PBRCV(alphas=[0.1, 1.0], cv=2, max_iter=30, n_mc=10).fit(d["logits"][:150].astype(float), d["labels"][:150])
    >>> r.alpha_ in (0.1, 1.0), r.best_estimator_.method, r.cv_results_["alpha"].tolist()
    (True, 'pbr', [0.1, 1.0])
    """

    method: ClassVar[str] = "pbr_cv"
    label: ClassVar[str] = "PBR (α by cross-validation)"
    _parameter_constraints: ClassVar[dict[str, Constraint]] = {
        "alphas": _GRID, "cv": _FOLDS, "scoring": one_of(CV_SCORES), "objective": _OBJECTIVE,
        **_GPRecalibrator._gp_constraints, "cv_seed": NON_NEGATIVE_INT,
        "binary_ece": one_of(BINARY_TARGET.values), "batched": _BATCHED, "warm_start": BOOLEAN,
        "n_jobs": _N_JOBS}

    #: ``cv_progress(done, total, message)``, see the class docstring (not saved).
    cv_progress: Callable[[int, int, str], None] | None = None

    def __init__(self, alphas: Sequence[float] | None = None, cv: int = 5, scoring: str = "ece",
                 objective: str = "pbr", mean_approx: bool = False, n_inducing: int = 10,
                 variational: str = "mean_field", optimizer: str = "lbfgs", max_iter: int = 1000, n_mc: int | str = "auto",
                 mc_draws: str = "antithetic",
                 n_predict_samples: int = 100, device: str = "auto", random_state: int = 0, cv_seed: int = 0,
                 binary_ece: Literal["positive", "top_label"] = BINARY_TARGET.default,  # type: ignore[assignment]
                 batched: bool | Literal["auto"] = "auto", prior_split: float = 0.0, prob_input: str = "wenger",
                 warm_start: bool = True, n_jobs: int = 1, mc_classes: int | str = "auto",
                 staged: bool | str = "auto"):
        self.alphas = alphas
        self.cv = cv
        self.scoring = scoring
        self.objective = objective
        self.mean_approx = mean_approx
        self.n_inducing = n_inducing
        self.variational = variational
        self.optimizer = optimizer
        self.max_iter = max_iter
        self.n_mc = n_mc
        self.mc_draws = mc_draws
        self.mc_classes = mc_classes
        self.n_predict_samples = n_predict_samples
        self.device = device
        self.random_state = random_state
        self.cv_seed = cv_seed
        self.binary_ece = binary_ece
        self.batched = batched
        self.prior_split = prior_split
        self.prob_input = prob_input
        self.warm_start = warm_start
        self.n_jobs = n_jobs
        self.staged = staged

    @classmethod
    def _test_params(cls) -> dict[str, Any]:
        """Two alphas, two folds and the GP family's quick settings."""
        return {**super()._test_params(), "alphas": [0.5, 1.0], "cv": 2}

    # ------------------------------------------------------------------ the estimator refitted
    def _estimator(self, alpha: float) -> PBR:
        """An unfitted PBR with ``alpha`` and this recalibrator's settings, as its registered method."""
        from pbr_core.recalibrators import gp_method, method_class

        cls = method_class(gp_method(self.objective, bool(self.mean_approx)))
        params = {name: getattr(self, name) for name in cls._param_names() if name != "alpha"}
        return cls(alpha=alpha, **params)

    def _pbr_params(self) -> dict[str, Any]:
        """What every fit of the selection shares (PBR's parameters but alpha; ``prior_split`` is the
        final fit's alone: the selection's fits carry no bound)."""
        return {name: getattr(self, name) for name in PBR._param_names()
                if name not in ("alpha", "objective", "prior_split")}

    # ------------------------------------------------------------------ fit
    def n_fits(self) -> int:
        """One PBR fit per alpha of the grid and inner fold, and the final fit at the chosen alpha."""
        return len(PAPER_ALPHAS if self.alphas is None else self.alphas) * int(self.cv) + 1

    def _fit(self, preds: Predictions) -> None:
        from pbr_core.alpha_selection import select_alpha

        for name in ("alpha_", "cv_results_", "selection_", "best_estimator_"):
            self.__dict__.pop(name, None)  # a refit: nothing of the previous fit may look current
        grid = list(PAPER_ALPHAS if self.alphas is None else self.alphas)
        steps = len(grid) * int(self.cv)
        callback = self.cv_progress

        def progress(done: int, total: int, message: str) -> None:
            # Sequential selection counts fits, a batched one iterations: both become a share of the grid.
            if callback is not None:
                callback(int(round(done / max(total, 1) * steps)), steps + 1, message)

        try:
            sel = select_alpha(preds, grid=grid, objective=self.objective, n_splits=int(self.cv), metric=self.scoring,
                               seed=int(self.cv_seed), progress=progress, batched=self.batched,
                               binary_ece=self.binary_ece, warm_start=bool(self.warm_start),
                               n_jobs=int(self.n_jobs), **self._pbr_params())
            self.alpha_ = float(sel.best_alpha)
            self.selection_ = sel
            self.cv_results_ = {c: sel.summary[c].to_numpy(dtype=np.int64 if c == "failed" else np.float64)
                                for c in CV_RESULT_COLUMNS}
            if callback is not None:
                callback(steps, steps + 1, f"alpha={self.alpha_:g} chosen")
            best = self._estimator(self.alpha_).fit(preds)
        except BaseException:
            for name in ("alpha_", "cv_results_", "selection_"):
                self.__dict__.pop(name, None)
            raise
        if sel.notes:  # failed (alpha, fold) fits: said where the final fit's report is read (CLI, pages)
            best.fit_report_["warnings"] = list(best.fit_report_.get("warnings") or []) + sel.notes
        self.best_estimator_ = best
        self.model_, self.input_kind_, self.kl_ = best.model_, best.input_kind_, best.kl_
        self.fit_report_, self.bounds_ = best.fit_report_, best.bounds_
        if hasattr(best, "bound_rows_"):
            self.bound_rows_ = best.bound_rows_
        else:
            self.__dict__.pop("bound_rows_", None)

    def fit_key(self) -> None:
        """None: a selection shares its fit with nothing (each fit chooses its own alpha)."""
        return None

    def fit_from(self, other: Recalibrator, X: Predictions | np.ndarray, y: np.ndarray | None = None,
                 input_type: InputType = "auto") -> "PBRCV":
        """A plain ``fit``: see :meth:`fit_key`."""
        return self.fit(X, y, input_type)

    # ------------------------------------------------------------------ state
    def _get_state(self) -> dict[str, Any]:
        # An alpha whose fit failed on a fold has no means (NaN): saved as null, so that the file is
        # strict JSON.
        results = {c: v if c == "failed" or np.all(np.isfinite(v)) else [float(x) if np.isfinite(x) else None for x in v]
                   for c, v in self.cv_results_.items()}
        return {**super()._get_state(), "alpha": self.alpha_, "cv_results": results}

    def _set_state(self, state: dict[str, Any]) -> None:
        super()._set_state(state)
        fields = _state.Fields(state, "state")
        results = fields.fields("cv_results")
        alphas = results.array("alpha", (None,), low=0.0, min_size=1)
        table = {"alpha": alphas}
        failed = np.zeros(alphas.size, dtype=np.int64)  # files saved before failed fits were kept: none
        if "failed" in results.group:  # Fields checked the group is a mapping
            counts = results.array("failed", (None,), low=0.0)
            _state.same_length(alphas, counts, results.path("alpha"), results.path("failed"))
            if np.any(counts != np.round(counts)):
                raise StateError(f"{results.path('failed')} must hold whole numbers of folds")
            failed = counts.astype(np.int64)
        for name in (c for c in CV_RESULT_COLUMNS if c not in ("alpha", "failed")):  # the means and spreads
            raw = results.get(name)
            missing = np.array([v is None for v in raw], dtype=bool) if isinstance(raw, list) else np.zeros(0, bool)
            if missing.any():  # null: an alpha with a failed fit, which has no means
                if missing.size != alphas.size or np.any(missing & (failed == 0)):
                    raise StateError(f"{results.path(name)} may be null only for an alpha with failed folds")
                raw = [0.0 if v is None else v for v in raw]
            # Scores and spreads are >= 0; a mean KL at the prior can be -1e-12 (rounding).
            table[name] = _state.array(raw, results.path(name), (None,), low=None if name == "kl_mean" else 0.0)
            _state.same_length(alphas, table[name], results.path("alpha"), results.path(name))
            if missing.any():
                table[name][missing] = np.nan
        table["failed"] = failed
        alpha = fields.number("alpha", low=0.0)
        if alpha not in set(alphas[failed == 0].tolist()):
            raise StateError(f"{fields.path('alpha')} must be one of the alphas tried ({results.path('alpha')}) "
                             f"without a failed fit, but the file holds {_state.shown(alpha)}")
        self.alpha_, self.cv_results_ = alpha, table
        best = self._estimator(alpha)
        best.n_classes_, best.input_type_ = self.n_classes_, self.input_type_
        best.class_names_ = getattr(self, "class_names_", None)
        best.model_, best.input_kind_, best.kl_ = self.model_, self.input_kind_, self.kl_
        best.fit_report_, best.bounds_ = self.fit_report_, self.bounds_
        self.best_estimator_ = best
