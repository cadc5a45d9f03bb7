"""The types of one GP fit: what it is given and what it reports (GP_SPEC section 3).

:class:`FitData` (the tensors and the objective), :class:`TrainSettings` (the optimiser settings),
:class:`TrainCheck` (the final training-set check) and :class:`FitReport` (what the fit did). They
live apart from :mod:`pbr_core.gp.training`, which runs the fit, so that the optimisers
(:mod:`pbr_core.gp.optimizers`) can share the settings without importing the training code: an
optimiser gets an objective closure and the model's parameters, never a :class:`FitData`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from typing import Callable, Literal

import numpy as np
import torch

from pbr_core.gp.model import GPRecalibrationModel, MarginalGrid
from pbr_core.gp.objectives import ClassSplit, ObjectiveSpec, ObjectiveTerms, evaluate_objective, split_classes, tail_error

Optimizer = Literal["lbfgs", "adam"]



#: Fits on a CPU interpolate the marginals between grid nodes (:class:`~pbr_core.gp.model.MarginalGrid`,
#: exact to ~1e-9; benchmarks/RESULTS_fast_pbr.md, round 5); False computes them at every input.
#: On a GPU the marginals are computed at every input (launch-bound there; the grid is not measured).
INTERPOLATE_MARGINALS = True


@dataclass
class FitData:
    """Tensors of one (possibly batched) fitting problem, all on the model's device.

    z : (*batch, N, K) scores; labels : (*batch, N); weights : (*batch, N) 0/1 or None;
    eps : (*batch, N, S, K) or (N, S, K) fixed draws or None. The KL weight alpha is
    ``spec.alpha`` (one value per GP of a batch: see :class:`~pbr_core.gp.objectives.ObjectiveSpec`).
    """

    z: torch.Tensor
    labels: torch.Tensor
    spec: ObjectiveSpec
    eps: torch.Tensor | None = None
    weights: torch.Tensor | None = None
    #: Draw only some classes of each row, the tail through its moments (:class:`ClassSplit`); None:
    #: every class is drawn. ``terms(model, exact=True)`` evaluates the objective on all classes.
    split: ClassSplit | None = None
    #: Interpolation grids of ``z`` (:class:`~pbr_core.gp.model.MarginalGrid`), by "GP input is p";
    #: shared by the copies :meth:`with_mc_draws` and :meth:`with_alpha` make (the same ``z``).
    _grids: dict = field(default_factory=dict, repr=False, compare=False)

    def _grid(self, model: GPRecalibrationModel) -> MarginalGrid | None:
        """The interpolation grid of ``z`` for ``model``'s input space (built once; None where the
        marginals are computed at every input: ``INTERPOLATE_MARGINALS`` off, or not on a CPU)."""
        if not INTERPOLATE_MARGINALS or self.z.is_cuda:
            return None
        key = model.input_kind == "probs"
        if self._grids.get(key) is None:
            self._grids[key] = model.grid_for(self.z)
        return self._grids[key]

    def with_mc_draws(self, n_draws: int) -> "FitData":
        """The same problem with only the first ``n_draws`` of the fixed draws (a cheaper objective)."""
        if self.eps is None or n_draws >= self.eps.shape[-2]:
            return self
        split = None if self.split is None else self.split.with_mc_draws(n_draws)
        return replace(self, eps=self.eps[..., :n_draws, :].contiguous(), split=split)

    def with_split(self, n_exact: int | None) -> "FitData":
        """The same problem drawing only each row's ``n_exact`` largest scores and its label
        (:class:`ClassSplit`); every class for None, for ``n_exact`` >= K, or without draws."""
        if n_exact is None or self.eps is None or n_exact >= self.z.shape[-1]:
            return self.exact()
        return replace(self, split=split_classes(self.z, self.labels, self.eps, n_exact))

    def refined(self) -> "FitData":
        """The same problem drawing twice as many classes per row (every class from K / 2 on)."""
        return self if self.split is None else self.with_split(2 * self.split.n_exact)

    def exact(self) -> "FitData":
        """The same problem with every class drawn (no :class:`ClassSplit`)."""
        return self if self.split is None else replace(self, split=None)

    def with_alpha(self, alpha: float) -> "FitData":
        """The same (unbatched) problem with KL weight ``alpha``."""
        return replace(self, spec=replace(self.spec, alpha=alpha))

    def member(self, index: tuple[int, ...]) -> "FitData":
        """The unbatched problem of batch entry ``index`` (its real rows only, its own alpha)."""
        keep = slice(None)
        if self.weights is not None:
            keep = self.weights[index] > 0
        eps = None
        if self.eps is not None:
            eps = self.eps[index] if self.eps.dim() == self.z.dim() + 1 else self.eps
            eps = eps[keep]
        spec = self.spec
        if isinstance(spec.alpha, tuple):
            spec = replace(spec, alpha=spec.alpha[int(np.ravel_multi_index(index, tuple(self.z.shape[:-2])))])
        split = None if self.split is None else self.split.rows(index, keep)
        return FitData(z=self.z[index][keep], labels=self.labels[index][keep], spec=spec, eps=eps, weights=None,
                       split=split)

    def terms(self, model: GPRecalibrationModel, exact: bool = False) -> ObjectiveTerms:
        """The objective and its parts at ``model``'s parameters (``exact``: every class drawn,
        even where the problem has a :class:`ClassSplit`)."""
        mu, var = model.marginals(self.z, self._grid(model))
        return evaluate_objective(mu, var, self.labels, model.kl_divergence(), self.spec, self.eps, self.weights,
                                  split=None if exact else self.split)

    def tail_error(self, model: GPRecalibrationModel) -> torch.Tensor | None:
        """:func:`~pbr_core.gp.objectives.tail_error` at ``model``'s parameters relative to the
        objective (of this split), per GP; None without a split. One computation of the marginals."""
        if self.split is None:
            return None
        with torch.no_grad():
            mu, var = model.marginals(self.z, self._grid(model))
            total = evaluate_objective(mu, var, self.labels, model.kl_divergence(), self.spec, self.eps, self.weights,
                                       split=self.split).total
            return tail_error(mu, var, self.split, self.weights) / total.abs().clamp_min(1e-12)

    def objective(self, model: GPRecalibrationModel) -> Callable[[], torch.Tensor]:
        """The closure an optimiser minimises: the objective of ``model``'s current parameters,
        one value per GP (the model's batch shape)."""
        return lambda: self.terms(model).total


@dataclass
class TrainSettings:
    """Optimiser settings (defaults: see :mod:`pbr_core.gp.training` and the design notes)."""

    optimizer: Optimizer = "lbfgs"
    max_iter: int = 1000
    warmup_iter: int = 100
    warmup_mc: int = 10
    lbfgs_coarse_mc: int = 0
    lbfgs_lr: float = 1.0
    lbfgs_history: int = 100
    tol_grad: float = 1e-8
    tol_change: float = 1e-11
    rtol: float = 1e-6
    adam_lr: float = 0.05
    adam_patience: int = 50
    adam_rtol: float = 1e-5
    max_retries: int = 3
    check_rtol: float = 0.02
    check_atol: float = 2e-3
    escape_prior: bool = True


@dataclass
class TrainCheck:
    """How to verify a fit on its own training data: "predictions not worse than the input".

    metric: "nll" (GP calibration), "brier" (PBR) or "nll+brier" (PBR total); the prediction is
    the one the recalibrator will return (``mean_approx``, ``n_samples``, ``seed``).
    """

    metric: Literal["nll", "brier", "nll+brier"]
    mean_approx: bool = False
    n_samples: int = 100
    seed: int = 0


@dataclass
class FitReport:
    """What one fit did (GP_SPEC section 3; the dashboard and benchmarks show it).

    ``objective``, ``ce``, ``brier`` and ``kl`` are the final values of the minimised objective and
    its terms (``ce`` / ``brier`` are None when absent); ``train_check`` compares the training-set
    metric of the recalibrated prediction with the uncalibrated input. ``ended_at_prior``: the
    fitted GP's mean moves no training score by ``pbr_core.gp.training.PRIOR_SHIFT`` or more, so
    the fit did not move from its prior and the recalibrated predictions are (nearly) the
    uncalibrated ones; decided once, on the final model, by :func:`pbr_core.gp.training.fit_gp`,
    and read by the CLI, the dashboard and the experiments
    (:func:`pbr_core.experiments.ended_at_prior`). ``continued``: the result is a continuation of
    the given start (``fit_gp(start=...)``); False for a fit from the prior, including one redone
    from the prior after a continuation failed its training check (its ``warnings`` say so).
    """

    iterations: int
    evaluations: int
    objective: float
    ce: float | None
    brier: float | None
    kl: float
    wall_time_s: float
    device: str
    optimizer: str
    converged: bool
    stop_reason: str
    jitter: float
    restarts: int = 0
    train_check: dict = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    ended_at_prior: bool = False
    continued: bool = False
    #: T, the classes of each row the fit drew (:class:`~pbr_core.gp.objectives.ClassSplit`); None: all.
    mc_classes: int | None = None
    #: With ``mc_classes``: the split's error estimate at the end (:func:`~pbr_core.gp.objectives.tail_error`)
    #: relative to the objective; where it exceeded ``MC_TAIL_TOLERANCE`` the fit continued drawing twice
    #: as many classes (or all), so it is within that tolerance unless the fit ended drawing every class.
    mc_tail_error: float | None = None
    #: A fit in stages (:mod:`pbr_core.gp.staged`): per stage its rows, draws per entry (``n_mc``),
    #: iterations, evaluations, final objective and stop reason; None for a full-batch fit.
    stages: list[dict] | None = None

    def to_dict(self) -> dict:
        out = asdict(self)
        if out["stages"] is None:  # a full-batch fit: its report (and saved file) as before the stages
            del out["stages"]
        return out
