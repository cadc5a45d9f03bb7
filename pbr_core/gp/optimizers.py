"""The two optimisers of the GP fits and their failure signals (GP_SPEC section 3).

:func:`run_lbfgs` runs :class:`LBFGS` (``torch.optim.LBFGS``'s algorithm and strong-Wolfe line
search, without the ``torch.optim`` base class) in chunks of ``CHUNK`` iterations with a known-good
snapshot; :func:`run_adam` is a vectorised Adam with a step size,
best-so-far snapshot, divergence restarts and stopping rule per GP of a batch. Both leave the
model at good parameters when they raise. As with ``torch.optim``, an optimiser gets the
parameters (the model's) and an ``objective()`` closure, not the caller's problem: it knows nothing
of the data or the objective's terms. The policy around them (retries, jitter, switching
optimiser, the training-set check) lives in :mod:`pbr_core.gp.training`.
"""

from __future__ import annotations

import math
from typing import Callable

import numpy as np
import torch
# torch's strong-Wolfe line search: importing this module does not import torch._dynamo (only
# constructing a torch.optim optimiser does; see LBFGS below).
from torch.optim.lbfgs import _strong_wolfe

from pbr_core.cancel import checkpoint
from pbr_core.gp.model import GPRecalibrationModel, NotPositiveDefiniteError
from pbr_core.gp.problem import TrainSettings
from pbr_core.progress import Progress

#: ``objective()``: the objective at the model's current parameters, one value per GP of the batch
#: (a scalar for one GP), with a graph for ``backward()`` when gradients are enabled.
Closure = Callable[[], torch.Tensor]

#: L-BFGS iterations per ``step`` call (snapshot / progress granularity).
CHUNK = 10

#: Factor applied to a diverging GP's Adam step size before it restarts from its best parameters.
ADAM_BACKOFF = 0.25


class DivergenceError(RuntimeError):
    """NaN / inf objective or gradient, or an objective that jumped up."""


# ---------------------------------------------------------------------- helpers
def snapshot(model: GPRecalibrationModel) -> dict[str, torch.Tensor]:
    return {name: p.detach().clone() for name, p in model.named_parameters()}


def restore(model: GPRecalibrationModel, snap: dict[str, torch.Tensor], members: torch.Tensor | None = None) -> None:
    with torch.no_grad():
        for name, p in model.named_parameters():
            if members is None:
                p.copy_(snap[name])
            else:
                p[members] = snap[name][members]


def batch_size(model: GPRecalibrationModel) -> int:
    return int(np.prod(model.batch_shape)) if len(model.batch_shape) else 1


# ---------------------------------------------------------------------- L-BFGS
def _host(t: torch.Tensor) -> np.ndarray:
    """A float64 NumPy copy of a (small) tensor."""
    return t.detach().to("cpu", torch.float64).numpy().copy()


def _two_loop(g: np.ndarray, dirs: list[np.ndarray], stps: list[np.ndarray], ro: list[float],
              h_diag: float) -> np.ndarray:
    """L-BFGS's two-loop recursion (torch.optim.LBFGS's): the direction -H g from the curvature pairs
    y = ``dirs``, s = ``stps`` (oldest first), rho = 1 / y^T s = ``ro`` and the initial scaling ``h_diag``."""
    q = -g
    al = [0.0] * len(dirs)
    for i in range(len(dirs) - 1, -1, -1):
        al[i] = float(stps[i] @ q) * ro[i]
        q -= al[i] * dirs[i]
    r = q * h_diag
    for i in range(len(dirs)):
        be_i = float(dirs[i] @ r) * ro[i]
        r += (al[i] - be_i) * stps[i]
    return r


class LBFGS:
    """``torch.optim.LBFGS`` with strong-Wolfe line search, iteration for iteration the same
    algorithm, without the ``torch.optim.Optimizer`` base class, with the objective carried from one
    :meth:`step` to the next and the two-loop recursion on the host (:func:`_two_loop`).

    Why not ``torch.optim.LBFGS`` itself (measured, benchmarks/RESULTS_fast_pbr.md):

    * constructing any ``torch.optim`` optimiser imports ``torch._dynamo`` (its
      ``add_param_group`` is wrapped by ``torch._disable_dynamo``): ~1.5 CPU s once per process,
      a third of a whole PBR fit at K = 10 for every CLI run;
    * every ``step`` call of torch's re-evaluates the objective at the point where the previous
      call's line search ended (the same value and gradient, already computed), and the chunked
      loop of :func:`run_lbfgs` evaluated it once more to check for an increase: two of every
      ~12 evaluations of a chunk of 10 iterations were repeats.

    The state (directions, step, curvature pairs, H_diag) and every update, test and the line
    search (torch's own ``_strong_wolfe``) are torch's, so a fit follows the path it followed with
    ``torch.optim.LBFGS`` to round-off (the host's arithmetic has no fused multiply-add: ~1e-11 in
    the parameters after 80 iterations; a test pins them to 1e-9).
    """

    def __init__(self, params: list[torch.nn.Parameter], lr: float = 1.0, max_eval: int = CHUNK * 30,
                 history_size: int = 20, tolerance_grad: float = 1e-7, tolerance_change: float = 1e-9):
        self.params = params
        self.lr, self.max_eval, self.history_size = lr, max_eval, history_size
        self.tolerance_grad, self.tolerance_change = tolerance_grad, tolerance_change
        self.n_iter = 0  # iterations over all steps (torch's state["n_iter"])
        self.loss: float | None = None  # objective and flat gradient at the current parameters
        self.flat_grad: torch.Tensor | None = None
        self.d = self.t = None
        # The direction, the previous gradient and the curvature pairs (y, s) with 1 / y^T s, in float64
        # NumPy on the host (see step).
        self.d_np: np.ndarray | None = None
        self.prev_np: np.ndarray | None = None
        self.old_dirs: list[np.ndarray] = []
        self.old_stps: list[np.ndarray] = []
        self.ro: list[float] = []
        self.h_diag = 1.0

    def _gather_flat_grad(self) -> torch.Tensor:
        return torch.cat([p.new_zeros(p.numel()) if p.grad is None else p.grad.view(-1) for p in self.params], 0)

    def _add_grad(self, step_size: float, update: torch.Tensor) -> None:
        offset = 0
        for p in self.params:
            numel = p.numel()
            p.add_(update[offset:offset + numel].view_as(p), alpha=step_size)
            offset += numel

    def evaluate(self, closure: Callable[[], torch.Tensor]) -> tuple[float, torch.Tensor]:
        """Objective and flat gradient at the current parameters (``closure`` runs with gradients).

        Raises DivergenceError when the gradient is not finite: checked once on the flat gradient
        (two operations), where a check parameter by parameter in the closure cost ~4 % of a K = 10 fit.
        """
        with torch.enable_grad():
            loss = float(closure().detach())
        flat = self._gather_flat_grad()
        if not bool(torch.isfinite(flat).all()):
            raise DivergenceError("the gradient became NaN or infinite during the L-BFGS line search")
        return loss, flat

    def _directional_evaluate(self, closure, x: list[torch.Tensor], t: float, d: torch.Tensor):
        self._add_grad(t, d)
        loss, flat_grad = self.evaluate(closure)
        for p, pdata in zip(self.params, x):
            p.copy_(pdata)
        return loss, flat_grad

    @torch.no_grad()
    def step(self, closure: Callable[[], torch.Tensor], max_iter: int) -> int:
        """At most ``max_iter`` iterations, as one ``torch.optim.LBFGS(max_iter=max_iter).step``.

        Returns the iterations done: fewer than ``max_iter`` when torch's tolerances stopped it
        (gradient, directional derivative, step or objective change) or ``max_eval`` was used up.
        """
        if self.loss is None:
            self.loss, self.flat_grad = self.evaluate(closure)
        loss, flat_grad = self.loss, self.flat_grad
        current_evals = 1  # torch counts its (here carried) evaluation at the start of a step
        if flat_grad.abs().max() <= self.tolerance_grad:
            return 0
        d, d_np, t, h_diag, prev_np = self.d, self.d_np, self.t, self.h_diag, self.prev_np
        old_dirs, old_stps, ro = self.old_dirs, self.old_stps, self.ro
        n_iter = 0
        while n_iter < max_iter:
            n_iter += 1
            self.n_iter += 1
            g_np = _host(flat_grad)
            if self.n_iter == 1:
                d = flat_grad.neg()
                d_np = -g_np
                old_dirs, old_stps, ro, h_diag = [], [], [], 1.0
            else:
                # The direction on the host in float64 NumPy: the parameter vector is tiny (3M + 3),
                # and torch's two-loop recursion made ~5 operations per stored pair and loop (a
                # tensor ``alpha`` synchronising each time): with a history of 100 pairs, ~1000 torch
                # operations per iteration, ~10 % of PBR total's L-BFGS time at K = 10 (py-spy).
                # The same formulas in the same order (round-off aside: no fused multiply-add).
                y = g_np - prev_np
                s = d_np * float(t)
                ys = float(y @ s)
                if ys > 1e-10:
                    if len(old_dirs) == self.history_size:
                        old_dirs.pop(0)
                        old_stps.pop(0)
                        ro.pop(0)
                    old_dirs.append(y)
                    old_stps.append(s)
                    ro.append(1.0 / ys)
                    h_diag = ys / float(y @ y)
                d_np = _two_loop(g_np, old_dirs, old_stps, ro, h_diag)
                d = torch.as_tensor(d_np, dtype=flat_grad.dtype, device=flat_grad.device)
            prev_np = g_np
            prev_loss = loss
            t = min(1.0, 1.0 / flat_grad.abs().sum()) * self.lr if self.n_iter == 1 else self.lr
            gtd = flat_grad.dot(d)
            if gtd > -self.tolerance_change:
                break
            x_init = [p.clone(memory_format=torch.contiguous_format) for p in self.params]
            loss, flat_grad, t, ls_func_evals = _strong_wolfe(
                lambda x, step, direction: self._directional_evaluate(closure, x, step, direction),
                x_init, t, d, loss, flat_grad, gtd, max_ls=self.max_eval - current_evals)
            self._add_grad(t, d)
            opt_cond = flat_grad.abs().max() <= self.tolerance_grad
            current_evals += ls_func_evals
            if n_iter == max_iter or current_evals >= self.max_eval or opt_cond:
                break
            if d.mul(t).abs().max() <= self.tolerance_change or abs(loss - prev_loss) < self.tolerance_change:
                break
        self.loss, self.flat_grad = loss, flat_grad
        self.d, self.d_np, self.t, self.h_diag, self.prev_np = d, d_np, t, h_diag, prev_np
        self.old_dirs, self.old_stps, self.ro = old_dirs, old_stps, ro
        return n_iter


def run_lbfgs(model: GPRecalibrationModel, objective: Closure, settings: TrainSettings, lr: float, start_iter: int,
               budget: int, progress: Progress | None, counters: dict,
               params: list[torch.nn.Parameter] | None = None) -> tuple[int, bool, str]:
    """L-BFGS on the sum of ``objective()`` from the current parameters for at most ``budget`` iterations.

    Returns (iterations done, converged, reason). Raises NotPositiveDefiniteError / DivergenceError
    with the parameters left at the last good snapshot.
    """
    # max_eval is generous so that "fewer than CHUNK iterations" means the tolerances stopped it.
    params = list(model.parameters()) if params is None else params
    opt = LBFGS(params, lr=lr, max_eval=CHUNK * 30, history_size=settings.lbfgs_history,
                tolerance_grad=settings.tol_grad, tolerance_change=settings.tol_change)

    def closure():
        # Every evaluation, line-search ones included: one step of CHUNK iterations can make
        # hundreds of them (tens of seconds at n = 1000, K = 100), too long to wait for a Stop.
        checkpoint()
        for p in params:
            if p.grad is not None:
                p.grad.zero_()
        loss = objective().sum()
        counters["evaluations"] += 1
        if not bool(torch.isfinite(loss)):
            raise DivergenceError(f"the objective became {float(loss.detach())} during the L-BFGS line search")
        loss.backward()  # a gradient that is not finite raises in LBFGS.evaluate
        return loss

    good = snapshot(model)
    done = 0
    try:
        # The objective and gradient here are where the first step starts: it does not evaluate
        # them a second time (the same values; one evaluation less per run).
        prev, grad = opt.evaluate(closure)
        opt.loss, opt.flat_grad = prev, grad
    except (NotPositiveDefiniteError, DivergenceError):
        restore(model, good)
        counters["iterations"] = start_iter
        raise
    while done < budget:
        try:
            it = opt.step(closure, CHUNK)
        except (NotPositiveDefiniteError, DivergenceError):
            restore(model, good)
            counters["iterations"] = start_iter + done
            raise
        done += max(it, 1)
        loss = opt.loss  # the objective at the parameters the step ended on (evaluated by its line search)
        if not math.isfinite(loss) or loss > prev + 1e-9 * max(1.0, abs(prev)):
            restore(model, good)
            counters["iterations"] = start_iter + done
            raise DivergenceError(f"the objective increased from {prev:.6g} to {loss:.6g} under L-BFGS")
        good = snapshot(model)
        if progress is not None:
            progress(start_iter + done, settings.max_iter, f"objective {loss:.6g}")
        if it < CHUNK:  # stopped on its own tolerances (gradient or change)
            return done, True, "tolerance (L-BFGS: gradient or objective change)"
        if prev - loss <= settings.rtol * max(1.0, abs(loss)):
            return done, True, f"objective change over {CHUNK} iterations below rtol={settings.rtol:g}"
        prev = loss
    return done, False, f"reached max_iter={settings.max_iter}"


# ---------------------------------------------------------------------- Adam (vectorised over the batch)
def _adam_update_one(params: list[torch.nn.Parameter], m1: list[torch.Tensor], m2: list[torch.Tensor],
                     step_size: float, bc2: float, beta1: float, beta2: float, eps: float) -> bool:
    """The Adam update of :func:`run_adam` for one (unbatched, active) GP with finite gradients, as
    a few list-wide (``torch._foreach_*``) operations instead of ~20 small ones per parameter: the
    same IEEE operations in the same order (products and sums rounded separately, no fused
    multiply-add), so the same result bit for bit (a test pins it). ``step_size`` = lr / bc1.
    Returns False, changing nothing, where a gradient is not finite (the general path handles it)."""
    grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in params]
    if not bool(torch.isfinite(torch.stack(torch._foreach_norm(grads))).all()):
        return False
    with torch.no_grad():
        c1, c2 = (1 - beta1) * 1.0, (1 - beta2) * 1.0  # as the general path's (1 - beta) * act, act = 1
        torch._foreach_mul_(m1, 1 - c1)
        torch._foreach_add_(m1, torch._foreach_mul(grads, c1))
        sq = torch._foreach_mul(grads, c2)
        torch._foreach_mul_(sq, grads)
        torch._foreach_mul_(m2, 1 - c2)
        torch._foreach_add_(m2, sq)
        den = torch._foreach_div(m2, bc2)
        torch._foreach_sqrt_(den)
        torch._foreach_add_(den, eps)
        upd = torch._foreach_mul(m1, step_size)
        torch._foreach_div_(upd, den)
        torch._foreach_sub_(params, upd)
    return True


def run_adam(model: GPRecalibrationModel, objective: Closure, settings: TrainSettings, start_iter: int, budget: int,
              progress: Progress | None, counters: dict) -> tuple[int, torch.Tensor, list[str], torch.Tensor]:
    """Adam on ``objective()`` with a step size, best snapshot and stopping rule per GP of the batch.

    Returns (iterations done, converged mask (B,), reasons per GP, restarts per GP). The model is
    left at each GP's best parameters. Raises DivergenceError when a GP keeps diverging.
    """
    batched = len(model.batch_shape) > 0
    b = batch_size(model)
    params = [p for p in model.parameters()]
    names = [n for n, _ in model.named_parameters()]
    dev, dt = params[0].device, params[0].dtype
    lr = torch.full((b,), settings.adam_lr, dtype=dt, device=dev)
    beta1, beta2, eps_adam = 0.9, 0.999, 1e-8
    m1 = [torch.zeros_like(p) for p in params]
    m2 = [torch.zeros_like(p) for p in params]
    steps = torch.zeros(b, dtype=dt, device=dev)
    active = torch.ones(b, dtype=torch.bool, device=dev)
    best = torch.full((b,), math.inf, dtype=dt, device=dev)
    best_at = torch.zeros(b, dtype=torch.long, device=dev)
    last_improve = torch.full((b,), math.inf, dtype=dt, device=dev)
    restarts = torch.zeros(b, dtype=torch.long, device=dev)
    reasons = [f"reached max_iter={settings.max_iter}"] * b
    best_snap = snapshot(model)

    def per_member(t: torch.Tensor, p: torch.Tensor) -> torch.Tensor:
        return t.reshape(b, *([1] * (p.dim() - 1))) if batched else t.reshape(())

    def loss_vector() -> torch.Tensor:
        return objective().reshape(b)

    for step in range(budget):
        checkpoint()
        for p in params:
            p.grad = None
        try:
            losses = loss_vector()
        except NotPositiveDefiniteError:
            restore(model, best_snap)
            counters["iterations"] = start_iter + step
            raise
        counters["evaluations"] += 1
        bad = ~torch.isfinite(losses)
        # A jump well above the best value is divergence too (Adam may wobble a little).
        bad |= losses > best + 0.5 * best.abs() + 0.1
        if bool(bad.any()):
            bad &= active
            if bool(bad.any()):
                restarts += bad.long()
                if bool((restarts > settings.max_retries * 2).any()):
                    restore(model, best_snap)
                    counters["iterations"] = start_iter + step
                    raise DivergenceError(
                        f"Adam kept diverging (objective {losses[bad].tolist()[:3]}) after "
                        f"{int(restarts.max())} restarts with smaller steps"
                    )
                restore(model, best_snap, bad if batched else None)
                lr = torch.where(bad, lr * ADAM_BACKOFF, lr)
                with torch.no_grad():
                    for mm1, mm2 in zip(m1, m2):
                        if batched:
                            mm1[bad] = 0
                            mm2[bad] = 0
                        else:
                            mm1.zero_()
                            mm2.zero_()
                steps = torch.where(bad, torch.zeros_like(steps), steps)
                continue
        finite_total = torch.where(torch.isfinite(losses), losses, torch.zeros_like(losses)).sum()
        finite_total.backward()
        with torch.no_grad():
            improved = active & (losses < best)
            if bool(improved.any()):
                better = improved & (losses < best - settings.adam_rtol * torch.clamp(best.abs(), min=1.0))
                last_improve = torch.where(better, torch.full_like(last_improve, float(step)), last_improve)
                last_improve = torch.where(torch.isinf(last_improve) & improved,
                                           torch.full_like(last_improve, float(step)), last_improve)
                best = torch.where(improved, losses.detach(), best)
                best_at = torch.where(improved, torch.full_like(best_at, step), best_at)
                for name, p in zip(names, params):
                    if batched:
                        best_snap[name][improved] = p.detach()[improved]
                    else:
                        best_snap[name].copy_(p.detach())
            stalled = active & (step - last_improve >= settings.adam_patience)
            if bool(stalled.any()):
                for i in torch.nonzero(stalled).flatten().tolist():
                    reasons[i] = (f"no relative improvement > {settings.adam_rtol:g} in "
                                  f"{settings.adam_patience} Adam steps")
                active &= ~stalled
            if not bool(active.any()):
                restore(model, best_snap)
                return step + 1, torch.ones(b, dtype=torch.bool, device=dev), reasons, restarts
            steps = steps + active.to(dt)
            bc1 = 1 - beta1 ** steps.clamp(min=1)
            bc2 = 1 - beta2 ** steps.clamp(min=1)
            if batched or not _adam_update_one(params, m1, m2, float((lr / bc1).reshape(())),
                                               float(bc2.reshape(())), beta1, beta2, eps_adam):
                for p, mm1, mm2 in zip(params, m1, m2):
                    g = p.grad if p.grad is not None else torch.zeros_like(p)
                    g = torch.where(torch.isfinite(g), g, torch.zeros_like(g))
                    act = per_member(active.to(dt), p)
                    mm1.mul_(1 - (1 - beta1) * act).add_((1 - beta1) * act * g)
                    mm2.mul_(1 - (1 - beta2) * act).add_((1 - beta2) * act * g * g)
                    upd = per_member(lr / bc1, p) * mm1 / ((mm2 / per_member(bc2, p)).sqrt() + eps_adam)
                    p.sub_(act * upd)
        if progress is not None and (step + 1) % CHUNK == 0:
            progress(start_iter + step + 1, settings.max_iter, f"objective {float(best.sum()):.6g}")
    restore(model, best_snap)
    converged = ~active
    return budget, converged, reasons, restarts
