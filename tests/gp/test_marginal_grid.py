"""Interpolated marginals (``MarginalGrid``): the fits' mu and var by cubic Hermite interpolation
between grid nodes, pinned against the marginals computed at every input (values and gradients)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import pbr_core.gp.model as model_module
import pbr_core.gp.problem as problem_module
from gp_testdata import split
from pbr_core.gp.model import GPRecalibrationModel, MarginalGrid, initial_inducing_points
from pbr_core.gp.objectives import ObjectiveSpec, draw_mc_noise
from pbr_core.gp.problem import FitData

F64 = torch.float64


def _model(z: torch.Tensor, kind: str, variational: str = "mean_field", batch: tuple = (), seed: int = 0,
           mean_scale: float = 1.0, lengthscale: float | None = None) -> GPRecalibrationModel:
    """A model away from its prior: random variational mean (times ``mean_scale``) and standard
    deviations in (0.2, 1.8), outputscale 0.8, the lengthscale given or Wenger's."""
    x = model_module.kernel_inputs(z, kind).numpy()
    zu = np.stack([initial_inducing_points(x[i] if batch else x, 8) for i in range(batch[0] if batch else 1)])
    zu = torch.as_tensor(zu if batch else zu[0])
    m = GPRecalibrationModel(zu, kind, variational, batch_shape=torch.Size(batch))
    g = torch.Generator().manual_seed(seed)
    dist = m.variational_strategy._variational_distribution
    with torch.no_grad():
        dist.variational_mean.copy_(mean_scale * torch.randn(dist.variational_mean.shape, generator=g, dtype=F64))
        if variational == "mean_field":
            dist._variational_stddev.copy_(0.2 + 1.6 * torch.rand(dist._variational_stddev.shape, generator=g, dtype=F64))
        else:
            c = dist.chol_variational_covar
            c.copy_(torch.eye(c.shape[-1], dtype=F64) * 0.7 + 0.2 * torch.randn(c.shape, generator=g, dtype=F64).tril())
        m.scaled_rbf.outputscale = 0.8
        if lengthscale is not None:
            m.scaled_rbf.base_kernel.lengthscale = lengthscale
    return m


def _scores(kind: str, batch: tuple = (), n: int = 1000, k: int = 20, seed: int = 1) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    z = torch.randn(*batch, n, k, generator=g, dtype=F64) * 4
    if batch:  # members with inputs of different spans (folds of different data)
        z = z * torch.linspace(0.5, 1.5, batch[0], dtype=F64).reshape(-1, 1, 1)
    return torch.log_softmax(z, -1) if kind != "logits" else z


def _values_and_grads(m: GPRecalibrationModel, z: torch.Tensor, grid: MarginalGrid | None):
    g = torch.Generator().manual_seed(5)
    w_mu = torch.randn(z.shape, generator=g, dtype=F64)
    w_var = torch.randn(z.shape, generator=g, dtype=F64)
    m.zero_grad()
    mu, var = m.marginals(z, grid)
    ((mu * w_mu).sum() + (var * w_var).sum()).backward()
    return mu.detach(), var.detach(), {n: p.grad.clone() for n, p in m.named_parameters()}


@pytest.mark.parametrize("batch", [(), (3,)])
@pytest.mark.parametrize("variational", ["mean_field", "cholesky"])
@pytest.mark.parametrize("kind", ["logits", "probs", "log_probs"])
def test_interpolated_marginals_and_gradients_equal_the_exact_ones(kind: str, variational: str, batch: tuple) -> None:
    z = _scores(kind, batch)
    m = _model(z, kind, variational, batch, lengthscale=None if kind == "probs" else 3.0)
    grid = m.grid_for(z)
    assert grid.node_count(m.scaled_rbf.base_kernel.lengthscale) > 0  # the grid is really used
    mu0, var0, g0 = _values_and_grads(m, z, None)
    mu1, var1, g1 = _values_and_grads(m, z, grid)
    assert not torch.equal(mu0, mu1)  # computed differently
    torch.testing.assert_close(mu1, mu0, rtol=0, atol=1e-9)
    torch.testing.assert_close(var1, var0, rtol=1e-9, atol=1e-10)
    for name in g0:
        scale = float(g0[name].abs().max())
        torch.testing.assert_close(g1[name], g0[name], rtol=1e-7, atol=1e-8 * max(scale, 1.0), msg=name)


def test_interpolation_error_stays_small_for_extreme_parameters() -> None:
    """A variational mean of norm ~30 (KL ~450), variances far from the prior's, and the shortest
    lengthscale at which the grid is still used: the error bound of MarginalGrid's docstring."""
    z = _scores("logits", n=1000, k=100)
    span = float(z.max() - z.min())
    nodes_allowed = model_module.GRID_MAX_FRACTION * z.numel()
    lengthscale = span * model_module.GRID_NODES_PER_LENGTHSCALE * 1.25 / (nodes_allowed - 64)
    m = _model(z, "logits", mean_scale=10.0, lengthscale=lengthscale)
    grid = m.grid_for(z)
    assert grid.node_count(m.scaled_rbf.base_kernel.lengthscale) > 0
    with torch.no_grad():
        mu0, var0 = m.marginals(z)
        mu1, var1 = m.marginals(z, grid)
    norm_m = float(m.variational_strategy._variational_distribution.variational_mean.norm())
    assert norm_m > 25
    assert float((mu1 - mu0).abs().max()) < 1e-10 * norm_m
    assert float((var1 - var0).abs().max()) < 1e-9 * 0.8 * 8 * 3.3  # s^2 * M * max |1 - s_m^2|


def test_the_grid_is_not_used_where_it_would_not_pay() -> None:
    """Few inputs, a lengthscale so short that the nodes would outnumber a quarter of the inputs, all
    inputs equal, or a non-finite input: the marginals are the exact ones, bit for bit."""
    few = _scores("logits", n=30, k=5)
    m = _model(few, "logits", lengthscale=30.0)
    assert m.grid_for(few).node_count(m.scaled_rbf.base_kernel.lengthscale) == 0
    z = _scores("logits", n=1000, k=20)
    assert m.grid_for(z).node_count(m.scaled_rbf.base_kernel.lengthscale) > 0  # the long lengthscale pays
    m = _model(z, "logits", lengthscale=0.5)
    grid = m.grid_for(z)
    assert grid.node_count(m.scaled_rbf.base_kernel.lengthscale) == 0
    with torch.no_grad():
        assert all(torch.equal(a, b) for a, b in zip(m.marginals(z), m.marginals(z, grid)))
    flat = torch.zeros(2000, 4, dtype=F64)
    assert m.grid_for(flat).node_count(m.scaled_rbf.base_kernel.lengthscale) == 0
    m_log = _model(torch.log_softmax(z, -1), "log_probs", lengthscale=3.0)
    with_zero = torch.log_softmax(_scores("logits", n=1000, k=20), -1)
    with_zero[0, 0] = -torch.inf  # p = 0: log p = -inf
    grid = m_log.grid_for(with_zero)
    assert grid.node_count(m_log.scaled_rbf.base_kernel.lengthscale) == 0
    with pytest.raises(ValueError, match="finite, not all equal inputs"):
        grid.weights(128)


def test_grid_weights_are_kept_while_the_lengthscale_moves_little() -> None:
    z = _scores("logits", n=2000, k=20)
    grid = MarginalGrid(z.reshape(-1, 1))
    first = grid.node_count(torch.tensor(2.0, dtype=F64))
    assert first > 0
    weights = grid.weights(first)
    for ls in (2.2, 1.9, 1.7, 2.6):  # within [need, 2 need]: the same nodes and the same weights
        assert grid.node_count(torch.tensor(ls, dtype=F64)) == first
        assert grid.weights(first) is weights
    assert grid.node_count(torch.tensor(1.0, dtype=F64)) > first  # half the lengthscale needs more
    assert grid.node_count(torch.tensor(8.0, dtype=F64)) < first  # four times: fewer nodes


def test_fit_data_interpolates_on_the_cpu_and_the_objective_matches(cifar100_logits, monkeypatch) -> None:
    """The training objective with the grid equals the exact one at the same parameters (PBR and
    GP calibration, CIFAR-100 logits), and ``INTERPOLATE_MARGINALS = False`` switches it off."""
    s = split(*cifar100_logits, n_re=400)
    z = torch.as_tensor(s.z)
    m = _model(z, "logits", lengthscale=4.0)
    eps = draw_mc_noise(len(s.y), 32, z.shape[1], seed=0, dtype=torch.float32, antithetic=True)
    for spec in (ObjectiveSpec.pbr(0.5), ObjectiveSpec.gp_calibration()):
        data = FitData(z=z, labels=torch.as_tensor(s.y), spec=spec, eps=eps if spec.needs_mc else None)
        assert data._grid(m) is not None and data.with_alpha(0.1)._grid(m) is data._grid(m)
        with torch.no_grad():
            interpolated = float(data.terms(m).total)
        monkeypatch.setattr(problem_module, "INTERPOLATE_MARGINALS", False)
        assert data._grid(m) is None
        with torch.no_grad():
            exact = float(data.terms(m).total)
        monkeypatch.setattr(problem_module, "INTERPOLATE_MARGINALS", True)
        # (PBR's Monte Carlo terms run in float32, where the grid's ~1e-11 changes of mu vanish.)
        assert interpolated != exact or spec.needs_mc
        assert abs(interpolated - exact) <= 1e-10 * abs(exact)


def test_a_fit_with_the_grid_reaches_the_exact_fits_objective(cifar10_logits, monkeypatch) -> None:
    """One PBR fit (CIFAR-10, 500 rows) with and without the grid: the same objective to 1e-5."""
    from pbr_core.predictions import Predictions
    from pbr_core.recalibrators.gp import PBR

    s = split(*cifar10_logits, n_re=500)
    preds = Predictions.from_arrays(s.z, s.y, input_type="logits")
    reports = []
    for on in (True, False):
        monkeypatch.setattr(problem_module, "INTERPOLATE_MARGINALS", on)
        reports.append(PBR(alpha=0.5, device="cpu").fit(preds).fit_report_)
    assert abs(reports[0]["objective"] - reports[1]["objective"]) <= 1e-5 * reports[1]["objective"]


def test_degenerate_members_and_spacings_fall_back_to_the_exact_marginals() -> None:
    """A batch member whose scores are all equal (a split of uniform predictions), or a spacing that
    underflows to 0, would put NaN into the grid's indices: no grid then (the review of this change
    crashed the process with both), and ``weights`` refuses."""
    z = torch.stack([_scores("logits", n=500, k=10), torch.zeros(500, 10, dtype=F64)])
    m = _model(z, "logits", batch=(2,), lengthscale=10.0)
    grid = m.grid_for(z)
    assert not grid.usable and grid.node_count(m.scaled_rbf.base_kernel.lengthscale) == 0
    with pytest.raises(ValueError, match="not all equal"):
        grid.weights(512)
    with torch.no_grad():
        assert all(torch.equal(a, b) for a, b in zip(m.marginals(z), m.marginals(z, grid)))
    tiny = torch.zeros(8192, 1, dtype=F64)
    tiny[0, 0] = 5e-324  # span > 0, but span / (nodes - 1) == 0.0
    assert MarginalGrid(tiny).node_count(torch.tensor(1.0, dtype=F64)) == 0


def test_a_grid_serves_only_the_scores_it_was_built_for() -> None:
    z = _scores("logits")
    m = _model(z, "logits", lengthscale=3.0)
    with pytest.raises(ValueError, match="other scores"):
        m.marginals(z.clone(), m.grid_for(z))
    z32 = z.float()  # float32 scores: no grid (the model works in float64), the exact path as before
    assert m.grid_for(z32).node_count(m.scaled_rbf.base_kernel.lengthscale) == 0


@pytest.mark.parametrize("batch", [(), (3,)])
@pytest.mark.parametrize("kind", ["logits", "probs"])
def test_mean_field_grid_function_equals_autograd_through_the_same_operations(kind: str, batch: tuple) -> None:
    """``_MeanFieldGridMarginals`` (analytic gradients, what mean-field fits use) against autograd
    through ``_grid_marginals`` on the same inputs: values and the gradients of every input."""
    z = _scores(kind, batch)
    m = _model(z, kind, "mean_field", batch, lengthscale=None if kind == "probs" else 3.0)
    grid = m.grid_for(z)
    with torch.no_grad():
        zu = m.variational_strategy.inducing_points.clone()
        ls = m.scaled_rbf.base_kernel.lengthscale.clone()
        log_scale = m.scaled_rbf.outputscale.log().clone()
        chol = torch.linalg.cholesky(m.inducing_covariance(zu))
        eye = torch.eye(chol.shape[-1], dtype=F64).expand_as(chol)
        chol_inv = torch.linalg.solve_triangular(chol, eye, upper=False)
        mean, s2 = (t.clone() for t in m._variational_terms())
        kdiag = (m.scaled_rbf.outputscale.unsqueeze(-1) + m.white.noise + m.jitter).clone()
    nodes = grid.node_count(ls)
    assert nodes > 0
    leaves = [t.clone().requires_grad_() for t in (zu, ls, log_scale, chol_inv, mean, s2, kdiag)]
    mu_ref, var_ref = m._grid_marginals(grid, nodes, *leaves)
    shape = z.shape
    mu_ref, var_ref = mu_ref.reshape(shape), var_ref.clamp_min(model_module.VAR_FLOOR).reshape(shape)
    g = torch.Generator().manual_seed(3)
    w_mu, w_var = torch.randn(shape, generator=g, dtype=F64), torch.randn(shape, generator=g, dtype=F64)
    grads_ref = torch.autograd.grad((mu_ref * w_mu).sum() + (var_ref * w_var).sum(), leaves)
    leaves2 = [t.detach().clone().requires_grad_() for t in leaves]
    w, wt = grid.weights(nodes)
    xg, h = grid.node_inputs(nodes)
    mu, var = model_module._MeanFieldGridMarginals.apply(*leaves2, xg, h, w, wt, grid.x, tuple(shape))
    torch.testing.assert_close(mu, mu_ref, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(var, var_ref, rtol=1e-12, atol=1e-12)
    grads = torch.autograd.grad((mu * w_mu).sum() + (var * w_var).sum(), leaves2)
    for name, a, b in zip(("zu", "ls", "log_scale", "chol_inv", "mean", "s2", "kdiag"), grads, grads_ref):
        assert a.shape == b.shape, name
        torch.testing.assert_close(a, b, rtol=1e-9, atol=1e-10 * max(1.0, float(b.abs().max())), msg=name)


def test_mean_field_grid_function_gives_no_gradient_through_a_clamped_variance() -> None:
    """Where an interpolated variance falls below ``VAR_FLOOR`` it is clamped and (as ``clamp_min``)
    passes no gradient: one inducing point, a variational variance of 0 and k(x, x) just below 1."""
    z = _scores("logits")
    m = _model(z, "logits", "mean_field", lengthscale=3.0)
    grid = m.grid_for(z)
    nodes = grid.node_count(m.scaled_rbf.base_kernel.lengthscale)
    w, wt = grid.weights(nodes)
    xg, h = grid.node_inputs(nodes)
    zu = torch.tensor([[0.0]], dtype=F64)
    ls = torch.tensor([[3.0]], dtype=F64)
    log_scale = torch.tensor(0.0, dtype=F64)
    chol_inv = torch.ones(1, 1, dtype=F64)
    mean = torch.zeros(1, dtype=F64)
    s2 = torch.zeros(1, dtype=F64)  # var = kdiag - k(x, u)^2 (k(u, u) = 1): below 0 near x = u = 0
    kdiag = torch.full((1,), 1.0 - 1e-3, dtype=F64).requires_grad_()
    _, var = model_module._MeanFieldGridMarginals.apply(zu, ls, log_scale, chol_inv, mean, s2, kdiag, xg, h, w, wt,
                                                         grid.x, tuple(z.shape))
    raw = m._grid_marginals(grid, nodes, zu, ls, log_scale, chol_inv, mean, s2, kdiag.detach())[1]
    clamped = raw.reshape(z.shape) <= model_module.VAR_FLOOR
    assert 0 < int(clamped.sum()) < clamped.numel() // 10  # some inputs clamped, most not
    assert bool((var >= model_module.VAR_FLOOR).all())
    (g,) = torch.autograd.grad(var.sum(), kdiag)
    assert float(g) == pytest.approx(float((~clamped).sum()))


@pytest.mark.parametrize("variational,batch", [("mean_field", ()), ("cholesky", ()), ("mean_field", (3,))])
def test_lean_weights_give_the_sparse_products(monkeypatch, variational: str, batch: tuple) -> None:
    """Beyond GRID_MAX_INPUTS the grid keeps each input's first node and offset (12 bytes, not ~104)
    and interpolates by gathers and index_add_: the same marginals and gradients as the sparse
    matrices to round-off. The limit is scaled down so that both run on the same 40,000 inputs."""
    z = _scores("logits", batch=batch, n=2000, k=20)
    m = _model(z, "logits", variational, batch=batch, lengthscale=3.0)
    sparse = _values_and_grads(m, z, m.grid_for(z))
    monkeypatch.setattr(model_module, "GRID_MAX_INPUTS", 1000)
    monkeypatch.setattr(model_module, "LEAN_CHUNK", 7000)  # several chunks, the last one short
    grid = m.grid_for(z)
    assert grid.node_count(m.scaled_rbf.base_kernel.lengthscale) > 0
    lean = _values_and_grads(m, z, grid)
    assert isinstance(grid.weights(grid._nodes)[0], model_module._LeanWeights)
    torch.testing.assert_close(lean[0], sparse[0], rtol=1e-13, atol=1e-13)
    torch.testing.assert_close(lean[1], sparse[1], rtol=1e-13, atol=1e-13)
    for name in sparse[2]:
        torch.testing.assert_close(lean[2][name], sparse[2][name], rtol=1e-11, atol=1e-11, msg=name)


def test_a_grid_beyond_the_sparse_limit_is_used_with_lean_weights() -> None:
    """4.2 x 10^6 scores (beyond GRID_MAX_INPUTS = 2^22): a grid, with lean weights, and its marginals
    within the interpolation's bound of the exact ones."""
    many = _scores("logits", n=2**16 + 1, k=64, seed=3)
    m = _model(many, "logits", lengthscale=30.0)
    grid = m.grid_for(many)
    nodes = grid.node_count(m.scaled_rbf.base_kernel.lengthscale)
    assert nodes > 0 and isinstance(grid.weights(nodes)[0], model_module._LeanWeights)
    with torch.no_grad():
        mu, var = m.marginals(many, grid)
        rows = slice(0, 4000)
        mu_exact, var_exact = m.marginals(many[rows])
    torch.testing.assert_close(mu[rows], mu_exact, rtol=0, atol=1e-9)
    torch.testing.assert_close(var[rows], var_exact, rtol=0, atol=1e-9)
