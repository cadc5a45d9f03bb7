"""Objectives on the marginals of q(f): GP calibration, PBR and PBR total (GP_SPEC section 2).

All are minimised; n is the number of recalibration samples and KL = KL(q(v) || N(0, I)).

* GP calibration (Wenger et al.'s ELBO / n; the paper's baseline):
  mean_n CE_n + KL / n, with Wenger's deterministic 2nd-order Taylor expansion of the expected
  log-softmax around pi = softmax(mu_n) (:func:`expected_log_softmax_taylor`).
* PBR (paper Eq. vi_obj2): mean_n E_q ||e_y - softmax(f_n)||^2 + alpha KL / n.
* PBR total (paper Eq. vi_obj3): mean_n E_q CE_n + mean_n E_q Brier_n + alpha KL / n.

The expectations of PBR and PBR total use Monte Carlo with the reparameterisation trick,
f = mu + sqrt(var) * eps with S draws eps ~ N(0, I) per (n, k), drawn ONCE before the optimisation
and kept fixed (common random numbers), so the objective is a deterministic smooth function of
the parameters and L-BFGS line searches stay valid.

The identity of the paper (Section 5.2): "Eq. vi_obj3 corresponds to [the GP-calibration] ELBO
objective when alpha = 1 and the Brier score is removed". With :class:`ObjectiveSpec` this is exact
when both use the SAME CE estimator: ``ObjectiveSpec.pbr_total(alpha=1, brier=False, ce=e)`` and
``ObjectiveSpec.gp_calibration(ce=e)`` are the same spec for e in {"taylor", "mc"}. With the
defaults they differ only in the estimator (GP calibration: Taylor, as Wenger; PBR total: Monte
Carlo, as GP_SPEC section 2 says), i.e. by the Taylor error, which vanishes as var -> 0.
"""

from __future__ import annotations

import math
import weakref
from dataclasses import dataclass, replace
from typing import Literal

import numpy as np
import torch

from pbr_core.cancel import checkpoint
from pbr_core.predictions import softmax

CEEstimator = Literal["none", "taylor", "mc"]

#: From this many classes on, :class:`_MCExpectations` uses torch's fused softmax when only the
#: Brier term is wanted (faster on long rows; measured per entry on a CPU core: K = 100 float32
#: 1.0 ns fused vs 1.1 ns written out, K = 10 23 ns vs 3.5 ns). With the cross entropy the passes
#: are written out at every K: they give log sum exp for free, which the fused softmax would need a
#: second exp pass (torch.logsumexp) for. CE + Brier at K = 100, n = 1000, S = 16, forward +
#: backward: 18.1 against 20.4 ms at a fitted PBR total's marginals, 17.9 against 26.5 ms on random
#: ones (benchmarks/RESULTS_fast_pbr.md, round 6). Measured in the (N, S, K) layout of the draws; in
#: today's (S, K, N) layout (:func:`kernel_draws`) the fused softmax over K and the written-out passes
#: cost about the same from 32 classes on (1.13 / 1.22 ms at K = 32, S = 32; 2.12 / 1.92 ms at K = 100,
#: S = 16; n = 1000, a loaded machine), so the threshold stays.
SOFTMAX_MIN_CLASSES = 32

#: dtype of the fixed draws of the fits (pbr_core.recalibrators.gp, pbr_core.gp.batch), hence of the
#: Monte Carlo work (see :class:`_MCExpectations`); read at fit time. float32 by default: the
#: Monte Carlo passes are 1.4-2x cheaper than in float64 while mu, var, every per-row result, the sums
#: over rows, the gradients, K_uu, its Cholesky and the KL stay float64 (GP_SPEC section 1). Measured
#: against float64 fits on the quality grid of benchmarks/RESULTS_fast_pbr.md (with the L-BFGS stop
#: rule of stop 19; under the looser earlier rule one float32 fit stopped 20 iterations early and
#: missed the bar). ``pbr_core.gp.objectives.MC_DTYPE = torch.float64`` gives float64 draws.
MC_DTYPE = torch.float32
#: The kinds of fixed Monte Carlo draws a GP recalibrator can fit with (``mc_draws``; see
#: :func:`draw_mc_noise`).
MC_DRAWS = ("antithetic", "iid")

#: From this many classes on, a GP recalibrator whose ``n_mc`` is "auto" (the default) fits with
#: ``MC_DRAWS_MANY_CLASSES`` fixed draws per entry instead of ``MC_DRAWS_FEW_CLASSES`` (see
#: :func:`auto_mc_draws`).
MANY_CLASSES = 50
MC_DRAWS_FEW_CLASSES = 32
MC_DRAWS_MANY_CLASSES = 16


def auto_mc_draws(n_classes: int) -> int:
    """S, the fixed draws per entry of a fit with ``n_mc="auto"``: 32 below ``MANY_CLASSES``
    classes, 16 from there on.

    Why fewer with many classes (docs/gp_measurements.md, "Why S = 16 draws from 50 classes on"):
    the objective averages its Monte Carlo terms over n * K entries, and at the fitted parameters
    of a CIFAR-100 network (K = 100, n = 1000) 16 antithetic draws estimate its gradient with a
    smaller Monte Carlo error (relative spread 4e-2 over 12 independent sets of draws) than 32 do
    at K = 10 (5e-2, CIFAR-10), while the draws are ~60 % of an evaluation's time there. At K = 10
    16 draws save nothing measurable and moved one fit of the paper's alpha grid to the prior.
    """
    return MC_DRAWS_FEW_CLASSES if int(n_classes) < MANY_CLASSES else MC_DRAWS_MANY_CLASSES


#: ``mc_classes="auto"`` (the default of every GP recalibrator) from ``MANY_CLASSES`` classes on:
#: each row draws its ``MC_EXACT_CLASSES`` (or more, see :func:`auto_mc_classes`) largest scores and
#: its label; the tail enters the softmax through its moments (:class:`ClassSplit`).
MC_EXACT_CLASSES = 16
#: The largest mean over rows of sum_tail softmax(z)_k^2 (uncalibrated) that ``auto_mc_classes``
#: accepts for a split: the tail's Monte Carlo variance, hence the split's error, scales with it.
MC_TAIL_SQUARES = 2.5e-4
#: A fit with a :class:`ClassSplit` whose :func:`tail_error` at the end exceeds this share of its
#: objective continues drawing twice as many classes, or all (:func:`pbr_core.gp.training.fit_gp`).
#: Below it the split moved the Brier term by at most ~1.5e-5 and the cross entropy by ~3e-5 of the
#: objective (0.3 and 0.65 of the estimate, measured): well inside the quality bar of issue 15 (1e-4).
MC_TAIL_TOLERANCE = 5e-5
#: Rows of z that :func:`auto_mc_classes` looks at (a seeded subsample beyond).
MC_TAIL_ROWS = 5_000


def auto_mc_classes(z: np.ndarray) -> int | None:
    """T, the classes of each row drawn by a fit with ``mc_classes="auto"`` on scores ``z`` (N, K),
    or None (every class) below ``MANY_CLASSES`` classes or when no smaller T keeps the tail light.

    T is the smallest of 16, 24, 32, 48, 64, 96, ... (below K) whose tail (the K - T smallest
    uncalibrated probabilities of a row) has a mean sum of squares of at most ``MC_TAIL_SQUARES``:
    the error of the split is of the order of the tail's variance, sum_tail p_k^2 (e^var - 1)
    (docs/gp_measurements.md).
    """
    z = np.asarray(z, dtype=np.float64)
    n, k = z.shape
    if k < MANY_CLASSES:
        return None
    if n > MC_TAIL_ROWS:
        z = z[np.random.default_rng(0).choice(n, MC_TAIL_ROWS, replace=False)]
    p = softmax(z)
    sq = -np.sort(-(p * p), axis=1)  # squares, largest first (p_k^2 is in the order of p_k)
    tail_sq = sq.sum(axis=1, keepdims=True) - np.cumsum(sq, axis=1)  # [:, t - 1]: sum beyond the top t
    t = MC_EXACT_CLASSES
    while t < k:
        if float(tail_sq[:, t - 1].mean()) <= MC_TAIL_SQUARES:
            return t
        t = t + t // 2 if (t & (t - 1)) == 0 else 4 * t // 3  # 16, 24, 32, 48, 64, 96, ...
    return None


#: Numbers per block of :func:`draw_mc_noise` (4e6 normals: ~0.1 s on a CPU core).
MC_DRAW_BLOCK = 2**22


@dataclass(frozen=True)
class ObjectiveSpec:
    """Which terms make up the objective.

    Attributes
    ----------
    ce : {"none", "taylor", "mc"}
        Expected cross-entropy term E_q[-log softmax_y(f)]: absent, Wenger's Taylor expansion, or
        Monte Carlo with the fixed draws.
    brier : bool
        Include the expected Brier score E_q ||e_y - softmax(f)||^2 (always Monte Carlo).
    alpha : float or tuple of float
        Weight of KL / n (GPyTorch calls the same idea ``beta``); 1 for the ELBO. A batch of GPs
        fitted together (:func:`pbr_core.gp.batch.fit_batch`) has one value per GP, in the order
        of the flattened batch; this is the only place a fit's alpha is kept.
    """

    ce: CEEstimator
    brier: bool
    alpha: float | tuple[float, ...] = 1.0

    def __post_init__(self) -> None:
        if self.ce not in ("none", "taylor", "mc"):
            raise ValueError(f"Expected argument `ce` to be 'none', 'taylor' or 'mc', but got {self.ce!r}.")
        if self.ce == "none" and not self.brier:
            raise ValueError("An objective needs a cross-entropy term, a Brier term, or both.")
        if np.ndim(self.alpha):  # frozen: a sequence of alpha values is kept as a tuple of floats
            object.__setattr__(self, "alpha", tuple(float(a) for a in np.ravel(self.alpha)))
        if not np.all(np.isfinite(self.alpha)) or np.any(np.asarray(self.alpha) < 0):
            raise ValueError(f"Expected argument `alpha` to be a finite number >= 0, but got {self.alpha!r}.")

    @classmethod
    def gp_calibration(cls, ce: Literal["taylor", "mc"] = "taylor") -> "ObjectiveSpec":
        """Wenger's negative ELBO / n: mean CE + KL / n (Taylor CE by default)."""
        return cls(ce=ce, brier=False, alpha=1.0)

    @classmethod
    def pbr(cls, alpha: float = 0.5) -> "ObjectiveSpec":
        """Paper Eq. vi_obj2: mean E_q Brier + alpha KL / n."""
        return cls(ce="none", brier=True, alpha=float(alpha))

    @classmethod
    def pbr_total(cls, alpha: float = 0.5, brier: bool = True, ce: Literal["taylor", "mc"] = "mc") -> "ObjectiveSpec":
        """Paper Eq. vi_obj3: mean E_q CE + mean E_q Brier + alpha KL / n (``brier=False`` drops the Brier term)."""
        return cls(ce=ce, brier=brier, alpha=float(alpha))

    @property
    def needs_mc(self) -> bool:
        """True when the objective uses the fixed Monte Carlo draws."""
        return self.brier or self.ce == "mc"


@dataclass
class ObjectiveTerms:
    """The objective and its parts; each tensor has the model's batch shape (a scalar for one GP)."""

    total: torch.Tensor
    kl: torch.Tensor
    ce: torch.Tensor | None = None
    brier: torch.Tensor | None = None

    def as_floats(self, index: tuple[int, ...] = ()) -> dict[str, float | None]:
        """Plain floats (of batch entry ``index``) for reports."""
        def f(t):
            return None if t is None else float(t.detach()[index].cpu())
        return {"objective": f(self.total), "ce": f(self.ce), "brier": f(self.brier), "kl": f(self.kl)}


def expected_log_softmax_taylor(mu: torch.Tensor, var: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Wenger's 2nd-order Taylor approximation of E_{f ~ N(mu, diag var)} [log softmax_y(f)].

    E[log softmax_y(f)] ~ log pi_y + 0.5 * (sum_k pi_k^2 var_k - sum_k pi_k var_k), pi = softmax(mu)
    (the Hessian of log softmax_y is -(diag(pi) - pi pi^T), independent of y). Accurate when the
    variances are small; it can even exceed 0 (an impossible log-probability) when they are large.

    Shapes: mu, var (..., N, K); labels (..., N) -> (..., N).
    """
    logp = torch.log_softmax(mu, dim=-1)
    pi = logp.exp()
    second = 0.5 * ((pi.pow(2) * var).sum(-1) - (pi * var).sum(-1))
    return logp.gather(-1, labels.unsqueeze(-1)).squeeze(-1) + second


def latent_samples(mu: torch.Tensor, var: torch.Tensor, eps: torch.Tensor) -> torch.Tensor:
    """Reparameterised draws f = mu + sqrt(var) * eps: (..., N, K) with eps (..., N, S, K) -> (..., N, S, K)."""
    return mu.unsqueeze(-2) + var.sqrt().unsqueeze(-2) * eps


def mc_terms_reference(mu: torch.Tensor, var: torch.Tensor, labels: torch.Tensor, eps: torch.Tensor,
                       ce: bool = True, brier: bool = True) -> tuple[torch.Tensor | None, torch.Tensor | None]:
    """Per-sample Monte Carlo E_q CE_n and E_q Brier_n, each (..., N), by plain autograd.

    The obvious implementation, kept as the reference that :func:`mc_expectations` is tested
    against (values and gradients). It materialises several (N, S, K) tensors for autograd.
    """
    f = latent_samples(mu, var, eps)
    logp = torch.log_softmax(f, dim=-1)
    lab = labels.unsqueeze(-1).unsqueeze(-1).expand(*f.shape[:-1], 1)
    logp_y = logp.gather(-1, lab).squeeze(-1)  # (..., N, S)
    ce_n = (-logp_y).mean(-1) if ce else None
    brier_n = None
    if brier:
        # ||e_y - p||^2 = 1 - 2 p_y + sum_k p_k^2
        brier_n = (1.0 - 2.0 * logp_y.exp() + logp.exp().pow(2).sum(-1)).mean(-1)
    return ce_n, brier_n


class _MCExpectations(torch.autograd.Function):
    """E_q CE_n and E_q Brier_n with analytic gradients, computed in row chunks.

    With p = softmax(f), f = mu + sd * eps, and onehot e_y:
    d CE / d f = p - e_y;  d Brier / d f = 2 p (p + p_y - sum_j p_j^2) - 2 p_y e_y.
    d/d mu = mean_s d/d f,  d/d sd = mean_s (d/d f * eps). Each row's terms depend on that row
    only, so the backward pass is a row-wise scaling of the saved (N, K) derivatives.

    With a :class:`ClassSplit` (``tail_c``, ``tail_d`` given): mu, sd and eps are those of each row's
    drawn classes, shifted by a per-row constant, and the normaliser of each draw is
    Z = sum_drawn exp f + c, c = the tail's E[sum exp f]; the Brier score's sum of squares gets
    d / Z^2, d = the tail's E[sum exp 2 f]. Then d/d f_k keeps the form above with p over that Z and
    q including d / Z^2, and d CE / dc = 1 / Z, d Brier / dc = 2 (p_y - q) / Z, d Brier / dd = 1 / Z^2
    (their means over the draws are the saved per-row derivatives).

    Why: the autograd version keeps ~6 tensors of N*S*K float64 (10^7 entries at n = 1000,
    K = 100, S = 100) and walks memory ~25 times; this does ~15 passes over cache-sized chunks and
    keeps only (N, K) results, several times faster on a CPU and far lighter on a GPU.
    """

    @staticmethod
    def forward(ctx, mu, sd, labels, eps, want_ce: bool, want_brier: bool, chunk_rows: int, tail_c=None, tail_d=None):
        *lead, n, k = mu.shape
        tail = tail_c is not None
        # eps in the kernel's layout (..., S, K, N) (:func:`kernel_draws`): the rows innermost, so
        # that every pass, the sums over the K classes and the means over the S draws included, runs
        # along N contiguous entries (1.4-1.5x faster at K = 10 than the (N, S, K) layout, whose sums over
        # a row's 10 classes are short strided reductions).
        s = eps.shape[-3]
        # The draws' dtype is the compute dtype: float32 draws make the (S, K, N) work float32
        # (softmax and its passes ~3x cheaper on a CPU); the (N, K) results stay in mu's dtype.
        cd = eps.dtype
        out_ce = mu.new_zeros(*lead, n) if want_ce else None
        out_b = mu.new_zeros(*lead, n) if want_brier else None
        d_ce_mu = torch.empty_like(mu) if want_ce else None
        d_ce_sd = torch.empty_like(mu) if want_ce else None
        d_b_mu = torch.empty_like(mu) if want_brier else None
        d_b_sd = torch.empty_like(mu) if want_brier else None
        if tail:  # d/dc and d/dd of the per-row results (the class docstring)
            d_ce_c = mu.new_empty(*lead, n) if want_ce else None
            d_b_c = mu.new_empty(*lead, n) if want_brier else None
            d_b_d = mu.new_empty(*lead, n) if want_brier else None
        draws = (-3, -2)  # a per-row result (..., S, 1, r) averaged over the draws
        # mu and sd as (..., K, N) in the compute dtype, once: a chunk's (..., 1, K, r) slice then
        # broadcasts over the draws with unit stride (a transposed view did not vectorise).
        mu_t, sd_t = mu.mT.to(cd).contiguous(), sd.mT.to(cd).contiguous()
        for a in range(0, n, chunk_rows):
            checkpoint()  # one evaluation takes seconds at n ~ 10^4, K = 100: stop between row chunks
            rows = slice(a, min(a + chunk_rows, n))
            e = eps[..., rows]  # (..., S, K, r)
            if e.shape[:-3] != tuple(lead):
                e = e.expand(*lead, *e.shape[-3:])
            r = e.shape[-1]
            lab = labels[..., rows].unsqueeze(-2)  # (..., 1, r)
            lab_s = lab.unsqueeze(-3).expand(*lead, s, 1, r)  # (..., S, 1, r)
            f = (e * sd_t[..., rows].unsqueeze(-3)).add_(mu_t[..., rows].unsqueeze(-3))  # (..., S, K, r)
            if want_ce:
                f_y = f.gather(-2, lab_s)  # (..., S, 1, r)
            if k >= SOFTMAX_MIN_CLASSES and not want_ce and not tail:
                p = torch.softmax(f, dim=-2)  # one fused pass (max, exp, sum, divide)
                ce_s = None
            elif tail:
                # The exact classes' exp(f - top) plus the tail's E[sum exp f] = c: Z = e^top * tot.
                top = f.amax(-2, keepdim=True)  # (..., S, 1, r)
                p = f.sub_(top).exp_()
                scale = torch.exp(-top.to(mu.dtype))  # in mu's dtype: e^-top can be large
                tot64 = p.sum(-2, keepdim=True).to(mu.dtype) + tail_c[..., rows].unsqueeze(-2).unsqueeze(-3) * scale
                p = p.div_(tot64.to(cd))
                inv_z = scale / tot64  # 1 / Z
                ce_s = tot64.log().to(cd) - (f_y - top) if want_ce else None
            else:
                # Few classes: the passes written out (torch's fused softmax is slower on short
                # rows), and with the cross entropy at any K, because they give -log p_y =
                # log sum exp(f - top) - (f_y - top) (exact where p_y underflows) without a second
                # exp pass.
                top = f.amax(-2, keepdim=True)
                p = f.sub_(top).exp_()
                tot = p.sum(-2, keepdim=True)
                p = p.div_(tot)
                ce_s = tot.log_() - (f_y - top) if want_ce else None
            onehot = torch.zeros(*lead, k, r, dtype=mu.dtype, device=mu.device).scatter_(-2, lab, 1.0)  # (..., K, r)
            e_y = e.gather(-2, lab_s)  # (..., S, 1, r)
            if want_ce:
                if tail:
                    d_ce_c[..., rows] = inv_z.mean(draws)
                out_ce[..., rows] = ce_s.mean(draws).to(mu.dtype)
                d_ce_mu[..., rows, :] = (p.mean(-3).to(mu.dtype) - onehot).mT
                d_ce_sd[..., rows, :] = ((p * e).mean(-3).to(mu.dtype) - onehot * e_y.mean(-3).to(mu.dtype)).mT
            if want_brier:
                p_y = p.gather(-2, lab_s)  # (..., S, 1, r)
                q = (p * p).sum(-2, keepdim=True)  # sum_k p_k^2
                if tail:  # + E[sum over the tail of exp(2 f)] / Z^2
                    tail_sq = tail_d[..., rows].unsqueeze(-2).unsqueeze(-3) * inv_z.square()
                    q = q + tail_sq.to(cd)
                    d_b_d[..., rows] = inv_z.square().mean(draws)
                    d_b_c[..., rows] = 2.0 * (inv_z * (p_y.to(mu.dtype) - q.to(mu.dtype))).mean(draws)
                # ||e_y - p||^2 = (1 - p_y)^2 + q - p_y^2: no cancellation of 1 - 2 p_y + q when p_y ~ 1
                out_b[..., rows] = ((1.0 - p_y).square() + (q - p_y.square())).mean(draws).to(mu.dtype)
                t = (p + (p_y - q)).mul_(p)  # p (p + p_y - q)
                d_b_mu[..., rows, :] = (2.0 * (t.mean(-3).to(mu.dtype) - onehot * p_y.mean(-3).to(mu.dtype))).mT
                d_b_sd[..., rows, :] = (2.0 * (t.mul_(e).mean(-3).to(mu.dtype)
                                               - onehot * (p_y * e_y).mean(-3).to(mu.dtype))).mT
        parts = (d_ce_mu, d_ce_sd, d_b_mu, d_b_sd)
        if tail:
            parts = parts + (d_ce_c, d_b_c, d_b_d)
        ctx.save_for_backward(*(t for t in parts if t is not None))
        ctx.flags = (want_ce, want_brier, tail)
        return (out_ce if want_ce else mu.new_zeros(()), out_b if want_brier else mu.new_zeros(()))

    @staticmethod
    def backward(ctx, g_ce, g_b):
        want_ce, want_brier, tail = ctx.flags
        saved = list(ctx.saved_tensors)
        grad_mu = grad_sd = grad_c = grad_d = None
        if want_ce:
            d_mu, d_sd = saved.pop(0), saved.pop(0)
            grad_mu = g_ce.unsqueeze(-1) * d_mu
            grad_sd = g_ce.unsqueeze(-1) * d_sd
        if want_brier:
            d_mu, d_sd = saved.pop(0), saved.pop(0)
            gm, gs = g_b.unsqueeze(-1) * d_mu, g_b.unsqueeze(-1) * d_sd
            grad_mu = gm if grad_mu is None else grad_mu + gm
            grad_sd = gs if grad_sd is None else grad_sd + gs
        if tail:
            if want_ce:
                grad_c = g_ce * saved.pop(0)
            if want_brier:
                gc = g_b * saved.pop(0)
                grad_c = gc if grad_c is None else grad_c + gc
                grad_d = g_b * saved.pop(0)
        return grad_mu, grad_sd, None, None, None, None, None, grad_c, grad_d


#: The fixed draws in the layout of the Monte Carlo kernel, by ``id`` of the draws (with a weak
#: reference to check it is the same tensor): see :func:`kernel_draws`.
_KERNEL_DRAWS: dict[int, tuple[weakref.ref, torch.Tensor]] = {}


def kernel_draws(eps: torch.Tensor) -> torch.Tensor:
    """The draws ``eps`` (..., N, S, K) in the layout of :class:`_MCExpectations`, (..., S, K, N)
    contiguous: made once per draws tensor and kept while that tensor lives (a fit evaluates its
    objective hundreds of times on the same fixed draws; the copy costs about one pass over them).
    The draws of a fit are never changed in place, so the copy stays theirs."""
    key = id(eps)
    hit = _KERNEL_DRAWS.get(key)
    if hit is not None and hit[0]() is eps:
        return hit[1]
    out = eps.movedim(-3, -1).contiguous()
    _KERNEL_DRAWS[key] = (weakref.ref(eps), out)
    weakref.finalize(eps, _KERNEL_DRAWS.pop, key, None)
    return out


def chunk_rows_for(mu: torch.Tensor, n_samples: int, max_elements: int | None = None) -> int:
    """Rows per chunk so that one (batch, S, K, rows) temporary has about ``max_elements`` entries.

    Default: 2^19 entries on a CPU (2 MiB per float32 temporary: the size of an L2 cache; with the
    (S, K, N) layout of :class:`_MCExpectations` 2^18 was 15 % slower at K = 10, S = 32, n = 1000,
    where it made two chunks of one evaluation), 2^26 (256 MiB in float32) on a GPU.
    """
    if max_elements is None:
        max_elements = 2**26 if mu.is_cuda else 2**19
    per_row = max(1, math.prod(mu.shape[:-2]) * n_samples * mu.shape[-1])
    return int(max(1, min(mu.shape[-2], max_elements // per_row)))


@dataclass
class ClassSplit:
    """Which classes of each row a fit's Monte Carlo terms draw, and which form its tail.

    The ``exact`` classes of a row (its T largest scores, and its label) are drawn with the fixed
    draws as before; the other K - T (the tail) enter the normaliser of the softmax through their
    expectations, E[sum exp f_k] = sum exp(mu_k + var_k / 2) (and, for the Brier score's sum of
    squares, E[sum exp 2 f_k] = sum exp(2 mu_k + 2 var_k)), see :func:`mc_expectations`.

    Attributes (all fixed for a fit, on the draws' device)
    ----------
    exact : LongTensor (*batch, N, T)
        The drawn classes of each row, the label among them.
    label_pos : LongTensor (*batch, N)
        Where the label is in ``exact``.
    tail : BoolTensor (*batch, N, K)
        True for the tail classes.
    eps : Tensor (*batch, N, S, T)
        The fixed draws of the exact classes (gathered from the fit's (N, S, K) draws).
    """

    exact: torch.Tensor
    label_pos: torch.Tensor
    tail: torch.Tensor
    eps: torch.Tensor

    def tail_weight(self, dtype: torch.dtype) -> torch.Tensor:
        """1 on the tail classes, 0 on the drawn ones, in ``dtype`` (made once per dtype)."""
        cache = self.__dict__.setdefault("_weights", {})
        if dtype not in cache:
            cache[dtype] = self.tail.to(dtype)
        return cache[dtype]

    @property
    def n_exact(self) -> int:
        return int(self.exact.shape[-1])

    def with_mc_draws(self, n_draws: int) -> "ClassSplit":
        """The same split with only the first ``n_draws`` draws."""
        return replace(self, eps=self.eps[..., :n_draws, :].contiguous())

    def rows(self, index: tuple[int, ...], keep) -> "ClassSplit":
        """The split of batch entry ``index``'s rows ``keep`` (unbatched)."""
        eps = self.eps[index] if self.eps.dim() == self.exact.dim() + 1 else self.eps
        return ClassSplit(exact=self.exact[index][keep], label_pos=self.label_pos[index][keep],
                          tail=self.tail[index][keep], eps=eps[keep])


class _TailMoments(torch.autograd.Function):
    """c = sum_tail exp(mu - shift + var / 2) and d = sum_tail exp(2 (mu - shift + var)) per row,
    the tail's E[sum exp f] and E[sum exp 2 f] (f ~ N(mu, var)) in units of exp(shift), with their
    gradients in one pass each (``shift`` is a constant; ``weight`` is 1 on the tail, 0 elsewhere)."""

    @staticmethod
    def forward(ctx, mu, var, shift, weight, want_d: bool):
        rest = mu - shift
        e1 = torch.addcmul(rest, var, torch.full((), 0.5, dtype=mu.dtype, device=mu.device)).exp_().mul_(weight)
        e2 = rest.add_(var).mul_(2.0).exp_().mul_(weight) if want_d else None
        ctx.save_for_backward(*(t for t in (e1, e2) if t is not None))
        c = e1.sum(-1)
        return c, (e2.sum(-1) if want_d else torch.zeros_like(c))

    @staticmethod
    def backward(ctx, g_c, g_d):
        saved = ctx.saved_tensors
        e1 = saved[0]
        grad_mu = g_c.unsqueeze(-1) * e1
        grad_var = 0.5 * grad_mu
        if len(saved) > 1:
            t = (2.0 * g_d).unsqueeze(-1) * saved[1]
            grad_mu = grad_mu + t
            grad_var = grad_var + t
        return grad_mu, grad_var, None, None, None


def tail_error(mu: torch.Tensor, var: torch.Tensor, split: ClassSplit,
               weights: torch.Tensor | None = None) -> torch.Tensor:
    """The order of the error of a :class:`ClassSplit`'s expectations, per GP of the batch: the mean
    over rows of Var(Z_tail) / E[Z]^2, with Z = sum_k exp f_k and f ~ N(mu, var).

    Where the tail's sum is replaced by its expectation, the first-order error vanishes (the tail's
    draws are independent of the drawn classes' and the expectation is exact), so what remains is
    of second order in the tail's fluctuation: measured on CIFAR-100 fits, the Brier and the cross-entropy
    terms moved by 0.2-0.3 and 0.5-0.65 times this value respectively
    (docs/gp_measurements.md).
    """
    with torch.no_grad():
        shift = mu.amax(-1, keepdim=True)
        rest = mu - shift
        ez = torch.exp(rest + 0.5 * var).sum(-1)
        var_tail = (torch.exp(2.0 * rest + var) * torch.expm1(var) * split.tail_weight(mu.dtype)).sum(-1)
        ratio = var_tail / ez.square()
        if weights is None:
            return ratio.mean(-1)
        return (ratio * weights).sum(-1) / weights.sum(-1)


def split_classes(z: torch.Tensor, labels: torch.Tensor, eps: torch.Tensor, n_exact: int) -> ClassSplit:
    """The :class:`ClassSplit` of scores ``z`` (*batch, N, K): each row's ``n_exact`` largest scores
    (the last of them replaced by the label where the label is not among them) are drawn with
    ``eps`` (*batch, N, S, K) or (N, S, K); the rest is the tail."""
    *lead, n, k = z.shape
    t = int(min(max(int(n_exact), 2), k))
    exact = torch.topk(z, t, dim=-1, sorted=True).indices
    lab = labels.unsqueeze(-1)
    has = (exact == lab).any(-1, keepdim=True)
    exact = torch.cat([exact[..., :-1], torch.where(has, exact[..., -1:], lab)], dim=-1)
    label_pos = (exact == lab).to(torch.int64).argmax(-1)
    tail = torch.ones(z.shape, dtype=torch.bool, device=z.device).scatter_(-1, exact, False)
    s = eps.shape[-2]
    e = eps if eps.dim() == z.dim() + 1 else eps.expand(*lead, *eps.shape)
    picked = e.gather(-1, exact.unsqueeze(-2).expand(*lead, n, s, t))
    return ClassSplit(exact=exact, label_pos=label_pos, tail=tail, eps=picked.contiguous())


def mc_expectations(mu: torch.Tensor, var: torch.Tensor, labels: torch.Tensor, eps: torch.Tensor,
                    ce: bool = True, brier: bool = True,
                    max_chunk_elements: int | None = None,
                    split: ClassSplit | None = None) -> tuple[torch.Tensor | None, torch.Tensor | None]:
    """Per-sample Monte Carlo E_q CE_n and E_q Brier_n, each (..., N), with fixed draws.

    Parameters
    ----------
    mu, var : Tensor of shape (..., N, K)
    labels : LongTensor of shape (..., N)
    eps : Tensor of shape (..., N, S, K) or (N, S, K)
        S fixed standard-normal draws per entry (common random numbers).
    ce, brier : bool
        Which expectations to compute.
    """
    if split is not None:
        out = _split_expectations(mu, var, split, ce, brier, max_chunk_elements)
        if all(t is None or bool(torch.isfinite(t).all()) for t in out):
            return out
        # The tail's moments overflowed (exp(2 mu + 2 var) at a line search's trial point with huge
        # variances, far from any fit, where the exact estimator stays finite): this evaluation
        # draws every class. Measured: at least 4 of the 320 fits of the paper's protocol met such a point,
        # which L-BFGS had to treat as a divergence (restart with a halved step, a warning).
    sd = var.sqrt()
    rows = chunk_rows_for(mu, eps.shape[-2], max_chunk_elements)
    out_ce, out_b = _MCExpectations.apply(mu, sd, labels, kernel_draws(eps), ce, brier, rows)
    return (out_ce if ce else None), (out_b if brier else None)


def _split_expectations(mu: torch.Tensor, var: torch.Tensor, split: ClassSplit, ce: bool, brier: bool,
                        max_chunk_elements: int | None) -> tuple[torch.Tensor | None, torch.Tensor | None]:
    """:func:`mc_expectations` with the draws on ``split``'s exact classes and the tail's moments."""
    mu_x, var_x = mu.gather(-1, split.exact), var.gather(-1, split.exact)
    # One shift per row for the drawn scores and the tail's moments (the results do not depend on it).
    shift = mu_x.detach().amax(-1, keepdim=True)
    c, d = _TailMoments.apply(mu, var, shift, split.tail_weight(mu.dtype), brier)
    rows = chunk_rows_for(mu_x, split.eps.shape[-2], max_chunk_elements)
    out_ce, out_b = _MCExpectations.apply(mu_x - shift, var_x.sqrt(), split.label_pos, kernel_draws(split.eps), ce,
                                          brier, rows, c, d)
    return (out_ce if ce else None), (out_b if brier else None)


def evaluate_objective(mu: torch.Tensor, var: torch.Tensor, labels: torch.Tensor, kl: torch.Tensor,
                       spec: ObjectiveSpec, eps: torch.Tensor | None = None,
                       weights: torch.Tensor | None = None, split: ClassSplit | None = None) -> ObjectiveTerms:
    """The objective of ``spec`` from the marginals (GP_SPEC section 2).

    Parameters
    ----------
    mu, var : Tensor of shape (*batch, N, K)
        Marginals of q(f) on the recalibration set.
    labels : LongTensor of shape (*batch, N)
    kl : Tensor of shape batch
        KL(q || p).
    spec : ObjectiveSpec
        The terms and the KL weight alpha (one per GP of a batch when ``spec.alpha`` is a tuple).
    eps : Tensor of shape (*batch, N, S, K) or (N, S, K), optional
        The fixed standard-normal draws (S per entry); required when ``spec.needs_mc``.
    weights : Tensor of shape (*batch, N), optional
        0/1 row weights (padding of unequal folds in a batch of GPs); n = weights.sum(-1).
    split : ClassSplit, optional
        Draw only each row's exact classes and take the tail through its moments
        (:func:`mc_expectations`); ``eps`` is then unused.
    """
    if spec.needs_mc and eps is None:
        raise ValueError("This objective uses Monte Carlo: pass the fixed draws `eps`.")
    if weights is None:
        weights = torch.ones(labels.shape, dtype=mu.dtype, device=mu.device)
    n = weights.sum(-1)

    def wmean(t: torch.Tensor) -> torch.Tensor:
        return (t * weights).sum(-1) / n

    total = torch.zeros_like(n)
    ce_value = brier_value = None
    ce_mc, brier_n = (None, None)
    if spec.needs_mc:
        ce_mc, brier_n = mc_expectations(mu, var, labels, eps, ce=spec.ce == "mc", brier=spec.brier, split=split)
    if spec.ce == "taylor":
        ce_value = wmean(-expected_log_softmax_taylor(mu, var, labels))
    elif spec.ce == "mc":
        ce_value = wmean(ce_mc)
    if ce_value is not None:
        total = total + ce_value
    if brier_n is not None:
        brier_value = wmean(brier_n)
        total = total + brier_value
    a = spec.alpha
    if isinstance(a, tuple):
        a = torch.as_tensor(a, dtype=total.dtype, device=total.device).reshape(kl.shape)
        # alpha = 0 entries contribute exactly 0 (never 0 * inf if a KL blows up).
        total = total + torch.where(a > 0, a * kl / n, torch.zeros_like(total))
    elif a > 0:
        total = total + a * kl / n
    return ObjectiveTerms(total=total, kl=kl, ce=ce_value, brier=brier_value)


def draw_mc_noise(n: int, n_samples: int, k: int, seed: int, device: torch.device | str = "cpu",
                  dtype: torch.dtype = torch.float64, antithetic: bool = False) -> torch.Tensor:
    """The fixed draws eps of shape (N, S, K): S standard normals per entry (common random numbers).

    Drawn with NumPy's seeded generator on the host, so the CPU and a GPU get the very same numbers
    (a fit on CUDA can be checked against the same fit on the CPU). Row-major in N: the draws of
    the first n rows do not depend on how many rows follow (padding a batch keeps them).

    ``antithetic``: the S draws of a row are pairs (e, -e), interleaved (e_1, -e_1, e_2, -e_2, ...), so
    every even prefix (the Adam warm-up's first ``warmup_mc`` draws) is antithetic too; an odd S ends
    with an unpaired draw. The odd-order terms of each expectation's Taylor expansion in eps cancel
    exactly, so S = 32 antithetic draws estimate the objective and its gradient with 2-4x (objective
    up to 40x) smaller Monte Carlo error than S = 100 independent ones (docs/gp_measurements.md).
    """
    rng = np.random.default_rng(seed)
    m = (n_samples + 1) // 2 if antithetic else n_samples
    out = np.empty((n, m, k))
    # Filled in row blocks of about MC_DRAW_BLOCK numbers (a tenth of a second each on a CPU) with a
    # stop check between blocks: the generator fills sequentially, so the draws equal one big call.
    rows = max(1, MC_DRAW_BLOCK // max(1, m * k))
    for start in range(0, n, rows):
        checkpoint()
        rng.standard_normal(out=out[start:start + rows])
    if antithetic:
        out = np.stack([out, -out], axis=2).reshape(n, 2 * m, k)[:, :n_samples]
    return torch.as_tensor(out, dtype=dtype, device=device)
