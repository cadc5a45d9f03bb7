"""PBR with its KL weight alpha chosen by cross-validation: scikit-learn's ``*CV`` wrapper pattern.

:class:`PBRCV` wraps a PBR recalibrator as scikit-learn's ``CalibratedClassifierCV`` wraps a
classifier: ``PBRCV(estimator=PBR(objective="pbr_total", max_iter=500), alphas=..., cv=5)``. ``fit``
chooses alpha by k-fold cross-validation INSIDE the data it is given
(:func:`pbr_core.alpha_selection.select_alpha_of`, GP_SPEC section 5: never on test data), each fit
a clone of the estimator at one alpha, then fits the estimator with the winner on all of it. The
chosen value is ``alpha_``, the grid's scores ``cv_results_``, and the refitted PBR
``best_estimator_`` (the recalibrator to ship: a ``pbr`` / ``pbr_total`` / ``pbr_app`` /
``pbr_total_app`` file). PBRCV repeats none of PBR's parameters: they are the estimator's.

Being registered, it runs wherever a method name is accepted: the shared recalibrator test suite,
``compare`` (alpha chosen inside each fold's recalibration set), the CLI and the pages. By name its
settings are flat, the estimator's beside the selection's (``get_recalibrator("pbr_cv", alphas=[0.1,
1], cv=3, objective="pbr_total", max_iter=500)``), and so are a saved file's "params", exactly as
before the wrapper: files load both ways.
"""

from __future__ import annotations

from typing import Any, ClassVar, Iterable, Literal, Sequence

import numpy as np

from pbr_core.evaluation import CV_SCORES
from pbr_core.metrics import BINARY_TARGET
from pbr_core.paper import PAPER_ALPHAS
from pbr_core.parallel import N_JOBS_WORDS, is_n_jobs
from pbr_core.predictions import Predictions
from pbr_core.progress import Progress
from pbr_core.recalibrators import _state
from pbr_core.recalibrators._params import (BOOLEAN, MAX_FOLDS, MAX_GRID, NON_NEGATIVE_INT, Constraint, check_params,
                                            int_range, one_of)
from pbr_core.recalibrators._state import StateError
from pbr_core.recalibrators.base import InputType, Recalibrator, as_predictions, register
from pbr_core.recalibrators.gp import _ALPHA, _OBJECTIVE, PBR

__all__ = ["PBRCV"]


def _is_grid(value: Any) -> bool:
    if value is None:
        return True
    if (isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple, np.ndarray))
            or not 0 < len(value) <= MAX_GRID):
        return False
    return all(_ALPHA.test(v) for v in value)


def _is_splitter(value: Any) -> bool:
    """A scikit-learn style splitter: ``split(X, y)`` yielding (train, validation) indices, ``get_n_splits()``."""
    return callable(getattr(value, "split", None)) and callable(getattr(value, "get_n_splits", None))


_GRID = Constraint(_is_grid, f"a non-empty list of at most {MAX_GRID} finite numbers >= 0, or None (the paper's grid)")
_FOLDS = int_range(2, MAX_FOLDS)
_CV = Constraint(lambda v: _FOLDS.test(v) or _is_splitter(v),
                 f"{_FOLDS.words}, or a splitter (an object with split(X, y) and get_n_splits(), such as "
                 "sklearn.model_selection.KFold)")
_BATCHED = Constraint(lambda v: isinstance(v, (bool, np.bool_)) or v == "auto", "True, False or 'auto'")
_N_JOBS = Constraint(is_n_jobs, N_JOBS_WORDS)
_ESTIMATOR = Constraint(lambda v: v is None or isinstance(v, PBR),
                        "a PBR recalibrator (PBR, PBRTotal, PBRApp or PBRTotalApp), or None (PBR())")

#: Columns of ``cv_results_`` (one entry per alpha): what :class:`~pbr_core.alpha_selection.AlphaSelection`
#: summarises over the folds.
CV_RESULT_COLUMNS = ("alpha", "mean", "std", "ece_mean", "ece_std", "brier_mean", "brier_std", "nll_mean", "nll_std",
                     "kl_mean", "kl_std", "failed")

#: PBRCV's own settings (the selection's), in the order a file and ``pbr-calib methods`` list them,
#: around the estimator's.
_BEFORE = ("alphas", "cv", "scoring")
_AFTER = ("cv_seed", "binary_ece", "batched", "warm_start", "n_jobs")

#: The fitted attributes that are the refitted estimator's (read through to ``best_estimator_``).
_ESTIMATOR_ATTRIBUTES = ("model_", "input_kind_", "kl_", "fit_report_", "bounds_", "bound_rows_")


def _estimator_settings(estimator: PBR) -> dict[str, Any]:
    """The estimator's parameters but alpha, flat: objective and mean_approx too (a variant fixes them)."""
    return {name: getattr(estimator, name) for name in PBR._param_names() if name != "alpha"}


@register
class PBRCV(Recalibrator):
    __doc__ = """PAC-Bayes recalibration with alpha chosen by k-fold cross-validation on the fitting data.

    ``fit(X, y)`` scores every alpha of ``alphas`` on ``cv`` held-out folds of ``X`` (mean held-out
    ``scoring``; ties go to the larger alpha), each fit a clone of ``estimator`` at that alpha, then
    fits the estimator with the winner on all of ``X``. It predicts as that fit does.

    Parameters
    ----------
    estimator : PBR, default None
        The PBR recalibrator whose alpha is chosen (:class:`~pbr_core.recalibrators.gp.PBR` or a
        variant: its objective, prediction rule and every other setting are kept in every fit);
        None is ``PBR()``. Its ``prior_split`` applies to the final fit only (the one whose bounds
        are reported); the cross-validation fits use every row of their folds.
    alphas : list of float or None, default None
        Candidate KL weights; None is the paper's grid {0, .01, .1, .25, .5, .75, .9, 1}.
    cv : int or splitter, default 5
        Number of folds k (at least 2; shuffled with ``cv_seed``), or a scikit-learn style splitter
        (``split(X, y)`` and ``get_n_splits()``, e.g. ``StratifiedKFold(3)``), given the scores and
        the labels. A saved file records a splitter as its number of folds.
    scoring : {"ece", "brier", "nll"}
        Held-out score to minimise; the ECE uses B = floor(n_val^(1/3)).
    cv_seed : int, default 0
        Seeds the fold assignment of an integer ``cv``.
    binary_ece : {"positive", "top_label"}
        Binary data: the ECE of p(y=1) (paper Appendix A; the default, the app's one choice
        :data:`pbr_core.metrics.BINARY_TARGET`, as in :func:`~pbr_core.alpha_selection.select_alpha`)
        or of the top label (the paper's tables).
    batched : bool or "auto"
        Fit the (alpha, fold) grid in one batched model (needs the estimator's ``optimizer="adam"``);
        "auto" batches on CUDA with Adam (see :mod:`pbr_core.alpha_selection`).
    warm_start : bool, default True
        Fit each fold's alphas in ascending order, each from the previous alpha's solution
        (continuation along the grid: 1.4-1.8x less CPU time measured, see :mod:`pbr_core.alpha_selection`);
        False fits every (alpha, fold) from the prior. The final fit on all rows always starts at
        the prior: ``best_estimator_`` is the estimator at ``alpha_``, fitted on ``X``.
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
        The estimator fitted on all the data with ``alpha_``, as the registered method of its
        objective and prediction rule (``pbr``, ``pbr_total``, ``pbr_app`` or ``pbr_total_app``).
    kl_, fit_report_, bounds_, model_
        Those of ``best_estimator_``.

    Progress: besides ``report_progress`` (each fit's optimiser iterations), ``fit(..., progress=)``
    takes ``progress(done, total, message)``, called after each cross-validation fit with
    ``total`` = the grid's fits + 1 (the final fit), and once more when alpha is chosen:
    ``progress(total - 1, total, "alpha=0.5 chosen")``. Stop: the fits check
    :func:`pbr_core.cancel.checkpoint`, like every fit.

    References
    ----------
    .. [1] H. Fujisawa and F. Futami. PAC-Bayes analysis for recalibration in classification.
       ICML 2025, Section 5.2 and Appendix F (the alpha grid).

    Examples
    --------
    >>> import numpy as np
    >>> from pbr_core.recalibrators import PBR, PBRCV
    >>> d = np.load("sample_data/cifar10_resnet110.npz")
    >>> r = PBRCV(PBR(max_iter=30, n_mc=10), alphas=[0.1, 1.0], cv=2)
    >>> r = r.fit(d["logits"][:150].astype(float), d["labels"][:150])
    >>> r.alpha_ in (0.1, 1.0), r.best_estimator_.method, r.cv_results_["alpha"].tolist()
    (True, 'pbr', [0.1, 1.0])
    """

    method: ClassVar[str] = "pbr_cv"
    label: ClassVar[str] = "PBR (α by cross-validation)"
    family: ClassVar[str] = "gp"
    uses: ClassVar[Literal["probs", "scores"]] = "scores"
    _parameter_constraints: ClassVar[dict[str, Constraint]] = {
        "estimator": _ESTIMATOR, "alphas": _GRID, "cv": _CV, "scoring": one_of(CV_SCORES),
        "cv_seed": NON_NEGATIVE_INT, "binary_ece": one_of(BINARY_TARGET.values), "batched": _BATCHED,
        "warm_start": BOOLEAN, "n_jobs": _N_JOBS}

    def __init__(self, estimator: PBR | None = None, alphas: Sequence[float] | None = None, cv: int | Any = 5,
                 scoring: str = "ece", cv_seed: int = 0,
                 binary_ece: Literal["positive", "top_label"] = BINARY_TARGET.default,  # type: ignore[assignment]
                 batched: bool | Literal["auto"] = "auto", warm_start: bool = True, n_jobs: int = 1):
        self.estimator = estimator
        self.alphas = alphas
        self.cv = cv
        self.scoring = scoring
        self.cv_seed = cv_seed
        self.binary_ece = binary_ece
        self.batched = batched
        self.warm_start = warm_start
        self.n_jobs = n_jobs

    def __getattr__(self, name: str) -> Any:
        # The fitted GP's attributes are the refitted estimator's (there only once fitted).
        best = self.__dict__.get("best_estimator_")
        if name in _ESTIMATOR_ATTRIBUTES and best is not None:
            return getattr(best, name)
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    @classmethod
    def _test_params(cls) -> dict[str, Any]:
        """Two alphas, two folds and the GP family's quick settings."""
        return {"estimator": PBR(**PBR._test_params()), "alphas": [0.5, 1.0], "cv": 2}

    # ------------------------------------------------------------------ settings by name: flat
    @classmethod
    def _settings_defaults(cls) -> dict[str, Any]:
        own = super()._settings_defaults()
        estimator = {name: value for name, value in PBR._settings_defaults().items() if name != "alpha"}
        return {**{k: own[k] for k in _BEFORE}, **estimator, **{k: own[k] for k in _AFTER}}

    @classmethod
    def _settings_constraints(cls) -> dict[str, Constraint]:
        estimator = {name: c for name, c in PBR._parameter_constraints.items() if name != "alpha"}
        return {**{k: v for k, v in cls._parameter_constraints.items() if k != "estimator"}, **estimator}

    @classmethod
    def _from_settings(cls, **settings: Any) -> "PBRCV":
        from pbr_core.recalibrators import gp_method, method_class

        own = {name: settings.pop(name) for name in (*_BEFORE, *_AFTER) if name in settings}
        objective, mean_approx = settings.pop("objective", "pbr"), settings.pop("mean_approx", False)
        _OBJECTIVE.check("objective", objective)
        BOOLEAN.check("mean_approx", mean_approx)
        return cls(estimator=method_class(gp_method(objective, bool(mean_approx)))(**settings), **own)

    def _settings(self) -> dict[str, Any]:
        own = self.get_params()
        if _is_splitter(self.cv):
            own["cv"] = int(self.cv.get_n_splits())  # a file records how many folds, not the splitter
        return {**{k: own[k] for k in _BEFORE}, **_estimator_settings(self._template()),
                **{k: own[k] for k in _AFTER}}

    # ------------------------------------------------------------------ checks
    def _validate_params(self) -> None:
        check_params(self, self._parameter_constraints)
        self._template()._validate_params()  # the estimator's own checks (CUDA asked for without a GPU)

    def _validate_saved_params(self) -> None:
        check_params(self, self._parameter_constraints)
        self._template()._validate_saved_params()

    # ------------------------------------------------------------------ the estimator
    def _template(self) -> PBR:
        return PBR() if self.estimator is None else self.estimator

    def _estimator(self, alpha: float) -> PBR:
        """An unfitted clone of the estimator at ``alpha``, as the registered method of its objective
        and prediction rule (what ``best_estimator_`` is, fitted or loaded from a file: ``PBR(objective=
        "pbr_total")`` is fitted and saved as ``pbr_total``)."""
        from pbr_core.recalibrators import gp_method, method_class

        template = self._template()
        cls = method_class(gp_method(template.objective, bool(template.mean_approx)))
        if type(template) is cls:
            # scikit-learn on first use: `from pbr_core.recalibrators import PBR` imports this module,
            # and sklearn.base (with scipy.stats) costs ~1 CPU s, paid by every process's first GP fit.
            from sklearn.base import clone

            return clone(template).set_params(alpha=float(alpha))
        settings = _estimator_settings(template)
        return cls(alpha=float(alpha), **{k: v for k, v in settings.items() if k in cls._param_names()})

    def _n_splits(self) -> int:
        return int(self.cv.get_n_splits()) if _is_splitter(self.cv) else int(self.cv)

    def _folds(self, preds: Predictions) -> list[tuple[np.ndarray, np.ndarray]]:
        """The selection's (train, validation) rows: shuffled k-fold with ``cv_seed``, or the splitter's
        (sorted: a fit's rows come in file order whatever the splitter yields)."""
        from pbr_core.alpha_selection import kfold_indices

        if not _is_splitter(self.cv):
            return kfold_indices(preds.n, int(self.cv), int(self.cv_seed))
        pairs: Iterable = self.cv.split(np.asarray(preds.scores), preds.labels)
        return [(np.sort(np.asarray(tr, dtype=np.int64)), np.sort(np.asarray(va, dtype=np.int64))) for tr, va in pairs]

    # ------------------------------------------------------------------ fit
    def n_fits(self) -> int:
        """One PBR fit per alpha of the grid and inner fold, and the final fit at the chosen alpha."""
        return len(PAPER_ALPHAS if self.alphas is None else self.alphas) * self._n_splits() + 1

    def fit(self, X: Predictions | np.ndarray, y: np.ndarray | None = None, input_type: InputType = "auto", *,
            progress: Progress | None = None) -> "PBRCV":
        """Choose alpha by cross-validation on ``X``, then fit the estimator with it on all of ``X``.

        ``progress(done, total, message)``, when given, hears each cross-validation fit and the choice
        (see the class docstring); otherwise as :meth:`Recalibrator.fit`.
        """
        self._validate_params()
        return self._fit_predictions(as_predictions(X, y, input_type), progress=progress)

    def _fit(self, preds: Predictions, progress: Progress | None = None) -> None:
        from pbr_core.alpha_selection import select_alpha_of

        for name in ("alpha_", "cv_results_", "selection_", "best_estimator_"):
            self.__dict__.pop(name, None)  # a refit: nothing of the previous fit may look current
        grid = list(PAPER_ALPHAS if self.alphas is None else self.alphas)
        folds = self._folds(preds)
        steps = len(grid) * len(folds)

        def cv_progress(done: int, total: int, message: str) -> None:
            # Sequential selection counts fits, a batched one iterations: both become a share of the grid.
            if progress is not None:
                progress(int(round(done / max(total, 1) * steps)), steps + 1, message)

        # The selection's fits carry no bound: a prior split is the final fit's alone.
        template = self._estimator(float(grid[0])).set_params(prior_split=0.0)
        try:
            sel = select_alpha_of(template, preds, folds, grid, metric=self.scoring, seed=int(self.cv_seed),
                                  progress=cv_progress, batched=self.batched, binary_ece=self.binary_ece,
                                  warm_start=bool(self.warm_start), n_jobs=int(self.n_jobs))
            self.alpha_ = float(sel.best_alpha)
            self.selection_ = sel
            self.cv_results_ = {c: sel.summary[c].to_numpy(dtype=np.int64 if c == "failed" else np.float64)
                                for c in CV_RESULT_COLUMNS}
            if progress is not None:
                progress(steps, steps + 1, f"alpha={self.alpha_:g} chosen")
            best = self._estimator(self.alpha_).fit(preds)
        except BaseException:
            for name in ("alpha_", "cv_results_", "selection_"):
                self.__dict__.pop(name, None)
            raise
        if sel.notes:  # failed (alpha, fold) fits: said where the final fit's report is read (CLI, pages)
            best.fit_report_["warnings"] = list(best.fit_report_.get("warnings") or []) + sel.notes
        self.best_estimator_ = best

    def fit_key(self) -> None:
        """None: a selection shares its fit with nothing (each fit chooses its own alpha)."""
        return None

    def fit_from(self, other: Recalibrator, X: Predictions | np.ndarray, y: np.ndarray | None = None,
                 input_type: InputType = "auto") -> "PBRCV":
        """A plain ``fit``: see :meth:`fit_key`."""
        return self.fit(X, y, input_type)

    def _predict_proba(self, preds: Predictions) -> np.ndarray:
        return self.best_estimator_._predict_proba(preds)

    # ------------------------------------------------------------------ state
    def _get_state(self) -> dict[str, Any]:
        # An alpha whose fit failed on a fold has no means (NaN): saved as null, so that the file is
        # strict JSON.
        results = {c: v if c == "failed" or np.all(np.isfinite(v)) else [float(x) if np.isfinite(x) else None for x in v]
                   for c, v in self.cv_results_.items()}
        return {**self.best_estimator_._get_state(), "alpha": self.alpha_, "cv_results": results}

    def _set_state(self, state: dict[str, Any]) -> None:
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
        best = self._estimator(alpha)
        best.n_classes_, best.input_type_ = self.n_classes_, self.input_type_
        best.class_names_ = getattr(self, "class_names_", None)
        best._set_state({k: v for k, v in state.items() if k not in ("alpha", "cv_results")})  # the GP's own checks
        self.alpha_, self.cv_results_, self.best_estimator_ = alpha, table, best
