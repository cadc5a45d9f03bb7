"""The recalibration model eta_V: one scalar latent GP shared by every class (GP_SPEC section 1).

Wenger et al. (AISTATS 2020), as used by the seed paper (Section 5.2, Appendix F): every entry
z_nk of the K-vector of logits (or log-probabilities) is one 1-D GP input, f_nk = z_nk + g(z_nk),
and the recalibrated prediction is softmax(f_n). g is a sparse variational GP with M inducing
points (whitened, mean-field by default), kernel ScaleKernel(RBF) + White.

Three input kinds (``input_kind``). The model is always called with the scores z (logits, or
log p for probabilities), so training, prediction and the "ended at the prior" test are the same
for all three; what differs is where the GP lives:

* ``"logits"``: GP input z, identity mean: f = z + g(z) (Wenger's model on logits).
* ``"probs"``: Wenger's model on probabilities: GP input p = exp(z), log mean function:
  f = log p + g(p) (pycalib's ``GPCalibration(logits=False)``: ``gp_classes.Log`` mean, the
  ``Logistic`` constraints below on the RBF of the probability input, inducing points by k-means
  on the flattened p). Wenger's hyperparameter ranges belong to this input space.
* ``"log_probs"``: this project's first model for probabilities: GP input log p, identity mean,
  f = log p + g(log p), with Wenger's probability-space initial values and ranges applied to
  log p. Kept so that files saved with it load and predict unchanged.

Only the marginals mu_nk, var_nk of q(f_nk) are ever needed. :meth:`GPRecalibrationModel.marginals`
computes them directly from the kernel blocks K_uu, K_uf and diag K_ff, with the same formulas and
jitter as GPyTorch's ``VariationalStrategy.forward`` (a test pins the two equal), because
(i) the Cholesky of K_uu must report failure instead of silently adding jitter (the training loop
owns the jitter retries, GP_SPEC section 3), (ii) it avoids building a lazy (M + NK)-square kernel
for N*K up to ~10^6 inputs, and (iii) it handles the batch of GPs used by alpha selection.

The model supports a ``batch_shape`` (GPyTorch batch GPs): one independent GP per batch entry,
with its own kernel hyperparameters, inducing points and variational parameters.
"""

from __future__ import annotations

import math
import warnings
from typing import Literal

import gpytorch
import numpy as np
import torch
import torch.utils.checkpoint
from gpytorch.constraints import Interval, Positive
from gpytorch.kernels import AdditiveKernel, Kernel, RBFKernel, ScaleKernel
from gpytorch.variational import (
    CholeskyVariationalDistribution,
    MeanFieldVariationalDistribution,
    VariationalStrategy,
)
from linear_operator.operators import DiagLinearOperator, ZeroLinearOperator

from pbr_core.cancel import checkpoint
from pbr_core.gp.device import DTYPE

InputKind = Literal["logits", "log_probs", "probs"]
VariationalKind = Literal["mean_field", "cholesky"]

#: Wenger's initial kernel values (GP_SPEC section 1).
INITIAL_VALUES: dict[str, dict[str, float]] = {
    "logits": {"outputscale": 1.0, "lengthscale": 10.0, "white": 0.01},
    "log_probs": {"outputscale": 1.0, "lengthscale": 0.5, "white": 0.01},
    "probs": {"outputscale": 1.0, "lengthscale": 0.5, "white": 0.01},
}


def kernel_inputs(z: np.ndarray | torch.Tensor, input_kind: InputKind) -> np.ndarray | torch.Tensor:
    """Where the GP g is evaluated for the scores ``z``: p = exp(z) for ``"probs"`` (Wenger's model
    on probabilities, z = log p), z itself otherwise. Inducing points live in this space."""
    if input_kind == "probs":
        return torch.exp(z) if isinstance(z, torch.Tensor) else np.exp(z)
    return z

#: Jitter added to K_uu (and, as in GPyTorch, to the marginal variances) in float64.
DEFAULT_JITTER = 1e-6


class NotPositiveDefiniteError(RuntimeError):
    """The inducing-point covariance K_uu (plus jitter) has no Cholesky factor."""


#: Entries of one (M, columns) block of K_uf in :meth:`GPRecalibrationModel.marginals`: cache-sized
#: (1 MiB) on a CPU; on a GPU large (512 MiB), since there every chunk costs kernel launches.
MARGINAL_CHUNK_ELEMENTS = 2**17
MARGINAL_CHUNK_ELEMENTS_CUDA = 2**26


def _marginal_chunk(x: torch.Tensor, zu: torch.Tensor, ls: torch.Tensor, log_scale: torch.Tensor,
                    chol_inv: torch.Tensor, mean: torch.Tensor, cov: torch.Tensor, kdiag: torch.Tensor,
                    mean_field: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """mu and var (before clamping) of the whitened SVGP at the 1-D inputs ``x`` (*b, c, 1).

    K_uf = s^2 exp(-(u - x)^2 / (2 l^2)) is built as exp(log s^2 - d^2 / 2) (two passes), A = L^-1 K_uf
    with ``chol_inv`` = L^-1 (an M x M triangular inverse, well conditioned for M ~ 10 with jitter),
    mu = x + m^T A, var = k(x, x) + jitter + (s^2 - 1)^T (A * A) (mean-field) or
    + 1^T ((C^T A)^2 - A * A) (Cholesky). Column sums are (1, M) @ (M, c) products (BLAS both ways).
    """
    # A stop check per chunk, in the forward pass and again when the backward pass recomputes the
    # chunk (torch.utils.checkpoint): at n ~ 10^4, K = 100 one evaluation takes seconds, most of
    # it here. Cancelled raised inside backward() comes out of it unchanged.
    checkpoint()
    d = (zu / ls) - (x / ls).mT  # (*b, M, c)
    kuf = torch.addcmul(log_scale.reshape(*log_scale.shape, 1, 1), d, d, value=-0.5).exp()
    a = chol_inv @ kuf  # = L^-1 K_uf: a GEMM, where a triangular solve copies the block twice
    mu = x[..., 0] + (mean.unsqueeze(-2) @ a).squeeze(-2)
    a2 = a * a
    if mean_field:
        var = kdiag + ((cov - 1.0).unsqueeze(-2) @ a2).squeeze(-2)
    else:
        ca = cov.mT @ a
        var = kdiag + (torch.ones_like(cov[..., :1, :]) @ (ca * ca - a2)).squeeze(-2)
    return mu, var


class _MeanFieldMarginals(torch.autograd.Function):
    """mu and var (before clamping) of the whitened mean-field SVGP at all inputs, with analytic
    gradients, in cache-sized column chunks (the same arithmetic as :func:`_marginal_chunk`).

    Why: at N*K = 10^5 inputs the marginals with autograd over checkpointed chunks (forward,
    forward again in backward, then ~15 autograd nodes per chunk) were ~80 % of an objective
    evaluation with S = 10 draws (50 of 60 ms at n = 1000, K = 100). Here the forward pass keeps
    nothing of size (M, NK); the backward pass recomputes each chunk's K_uf and A once and forms
    the gradients directly. With g_mu, g_var the incoming gradients of one chunk (columns c) and
    D = (u - x) / l, K_uf = exp(log s^2 - D^2 / 2), A = L^-1 K_uf:

    * g_m = A g_mu, g_(s^2) = A^2 g_var, g_kdiag = sum_c g_var;
    * G_A = m g_mu^T + 2 A * ((s^2 - 1) g_var^T), g_(L^-1) = G_A K_uf^T, G_K = L^-T G_A;
    * H = G_K * K_uf: g_(log s^2) = sum H, g_u = -sum_c (H * D) / l, g_l = sum (H * D^2) / l.

    Tested against autograd through :func:`_marginal_chunk` (values and gradients).
    """

    @staticmethod
    def forward(ctx, x, zu, ls, log_scale, chol_inv, mean, s2, kdiag, cols: int):
        mus, variances = [], []
        for start in range(0, x.shape[-2], cols):
            checkpoint()
            mc, vc = _marginal_chunk(x[..., start:start + cols, :], zu, ls, log_scale, chol_inv, mean, s2, kdiag,
                                     True)
            mus.append(mc)
            variances.append(vc)
        ctx.save_for_backward(x, zu, ls, log_scale, chol_inv, mean, s2)
        ctx.cols = cols
        mu = mus[0] if len(mus) == 1 else torch.cat(mus, dim=-1)
        var = variances[0] if len(variances) == 1 else torch.cat(variances, dim=-1)
        return mu, var

    @staticmethod
    def backward(ctx, g_mu, g_var):
        x, zu, ls, log_scale, chol_inv, mean, s2 = ctx.saved_tensors
        cols = ctx.cols
        g_zu = torch.zeros_like(zu)[..., 0]  # (*b, M)
        g_ls = torch.zeros_like(ls)[..., 0, 0]  # (*b)
        g_log_scale = torch.zeros_like(log_scale)
        g_chol_inv = torch.zeros_like(chol_inv)
        g_mean = torch.zeros_like(mean)
        g_s2 = torch.zeros_like(s2)
        two_s2m1 = (2.0 * (s2 - 1.0)).unsqueeze(-1)  # (*b, M, 1)
        mean_c = mean.unsqueeze(-1)  # (*b, M, 1)
        chol_inv_t = chol_inv.mT
        for start in range(0, x.shape[-2], cols):
            checkpoint()
            xc = x[..., start:start + cols, :]
            gm = g_mu[..., start:start + cols].unsqueeze(-2)  # (*b, 1, c)
            gv = g_var[..., start:start + cols].unsqueeze(-2)
            d = (zu / ls) - (xc / ls).mT  # (*b, M, c)
            kuf = torch.addcmul(log_scale.reshape(*log_scale.shape, 1, 1), d, d, value=-0.5).exp_()
            a = chol_inv @ kuf
            g_mean += (a @ gm.mT)[..., 0]
            a2 = a * a
            g_s2 += (a2 @ gv.mT)[..., 0]
            # G_A = m g_mu^T + 2 A * ((s^2 - 1) g_var^T); the outer products as rank-1 GEMMs, ~3x
            # faster than broadcast multiplications of an (M, 1) and a (1, c) view.
            g_a = (a * (two_s2m1 @ gv)).add_(mean_c @ gm)
            g_chol_inv += g_a @ kuf.mT
            h = (chol_inv_t @ g_a).mul_(kuf)  # H = (L^-T G_A) * K_uf
            g_log_scale += h.sum((-2, -1))
            hd = h.mul_(d)  # H * D
            g_zu -= hd.sum(-1)
            g_ls += torch.linalg.vecdot(hd, d).sum(-1)
        g_zu = (g_zu / ls[..., 0]).unsqueeze(-1)
        g_ls = (g_ls / ls[..., 0, 0]).reshape(ls.shape)
        return None, g_zu, g_ls, g_log_scale, g_chol_inv, g_mean, g_s2, g_var.sum(-1, keepdim=True), None


#: The marginal variances are at least this (>= the white noise in exact arithmetic; a guard
#: against round-off only).
VAR_FLOOR = 1e-12
#: Grid nodes per lengthscale of :class:`MarginalGrid` (see there for the error bound).
GRID_NODES_PER_LENGTHSCALE = 128
#: :class:`MarginalGrid` is used only while its nodes are at most this fraction of the inputs;
#: beyond (short lengthscales, few inputs) the marginals are computed at every input.
GRID_MAX_FRACTION = 0.25
#: Below this many inputs per GP the marginals at every input cost well under a millisecond: no grid.
GRID_MIN_INPUTS = 4096
#: Above this many inputs in all (batch x N x K) the grid's weights are lean (:class:`_LeanWeights`:
#: each input's first node and offset, 12 bytes, the Hermite weights recomputed on each use, the
#: products as gathers and ``index_add_``) instead of the sparse matrices W and W^T (~104 bytes per
#: input: 440 MB here). The same interpolation to round-off; below it the sparse products stay, so
#: fits of up to 4 x 10^5 rows at K = 10 are those of before, bit for bit. Until issue 40 no grid at
#: all beyond it: at 10^7 inputs (10^6 rows, K = 10) the marginals at every input cost ~2 s per
#: evaluation.
GRID_MAX_INPUTS = 2**22
#: Inputs per chunk of a :class:`_LeanWeights` product (bounds its temporaries to ~100 MB).
LEAN_CHUNK = 2**20
#: Node counts are multiples of this. The interpolation weights (a function of the node count, ~50
#: ms to build at N*K = 10^5) are kept while the nodes are between what the lengthscale needs and
#: twice that, so they are rebuilt only a few times in a fit.
GRID_NODE_STEP = 64


class MarginalGrid:
    """Interpolated marginals for the fixed inputs of one fit (the GP's inputs are 1-D).

    A fit evaluates mu and var at the same N*K scalar inputs x (the flattened scores) hundreds of
    times, with M cross-covariances per input each time, forward and backward: at N*K = 10^5 that
    was ~45 % of a K = 100 fit. mu(x) - x and var(x) are smooth functions of the single input x, of
    lengthscale l: linear combinations of the M functions k(u_m, x) and of their pairwise products.
    So they are computed exactly, with their x-derivatives, at G evenly spaced nodes spanning the
    inputs (``GRID_NODES_PER_LENGTHSCALE`` = R nodes per lengthscale) and interpolated at every
    input by cubic Hermite polynomials on the nodes' intervals: small (M, G) passes and one sparse
    product (its transpose backward) per evaluation, whatever N*K.

    Error: cubic Hermite interpolation errs by at most h^4 / 384 max |f^(4)| (h = l / R). Every
    function of the whitened GP's reproducing-kernel space with norm ||g|| has
    |g^(4)| <= ||g|| s sqrt(105) / l^4 (s^2 the outputscale); mu - x has norm ||m||, and each of the
    M squares in var is bounded by Leibniz's rule (70 s^2 / l^4). With R = 128 the error is below
    1e-10 ||m|| s in mu and 1e-9 s^2 |1 - s_m^2| summed over m in var (mean-field; for the Cholesky
    family the sum becomes ||C||_F^2 + M); tests pin the interpolated marginals to 1e-9 and their
    gradients to 1e-7 relative against the exact ones. It is used only while G is at most
    ``GRID_MAX_FRACTION`` of the inputs. For a fixed G the objective is a smooth deterministic
    function of the parameters; G changes (in steps of ``GRID_NODE_STEP`` nodes) only as the
    lengthscale moves, which moves the objective by ~1e-12-1e-11 (measured), of the order of
    L-BFGS's ``tol_change`` and harmless in the measured fits. A batch of GPs shares one G (the
    largest any member needs; no grid if one member's inputs rule it out), so a batched fit equals
    each fit alone to the interpolation's round-off (~1e-12), not bit for bit.

    Only training uses it (:class:`pbr_core.gp.problem.FitData`); predictions, the training check
    and the "ended at the prior" test compute the marginals at every input.

    Parameters
    ----------
    x : Tensor of shape (*batch, NK, 1)
        The GP's inputs (p for "probs", the scores otherwise), fixed for the fit.
    """

    def __init__(self, x: torch.Tensor, source: torch.Tensor | None = None):
        self.x = x
        #: The scores the grid was built for (:meth:`GPRecalibrationModel.marginals` checks it).
        self.source = x if source is None else source
        flat = x[..., 0]
        self.lo = flat.amin(-1, keepdim=True)  # (*b, 1)
        self.span = flat.amax(-1, keepdim=True) - self.lo
        # Non-finite inputs (log p = -inf where p = 0) have no interval, and a member whose inputs
        # are all equal has none either: no grid, exact marginals. float64 only (as the model).
        self.usable = bool(torch.isfinite(self.span).all() and (self.span > 0).all()) and x.dtype == torch.float64
        self._nodes = 0
        self._cache: tuple[torch.Tensor, torch.Tensor] | None = None

    def node_count(self, ls: torch.Tensor) -> int:
        """Nodes needed for lengthscale(s) ``ls`` (R per lengthscale over the widest member), or 0
        when the grid would not pay (fewer than ``GRID_MIN_INPUTS`` inputs, more nodes than
        ``GRID_MAX_FRACTION`` of them) or cannot be built (all inputs equal, non-finite inputs)."""
        if not self.usable or self.x.shape[-2] < GRID_MIN_INPUTS:
            return 0
        ratio = float((self.span / ls.detach().reshape(self.span.shape)).max())
        if not math.isfinite(ratio):
            return 0
        need = ratio * GRID_NODES_PER_LENGTHSCALE + 2
        if need <= self._nodes <= 2.0 * need + GRID_NODE_STEP:
            nodes = self._nodes  # enough nodes, and not too many: keep the weights
        else:  # a quarter more than needed, so that a shrinking lengthscale does not rebuild at once
            nodes = int(math.ceil(1.25 * need / GRID_NODE_STEP)) * GRID_NODE_STEP
        if nodes > GRID_MAX_FRACTION * self.x.shape[-2]:
            return 0  # too many nodes to pay
        if nodes != self._nodes and not self._buildable(nodes):
            return 0  # a spacing that underflows to 0 (kept nodes passed this when their weights were built)
        return nodes

    def _buildable(self, nodes: int) -> bool:
        """Whether weights for ``nodes`` nodes can be built: finite, not all equal inputs, at least two
        nodes and a node spacing that does not underflow to 0."""
        return nodes >= 2 and self.usable and bool((self.span / (nodes - 1) > 0).all())

    def weights(self, nodes: int) -> tuple[torch.Tensor, torch.Tensor]:
        """The interpolation as a sparse matrix W (B * NK, B * 2G) and its transpose (CSR), for
        ``nodes`` nodes: row j of W holds the four cubic Hermite basis weights of input j, on the
        values and the h-scaled derivatives at the two nodes around it (columns f_i, f_i+1, then
        h f'_i, h f'_i+1 in the second half of its member's 2G columns). Beyond ``GRID_MAX_INPUTS``
        inputs the same products as :class:`_LeanWeights` (``w @ v`` and ``wt @ g`` alike)."""
        if self._nodes != nodes or self._cache is None:
            if not self._buildable(nodes):
                raise ValueError(f"A grid needs finite, not all equal inputs and at least 2 nodes (got {nodes}): "
                                 "use node_count().")
            if self.x[..., 0].numel() > GRID_MAX_INPUTS:
                lean = _LeanWeights(self.x, self.lo, self.span, nodes)
                self._cache = (lean, lean.transposed())
                self._nodes = nodes
                return self._cache
            h = self.span / (nodes - 1)
            u = (self.x[..., 0] - self.lo) / h
            idx = u.floor().clamp_(0, nodes - 2)
            t = (u - idx).clamp_(0.0, 1.0)
            t2, t3 = t * t, t * t * t
            basis = torch.stack([2.0 * t3 - 3.0 * t2 + 1.0, -2.0 * t3 + 3.0 * t2, t3 - 2.0 * t2 + t, t3 - t2], dim=-1)
            # int32 indices: ~25 % faster products than int64, and less memory (inputs <= GRID_MAX_INPUTS)
            idx = idx.to(torch.int32)
            lead = idx.shape[:-1]
            count = int(np.prod(lead, dtype=np.int64))
            first = idx + (torch.arange(count, device=idx.device, dtype=torch.int32) * (2 * nodes)).reshape(*lead, 1)
            cols = torch.stack([first, first + 1, first + nodes, first + nodes + 1], dim=-1).reshape(-1)
            rows = cols.numel() // 4
            if cols.numel() and (int(cols.min()) < 0 or int(cols.max()) >= count * 2 * nodes):
                # Never hand a malformed matrix to the unchecked constructor below (memory safety).
                raise ValueError("MarginalGrid: an input fell outside the grid; use the exact marginals.")
            crow = torch.arange(0, 4 * rows + 1, 4, device=idx.device, dtype=torch.int32)
            values = basis.reshape(-1)
            width = count * 2 * nodes
            # W^T in CSR: the entries ordered by column, stably (rows ascending within a column, as
            # torch's to_sparse_csc orders them, which took 2-3x longer: ~70 ms at 10^5 inputs, a
            # few times per fit). Entry e belongs to row e // 4. NumPy's stable sort of 16-bit keys
            # is a radix sort.
            keys = cols.cpu().numpy()
            order = np.argsort(keys.astype(np.uint16) if width <= 65536 else keys, kind="stable")
            order = torch.from_numpy(order).to(idx.device)
            ccol = torch.zeros(width + 1, dtype=torch.int64, device=idx.device)
            ccol[1:] = torch.bincount(cols.to(torch.int64), minlength=width).cumsum(0)
            with warnings.catch_warnings():  # "sparse CSR support is in beta": the product is what we use
                warnings.simplefilter("ignore", UserWarning)
                w = torch.sparse_csr_tensor(crow, cols, values, (rows, width), check_invariants=False)
                wt = torch.sparse_csr_tensor(ccol.to(torch.int32), (order // 4).to(torch.int32), values[order],
                                             (width, rows), check_invariants=False)
            self._cache = (w, wt)
            self._nodes = nodes
        return self._cache

    def node_inputs(self, nodes: int) -> tuple[torch.Tensor, torch.Tensor]:
        """The node positions (*b, G, 1) and the spacing h (*b, 1) (kept for the last node count)."""
        if getattr(self, "_node_inputs", (None,))[0] != nodes:
            h = self.span / (nodes - 1)
            steps = torch.arange(nodes, dtype=self.x.dtype, device=self.x.device)
            self._node_inputs = (nodes, (self.lo + h * steps).unsqueeze(-1), h)
        return self._node_inputs[1], self._node_inputs[2]


class _LeanWeights:
    """The interpolation matrix W of a :class:`MarginalGrid` (or its transpose) kept as each input's
    interval (its member's offset plus the node below it, int32 where it fits) and its offset t in
    that interval: 12 bytes per input, against ~104 for the sparse W and W^T.

    ``w @ v`` (v: (B * 2G, 2), the node values f and h-scaled derivatives d of each member) turns
    each interval's cubic Hermite polynomial into its power form, c0 + t (c1 + t (c2 + t c3)) with
    c0 = f_i, c1 = d_i, c2 = 3 (f_i+1 - f_i) - 2 d_i - d_i+1, c3 = 2 (f_i - f_i+1) + d_i + d_i+1, and
    evaluates it at every input (one gather of its interval's 8 numbers, Horner's rule); ``wt @ g``
    sums each input's (1, t, t^2, t^3) g into its interval (``index_add_``), then maps the
    coefficients back to the node rows (the transpose of that small linear map). In chunks of
    ``LEAN_CHUNK`` inputs. The same interpolation as W to round-off (tests/gp/test_marginal_grid.py).
    """

    def __init__(self, x: torch.Tensor, lo: torch.Tensor, span: torch.Tensor, nodes: int, _t: bool = False,
                 _parts: tuple | None = None):
        self.nodes, self._t = int(nodes), _t
        if _parts is not None:
            self.interval, self.offset, self.rows, self.members = _parts
            return
        h = span / (nodes - 1)
        u = (x[..., 0] - lo) / h  # (*b, NK)
        idx = u.floor().clamp_(0, nodes - 2)
        self.offset = (u - idx).clamp_(0.0, 1.0).reshape(-1)
        lead = idx.shape[:-1]
        self.members = int(np.prod(lead, dtype=np.int64))
        base = (torch.arange(self.members, device=idx.device, dtype=torch.int64) * (nodes - 1)).reshape(*lead, 1)
        interval = (idx.to(torch.int64) + base).reshape(-1)
        if interval.numel() and (int(interval.min()) < 0 or int(interval.max()) >= self.members * (nodes - 1)):
            raise ValueError("MarginalGrid: an input fell outside the grid; use the exact marginals.")
        # int32 where it fits: half the memory, and index_select / index_add_ take it as it is.
        self.interval = interval.to(torch.int32) if self.members * (nodes - 1) < 2**31 else interval
        self.rows = int(self.interval.numel())

    def transposed(self) -> "_LeanWeights":
        return _LeanWeights(None, None, None, self.nodes, _t=not self._t,
                            _parts=(self.interval, self.offset, self.rows, self.members))

    def __matmul__(self, v: torch.Tensor) -> torch.Tensor:
        checkpoint()
        cols = v.shape[-1]
        if not self._t:  # W @ v: (rows, C); every pass on contiguous 1-D tensors
            vv = v.reshape(self.members, 2, self.nodes, cols)
            out = v.new_empty(self.rows, cols)
            for j in range(cols):
                f, d = vv[:, 0, :, j], vv[:, 1, :, j]
                f0, f1, d0, d1 = f[:, :-1], f[:, 1:], d[:, :-1], d[:, 1:]
                coef = [f0.reshape(-1), d0.reshape(-1), (3.0 * (f1 - f0) - 2.0 * d0 - d1).reshape(-1),
                        (2.0 * (f0 - f1) + d0 + d1).reshape(-1)]
                for a in range(0, self.rows, LEAN_CHUNK):
                    b = min(a + LEAN_CHUNK, self.rows)
                    i, t = self.interval[a:b], self.offset[a:b]
                    c0, c1, c2, c3 = (c.index_select(0, i) for c in coef)
                    acc = c3.mul_(t).add_(c2).mul_(t).add_(c1).mul_(t).add_(c0)  # Horner
                    out[a:b, j] = acc
            return out
        width = self.members * (self.nodes - 1)
        out = v.new_zeros(self.members, 2, self.nodes, cols)  # W^T @ v: (B 2G, C)
        for j in range(cols):
            g_coef = [v.new_zeros(width) for _ in range(4)]
            for a in range(0, self.rows, LEAN_CHUNK):
                b = min(a + LEAN_CHUNK, self.rows)
                i, t = self.interval[a:b], self.offset[a:b]
                g = v[a:b, j].contiguous()
                g_coef[0].index_add_(0, i, g)
                for k in range(1, 4):
                    g = g * t
                    g_coef[k].index_add_(0, i, g)
            g0, g1, g2, g3 = (c.reshape(self.members, self.nodes - 1) for c in g_coef)
            out[:, 0, :-1, j] += g0 - 3.0 * g2 + 2.0 * g3
            out[:, 0, 1:, j] += 3.0 * g2 - 2.0 * g3
            out[:, 1, :-1, j] += g1 - 2.0 * g2 + g3
            out[:, 1, 1:, j] += g3 - g2
        return out.reshape(-1, cols)


class _SparseProduct(torch.autograd.Function):
    """W @ V for a fixed sparse W (given with its transpose, both CSR) and a dense V with gradient."""

    @staticmethod
    def forward(ctx, v, w, wt):
        ctx.wt = wt
        return w @ v

    @staticmethod
    def backward(ctx, grad):
        return ctx.wt @ grad.contiguous(), None, None


def _node_values(zu: torch.Tensor, ls: torch.Tensor, log_scale: torch.Tensor, chol_inv: torch.Tensor,
                 mean: torch.Tensor, cov: torch.Tensor, kdiag: torch.Tensor, xg: torch.Tensor, h: torch.Tensor,
                 mean_field: bool) -> tuple[torch.Tensor, ...]:
    """mu - x and var with their x-derivatives (times the spacing ``h``) at the nodes ``xg`` of a
    :class:`MarginalGrid`, as (*b, 2G, 2) ``values`` (columns mu - x and var; rows the G values, then
    the G derivatives), and the intermediates D = (u - x_g) / l, K = K_ug, K' = K * D / l (= dK/dx),
    A = L^-1 K, A' = L^-1 K' and A * A' that :class:`_MeanFieldGridMarginals` differentiates.

    mu - x = m^T A, d(mu - x)/dx = m^T A'; var = k(x, x) + jitter + (s^2 - 1)^T A^2 and
    dvar/dx = 2 (s^2 - 1)^T (A * A') (mean-field), or with C^T A in place of the squares (Cholesky).
    """
    d = (zu - xg.mT) / ls  # (*b, M, G)
    kug = torch.addcmul(log_scale.reshape(*log_scale.shape, 1, 1), d, d, value=-0.5).exp()
    kd = kug * d / ls
    a = chol_inv @ kug
    da = chol_inv @ kd
    ada = a * da
    m_row = mean.unsqueeze(-2)
    res, dres = (m_row @ a).squeeze(-2), (m_row @ da).squeeze(-2)
    if mean_field:
        w_row = (cov - 1.0).unsqueeze(-2)
        var, dvar = kdiag + (w_row @ (a * a)).squeeze(-2), 2.0 * (w_row @ ada).squeeze(-2)
    else:
        ca, cda = cov.mT @ a, cov.mT @ da
        var = kdiag + (ca * ca - a * a).sum(-2)
        dvar = 2.0 * (ca * cda - ada).sum(-2)
    values = torch.stack([torch.cat([res, dres * h], -1), torch.cat([var, dvar * h], -1)], dim=-1)
    return values, d, kug, kd, a, da, ada


class _MeanFieldGridMarginals(torch.autograd.Function):
    """The interpolated marginals of :meth:`GPRecalibrationModel._grid_marginals` for the mean-field
    family, (B * NK, 2) columns mu - x and var, with analytic gradients.

    Why: through autograd the ~25 small (M, G) operations at the nodes and the slicing of the
    result made ~35 nodes of the backward pass, each with the engine's overhead, about a third of a
    K = 10 evaluation's backward pass. With D = (u - x_g) / l, K = exp(log s^2 - D^2 / 2),
    K' = K * D / l (= dK/dx), A = L^-1 K, A' = L^-1 K', w = s^2 - 1, and the node values
    res = m^T A, dres = m^T A', var = kdiag + w^T A^2, dvar = 2 w^T (A * A') (the derivatives times
    the node spacing h before the interpolation W):

    * g_m = A g_res + A' g_dres, g_(s^2) = A^2 g_var + 2 (A * A') g_dvar, g_kdiag = sum g_var;
    * G_A = m g_res^T + 2 A * (w g_var^T) + 2 A' * (w g_dvar^T), G_A' = m g_dres^T + 2 A * (w g_dvar^T);
    * g_(L^-1) = G_A K^T + G_A' K'^T; G_K = L^-T G_A, G_K' = L^-T G_A';
    * H = (G_K + G_K' * D / l) * K, G_D = G_K' * K / l - H * D: g_(log s^2) = sum H,
      g_u = sum_g G_D / l, g_l = -(sum G_K' * K' + sum G_D * D) / l.

    Tested against autograd through the same operations (values and gradients).
    """

    @staticmethod
    def forward(ctx, zu, ls, log_scale, chol_inv, mean, s2, kdiag, xg, h, w, wt, x, shape):
        values, d, kug, kd, a, da, ada = _node_values(zu, ls, log_scale, chol_inv, mean, s2, kdiag, xg, h, True)
        out = w @ values.reshape(-1, 2)  # (B * NK, 2)
        var_all = out[:, 1]
        kept = var_all > VAR_FLOOR  # round-off below the white noise: clamped, no gradient
        ctx.save_for_backward(d, kug, kd, a, da, ada, chol_inv, mean, s2, ls, h, kept)
        ctx.wt = wt
        return (x.reshape(-1) + out[:, 0]).reshape(shape), var_all.clamp_min(VAR_FLOOR).reshape(shape)

    @staticmethod
    def backward(ctx, g_mu, g_var):
        d, kug, kd, a, da, ada, chol_inv, mean, s2, ls, h, kept = ctx.saved_tensors
        nodes = d.shape[-1]
        g_out = torch.stack([g_mu.reshape(-1), g_var.reshape(-1) * kept], dim=-1)
        g_values = (ctx.wt @ g_out).reshape(*d.shape[:-2], 2 * nodes, 2)
        g_res, g_var = g_values[..., :nodes, 0], g_values[..., :nodes, 1]  # (*b, G)
        g_dres, g_dvar = g_values[..., nodes:, 0] * h, g_values[..., nodes:, 1] * h
        g_mean = (a @ g_res.unsqueeze(-1) + da @ g_dres.unsqueeze(-1))[..., 0]
        g_s2 = ((a * a) @ g_var.unsqueeze(-1) + ada @ (2.0 * g_dvar).unsqueeze(-1))[..., 0]
        g_kdiag = g_var.sum(-1, keepdim=True)
        w2 = (2.0 * (s2 - 1.0)).unsqueeze(-1)  # (*b, M, 1)
        m_col = mean.unsqueeze(-1)
        # Outer products as rank-1 GEMMs (faster than broadcast multiplications of (M, 1) and (1, G) views).
        wv, wdv = w2 @ g_var.unsqueeze(-2), w2 @ g_dvar.unsqueeze(-2)  # (*b, M, G)
        g_a = (a * wv).add_(da * wdv).add_(m_col @ g_res.unsqueeze(-2))
        g_da = (a * wdv).add_(m_col @ g_dres.unsqueeze(-2))
        g_chol_inv = g_a @ kug.mT + g_da @ kd.mT
        chol_inv_t = chol_inv.mT
        g_k, g_kd = chol_inv_t @ g_a, chol_inv_t @ g_da
        hh = g_kd.mul(d).div_(ls).add_(g_k).mul_(kug)  # H = (G_K + G_K' * D / l) * K
        g_log_scale = hh.sum((-2, -1))
        g_d = (g_kd * kug).div_(ls).sub_(hh.mul_(d))  # G_D
        g_zu = g_d.sum(-1, keepdim=True) / ls
        g_ls = -((g_kd * kd).sum((-2, -1), keepdim=True) + (g_d * d).sum((-2, -1), keepdim=True)) / ls
        return g_zu, g_ls, g_log_scale, g_chol_inv, g_mean, g_s2, g_kdiag, None, None, None, None, None, None


def broadcast_batch_shapes(*shapes: torch.Size | tuple[int, ...]) -> torch.Size:
    """``torch.broadcast_shapes`` for plain integer shapes, written out.

    Why: torch's own (``torch._refs._broadcast_shapes``) imports ``torch.fx.experimental.symbolic_shapes``
    on its first call, and with it sympy and mpmath (483 modules): ~0.7 CPU s, most of what the first
    GP fit of a process paid beyond the later ones (benchmarks/RESULTS_pbr_scale.md). GPyTorch calls it
    when a kernel with sub-kernels reads its batch shape, i.e. whenever a model is built.
    """
    out: list[int] = []
    for shape in shapes:
        dims = [int(shape)] if isinstance(shape, int) else [int(d) for d in shape]
        if len(dims) > len(out):
            out = [1] * (len(dims) - len(out)) + out
        for i, d in enumerate(dims, start=len(out) - len(dims)):
            if out[i] == 1:
                out[i] = d
            elif d != 1 and d != out[i]:
                raise RuntimeError(f"Shapes {[tuple(s) if not isinstance(s, int) else (s,) for s in shapes]} "
                                   "cannot be broadcast together.")
    return torch.Size(out)


class _BatchShape:
    """Kernel mixin: ``batch_shape`` broadcast by :func:`broadcast_batch_shapes` (GPyTorch's
    ``Kernel.batch_shape`` otherwise, which calls ``torch.broadcast_shapes``)."""

    @property
    def batch_shape(self) -> torch.Size:
        kernels = list(self.sub_kernels())
        if kernels:
            return broadcast_batch_shapes(self._batch_shape, *[k.batch_shape for k in kernels])
        return self._batch_shape

    @batch_shape.setter
    def batch_shape(self, val: torch.Size) -> None:
        self._batch_shape = val


class _ScaleKernel(_BatchShape, ScaleKernel):
    """GPyTorch's ``ScaleKernel`` (same parameters and state) without ``torch.broadcast_shapes``."""


class _AdditiveKernel(_BatchShape, AdditiveKernel):
    """GPyTorch's ``AdditiveKernel`` (same parameters and state) without ``torch.broadcast_shapes``."""


class WhiteNoiseKernel(Kernel):
    """White noise k(x_i, x_j) = sigma_w^2 * 1[i == j] for the SAME input set, zero across sets.

    GPyTorch 1.15 has no such kernel any more (GP_SPEC section 1). As in GPflow's ``White``:
    ``k(X)`` (``x2`` omitted or the same tensor) and ``diag=True`` give sigma_w^2 on the diagonal;
    the covariance between two different input sets (e.g. inducing points and data) is zero.
    Inputs that are equal in value and shape (not only the same object) also count as "the same set",
    because GPyTorch slices lazily evaluated kernels into new tensors (for example
    ``VariationalStrategy`` slices k([Z; X]) into its K_uu and K_ff blocks).

    Parameters
    ----------
    noise_constraint : gpytorch.constraints.Interval, optional
        Constraint on sigma_w^2; default positive (softplus).
    batch_shape : torch.Size
        One noise variance per batch entry.
    """

    is_stationary = True

    def __init__(self, noise_constraint: Interval | None = None, batch_shape: torch.Size = torch.Size([]), **kwargs):
        super().__init__(batch_shape=batch_shape, **kwargs)
        self.register_parameter("raw_noise", torch.nn.Parameter(torch.zeros(*self.batch_shape, 1)))
        self.register_constraint("raw_noise", noise_constraint if noise_constraint is not None else Positive())

    @property
    def noise(self) -> torch.Tensor:
        """sigma_w^2, shape (*batch_shape, 1)."""
        return self.raw_noise_constraint.transform(self.raw_noise)

    @noise.setter
    def noise(self, value: float | torch.Tensor) -> None:
        value = torch.as_tensor(value, dtype=self.raw_noise.dtype, device=self.raw_noise.device)
        self.initialize(raw_noise=self.raw_noise_constraint.inverse_transform(value.expand_as(self.raw_noise)))

    def forward(self, x1: torch.Tensor, x2: torch.Tensor, diag: bool = False, **params):
        batch = broadcast_batch_shapes(x1.shape[:-2], x2.shape[:-2], self.batch_shape)
        noise = self.noise  # (*batch_shape, 1)
        if diag:
            return noise.expand(*batch, x1.shape[-2])
        same = x1 is x2 or (x1.shape == x2.shape and torch.equal(x1, x2))
        if same:
            return DiagLinearOperator(noise.expand(*batch, x1.shape[-2]))
        return ZeroLinearOperator(*batch, x1.shape[-2], x2.shape[-2], dtype=x1.dtype, device=x1.device)


class IdentityMean(gpytorch.means.Mean):
    """m(z) = z: with g = 0 the model returns the uncalibrated prediction (GP_SPEC section 1)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x[..., 0]


class LogMean(gpytorch.means.Mean):
    """m(p) = log p, clipped at the smallest positive float (pycalib's ``gp_classes.Log``): Wenger's
    mean function on probability inputs; with g = 0 the model returns the uncalibrated prediction."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.log(x[..., 0].clamp_min(torch.finfo(x.dtype).tiny))


def kmeans_1d(values: np.ndarray, n_clusters: int, max_iter: int = 300, max_points: int = 1_000_000,
              seed: int = 0) -> np.ndarray:
    """Lloyd's k-means on scalars, exact and fast in 1-D (sorted data, cumulative sums).

    The inducing-point initialisation of GP_SPEC section 1 ("k-means on the N*K flattened
    scalars, fixed seed"). Starts from the (k + 1/2)/M quantiles, so it is deterministic; only when
    there are more than ``max_points`` scalars is a subsample drawn, with ``seed``.

    Returns
    -------
    ndarray of shape (m,)
        Sorted distinct centres, m <= n_clusters (fewer when there are fewer distinct values).
    """
    x = np.asarray(values, dtype=np.float64).ravel()
    x = x[np.isfinite(x)]
    if x.size == 0:
        raise ValueError("Expected at least one finite value to place inducing points on.")
    if n_clusters < 1:
        raise ValueError(f"Expected argument `n_clusters` to be an integer larger than 0, but got {n_clusters}.")
    if x.size > max_points:
        x = np.random.default_rng(seed).choice(x, size=max_points, replace=False)
    xs = np.sort(x)
    uniq = np.unique(xs)
    if uniq.size <= n_clusters:
        return uniq
    cum = np.concatenate([[0.0], np.cumsum(xs)])
    centres = np.quantile(xs, (np.arange(n_clusters) + 0.5) / n_clusters)
    for _ in range(max_iter):
        checkpoint()
        centres = np.sort(centres)
        cuts = np.searchsorted(xs, (centres[:-1] + centres[1:]) / 2.0, side="right")
        starts = np.concatenate([[0], cuts])
        stops = np.concatenate([cuts, [xs.size]])
        counts = stops - starts
        new = centres.copy()
        nz = counts > 0
        new[nz] = (cum[stops[nz]] - cum[starts[nz]]) / counts[nz]
        if np.array_equal(new, centres):
            break
        centres = new
    return np.unique(centres)


def initial_inducing_points(z: np.ndarray, n_inducing: int, seed: int = 0) -> np.ndarray:
    """M inducing locations for the scores ``z`` (any shape): k-means centres, padded when too few.

    With fewer distinct values than M (e.g. tiny inputs), the remaining points are spread evenly
    over the data range so that every inducing point is distinct (K_uu stays well conditioned).
    """
    centres = kmeans_1d(z, n_inducing, seed=seed)
    if centres.size < n_inducing:
        lo, hi = float(np.min(z)), float(np.max(z))
        span = max(hi - lo, 1.0)
        extra = np.linspace(lo - 0.5 * span, hi + 0.5 * span, n_inducing - centres.size + 2)[1:-1]
        centres = np.sort(np.concatenate([centres, extra]))
    return centres


class GPRecalibrationModel(gpytorch.models.ApproximateGP):
    """Wenger's latent GP recalibration model in GPyTorch (GP_SPEC section 1).

    Parameters
    ----------
    inducing_points : Tensor of shape (*batch_shape, M) or (*batch_shape, M, 1)
        Initial inducing locations (learnable), e.g. from :func:`initial_inducing_points`.
    input_kind : {"logits", "probs", "log_probs"}
        Where the GP lives (module docstring) and Wenger's initial kernel values and constraints: on
        logits outputscale 1, lengthscale 10 (softplus-positive); on probabilities ("probs", and
        "log_probs" which applies the same values to log p) outputscale 1 in (0, 5) and
        lengthscale 0.5 in (0.001, 10) (Interval constraints); white noise 0.01 (softplus-positive)
        in all. ``inducing_points`` are in the GP's input space (p for "probs").
    variational : {"mean_field", "cholesky"}
        Whitened mean-field (diagonal) q(v) = N(m, diag s^2), Wenger's choice, or a full Cholesky
        factor. Both start at the prior N(0, I) (``mean_init_std=0``).
    batch_shape : torch.Size
        Independent GPs fitted together (alpha selection).
    jitter : float
        Diagonal jitter added to K_uu (and to the marginal variances, as GPyTorch does).

    Examples
    --------
    >>> import torch
    >>> model = GPRecalibrationModel(torch.linspace(-5, 5, 10, dtype=torch.float64), "logits")
    >>> z = torch.randn(4, 3, dtype=torch.float64)
    >>> mu, var = model.marginals(z)
    >>> bool(torch.equal(mu, z))  # q = prior: mean of g is 0, so mu = z
    True
    """

    def __init__(self, inducing_points: torch.Tensor, input_kind: InputKind = "logits",
                 variational: VariationalKind = "mean_field", batch_shape: torch.Size = torch.Size([]),
                 jitter: float = DEFAULT_JITTER):
        if input_kind not in INITIAL_VALUES:
            raise ValueError(
                f"Expected argument `input_kind` to be 'logits', 'probs' or 'log_probs', but got {input_kind!r}.")
        batch_shape = torch.Size(batch_shape)
        inducing_points = torch.as_tensor(inducing_points)
        if inducing_points.dim() == len(batch_shape) + 1:
            inducing_points = inducing_points.unsqueeze(-1)
        if inducing_points.shape[:-2] != batch_shape or inducing_points.shape[-1] != 1:
            raise ValueError(
                f"Expected `inducing_points` of shape (*{tuple(batch_shape)}, M, 1), but got {tuple(inducing_points.shape)}."
            )
        m = inducing_points.shape[-2]
        if variational == "mean_field":
            dist = MeanFieldVariationalDistribution(m, batch_shape=batch_shape, mean_init_std=0.0)
        elif variational == "cholesky":
            dist = CholeskyVariationalDistribution(m, batch_shape=batch_shape, mean_init_std=0.0)
        else:
            raise ValueError(f"Expected argument `variational` to be 'mean_field' or 'cholesky', but got {variational!r}.")
        strategy = VariationalStrategy(self, inducing_points, dist, learn_inducing_locations=True, jitter_val=jitter)
        super().__init__(strategy)
        self.input_kind = input_kind
        self.variational = variational
        self.batch_shape = batch_shape
        if input_kind == "logits":
            rbf = RBFKernel(batch_shape=batch_shape)
            scaled = _ScaleKernel(rbf, batch_shape=batch_shape)
        else:
            rbf = RBFKernel(batch_shape=batch_shape, lengthscale_constraint=Interval(1e-3, 10.0))
            scaled = _ScaleKernel(rbf, batch_shape=batch_shape, outputscale_constraint=Interval(0.0, 5.0))
        # Used by GPyTorch's own ``model(x)`` path (tests compare it with ``marginals``).
        self.mean_module = LogMean() if input_kind == "probs" else IdentityMean()
        self.covar_module = _AdditiveKernel(scaled, WhiteNoiseKernel(batch_shape=batch_shape))
        # float64 first, then Wenger's values, so that 0.01 is not rounded through float32.
        self.to(dtype=DTYPE)
        self.reset_to_prior()

    # ------------------------------------------------------------------ parts
    @property
    def scaled_rbf(self) -> ScaleKernel:
        return self.covar_module.kernels[0]

    @property
    def white(self) -> WhiteNoiseKernel:
        return self.covar_module.kernels[1]

    @property
    def jitter(self) -> float:
        return float(self.variational_strategy.jitter_val)

    @jitter.setter
    def jitter(self, value: float) -> None:
        self.variational_strategy.jitter_val = float(value)

    def reset_to_prior(self) -> None:
        """Wenger's initial kernel values and q(v) = N(0, I); inducing locations are kept."""
        init = INITIAL_VALUES[self.input_kind]
        with torch.no_grad():
            self.scaled_rbf.outputscale = init["outputscale"]
            self.scaled_rbf.base_kernel.lengthscale = init["lengthscale"]
            self.white.noise = init["white"]
            dist = self.variational_strategy._variational_distribution
            dist.variational_mean.zero_()
            if self.variational == "mean_field":
                dist._variational_stddev.fill_(1.0)
            else:
                dist.chol_variational_covar.copy_(torch.eye(dist.chol_variational_covar.shape[-1]).expand_as(
                    dist.chol_variational_covar))
            # Mark q(v) as initialised: otherwise GPyTorch's first ``model(x)`` call would overwrite
            # the (possibly fitted) variational parameters with the prior.
            self.variational_strategy.variational_params_initialized.fill_(1)

    def forward(self, x: torch.Tensor) -> gpytorch.distributions.MultivariateNormal:
        """The prior p(f) = GP(m, k) at GP inputs ``x`` (p for "probs"): used by GPyTorch's
        ``VariationalStrategy`` when calling ``model(x)``."""
        return gpytorch.distributions.MultivariateNormal(self.mean_module(x), self.covar_module(x))

    # ------------------------------------------------------------------ what the objectives need
    def kl_divergence(self) -> torch.Tensor:
        """KL(q(v) || N(0, I)) of the whitened variational distribution, shape batch_shape (GP_SPEC section 2)."""
        if self.variational == "mean_field":
            # KL(N(m, diag s^2) || N(0, I)) = (sum s^2 + m^2 - 1 - log s^2) / 2, written out: GPyTorch's
            # general MVN-to-MVN KL builds lazy operators, ~1 ms of a ~10 ms objective evaluation at
            # K = 10 (equal to it to round-off: tests/gp/test_model.py).
            mean, s2 = self._variational_terms()
            return 0.5 * (s2 + mean.square() - 1.0 - s2.log()).sum(-1)
        # GPyTorch memoises q(v) between calls of the strategy; we bypass its __call__, so clear the
        # memo or a second backward pass would reuse a freed graph.
        self.variational_strategy._clear_cache()
        return self.variational_strategy.kl_divergence()

    def _variational_terms(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(m, s^2) for mean-field or (m, C lower-triangular) for the Cholesky family."""
        dist = self.variational_strategy._variational_distribution
        if self.variational == "mean_field":
            return dist.variational_mean, dist._variational_stddev.pow(2)
        return dist.variational_mean, dist.chol_variational_covar.tril()

    def cross_covariance(self, zu: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        """K_uf = s^2 exp(-(u - x)^2 / (2 l^2)) for 1-D inputs, shape (*batch, M, NK).

        Equal to ``self.scaled_rbf(zu, x).to_dense()`` (a test pins it) but one fused broadcast:
        GPyTorch's general distance code makes several (M, NK) temporaries, which dominated the
        objective's cost for N*K = 10^5 inputs.
        """
        ls = self.scaled_rbf.base_kernel.lengthscale  # (*batch, 1, 1)
        log_scale = self.scaled_rbf.outputscale.log()
        d = (zu / ls) - (x / ls).mT  # (*batch, M, NK)
        # s^2 exp(-d^2 / 2) as exp(log s^2 - d^2 / 2): two passes over the (M, NK) block instead of four.
        return torch.addcmul(log_scale.reshape(*log_scale.shape, 1, 1), d, d, value=-0.5).exp()

    def inducing_covariance(self, zu: torch.Tensor) -> torch.Tensor:
        """K_uu + jitter I = s^2 exp(-(u_i - u_j)^2 / (2 l^2)) + (sigma_w^2 + jitter) I, shape (*batch, M, M).

        Equal to ``self.covar_module(zu).to_dense()`` plus the jitter (a test pins it), written out:
        GPyTorch's kernel call (lazy additive and scaled kernels, constraints) cost ~1.5 ms of a
        ~10 ms objective evaluation at K = 10.
        """
        ls = self.scaled_rbf.base_kernel.lengthscale  # (*batch, 1, 1)
        d = (zu / ls) - (zu / ls).mT  # (*batch, M, M)
        kuu = torch.addcmul(self.scaled_rbf.outputscale.log().reshape(*self.batch_shape, 1, 1), d, d, value=-0.5).exp()
        eye = torch.eye(kuu.shape[-1], dtype=kuu.dtype, device=kuu.device)
        return kuu + (self.white.noise.unsqueeze(-1) + self.jitter) * eye

    def marginals(self, z: torch.Tensor, grid: MarginalGrid | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """Marginal mean and variance of q(f_nk) for scores ``z`` of shape (*batch_shape, N, K).

        ``z`` is always the scores (logits, or log p); for ``input_kind="probs"`` the GP is
        evaluated at x = exp(z) = p and its mean function is log x = z, so mu = z + E g(p).
        See :meth:`_identity_mean_marginals` for the formulas. ``grid``: a :class:`MarginalGrid`
        of these very inputs (:meth:`grid_for`), to interpolate the marginals where it pays (fits).

        Raises
        ------
        NotPositiveDefiniteError
            When K_uu + jitter I has no Cholesky factor (the caller retries with more jitter).
        """
        if grid is not None and grid.source is not z:
            raise ValueError("`grid` was built for other scores: pass the grid of these very scores (grid_for(z)).")
        if self.input_kind != "probs":
            return self._identity_mean_marginals(z, grid)
        x = torch.exp(z)
        mu, var = self._identity_mean_marginals(x, grid)
        # mu = x + E g(x); the log mean function replaces the identity: z + (mu - x). Subtracting x
        # first keeps mu == z exactly where E g = 0 (at the prior).
        return z + (mu - x), var

    def grid_for(self, z: torch.Tensor) -> MarginalGrid:
        """The :class:`MarginalGrid` of the scores ``z`` (*batch_shape, N, K), for :meth:`marginals`."""
        x = kernel_inputs(z, self.input_kind)
        return MarginalGrid(x.reshape(*x.shape[:-2], x.shape[-2] * x.shape[-1], 1), source=z)

    def _identity_mean_marginals(self, z: torch.Tensor,
                                 grid: MarginalGrid | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """Marginals of f = z + g(z) at GP inputs ``z`` of shape (*batch_shape, N, K).

        Whitened SVGP predictive (as ``VariationalStrategy.forward``), with A = L^-1 K_uf and
        L L^T = K_uu + jitter I:

        mu = z + A^T m,    var = diag K_ff + jitter - sum_m A_m^2 + ||C^T A||^2 (C C^T = S).

        Raises
        ------
        NotPositiveDefiniteError
            When K_uu + jitter I has no Cholesky factor (the caller retries with more jitter).
        """
        *lead, n, k = z.shape
        x = z.reshape(*lead, n * k, 1)
        zu = self.variational_strategy.inducing_points
        kuu = self.inducing_covariance(zu)
        chol, info = torch.linalg.cholesky_ex(kuu)
        if bool((info > 0).any()) or not bool(torch.isfinite(chol).all()):
            raise NotPositiveDefiniteError(
                f"the inducing-point covariance K_uu is not positive definite with jitter {self.jitter:g} "
                f"(outputscale {self.scaled_rbf.outputscale.detach().cpu().numpy().ravel()[:3]}, "
                f"lengthscale {self.scaled_rbf.base_kernel.lengthscale.detach().cpu().numpy().ravel()[:3]})"
            )
        eye = torch.eye(chol.shape[-1], dtype=chol.dtype, device=chol.device)
        chol_inv = torch.linalg.solve_triangular(chol, eye.expand_as(chol), upper=False)
        mean, cov = self._variational_terms()
        kdiag = (self.scaled_rbf.outputscale.unsqueeze(-1) + self.white.noise) + self.jitter  # (*b, 1)
        ls = self.scaled_rbf.base_kernel.lengthscale
        log_scale = self.scaled_rbf.outputscale.log()
        nodes = grid.node_count(ls) if grid is not None else 0
        if nodes:
            if self.variational == "mean_field":  # clamped and shaped by the Function itself
                w, wt = grid.weights(nodes)
                xg, h = grid.node_inputs(nodes)
                return _MeanFieldGridMarginals.apply(zu, ls, log_scale, chol_inv, mean, cov, kdiag, xg, h, w, wt,
                                                     grid.x, (*lead, n, k))
            mu, var = self._grid_marginals(grid, nodes, zu, ls, log_scale, chol_inv, mean, cov, kdiag)
            return mu.reshape(*lead, n, k), var.clamp_min(VAR_FLOOR).reshape(*lead, n, k)
        budget = MARGINAL_CHUNK_ELEMENTS_CUDA if zu.is_cuda else MARGINAL_CHUNK_ELEMENTS
        cols = max(1, budget // max(1, zu.shape[-2] * int(np.prod(lead, dtype=np.int64))))
        if self.variational == "mean_field" and torch.is_grad_enabled():
            mu, var = _MeanFieldMarginals.apply(x, zu, ls, log_scale, chol_inv, mean, cov, kdiag, cols)
            var = var.clamp_min(VAR_FLOOR)
            return mu.reshape(*lead, n, k), var.reshape(*lead, n, k)
        mus, variances = [], []
        for start in range(0, n * k, cols):
            xc = x[..., start:start + cols, :]
            if torch.is_grad_enabled() and n * k > cols:
                # Column chunks small enough for the cache, recomputed in the backward pass: the
                # (M, NK) temporaries of one big pass made the marginals ~40% of an objective.
                mc, vc = torch.utils.checkpoint.checkpoint(
                    _marginal_chunk, xc, zu, ls, log_scale, chol_inv, mean, cov, kdiag, self.variational == "mean_field",
                    use_reentrant=False)
            else:
                mc, vc = _marginal_chunk(xc, zu, ls, log_scale, chol_inv, mean, cov, kdiag,
                                         self.variational == "mean_field")
            mus.append(mc)
            variances.append(vc)
        mu = mus[0] if len(mus) == 1 else torch.cat(mus, dim=-1)
        var = variances[0] if len(variances) == 1 else torch.cat(variances, dim=-1)
        # Exactly >= white noise in exact arithmetic; guard against round-off only.
        var = var.clamp_min(VAR_FLOOR)
        return mu.reshape(*lead, n, k), var.reshape(*lead, n, k)

    def _grid_marginals(self, grid: MarginalGrid, nodes: int, zu: torch.Tensor, ls: torch.Tensor,
                        log_scale: torch.Tensor, chol_inv: torch.Tensor, mean: torch.Tensor, cov: torch.Tensor,
                        kdiag: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """mu and var (before clamping), (*b, NK), at ``grid``'s inputs by cubic Hermite interpolation
        between ``nodes`` nodes (:class:`MarginalGrid`), with autograd (everything of size NK is one
        sparse product, forward and backward): the fits' path for the Cholesky family, and the
        reference that :class:`_MeanFieldGridMarginals` (the mean-field family's) is tested against.

        The node values are :func:`_node_values`'s.
        """
        xg, h = grid.node_inputs(nodes)  # (*b, G, 1), (*b, 1)
        shape = grid.x.shape[:-1]
        values = _node_values(zu, ls, log_scale, chol_inv, mean, cov, kdiag, xg, h, self.variational == "mean_field")[0]
        w, wt = grid.weights(nodes)
        out = _SparseProduct.apply(values.reshape(-1, 2), w, wt)  # (B * NK, 2)
        return grid.x[..., 0] + out[:, 0].reshape(shape), out[:, 1].reshape(shape)

    # ------------------------------------------------------------------ batch members
    def member(self, index: tuple[int, ...] | int) -> "GPRecalibrationModel":
        """An unbatched copy of the GP at batch position ``index`` (same parameters and jitter)."""
        index = (index,) if isinstance(index, int) else tuple(index)
        zu = self.variational_strategy.inducing_points.detach()[index].clone()
        single = GPRecalibrationModel(zu, self.input_kind, self.variational, jitter=self.jitter)
        single.to(zu.device)
        mine = dict(self.named_parameters())
        with torch.no_grad():
            for name, p in single.named_parameters():
                p.copy_(mine[name][index])
        return single

    def set_member(self, index: tuple[int, ...] | int, single: "GPRecalibrationModel") -> None:
        """Write an unbatched model's parameters into batch position ``index``."""
        index = (index,) if isinstance(index, int) else tuple(index)
        theirs = dict(single.named_parameters())
        with torch.no_grad():
            for name, p in self.named_parameters():
                p[index] = theirs[name]
