"""The latent GP model (GP_SPEC section 1): kernel, marginals, KL, inducing points, batches."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from pbr_core.gp.device import resolve_device
from pbr_core.gp.model import (
    GPRecalibrationModel,
    WhiteNoiseKernel,
    broadcast_batch_shapes,
    initial_inducing_points,
    kmeans_1d,
)
from pbr_core.gp.predict import predict_proba
from pbr_core.predictions import log_probs, softmax

F64 = torch.float64


def _perturbed(model: GPRecalibrationModel, seed: int = 0) -> GPRecalibrationModel:
    """Move every parameter away from its initial value (a model that is not at the prior)."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for _, p in model.named_parameters():
            p.add_(0.3 * torch.randn(p.shape, generator=g, dtype=p.dtype))
    return model


# ---------------------------------------------------------------------- kernel
def test_broadcast_batch_shapes_is_torchs() -> None:
    cases = [((), ()), ((3,), ()), ((2, 1), (4,)), ((1,), (5, 1), (1, 1, 1)), (torch.Size([2, 3]), torch.Size([3])), (4, (1,))]
    for shapes in cases:
        assert broadcast_batch_shapes(*shapes) == torch.broadcast_shapes(*shapes)
    with pytest.raises(RuntimeError, match="cannot be broadcast"):
        broadcast_batch_shapes((2,), (3,))


def test_batched_kernels_keep_their_batch_shape() -> None:
    zu = torch.linspace(-3, 3, 4, dtype=F64).expand(2, 3, 4).clone()
    model = GPRecalibrationModel(zu, "logits", batch_shape=torch.Size([2, 3]))
    assert model.covar_module.batch_shape == torch.Size([2, 3])
    assert model.scaled_rbf.batch_shape == torch.Size([2, 3])


def test_white_noise_kernel_is_diagonal_on_one_input_set_only() -> None:
    k = WhiteNoiseKernel().to(F64)
    k.noise = 0.01
    x = torch.linspace(-1, 1, 5, dtype=F64)[:, None]
    u = torch.linspace(-1, 1, 3, dtype=F64)[:, None]
    np.testing.assert_allclose(k(x).to_dense().detach().numpy(), 0.01 * np.eye(5), rtol=1e-12)
    np.testing.assert_allclose(k(x, x.clone()).to_dense().detach().numpy(), 0.01 * np.eye(5), rtol=1e-12)  # sliced copies
    assert torch.count_nonzero(k(u, x).to_dense()) == 0
    np.testing.assert_allclose(k(x, diag=True).detach().numpy(), np.full(5, 0.01), rtol=1e-12)


def test_initial_values_follow_wenger() -> None:
    z = torch.linspace(-3, 3, 10, dtype=F64)
    m = GPRecalibrationModel(z, "logits")
    assert m.scaled_rbf.outputscale.item() == pytest.approx(1.0, rel=1e-12)
    assert m.scaled_rbf.base_kernel.lengthscale.item() == pytest.approx(10.0, rel=1e-12)
    assert m.white.noise.item() == pytest.approx(0.01, rel=1e-12)
    m = GPRecalibrationModel(z, "log_probs")
    assert m.scaled_rbf.base_kernel.lengthscale.item() == pytest.approx(0.5, rel=1e-12)
    assert m.scaled_rbf.raw_outputscale_constraint.upper_bound.item() == 5.0
    assert m.scaled_rbf.base_kernel.raw_lengthscale_constraint.lower_bound.item() == pytest.approx(1e-3)
    assert m.scaled_rbf.base_kernel.raw_lengthscale_constraint.upper_bound.item() == 10.0
    dist = m.variational_strategy._variational_distribution
    assert torch.all(dist.variational_mean == 0) and torch.all(dist._variational_stddev == 1)
    assert all(p.dtype == F64 for p in m.parameters())


def test_cross_covariance_equals_gpytorch_scale_rbf() -> None:
    m = _perturbed(GPRecalibrationModel(torch.linspace(-3, 3, 7, dtype=F64), "logits"))
    x = torch.randn(50, 1, dtype=F64, generator=torch.Generator().manual_seed(1)) * 4
    zu = m.variational_strategy.inducing_points
    ref = m.scaled_rbf(zu, x).to_dense()
    torch.testing.assert_close(m.cross_covariance(zu, x), ref, rtol=1e-13, atol=1e-15)


# ---------------------------------------------------------------------- marginals and KL
@pytest.mark.parametrize("variational", ["mean_field", "cholesky"])
@pytest.mark.parametrize("kind", ["logits", "log_probs"])
def test_marginals_equal_gpytorch_variational_strategy(variational: str, kind: str) -> None:
    """Our direct marginals == GPyTorch's VariationalStrategy(model)(x) mean and variance."""
    z = torch.randn(30, 4, dtype=F64, generator=torch.Generator().manual_seed(0)) * 3
    if kind == "log_probs":
        z = torch.log_softmax(z, dim=1)
    m = _perturbed(GPRecalibrationModel(torch.as_tensor(initial_inducing_points(z.numpy(), 6)), kind, variational))
    mu, var = m.marginals(z)
    for mode in (m.train, m.eval):
        mode()
        out = m(z.reshape(-1, 1))
        torch.testing.assert_close(mu.reshape(-1), out.mean, rtol=1e-10, atol=1e-10)
        torch.testing.assert_close(var.reshape(-1), out.variance, rtol=1e-9, atol=1e-10)


@pytest.mark.parametrize("batch", [(), (3,)])
@pytest.mark.parametrize("kind", ["logits", "log_probs"])
def test_analytic_marginal_gradients_equal_autograd(batch: tuple, kind: str, monkeypatch) -> None:
    """The mean-field marginals' analytic backward (several column chunks) == autograd through the
    plain formulas (one chunk, no checkpointing), values and the gradient of every parameter."""
    import pbr_core.gp.model as model_module

    g = torch.Generator().manual_seed(2)
    z = torch.randn(*batch, 40, 6, dtype=F64, generator=g) * 3
    if kind == "log_probs":
        z = torch.log_softmax(z, dim=-1)
    zu = torch.as_tensor(initial_inducing_points(z.numpy(), 7)).expand(*batch, 7).clone()
    m = _perturbed(GPRecalibrationModel(zu, kind, batch_shape=torch.Size(batch)), seed=3)
    g_mu = torch.randn(*batch, 40, 6, dtype=F64, generator=g)
    g_var = torch.randn(*batch, 40, 6, dtype=F64, generator=g)
    results = []
    for budget in (7 * 11 * max(1, len(batch) and batch[0]), None):
        m.zero_grad()
        if budget is None:  # the reference: autograd through one _marginal_chunk of all inputs
            monkeypatch.setattr(m, "variational", "mean_field_reference")
            monkeypatch.setattr(m, "_variational_terms", lambda: (
                m.variational_strategy._variational_distribution.variational_mean,
                m.variational_strategy._variational_distribution._variational_stddev.pow(2)))
            real_chunk = model_module._marginal_chunk
            monkeypatch.setattr(model_module, "_marginal_chunk",
                                lambda *a: real_chunk(*a[:-1], True))
            monkeypatch.setattr(model_module, "MARGINAL_CHUNK_ELEMENTS", 10**9)
        else:
            monkeypatch.setattr(model_module, "MARGINAL_CHUNK_ELEMENTS", budget)  # 11 columns per chunk
        mu, var = m.marginals(z)
        ((mu * g_mu).sum() + (var * g_var).sum()).backward()
        results.append((mu.detach(), var.detach(), {n: p.grad.clone() for n, p in m.named_parameters()}))
    (mu1, var1, grads1), (mu0, var0, grads0) = results
    torch.testing.assert_close(mu1, mu0, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(var1, var0, rtol=1e-12, atol=1e-12)
    assert grads1.keys() == grads0.keys()
    for name in grads0:
        torch.testing.assert_close(grads1[name], grads0[name], rtol=1e-9, atol=1e-11, msg=name)


def test_prior_marginals_are_the_input_and_the_prior_variance() -> None:
    z = torch.randn(20, 5, dtype=F64) * 5
    m = GPRecalibrationModel(torch.as_tensor(initial_inducing_points(z.numpy(), 10)), "logits")
    mu, var = m.marginals(z)
    assert torch.equal(mu, z)
    torch.testing.assert_close(var, torch.full_like(var, 1.0 + 0.01 + m.jitter), rtol=1e-9, atol=0)


def test_kl_is_the_whitened_gaussian_kl() -> None:
    m = _perturbed(GPRecalibrationModel(torch.linspace(-2, 2, 8, dtype=F64), "logits"))
    assert m.kl_divergence().item() > 0
    dist = m.variational_strategy._variational_distribution
    mean, s2 = dist.variational_mean.detach(), dist._variational_stddev.detach() ** 2
    closed = 0.5 * torch.sum(s2 + mean**2 - 1 - torch.log(s2))
    torch.testing.assert_close(m.kl_divergence().detach(), closed, rtol=1e-10, atol=1e-12)
    assert GPRecalibrationModel(torch.linspace(-2, 2, 8, dtype=F64), "logits").kl_divergence().item() == 0.0


@pytest.mark.parametrize("variational", ["mean_field", "cholesky"])
@pytest.mark.parametrize("batch", [(), (3,)])
def test_kl_and_inducing_covariance_equal_gpytorch(variational: str, batch: tuple) -> None:
    """The written-out KL (mean-field) and K_uu + jitter I equal GPyTorch's, values and gradients."""
    zu = torch.linspace(-2, 2, 8, dtype=F64).expand(*batch, 8).clone()
    m = _perturbed(GPRecalibrationModel(zu, "logits", variational, batch_shape=torch.Size(batch)), seed=4)
    ours = [m.kl_divergence(), m.inducing_covariance(m.variational_strategy.inducing_points)]
    m.variational_strategy._clear_cache()
    u = m.variational_strategy.inducing_points
    theirs = [m.variational_strategy.kl_divergence(),
              m.covar_module(u).to_dense() + m.jitter * torch.eye(8, dtype=F64)]
    for a, b in zip(ours, theirs):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-14)
        ga = torch.autograd.grad(a.sum(), list(m.parameters()), allow_unused=True)
        gb = torch.autograd.grad(b.sum(), list(m.parameters()), allow_unused=True)
        for x, y in zip(ga, gb):
            assert (x is None) == (y is None) or (x if y is None else y).abs().max() == 0
            if x is not None and y is not None:
                torch.testing.assert_close(x, y, rtol=1e-10, atol=1e-12)


def test_kl_can_be_differentiated_twice_in_a_row() -> None:
    m = _perturbed(GPRecalibrationModel(torch.linspace(-2, 2, 8, dtype=F64), "logits"))
    for _ in range(2):  # GPyTorch memoises q(v); a stale memo would break the second backward
        m.kl_divergence().backward()


# ---------------------------------------------------------------------- the mean approximation at the prior
def test_mean_approximation_at_initialisation_returns_the_input_exactly(cifar10_logits) -> None:
    z, _ = cifar10_logits
    z = z[:500]
    m = GPRecalibrationModel(torch.as_tensor(initial_inducing_points(z, 10)), "logits")
    p = predict_proba(m, z, mean_approx=True)
    np.testing.assert_array_equal(p, torch.softmax(torch.as_tensor(z), dim=1).numpy() /
                                  torch.softmax(torch.as_tensor(z), dim=1).numpy().sum(1, keepdims=True))
    np.testing.assert_allclose(p, softmax(z), rtol=1e-14, atol=1e-16)
    probs = softmax(z)  # probability input: z = log p, softmax(log p) = p
    lp = log_probs(probs)
    m = GPRecalibrationModel(torch.as_tensor(initial_inducing_points(lp, 10)), "log_probs")
    np.testing.assert_allclose(predict_proba(m, lp, mean_approx=True), probs, rtol=1e-13, atol=1e-16)


# ---------------------------------------------------------------------- inducing points
def _lloyd_reference(x: np.ndarray, centres: np.ndarray, iters: int = 500) -> np.ndarray:
    for _ in range(iters):
        assign = np.argmin(np.abs(x[:, None] - centres[None, :]), axis=1)
        new = np.array([x[assign == j].mean() if np.any(assign == j) else centres[j] for j in range(centres.size)])
        if np.allclose(new, centres, rtol=0, atol=1e-12):
            break
        centres = new
    return np.sort(centres)


def test_kmeans_1d_is_a_lloyd_fixed_point(cifar100_logits) -> None:
    z, _ = cifar100_logits
    x = z[:300].ravel()
    c = kmeans_1d(x, 10)
    assert c.size == 10 and np.all(np.diff(c) > 0)
    np.testing.assert_allclose(_lloyd_reference(x, c.copy()), c, rtol=0, atol=1e-9)
    np.testing.assert_array_equal(c, kmeans_1d(x, 10))  # deterministic


def test_inducing_points_are_distinct_even_with_few_distinct_values() -> None:
    z = np.array([[0.0, 1.0], [1.0, 0.0], [0.0, 1.0]])
    u = initial_inducing_points(z, 10)
    assert u.size == 10 and np.unique(u).size == 10
    assert {0.0, 1.0} <= set(u.tolist())


def test_kmeans_subsamples_very_large_inputs_with_its_seed() -> None:
    x = np.random.default_rng(0).normal(size=50_000)
    a = kmeans_1d(x, 5, max_points=10_000, seed=1)
    np.testing.assert_array_equal(a, kmeans_1d(x, 5, max_points=10_000, seed=1))
    assert np.all(np.abs(a - kmeans_1d(x, 5)) < 0.1)


# ---------------------------------------------------------------------- batches and devices
def test_batched_model_equals_its_members() -> None:
    g = torch.Generator().manual_seed(0)
    z = torch.randn(3, 12, 4, dtype=F64, generator=g)
    zu = torch.stack([torch.as_tensor(initial_inducing_points(z[i].numpy(), 5)) for i in range(3)])
    batch = _perturbed(GPRecalibrationModel(zu, "logits", batch_shape=torch.Size([3])))
    mu, var = batch.marginals(z)
    kl = batch.kl_divergence()
    for i in range(3):
        single = batch.member(i)
        m1, v1 = single.marginals(z[i])
        torch.testing.assert_close(mu[i], m1, rtol=1e-12, atol=1e-12)
        torch.testing.assert_close(var[i], v1, rtol=1e-12, atol=1e-12)
        torch.testing.assert_close(kl[i], single.kl_divergence(), rtol=1e-12, atol=1e-12)


def test_device_resolution() -> None:
    assert resolve_device("cpu").type == "cpu"
    assert resolve_device("auto").type == ("cuda" if torch.cuda.is_available() else "cpu")
    with pytest.raises(ValueError, match="Expected argument `device`"):
        resolve_device("tpu")
    if not torch.cuda.is_available():
        with pytest.raises(RuntimeError, match="cannot use a CUDA GPU"):
            resolve_device("cuda")
        with pytest.raises(RuntimeError, match="cannot use a CUDA GPU"):
            resolve_device("cuda:1")
