"""GP calibration (Wenger et al., 2020) and PAC-Bayes recalibration (PBR; Fujisawa & Futami, 2025).

Six registered methods share one latent-GP model (GP_SPEC section 1) and differ only in the
objective (GP_SPEC section 2) and in how they predict (section 4):

* ``gp`` (:class:`GPCalibration`): mean CE (Taylor) + KL / n; predicts the J-sample mean.
* ``gp_app`` (:class:`GPCalibrationApp`): the same fit; predicts softmax(mu).
* ``pbr`` (:class:`PBR`): mean E_q Brier + alpha KL / n (Eq. vi_obj2); J-sample mean.
* ``pbr_total`` (:class:`PBRTotal`): mean E_q CE + mean E_q Brier + alpha KL / n (Eq. vi_obj3).
* ``pbr_app`` (:class:`PBRApp`), ``pbr_total_app`` (:class:`PBRTotalApp`): as ``pbr`` and
  ``pbr_total``, predicting softmax(mu).

``PBR(objective="pbr_total")`` is the same model as ``PBRTotal()`` (saved under the method name
"pbr" with its ``objective`` parameter); the fixed-flag subclasses exist so that every variant has
its own registry name for tables, the CLI and saved files.
"""

from __future__ import annotations

import math
import re
import warnings
from dataclasses import replace
from typing import Any, ClassVar, Literal

import numpy as np
import torch

from pbr_core.bounds import fit_bounds
from pbr_core.fit_rows import FitRows
from pbr_core.gp.device import DTYPE, resolve_device
from pbr_core.gp import objectives as _objectives
from pbr_core.gp.model import (
    GPRecalibrationModel,
    InputKind,
    NotPositiveDefiniteError,
    initial_inducing_points,
    kernel_inputs,
)
from pbr_core.gp.objectives import MC_DRAWS, ObjectiveSpec, auto_mc_classes, auto_mc_draws, draw_mc_noise
from pbr_core.gp.predict import predict_proba
from pbr_core.gp.problem import FitData, TrainCheck, TrainSettings
from pbr_core.gp.staged import fit_staged, uses_stages
from pbr_core.gp.threads import fit_threads
from pbr_core.gp.training import fit_gp, training_check
from pbr_core.progress import Progress
from pbr_core.progress import installed as installed_progress
from pbr_core.predictions import Predictions
from pbr_core.recalibrators import _state
from pbr_core.recalibrators import base as _base
from pbr_core.recalibrators._params import (
    BOOLEAN,
    FINITE_NON_NEGATIVE,
    MAX_INDUCING_POINTS,
    MAX_ITERATIONS,
    MAX_MC_CLASSES,
    MAX_MC_DRAWS,
    MAX_PREDICT_SAMPLES,
    NON_NEGATIVE_INT,
    Constraint,
    check_params,
    int_range,
    one_of,
)
from pbr_core.recalibrators._state import StateError
from pbr_core.recalibrators.base import Recalibrator, register

__all__ = ["BOUND_VALIDITY", "GPCalibration", "GPCalibrationApp", "PBR", "PBRApp", "PBRTotal", "PBRTotalApp",
           "prediction_seed", "prior_split_rows"]

Objective = Literal["gp", "pbr", "pbr_total"]

#: The GP model on probability inputs for each ``prob_input`` (``GPRecalibrationModel.input_kind``).
PROB_INPUT_KINDS: dict[str, InputKind] = {"log": "log_probs", "wenger": "probs"}
#: ``prob_input`` of files saved before the parameter existed: their GP on probabilities is log p
#: with an identity mean.
LEGACY_PROB_INPUT = "log"

#: Report keys that depend on the run (clock, machine), kept in memory but not in saved files, so
#: that two equal fits save equal files.
_VOLATILE_REPORT_KEYS = ("wall_time_s",)


def _is_device(value: Any) -> bool:
    if not isinstance(value, (str, torch.device)):
        return False
    # "cuda:" and a number, nothing else: a saved file's device is shown on pages (issue 34)
    return re.fullmatch(r"auto|cpu|cuda(:\d{1,4})?", str(value).lower()) is not None

#: How a fit's Corollary 1-2 values are labelled, by where the prior came from (``prior_split``).
#: Corollaries 1-2 need a prior chosen independently of the rows the bound is evaluated on.
BOUND_VALIDITY = {
    "split": "valid as stated: prior chosen on separate rows",
    "same_rows": "approximate: prior fitted on the same rows",
}

#: GP calibration's L-BFGS stopping rule: the former defaults. The tighter rule of
#: :class:`~pbr_core.gp.problem.TrainSettings` (rtol 1e-6) was needed for the PBR objectives, whose
#: Monte Carlo Brier term is flat near its optimum (fits stopped 1-1.6e-4 above the reference with
#: rtol 1e-5); GP calibration's objective (Wenger's Taylor cross entropy, no draws) was not shown to
#: need it, and took 2.6x the iterations under it at K = 10 (420 against 160; 2.43 against 1.49
#: CPU s) for a 4.4e-4 lower objective (benchmarks/RESULTS_fast_pbr.md, round 3). It keeps the
#: L-BFGS history of 20 too (PBR's went to 100 in round 4), so its fits are those of the
#: reproduction tables.
GP_CALIBRATION_STOP = {"rtol": 1e-5, "tol_change": 1e-9, "tol_grad": 1e-6, "lbfgs_history": 20}

#: Largest share of the rows ``prior_split`` may set aside for choosing the prior.
MAX_PRIOR_SPLIT = 0.9
#: Fewest rows on either side of a prior split.
MIN_SPLIT_ROWS = 2


def prediction_seed(random_state: int) -> int:
    """The seed of a fitted GP's prediction draws: a stream independent of the fit's own Monte Carlo
    draws (``draw_mc_noise(..., seed=random_state)``).

    With the same seed, the J prediction draws of the i-th recalibration row would be the very S
    draws the fit optimised on (S = J = 100 by default): metrics on the recalibration rows (their
    ECE next to the bounds, the training-set check) would score the fit on the noise it was tuned
    to, not on the posterior. (A review measured .0066 with the fit's draws against .0076 with fresh
    ones at alpha = 0; on three alpha = 0 fits here, KITTI random forest folds 0-1 and CIFAR-10
    fold 0, n_re = 1000, the recalibration-set ECE moved by .002-.003 in either direction.) A
    derived stream keeps predictions a deterministic function of ``random_state`` and the input.
    """
    return int(np.random.SeedSequence(int(random_state), spawn_key=(1,)).generate_state(1)[0])


def prior_split_rows(n: int, prior_split: float, random_state: int) -> tuple[np.ndarray, np.ndarray]:
    """(prior rows, bound rows) of ``n`` recalibration rows for ``prior_split`` (sorted, disjoint).

    ``round(prior_split * n)`` random rows choose the prior (kernel hyperparameters and inducing
    points); the others fit the posterior and carry the bound. The draw depends only on
    ``(n, prior_split, random_state)``.
    """
    n_prior = int(round(float(prior_split) * n))
    if n_prior < MIN_SPLIT_ROWS or n - n_prior < MIN_SPLIT_ROWS:
        raise ValueError(
            f"prior_split={prior_split:g} of {n} rows leaves {n_prior} rows to choose the prior and "
            f"{n - n_prior} to fit and bound on; each side needs at least {MIN_SPLIT_ROWS} rows (more rows, or "
            "another prior_split)."
        )
    perm = np.random.default_rng(np.random.SeedSequence(int(random_state), spawn_key=(2,))).permutation(n)
    return np.sort(perm[:n_prior]), np.sort(perm[n_prior:])


_DEVICE = Constraint(_is_device, "'auto', 'cpu', 'cuda' or 'cuda:N'")
_OBJECTIVE = one_of(("pbr", "pbr_total"))
_MC_DRAW_COUNT = int_range(1, MAX_MC_DRAWS)
_N_MC = Constraint(lambda v: (isinstance(v, str) and v == "auto") or _MC_DRAW_COUNT.test(v),
                   f"{_MC_DRAW_COUNT.words} or 'auto'")
_MC_CLASS_COUNT = int_range(2, MAX_MC_CLASSES)
_MC_CLASSES = Constraint(lambda v: (isinstance(v, str) and v in ("auto", "all")) or _MC_CLASS_COUNT.test(v),
                         f"{_MC_CLASS_COUNT.words}, 'auto' or 'all'")
_ALPHA = FINITE_NON_NEGATIVE
_STAGED = Constraint(lambda v: isinstance(v, (bool, np.bool_)) or (isinstance(v, str) and v == "auto"),
                     "True, False or 'auto'")
_PRIOR_SPLIT = Constraint(
    lambda v: (not isinstance(v, (bool, np.bool_)) and isinstance(v, (int, float, np.integer, np.floating))
               and math.isfinite(v) and (v == 0 or 0 < v <= MAX_PRIOR_SPLIT)),
    f"0 (prior fitted on the same rows) or a share in (0, {MAX_PRIOR_SPLIT:g}] of the rows set aside to choose "
    "the prior")


def mc_description(report: dict) -> str:
    """The Monte Carlo work of a GP fit in words, from its ``fit_report_`` ("" for a fit without
    Monte Carlo): the draws per entry and, where the fit drew only some classes of each row, which."""
    if "n_mc" not in report:
        return ""
    text = f"{report['n_mc']} Monte Carlo draws per entry"
    if report.get("mc_classes"):
        text += (f" of each row's {report['mc_classes']} largest scores and its label (the other classes "
                 "through their expectation)")
    return text


class _GPRecalibrator(Recalibrator):
    """Shared machinery of the GP family: fit, predict, state. Not registered itself."""

    uses: ClassVar[Literal["probs", "scores"]] = "scores"
    family: ClassVar[str] = "gp"
    #: The (objective, mean_approx) this registered method stands for: ``gp_method`` finds a
    #: method by them (e.g. ("pbr_total", True) -> "pbr_total_app").
    variant: ClassVar[tuple[str, bool]]
    #: The parameters every GP method takes; each class lists its own first.
    _gp_constraints: ClassVar[dict[str, Constraint]] = {
        "n_inducing": int_range(1, MAX_INDUCING_POINTS), "max_iter": int_range(1, MAX_ITERATIONS), "n_mc": _N_MC,
        "mc_draws": one_of(MC_DRAWS), "mc_classes": _MC_CLASSES,
        "n_predict_samples": int_range(1, MAX_PREDICT_SAMPLES), "optimizer": one_of(("lbfgs", "adam")),
        "variational": one_of(("mean_field", "cholesky")), "mean_approx": BOOLEAN,
        "random_state": NON_NEGATIVE_INT, "device": _DEVICE, "prior_split": _PRIOR_SPLIT,
        "prob_input": one_of(PROB_INPUT_KINDS), "staged": _STAGED}

    # Set by subclasses' __init__.
    objective: str
    alpha: float
    mean_approx: bool
    n_inducing: int
    variational: str
    optimizer: str
    max_iter: int
    n_mc: int | str
    mc_draws: str
    mc_classes: int | str
    n_predict_samples: int
    device: str
    random_state: int
    prior_split: float
    prob_input: str
    staged: bool | str

    # ------------------------------------------------------------------ configuration
    def _input_kind(self, preds: Predictions) -> InputKind:
        """The GP model for these predictions: logits as they are; probabilities as ``prob_input`` says."""
        return "logits" if preds.logits is not None else PROB_INPUT_KINDS[self.prob_input]

    def _spec(self) -> ObjectiveSpec:
        if self.objective == "gp":
            return ObjectiveSpec.gp_calibration(ce=self.ce_estimator)
        if self.objective == "pbr":
            return ObjectiveSpec.pbr(self.alpha)
        return ObjectiveSpec.pbr_total(self.alpha)

    def mc_draw_count(self, n_classes: int) -> int:
        """S, the fixed Monte Carlo draws per entry a fit on ``n_classes`` classes uses: ``n_mc``, or
        for "auto" :func:`pbr_core.gp.objectives.auto_mc_draws` (32 below 50 classes, 16 from there on)."""
        return auto_mc_draws(n_classes) if self.n_mc == "auto" else int(self.n_mc)

    def mc_class_count(self, z: np.ndarray) -> int | None:
        """T, the classes of each row a fit on scores ``z`` (N, K) draws (the others enter through
        their moments, :class:`pbr_core.gp.objectives.ClassSplit`), or None when it draws every class:
        ``mc_classes``, or for "auto" :func:`pbr_core.gp.objectives.auto_mc_classes`."""
        if self.mc_classes == "all":
            return None
        k = int(np.shape(z)[-1])
        t = auto_mc_classes(z) if self.mc_classes == "auto" else int(self.mc_classes)
        return None if t is None or t >= k else int(t)

    def _check_metric(self) -> Literal["nll", "brier", "nll+brier"]:
        return {"gp": "nll", "pbr": "brier", "pbr_total": "nll+brier"}[self.objective]

    def _validate_params(self) -> None:
        self._check_param_values()
        # RuntimeError now (before any data is read) when CUDA is asked for but absent ("auto" never fails:
        # scores=0 checks it without asking torch for a GPU).
        resolve_device(self.device, scores=0)

    def _validate_saved_params(self) -> None:
        # Not the device: a model fitted on a GPU loads (and predicts) on a CPU-only machine.
        self._check_param_values()

    def _check_param_values(self) -> None:
        """ValueError naming the first invalid constructor parameter (``_parameter_constraints``)."""
        check_params(self, self._parameter_constraints)

    @classmethod
    def _test_params(cls) -> dict[str, Any]:
        """Quick settings for the shared recalibrator suite: fewer iterations and MC draws."""
        return {"max_iter": 60, "n_mc": 20, "n_predict_samples": 20}

    # ------------------------------------------------------------------ fit
    def _progress(self) -> Progress | None:
        """The optimiser's progress callback for this fit, or None when nobody listens: it reports
        ``(iteration, max_iter, "<method> fit")`` to the progress
        installed with :func:`pbr_core.progress.report_progress` (iterations never counted back:
        with ``prior_split`` the second fit continues the count)."""
        installed = installed_progress()
        if installed is None:
            return None
        done = [0]
        desc = f"{self.method} fit"

        def report(iteration: int, max_iter: int, message: str = "") -> None:
            if min(iteration, max_iter) > done[0]:
                done[0] = min(iteration, max_iter)
                installed(done[0], max_iter, desc)

        return report

    def _train_settings(self) -> tuple[TrainSettings, TrainCheck]:
        """The optimiser settings and the final training-set check (made with this recalibrator's own
        prediction rule: mean approximation or J draws)."""
        settings = TrainSettings(optimizer=self.optimizer, max_iter=int(self.max_iter))
        if self.objective == "gp":
            settings = replace(settings, **GP_CALIBRATION_STOP)
        return (settings, TrainCheck(self._check_metric(), bool(self.mean_approx), int(self.n_predict_samples),
                                     prediction_seed(int(self.random_state))))

    def _fit(self, preds: Predictions, start: "_GPRecalibrator | None" = None) -> None:
        """The fit from the prior, or with ``start`` (a fitted GP of the same shape, checked by
        :meth:`fit_continued`) from that GP's parameters."""
        try:
            with fit_threads():  # the library's thread policy (pbr_core.gp.threads: measured)
                self._fit_gp(preds, start)
        except BaseException:
            # The base class unmarks n_classes_ / input_type_; drop the half-trained model too.
            self.__dict__.pop("model_", None)
            raise

    def _fit_gp(self, preds: Predictions, start: "_GPRecalibrator | None" = None) -> None:
        self._validate_params()
        z = np.asarray(preds.scores, dtype=np.float64)
        dev = resolve_device(self.device, scores=z.size)  # "auto": a GPU only for work large enough to gain
        y = np.asarray(preds.labels, dtype=np.int64)
        n = z.shape[0]
        kind = self._input_kind(preds)
        split = float(getattr(self, "prior_split", 0.0) or 0.0)
        progress = self._progress()
        if split > 0:
            # Corollaries 1-2 as stated: the prior (kernel hyperparameters, inducing points) is
            # chosen by a fit on the prior rows only; the posterior q is then fitted from that
            # fixed prior on the other rows, and the bound is evaluated on those rows alone.
            prior_rows, bound_rows = prior_split_rows(n, split, int(self.random_state))
            prior_fit = self._fit_model(z[prior_rows], y[prior_rows], kind, dev, progress)[0]
            model, report = self._fit_model(z[bound_rows], y[bound_rows], kind, dev, progress, prior=prior_fit)
            prior_info = {"kind": "split", "n_prior": int(prior_rows.size), "n_bound": int(bound_rows.size)}
            self.bound_rows_ = bound_rows
        else:
            model, report = self._fit_model(z, y, kind, dev, progress, start=None if start is None else start.model_)
            prior_info = {"kind": "same_rows", "n_prior": int(n), "n_bound": int(n)}
            self.__dict__.pop("bound_rows_", None)
        prior_info["validity"] = BOUND_VALIDITY[prior_info["kind"]]
        self.model_ = model
        self.input_kind_ = kind
        self.kl_ = float(report.kl)
        self.fit_report_ = {**report.to_dict(), "prior": prior_info}
        if self._spec().needs_mc:
            # The S of "auto"; a fit in stages reports its last stage's (the draws of the fit on every row).
            self.fit_report_["n_mc"] = (report.stages[-1]["n_mc"] if report.stages else
                                        self.mc_draw_count(z.shape[1]))
        if start is not None:
            # A continuation that failed its training check was redone from the prior (fit_gp).
            key = "continued_from_alpha" if report.continued else "continuation_abandoned_from_alpha"
            self.fit_report_[key] = float(start.alpha)
        self.bounds_ = {**fit_bounds(prior_info["n_bound"], max(self.kl_, 0.0)), "n_rows": int(n),
                        "prior": prior_info["kind"], "validity": prior_info["validity"]}

    def _fit_model(self, z: np.ndarray, y: np.ndarray, kind: str, dev: torch.device,
                   progress: Progress | None, prior: GPRecalibrationModel | None = None,
                   start: GPRecalibrationModel | None = None) -> tuple[GPRecalibrationModel, Any]:
        """One GP fit on (z, y). With ``prior``: its inducing points and kernel hyperparameters are
        copied and held fixed, q(v) starts at N(0, I), and only q is fitted (the KL is then to a
        prior that did not see these rows). With ``start`` (a fitted GP of the same shape): the
        optimiser starts from its parameters (:meth:`fit_continued`)."""
        n, k = z.shape
        if prior is None:
            zu = torch.as_tensor(initial_inducing_points(kernel_inputs(z, kind), int(self.n_inducing),
                                                         seed=int(self.random_state)), dtype=DTYPE)
            model = GPRecalibrationModel(zu, kind, self.variational).to(dev)
            frozen: list[torch.nn.Parameter] = []
        else:
            zu = prior.variational_strategy.inducing_points.detach().clone()
            model = GPRecalibrationModel(zu, kind, self.variational, jitter=prior.jitter).to(dev)
            model.covar_module.load_state_dict(prior.covar_module.state_dict())
            # Optimisers leave a parameter without a gradient where it is (a zero step).
            frozen = [model.variational_strategy.inducing_points, *model.covar_module.parameters()]
            for p in frozen:
                p.requires_grad_(False)
        spec = self._spec()
        settings, check = self._train_settings()
        params = None
        if start is not None:
            params = {name: p.detach().to(dev) for name, p in start.named_parameters()}
        if uses_stages(n, self.staged):
            # Many rows: a subsample first, then every row with a fixed Monte Carlo budget (pbr_core.gp.staged).
            try:
                report = fit_staged(model, z, y, spec, seed=int(self.random_state), n_mc=self.mc_draw_count(k),
                                    antithetic=self.mc_draws == "antithetic", mc_classes=self.mc_class_count(z),
                                    device=dev, dtype=_objectives.MC_DTYPE, settings=settings, check=check,
                                    progress=progress, start=params,
                                    start_jitter=None if start is None else start.jitter)
            finally:
                for p in frozen:
                    p.requires_grad_(True)
            return model, report
        eps = None
        if spec.needs_mc:
            eps = draw_mc_noise(n, self.mc_draw_count(k), k, int(self.random_state), device=dev, dtype=_objectives.MC_DTYPE,
                                antithetic=self.mc_draws == "antithetic")
        data = FitData(z=torch.as_tensor(z, dtype=DTYPE, device=dev), labels=torch.as_tensor(y, device=dev),
                       spec=spec, eps=eps)
        if eps is not None:
            data = data.with_split(self.mc_class_count(z))
        try:
            report = fit_gp(model, data, settings, progress=progress, check=check, start=params,
                            start_jitter=None if start is None else start.jitter)[0]  # the start's K_uu needed that
        finally:
            for p in frozen:
                p.requires_grad_(True)
        return model, report

    # ------------------------------------------------------------------ sharing one fit
    #: Parameters that change only how a fitted GP predicts, never the fit.
    _PREDICT_ONLY_PARAMS: ClassVar[tuple[str, ...]] = ("mean_approx", "n_predict_samples")

    def fit_key(self) -> tuple[str, tuple[tuple[str, str], ...]]:
        """The objective and every parameter except ``mean_approx`` and ``n_predict_samples``.

        Equal keys mean the same objective minimised from the same start (seed, inducing points,
        Monte Carlo draws, optimiser), so ``gp`` and ``gp_app`` with the same settings share a key.
        """
        params = {k: v for k, v in self.get_params().items() if k not in self._PREDICT_ONLY_PARAMS}
        params.update(objective=self.objective, alpha=None if self.objective == "gp" else float(self.alpha))
        return ("gp-family", tuple(sorted((k, repr(v)) for k, v in params.items())))

    def fit_from(self, other: Recalibrator, X: Predictions | np.ndarray, y: np.ndarray | None = None,
                 input_type: _base.InputType = "auto") -> "_GPRecalibrator":
        """Reuse ``other``'s fitted GP (same :meth:`fit_key`, fitted on the same ``X``) instead of refitting.

        The fit itself does not depend on ``mean_approx``, but its final training-set check
        (:class:`~pbr_core.gp.problem.TrainCheck`: "the recalibrated prediction is not worse than
        the input on the recalibration set") uses the prediction this recalibrator will make. That
        check is run again here with this recalibrator's own prediction; when it fails, or when
        ``other`` is not a fitted GP recalibrator with the same key, this is a full ``fit``, which
        then recovers exactly as a fresh fit would. ``fit_report_["fit_shared_with"]`` names the
        method whose fit was reused.
        """
        self._validate_params()
        preds = _base.as_predictions(X, y, input_type)
        if (not isinstance(other, _GPRecalibrator) or not other.is_fitted or other.fit_key() != self.fit_key()
                or other.n_classes_ != preds.n_classes or other.input_type_ != preds.input_type
                or other.bounds_.get("n_rows", other.bounds_.get("n")) != preds.n):
            return self.fit(preds)
        settings, check = self._train_settings()
        result = training_check(other._model_for_prediction(preds.scores.size), np.asarray(preds.scores, dtype=np.float64),
                                np.asarray(preds.labels, dtype=np.int64), check, settings)
        if not result["passed"]:
            return self.fit(preds)
        self.n_classes_, self.input_type_ = other.n_classes_, other.input_type_
        self.class_names_ = getattr(other, "class_names_", None)
        # The rows this fit is said to be of (not other's record: only their number was compared).
        self.fit_rows_ = FitRows.of(preds)
        self.model_, self.input_kind_, self.kl_ = other.model_, other.input_kind_, other.kl_
        self.fit_report_ = {**other.fit_report_, "train_check": result, "fit_shared_with": other.method}
        self.bounds_ = dict(other.bounds_)
        if hasattr(other, "bound_rows_"):
            self.bound_rows_ = other.bound_rows_
        return self

    def fit_batch(self, data: Predictions, row_sets: list[np.ndarray], alphas: list[float],
                  progress: Progress | None = None) -> tuple[Any, list[Any], torch.device]:
        """This recalibrator's fit of ``data``'s rows ``row_sets[i]`` at ``alphas[i]`` for every i, all
        in one batched GP (:func:`pbr_core.gp.batch.fit_batch`: its settings, draws, seed and
        training-set check; a batched fit is Adam): (batched model, reports, device). The batched
        paths of :func:`pbr_core.gp.grid.fit_grid_batched` (the alpha selection, the KL-gap study);
        :meth:`predict_member` predicts with it. This recalibrator itself stays unfitted."""
        from pbr_core.gp.batch import fit_batch

        z = np.asarray(data.scores, dtype=np.float64)
        device = resolve_device(self.device)
        settings, check = self._train_settings()
        with fit_threads():  # the library's thread policy, as in fit
            model, reports = fit_batch(
                [z[rows] for rows in row_sets], [data.labels[rows] for rows in row_sets], list(alphas), self._spec(),
                self._input_kind(data), device, n_mc=self.mc_draw_count(z.shape[1]), antithetic=self.mc_draws == "antithetic",
                mc_classes=self.mc_class_count(z), seed=int(self.random_state), n_inducing=int(self.n_inducing), variational=self.variational,
                settings=replace(settings, optimizer="adam"), check=check, progress=progress)
        return model, reports, device

    def predict_member(self, model: Any, index: int, scores: np.ndarray, device: torch.device) -> np.ndarray:
        """Probabilities of GP ``index`` of a :meth:`fit_batch` model, as :meth:`predict_proba` gives them."""
        return predict_proba(model.member(index), np.asarray(scores, dtype=np.float64), bool(self.mean_approx),
                             int(self.n_predict_samples), prediction_seed(int(self.random_state)), device=device)

    def fit_continued(self, start: Recalibrator, X: Predictions | np.ndarray, y: np.ndarray | None = None,
                      input_type: _base.InputType = "auto") -> "_GPRecalibrator":
        """Fit starting from ``start``'s fitted GP instead of from the prior (continuation).

        Meant for a grid of alpha values on the same rows (:func:`pbr_core.alpha_selection.select_alpha`,
        :func:`pbr_core.experiments.kl_vs_ece_gap`): fitted in ascending order, each fit starts at
        the solution for the previous, smaller alpha. That start is what the escape from the prior
        (:mod:`pbr_core.gp.training`) builds by hand, a fit at a smaller alpha continued at the real
        one, so the fit runs L-BFGS from it directly: no Adam warm-up, no restarts from smaller
        alpha. The objective, the Monte Carlo draws and the training-set check are those of
        :meth:`fit`; only the starting point differs, so the fit may end at another local optimum
        than a fit from the prior (benchmarks/RESULTS_fast_pbr.md compares the two on every alpha
        of the paper's grid). ``fit_report_["continued_from_alpha"]`` records the start's alpha. A
        continued fit that fails the training-set check is redone from the prior, exactly as
        :meth:`fit` would do it, so a continuation never fails where a fit from the prior would not;
        the report then holds ``continuation_abandoned_from_alpha`` instead, and a warning says why.

        Parameters
        ----------
        start : fitted GP recalibrator
            Of the same family and shape: the same variational family, number of inducing points,
            number of classes and kind of input (logits, probabilities), and no prior split.
        X, y, input_type
            As in :meth:`fit`.

        Raises
        ------
        ValueError
            When ``start`` cannot be continued (not fitted, or another shape), or this
            recalibrator has ``prior_split > 0`` (its fits start from a prior chosen on other rows).
        """
        self._validate_params()
        preds = _base.as_predictions(X, y, input_type)
        if not isinstance(start, _GPRecalibrator) or not start.is_fitted:
            raise ValueError(f"fit_continued needs a fitted GP recalibrator to start from, but got "
                             f"{'an unfitted ' if isinstance(start, _GPRecalibrator) else ''}{type(start).__name__}.")
        if float(getattr(self, "prior_split", 0.0) or 0.0) > 0:
            raise ValueError("fit_continued cannot start a fit with prior_split > 0: its posterior starts at a "
                             "prior chosen on other rows; use fit().")
        differences = [f"{what} {theirs!r} vs {ours!r}" for what, theirs, ours in (
            ("classes", start.n_classes_, preds.n_classes),
            ("GP input", start.input_kind_, self._input_kind(preds)),
            ("variational family", start.variational, self.variational),
            ("inducing points", start.model_.variational_strategy.inducing_points.shape[0], int(self.n_inducing)),
        ) if theirs != ours]
        if differences:
            raise ValueError("fit_continued needs a start of the same shape as this fit, but they differ in "
                             + "; ".join(differences) + ".")
        return self._fit_predictions(preds, start=start)

    # ------------------------------------------------------------------ predict
    def _model_for_prediction(self, scores: int | None = None) -> GPRecalibrationModel:
        """The fitted GP on the device to predict ``scores`` scores (rows x classes) on."""
        try:
            dev = resolve_device(self.device, scores=scores)
        except RuntimeError as exc:
            # A model fitted on a GPU still predicts on a CPU-only machine (the result is the same).
            warnings.warn(f"{exc} Predicting on the CPU instead.", RuntimeWarning, stacklevel=3)
            dev = torch.device("cpu")
        if self.model_.variational_strategy.inducing_points.device != dev:
            self.model_ = self.model_.to(dev)
        return self.model_

    def _predict_proba(self, preds: Predictions) -> np.ndarray:
        if (preds.logits is not None) != (self.input_kind_ == "logits"):
            fitted = "logits" if self.input_kind_ == "logits" else "probabilities"
            given = "logits" if preds.logits is not None else "probabilities"
            raise ValueError(
                f"This {type(self).__name__} was fitted on {fitted} but is asked to predict from {given}: "
                f"the GP acts on the scores themselves, so give {fitted} (input_type='{fitted}')."
            )
        with fit_threads():
            return predict_proba(self._model_for_prediction(preds.scores.size), preds.scores,
                                 mean_approx=bool(self.mean_approx),
                                 n_samples=int(self.n_predict_samples), seed=prediction_seed(int(self.random_state)))

    # ------------------------------------------------------------------ state
    def gp_parameters(self) -> dict[str, np.ndarray]:
        """All learned GP parameters as float64 arrays (raw, i.e. before the constraint transforms)."""
        self._check_fitted()
        return {name: p.detach().cpu().numpy().astype(np.float64).copy() for name, p in self.model_.named_parameters()}

    def _get_state(self) -> dict[str, Any]:
        report = {k: v for k, v in self.fit_report_.items() if k not in _VOLATILE_REPORT_KEYS}
        return {"gp": _positive_scales(self.gp_parameters()), "input_kind": self.input_kind_,
                "jitter": float(self.model_.jitter),
                "kl": self.kl_, "fit_report": report, "bounds": dict(self.bounds_)}

    @classmethod
    def _from_fields(cls, data: dict[str, Any]) -> "Recalibrator":
        params = data.get("params")
        if isinstance(params, dict) and "prob_input" not in params:
            # A file saved before ``prob_input`` existed: it loads as the model it was saved with.
            data = {**data, "params": {**params, "prob_input": LEGACY_PROB_INPUT}}
        return super()._from_fields(data)

    def _set_state(self, state: dict[str, Any]) -> None:
        fields = _state.Fields(state, "state")
        kind = fields.choice("input_kind", ("logits", *PROB_INPUT_KINDS.values()))
        expected = "logits" if self.input_type_ == "logits" else PROB_INPUT_KINDS[self.prob_input]
        if kind != expected:
            where = ("the file's input_type" if self.input_type_ == "logits"
                     else f'the file\'s input_type, with params.prob_input "{self.prob_input}"')
            raise StateError(f'state.input_kind is "{kind}", but a GP fitted on {self.input_type_} ({where}) '
                             f'acts on "{expected}"')
        jitter = fields.number("jitter", low=0.0, low_open=True)
        self.model_ = _load_gp(fields.fields("gp"), kind, self.variational, jitter, int(self.n_inducing))
        self.input_kind_ = kind
        self.kl_ = fields.number("kl")
        if self.kl_ < -1e-6:  # a fit left at the prior can report -1e-12 (rounding)
            raise StateError(f"state.kl must be a KL divergence, which is never below 0, but the file holds "
                             f"{self.kl_!r}")
        self.fit_report_ = _check_fit_report(fields.fields("fit_report"))
        bounds = fields.fields("bounds")
        for name, value in bounds.group.items():
            if name == "prior":
                bounds.choice("prior", tuple(BOUND_VALIDITY))
            elif name == "validity":
                bounds.choice("validity", tuple(BOUND_VALIDITY.values()))
            elif name in ("n", "n_rows", "n_bins"):  # counts: the pages use n as the rows it was fitted on
                bounds.whole_number(name)
            else:  # finite: a fit's bounds are (an infinite "n" crashed int() on the Fit & apply page)
                _state.number(value, bounds.path(name))
        self.bounds_ = dict(bounds.group)
        # Files saved before the prior split existed: their prior was fitted on the same rows.
        self.bounds_.setdefault("prior", "same_rows")
        self.bounds_.setdefault("validity", BOUND_VALIDITY[self.bounds_["prior"]])


#: The GP's kernel hyperparameters after their constraint transforms, which must be finite and > 0
#: for the model to mean anything (softplus can round a very negative raw value to exactly 0).
_HYPERPARAMETERS = {
    "covar_module.kernels.0.raw_outputscale": ("outputscale", lambda m: m.scaled_rbf.outputscale),
    "covar_module.kernels.0.base_kernel.raw_lengthscale": ("lengthscale",
                                                           lambda m: m.scaled_rbf.base_kernel.lengthscale),
    "covar_module.kernels.1.raw_noise": ("white-noise variance", lambda m: m.white.noise),
}


#: The variational scales of q(v): the mean-field standard deviations s, and the Cholesky factor C,
#: whose diagonal is read. q depends only on s^2 and on C C^T, so a fit may end with a negative s
#: or a negative diagonal of C (the optimiser is unconstrained); saved files hold them positive
#: (:func:`_positive_scales`) and a file with one at or below 0 is refused (issue 34).
_STDDEV = "variational_strategy._variational_distribution._variational_stddev"
_CHOLESKY = "variational_strategy._variational_distribution.chol_variational_covar"


def _positive_scales(params: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """``params`` (of :meth:`_GPRecalibrator.gp_parameters`) with |s| for the mean-field scales and
    the Cholesky factor's columns flipped to a positive diagonal: the same q(v), exactly (only s^2
    and C C^T enter the model, and a sign flip is exact in floating point)."""
    out = dict(params)
    if _STDDEV in out:
        out[_STDDEV] = np.abs(out[_STDDEV])
    if _CHOLESKY in out:
        c = out[_CHOLESKY]
        out[_CHOLESKY] = c * np.where(np.diagonal(c, axis1=-2, axis2=-1) < 0, -1.0, 1.0)[..., None, :]
    return out


def _load_gp(gp: _state.Fields, kind: str, variational: str, jitter: float, n_inducing: int) -> GPRecalibrationModel:
    """The GP model of a saved state, every parameter checked: names, shapes (``n_inducing``
    inducing points, the variational family), finite values, positive hyperparameters and
    variational scales, and a K_uu that has a Cholesky factor (otherwise every prediction would fail).

    The number of inducing points is checked against ``params.n_inducing`` (itself bounded) before
    the M x M covariance is built, so a file cannot demand an arbitrarily large K_uu."""
    zu = gp.array("variational_strategy.inducing_points", (n_inducing, 1), min_size=1,
                  shape_note=f"(params.n_inducing is {n_inducing})")
    m = zu.shape[0]
    model = GPRecalibrationModel(torch.as_tensor(zu, dtype=DTYPE), kind, variational, jitter=jitter)
    own = dict(model.named_parameters())
    missing, unexpected = sorted(set(own) - set(gp.group)), sorted(set(gp.group) - set(own))
    if missing or unexpected:
        wrong = ([f"lacks {missing}"] if missing else []) + ([f"also holds {unexpected}"] if unexpected else [])
        raise StateError(f"{gp.where} must hold the parameters of a {variational} GP, but " + "; ".join(wrong))
    with torch.no_grad():
        for name, p in own.items():
            note = f"(for {m} inducing points, {variational} family)" if name.startswith("variational_strategy.") else ""
            value = gp.array(name, tuple(p.shape), shape_note=note)
            scales = np.diagonal(value, axis1=-2, axis2=-1) if name == _CHOLESKY else value if name == _STDDEV else None
            if scales is not None and np.any(scales <= 0):
                what = "standard deviations" if name == _STDDEV else "Cholesky factor's diagonal"
                raise StateError(f"{gp.path(name)} must hold numbers above 0 (the variational {what}, which "
                                 f"pbr-calib saves positive), but holds {_state.shown(scales[scales <= 0][0])}")
            p.copy_(torch.as_tensor(value, dtype=DTYPE))
        for name, (label, get) in _HYPERPARAMETERS.items():
            v = get(model).detach().cpu().numpy().ravel()
            if not (np.all(np.isfinite(v)) and np.all(v > 0)):
                raise StateError(f"{gp.path(name)} makes the GP's {label} {_state.shown(v[0])}, but it must be a "
                                 "finite number above 0")
        try:
            mu, var = model.marginals(torch.as_tensor(zu.reshape(1, m), dtype=DTYPE))
        except NotPositiveDefiniteError:
            raise StateError(f"the GP parameters in {gp.where} give an inducing-point covariance that is not "
                             f"positive definite even with jitter {jitter:g}, so the GP cannot predict") from None
        if not (bool(torch.isfinite(mu).all()) and bool(torch.isfinite(var).all())):
            raise StateError(f"the GP parameters in {gp.where} give predictions that are not finite numbers")
    return model


#: Longest ``fit_report.device`` a saved file may hold ("cpu", "cuda:0"; pages print it).
MAX_DEVICE_TEXT = 64


def _check_fit_report(report: _state.Fields) -> dict[str, Any]:
    """The fit report of a saved GP: a record, but pages and the CLI print some of its fields."""
    g = report.group
    _state.record(dict(g), report.where)
    if isinstance(g.get("device"), str) and len(g["device"]) > MAX_DEVICE_TEXT:
        raise StateError(f"{report.path('device')} must name a device in at most {MAX_DEVICE_TEXT} characters "
                         f"(such as \"cpu\" or \"cuda:0\"), but holds {len(g['device']):,}")
    if "iterations" in g:
        report.whole_number("iterations")
    if "converged" in g and not isinstance(g["converged"], bool):
        raise StateError(f"{report.path('converged')} must be true or false, but the file holds {_state.shown(g['converged'])}")
    if "device" in g and not isinstance(g["device"], str):
        raise StateError(f"{report.path('device')} must be a text, but the file holds {_state.shown(g['device'])}")
    if "warnings" in g and not (isinstance(g["warnings"], list) and all(isinstance(w, str) for w in g["warnings"])):
        raise StateError(f"{report.path('warnings')} must be a list of texts, but the file holds {_state.shown(g['warnings'])}")
    return dict(g)


_DOC_COMMON = """
    n_inducing : int, default 10
        M, the number of inducing points (k-means initialised on the N*K scores, learnable).
    variational : {"mean_field", "cholesky"}
        Whitened mean-field q (Wenger's choice) or a full Cholesky factor.
    optimizer : {"lbfgs", "adam"}
        "lbfgs": an Adam warm-up, then L-BFGS with strong-Wolfe line search (see
        :mod:`pbr_core.gp.training` for why); "adam": Adam only.
    max_iter : int, default 1000
        Iteration budget of the optimiser, warm-up included. Two recoveries get a fresh budget of
        the same size each: a fit that ends at the prior (the identity map) is redone from an
        alpha = 0 fit, and a fit that fails its training-set check is redone from the prior with
        Adam (see :mod:`pbr_core.gp.training`). So one fit runs at most 3 * max_iter iterations,
        4 * max_iter for a continued fit (:meth:`fit_continued`) that fails and is redone from the
        prior; ``fit_report_["iterations"]`` counts them all.
    n_mc : int or "auto", default "auto"
        S, the fixed Monte Carlo draws per entry for the expectations of the objective; "auto": 32
        below 50 classes, 16 from 50 classes on (:func:`pbr_core.gp.objectives.auto_mc_draws` says
        why). ``fit_report_["n_mc"]`` is the S a fit used.
    mc_draws : {"antithetic", "iid"}, default "antithetic"
        "antithetic": the S draws are S / 2 pairs (e, -e), which estimate the expectations (and
        their gradients) with a smaller Monte Carlo error than 100 independent draws at a third of
        the cost; "iid": S independent draws (the default before, with S = 100). Both estimate the
        same objective (paper Eqs. vi_obj2 / vi_obj3); see docs/gp_measurements.md.
    mc_classes : int, "auto" or "all", default "auto"
        T, the classes of each row whose scores are drawn: the T largest scores of the row and its
        label; the other classes enter the softmax's normaliser through their expectation
        (E sum exp f_k, exactly; :class:`pbr_core.gp.objectives.ClassSplit`), which removes most of
        the Monte Carlo work with many classes. "auto": every class below 50 classes; from 50 on,
        16 or more, as the uncalibrated probabilities' tail requires
        (:func:`pbr_core.gp.objectives.auto_mc_classes`). At the end of a fit the split's error is
        estimated (Var of the tail's sum / E[Z]^2); where it exceeds 5e-5 of the objective, the fit
        continues drawing twice as many classes (or all) until it does not. The reported objective
        is always the one on every class. ``fit_report_["mc_classes"]`` is the T the fit ended with
        (None: every class). "all": every class always (the estimator before 2026-11-27).
    n_predict_samples : int, default 100
        J, posterior draws averaged per prediction (ignored by the mean approximation).
    device : {"auto", "cpu", "cuda", "cuda:N"}
        "auto" uses a GPU when PyTorch sees one and the work has at least 50,000 scores (rows x
        classes; the CPU below, where a GPU's kernel launches cost more than they save). The line is
        provisional, from one H200 against one CPU thread (:mod:`pbr_core.gp.device`). Asking for
        CUDA without one raises RuntimeError.
    random_state : int
        Seeds the inducing-point subsample, the fixed Monte Carlo draws and the prediction draws
        (a stream independent of the fit's draws, :func:`prediction_seed`), and the prior split.
    prior_split : float, default 0
        0: the prior's kernel hyperparameters and inducing points are fitted on the same rows as the
        posterior (the paper's experiments), so the reported Corollary 1-2 values hold only
        approximately. A share s in (0, 0.9]: round(s n) random rows choose the prior (a full fit
        there), then q is fitted from that fixed prior on the other rows and the bounds are computed
        on those rows alone: valid as stated, at the price of a smaller n in the bound (and fewer rows
        for q). ``fit_report_["prior"]`` and ``bounds_["validity"]`` say which.
    prob_input : {"wenger", "log"}, default "wenger"
        The GP on probability inputs (logit inputs are not affected). "wenger": Wenger et al.'s
        model, the GP's input is p itself with a log mean function, f = log p + g(p); Wenger's
        kernel ranges (lengthscale in (0.001, 10), outputscale in (0, 5)) and initial values
        belong to that input space. "log": the GP's input is log p with an identity mean,
        f = log p + g(log p) (the only model before 2026-11-26; files saved then load as it).
        Chosen by measurement on KITTI, 3 models x 10 folds: "wenger" had the lower test ECE in
        5 of 18 (model, method) cells by paired tests and the higher in none
        (``docs/reproduction.md``, "The GP on probability inputs").
    staged : bool or "auto", default "auto"
        Fit in stages (:mod:`pbr_core.gp.staged`): first on 5,000 rows drawn at random, then
        L-BFGS continued on every row with a fixed Monte Carlo budget per evaluation (n x S = 2^17
        draws, at least 2 per entry), so that the cost stops growing with the draws of every row;
        the bounds are those of the fit on every row. "auto": from 20,000 rows on
        (``STAGED_MIN_ROWS``), where it reached the full-batch fit's objective (1e-4 lower at
        n = 10^5) in a quarter of the time (benchmarks/RESULTS_pbr_scale.md); fits of fewer rows are
        the full-batch fits of before, bit for bit. ``fit_report_["stages"]`` says what each stage did.
"""

_DOC_ATTRIBUTES = """
    Attributes
    ----------
    kl_ : float
        KL(q || p) of the fitted GP (whitened: KL(N(m, diag s^2) || N(0, I))).
    fit_report_ : dict
        :class:`pbr_core.gp.problem.FitReport` as a dict: iterations, final objective and its terms,
        KL, wall time (not saved), device, converged, warnings, training-set check.
    bounds_ : dict
        Corollary 1 and 2 values for this fit (B = floor(n^(1/3)), eps = 0.05, L = 1; valid lambda),
        ``n`` the rows the bound is evaluated on, ``n_rows`` all fitted rows, ``validity``: "valid as
        stated: ..." (``prior_split > 0``) or "approximate: prior fitted on the same rows". Both
        corollaries bound an average over the posterior of the GP, E_rho |...|, not the one
        recalibrated map that ``predict_proba`` returns (the mean of J draws, Algorithm 1).
    bound_rows_ : ndarray
        With ``prior_split > 0``: the indices of the rows (of the fitted data) the bound is evaluated
        on; metrics that go with the bound (the ECE on S_re) must be computed on these rows only.
        Not saved.
    model_ : GPRecalibrationModel
        The fitted GPyTorch model.
"""


@register
class GPCalibration(_GPRecalibrator):
    __doc__ = """GP calibration (Wenger et al., 2020): the paper's GP baseline.

    Minimises Wenger's negative ELBO / n, mean_n CE_n + KL / n, with the 2nd-order Taylor
    approximation of the expected log-softmax (GP_SPEC section 2), over the latent GP of GP_SPEC
    section 1 applied to the logits (or log-probabilities).

    Parameters
    ----------
    mean_approx : bool, default False
        Predict with softmax(mu) (the "app." variant) instead of the J-sample mean.
    ce_estimator : {"taylor", "mc"}
        Wenger's Taylor expansion (default) or Monte Carlo with the fixed draws.""" + _DOC_COMMON + _DOC_ATTRIBUTES + """
    References
    ----------
    .. [1] J. Wenger, H. Kjellstroem and R. Triebel. Non-parametric calibration for classification.
       AISTATS 2020.
    .. [2] H. Fujisawa and F. Futami. PAC-Bayes analysis for recalibration in classification.
       ICML 2025, Section 5.2.

    Examples
    --------
    >>> import numpy as np
    >>> from pbr_core.recalibrators.gp import GPCalibration
    >>> d = np.load("sample_data/cifar10_resnet110.npz")
    >>> r = GPCalibration(max_iter=50).fit(d["logits"][:200].astype(float), d["labels"][:200])
    >>> r.predict_proba(d["logits"][200:205].astype(float)).shape
    (5, 10)
    """

    method: ClassVar[str] = "gp"
    label: ClassVar[str] = "GP calibration"
    variant: ClassVar[tuple[str, bool]] = ("gp", False)
    # Fixed by the class, not parameters (set on the class, so __init__ sets only parameters, as
    # scikit-learn's convention and check_no_attributes_set_in_init ask); alpha is unused by "gp".
    objective: ClassVar[str] = "gp"
    alpha: ClassVar[float] = 1.0
    _parameter_constraints: ClassVar[dict[str, Constraint]] = {
        **_GPRecalibrator._gp_constraints, "ce_estimator": one_of(("taylor", "mc"))}

    def __init__(self, mean_approx: bool = False, n_inducing: int = 10, variational: str = "mean_field",
                 optimizer: str = "lbfgs", max_iter: int = 1000, n_mc: int | str = "auto", mc_draws: str = "antithetic",
                 n_predict_samples: int = 100, ce_estimator: str = "taylor", device: str = "auto", random_state: int = 0,
                 prior_split: float = 0.0, prob_input: str = "wenger", mc_classes: int | str = "auto",
                 staged: bool | str = "auto"):
        self.mean_approx = mean_approx
        self.n_inducing = n_inducing
        self.variational = variational
        self.optimizer = optimizer
        self.max_iter = max_iter
        self.n_mc = n_mc
        self.mc_draws = mc_draws
        self.mc_classes = mc_classes
        self.n_predict_samples = n_predict_samples
        self.ce_estimator = ce_estimator
        self.device = device
        self.random_state = random_state
        self.prior_split = prior_split
        self.prob_input = prob_input
        self.staged = staged


@register
class GPCalibrationApp(GPCalibration):
    __doc__ = """GP calibration with the mean approximation (paper: "GP calibration (app.)").

    Exactly :class:`GPCalibration` with ``mean_approx=True``: predicts softmax(mu).

    Parameters
    ----------
    See :class:`GPCalibration` (``mean_approx`` is fixed to True).

    References
    ----------
    .. [1] J. Wenger, H. Kjellstroem and R. Triebel. Non-parametric calibration for classification.
       AISTATS 2020.
    """

    method: ClassVar[str] = "gp_app"
    label: ClassVar[str] = "GP calibration (app.)"
    variant: ClassVar[tuple[str, bool]] = ("gp", True)

    def __init__(self, n_inducing: int = 10, variational: str = "mean_field", optimizer: str = "lbfgs",
                 max_iter: int = 1000, n_mc: int | str = "auto", mc_draws: str = "antithetic", n_predict_samples: int = 100,
                 ce_estimator: str = "taylor",
                 device: str = "auto", random_state: int = 0, prior_split: float = 0.0, prob_input: str = "wenger",
                 mc_classes: int | str = "auto", staged: bool | str = "auto"):
        super().__init__(mean_approx=True, n_inducing=n_inducing, variational=variational, optimizer=optimizer,
                         max_iter=max_iter, n_mc=n_mc, mc_draws=mc_draws, n_predict_samples=n_predict_samples,
                         ce_estimator=ce_estimator, device=device, random_state=random_state,
                         prior_split=prior_split, prob_input=prob_input, mc_classes=mc_classes, staged=staged)


@register
class PBR(_GPRecalibrator):
    __doc__ = """PAC-Bayes recalibration (Fujisawa & Futami, 2025; Algorithm 1).

    ``objective="pbr"`` minimises paper Eq. vi_obj2, mean_n E_q ||e_y - softmax(f_n)||^2 + alpha KL / n;
    ``objective="pbr_total"`` minimises Eq. vi_obj3, mean_n E_q CE_n + mean_n E_q Brier_n + alpha KL / n.
    Expectations by Monte Carlo with S fixed draws (common random numbers), over the latent GP of
    GP_SPEC section 1. Predictions average softmax over J posterior draws (Algorithm 1, line 5).

    Parameters
    ----------
    alpha : float, default 0.5
        KL weight; the paper's grid is {0, .01, .1, .25, .5, .75, .9, 1}
        (:class:`~pbr_core.recalibrators.pbr_cv.PBRCV` chooses it by cross-validation).
    objective : {"pbr", "pbr_total"}
    mean_approx : bool, default False
        Predict with softmax(mu) (the "PBR app." variants).""" + _DOC_COMMON + _DOC_ATTRIBUTES + """
    References
    ----------
    .. [1] H. Fujisawa and F. Futami. PAC-Bayes analysis for recalibration in classification.
       ICML 2025, Section 5.2, Eqs. vi_obj2 and vi_obj3, Algorithm 1.
    .. [2] J. Wenger, H. Kjellstroem and R. Triebel. Non-parametric calibration for classification.
       AISTATS 2020.

    Examples
    --------
    >>> import numpy as np
    >>> from pbr_core.recalibrators.gp import PBR
    >>> d = np.load("sample_data/cifar10_resnet110.npz")
    >>> r = PBR(alpha=0.5, objective="pbr_total", max_iter=50).fit(d["logits"][:200].astype(float), d["labels"][:200])
    >>> r.kl_ >= 0 and sorted(r.bounds_)[:2]
    ['corollary1', 'corollary2']
    """

    method: ClassVar[str] = "pbr"
    label: ClassVar[str] = "PBR"
    variant: ClassVar[tuple[str, bool]] = ("pbr", False)
    _parameter_constraints: ClassVar[dict[str, Constraint]] = {
        "objective": _OBJECTIVE, "alpha": _ALPHA, **_GPRecalibrator._gp_constraints}

    def __init__(self, alpha: float = 0.5, objective: str = "pbr", mean_approx: bool = False, n_inducing: int = 10,
                 variational: str = "mean_field", optimizer: str = "lbfgs", max_iter: int = 1000, n_mc: int | str = "auto",
                 mc_draws: str = "antithetic",
                 n_predict_samples: int = 100, device: str = "auto", random_state: int = 0,
                 prior_split: float = 0.0, prob_input: str = "wenger", mc_classes: int | str = "auto",
                 staged: bool | str = "auto"):
        self.alpha = alpha
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
        self.prior_split = prior_split
        self.prob_input = prob_input
        self.staged = staged


class _FixedPBR(PBR):
    """A registered PBR variant: ``objective`` and ``mean_approx`` are fixed by the class (its
    ``variant``), not constructor parameters."""

    def __init__(self, alpha: float = 0.5, n_inducing: int = 10, variational: str = "mean_field",
                 optimizer: str = "lbfgs", max_iter: int = 1000, n_mc: int | str = "auto", mc_draws: str = "antithetic",
                 n_predict_samples: int = 100,
                 device: str = "auto", random_state: int = 0, prior_split: float = 0.0, prob_input: str = "wenger",
                 mc_classes: int | str = "auto", staged: bool | str = "auto"):
        objective, mean_approx = self.variant
        super().__init__(alpha=alpha, objective=objective, mean_approx=mean_approx, n_inducing=n_inducing,
                         variational=variational, optimizer=optimizer, max_iter=max_iter, n_mc=n_mc, mc_draws=mc_draws,
                         n_predict_samples=n_predict_samples, device=device, random_state=random_state,
                         prior_split=prior_split, prob_input=prob_input, mc_classes=mc_classes, staged=staged)


_VARIANT_DOC = """

    :class:`PBR` with ``objective="{0}"`` and ``mean_approx={1}`` fixed.

    Parameters
    ----------
    See :class:`PBR`.

    References
    ----------
    .. [1] H. Fujisawa and F. Futami. PAC-Bayes analysis for recalibration in classification.
       ICML 2025, Section 5.2 and Appendix F.
    """


@register
class PBRTotal(_FixedPBR):
    __doc__ = "PBR total (paper Eq. vi_obj3): CE + Brier + alpha KL / n." + _VARIANT_DOC.format("pbr_total", False)

    method: ClassVar[str] = "pbr_total"
    label: ClassVar[str] = "PBR total"
    variant: ClassVar[tuple[str, bool]] = ("pbr_total", False)


@register
class PBRApp(_FixedPBR):
    __doc__ = ("PBR app.: PBR (Eq. vi_obj2) predicting with the mean approximation softmax(mu)."
               + _VARIANT_DOC.format("pbr", True))

    method: ClassVar[str] = "pbr_app"
    label: ClassVar[str] = "PBR (app.)"
    variant: ClassVar[tuple[str, bool]] = ("pbr", True)


@register
class PBRTotalApp(_FixedPBR):
    __doc__ = ("PBR app. total: PBR total (Eq. vi_obj3) predicting with softmax(mu)."
               + _VARIANT_DOC.format("pbr_total", True))

    method: ClassVar[str] = "pbr_total_app"
    label: ClassVar[str] = "PBR total (app.)"
    variant: ClassVar[tuple[str, bool]] = ("pbr_total", True)
