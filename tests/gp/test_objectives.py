"""Objectives (GP_SPEC section 2): the fused Monte Carlo terms, the paper's identity, Taylor's accuracy."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from pbr_core.gp.model import GPRecalibrationModel, initial_inducing_points
from pbr_core.gp.objectives import (
    SOFTMAX_MIN_CLASSES,
    ObjectiveSpec,
    draw_mc_noise,
    evaluate_objective,
    expected_log_softmax_taylor,
    mc_expectations,
    mc_terms_reference,
)

F64 = torch.float64


def _inputs(lead=(), n=23, k=6, seed=0):
    g = torch.Generator().manual_seed(seed)
    mu = torch.randn(*lead, n, k, dtype=F64, generator=g) * 3
    var = torch.rand(*lead, n, k, dtype=F64, generator=g) + 0.01
    y = torch.randint(0, k, (*lead, n), generator=g)
    return mu, var, y


@pytest.mark.parametrize("lead", [(), (3,)])
@pytest.mark.parametrize("ce,brier", [(True, True), (True, False), (False, True)])
@pytest.mark.parametrize("k", [6, SOFTMAX_MIN_CLASSES + 3])  # the written-out and the fused softmax
def test_fused_mc_terms_equal_plain_autograd(lead, ce, brier, k) -> None:
    """Values and gradients of the chunked analytic-gradient version == the obvious autograd version."""
    mu, var, y = _inputs(lead, k=k)
    eps = draw_mc_noise(mu.shape[-2], 13, mu.shape[-1], seed=1)
    w = torch.rand(*lead, mu.shape[-2], dtype=F64, generator=torch.Generator().manual_seed(2))
    grads = []
    for fn, kwargs in ((mc_expectations, {"max_chunk_elements": 97}), (mc_terms_reference, {})):
        m, v = mu.clone().requires_grad_(), var.clone().requires_grad_()
        a, b = fn(m, v, y, eps, ce=ce, brier=brier, **kwargs)
        loss = sum((t * w * (i + 1)).sum() for i, t in enumerate((a, b)) if t is not None)
        loss.backward()
        grads.append((loss.detach(), m.grad, v.grad))
    for x, r in zip(grads[0], grads[1]):
        torch.testing.assert_close(x, r, rtol=1e-12, atol=1e-13)


@pytest.mark.parametrize("k", [6, SOFTMAX_MIN_CLASSES + 3])
def test_float32_draws_give_float32_accurate_terms_in_float64(k) -> None:
    """float32 draws (the default MC_DTYPE of the fits) do the (N, S, K) work in float32: the
    results stay float64 tensors and agree with the float64 reference of the same draws to float32
    accuracy (values and gradients), including confident rows where p_y rounds to 1."""
    mu, var, y = _inputs((), n=40, k=k)
    mu[:5] *= 10.0  # very confident rows
    eps = draw_mc_noise(mu.shape[-2], 50, mu.shape[-1], seed=1)
    out = []
    for e in (eps.to(torch.float32), eps):
        m, v = mu.clone().requires_grad_(), var.clone().requires_grad_()
        a, b = mc_expectations(m, v, y, e)
        assert a.dtype == b.dtype == F64
        (a.sum() + 2.0 * b.sum()).backward()
        out.append((a.detach(), b.detach(), m.grad, v.grad))
    for x, r in zip(out[0], out[1]):
        torch.testing.assert_close(x, r, rtol=2e-5, atol=2e-6)


def test_identity_pbr_total_alpha_one_without_brier_is_the_gp_calibration_elbo(cifar10_logits) -> None:
    """Paper Section 5.2: Eq. vi_obj3 with alpha = 1 and no Brier term is the GP-calibration ELBO.

    Exact (values and gradients) when both use the same CE estimator; GP calibration defaults to
    Wenger's Taylor CE and PBR total to Monte Carlo, so with the defaults they differ only by the
    Taylor error (checked in the Taylor tests below).
    """
    z, y = cifar10_logits
    z, y = torch.as_tensor(z[:200]), torch.as_tensor(y[:200])
    m = GPRecalibrationModel(torch.as_tensor(initial_inducing_points(z.numpy(), 10)), "logits")
    with torch.no_grad():  # away from the prior, so that every term matters
        for p in m.parameters():
            p.add_(0.2 * torch.randn(p.shape, dtype=F64, generator=torch.Generator().manual_seed(3)))
    eps = draw_mc_noise(200, 50, 10, seed=0)
    for estimator in ("taylor", "mc"):
        out = []
        for spec in (ObjectiveSpec.pbr_total(alpha=1.0, brier=False, ce=estimator),
                     ObjectiveSpec.gp_calibration(ce=estimator)):
            assert spec.needs_mc == (estimator == "mc")
            m.zero_grad()
            mu, var = m.marginals(z)
            t = evaluate_objective(mu, var, y, m.kl_divergence(), spec, eps)
            t.total.backward()
            out.append((t.total.detach(), [p.grad.clone() for p in m.parameters()]))
            assert t.kl.item() > 0 and t.brier is None
        assert out[0][0].item() == out[1][0].item()
        for g0, g1 in zip(out[0][1], out[1][1]):
            assert torch.equal(g0, g1)
    assert ObjectiveSpec.pbr_total(1.0, brier=False, ce="taylor") == ObjectiveSpec.gp_calibration()


def test_objective_terms_add_up() -> None:
    mu, var, y = _inputs()
    eps = draw_mc_noise(mu.shape[0], 20, mu.shape[1], seed=0)
    kl = torch.tensor(3.0, dtype=F64)
    t = evaluate_objective(mu, var, y, kl, ObjectiveSpec.pbr_total(alpha=0.25), eps)
    n = mu.shape[0]
    assert t.total.item() == pytest.approx(t.ce.item() + t.brier.item() + 0.25 * 3.0 / n, rel=1e-14)
    t = evaluate_objective(mu, var, y, kl, ObjectiveSpec.pbr(alpha=0.0), eps)
    assert t.total.item() == t.brier.item() and t.ce is None
    t = evaluate_objective(mu, var, y, torch.tensor(float("inf"), dtype=F64), ObjectiveSpec.pbr(alpha=0.0), eps)
    assert torch.isfinite(t.total)  # alpha = 0 never multiplies an infinite KL
    with pytest.raises(ValueError, match="alpha"):
        ObjectiveSpec.pbr(alpha=-1)
    with pytest.raises(ValueError, match="Monte Carlo"):
        evaluate_objective(mu, var, y, kl, ObjectiveSpec.pbr(), None)


def test_padding_weights_ignore_padded_rows() -> None:
    mu, var, y = _inputs(n=20)
    eps = draw_mc_noise(20, 10, mu.shape[1], seed=0)
    kl = torch.tensor(1.0, dtype=F64)
    spec = ObjectiveSpec.pbr_total(0.5)
    full = evaluate_objective(mu[:15], var[:15], y[:15], kl, spec, eps[:15])
    w = torch.cat([torch.ones(15, dtype=F64), torch.zeros(5, dtype=F64)])
    padded = evaluate_objective(mu, var, y, kl, spec, eps, weights=w)
    assert padded.total.item() == pytest.approx(full.total.item(), rel=1e-14)


def test_a_batch_of_alphas_is_one_per_gp_of_the_spec() -> None:
    """A batch of GPs keeps its alphas in the spec (the fit's only alpha): each GP's objective is the
    one its own scalar alpha gives, to the last bit; alpha = 0 never multiplies an infinite KL."""
    mu, var, y = _inputs(lead=(3,))
    eps = draw_mc_noise(mu.shape[-2], 10, mu.shape[-1], seed=0)
    kl = torch.tensor([2.0, 3.0, float("inf")], dtype=F64)
    spec = ObjectiveSpec(ce="mc", brier=True, alpha=np.array([0.25, 1.0, 0.0]))
    assert spec.alpha == (0.25, 1.0, 0.0) and spec == ObjectiveSpec(ce="mc", brier=True, alpha=[0.25, 1.0, 0.0])
    batched = evaluate_objective(mu, var, y, kl, spec, eps).total
    for i, a in enumerate(spec.alpha):
        alone = evaluate_objective(mu[i], var[i], y[i], kl[i], ObjectiveSpec.pbr_total(alpha=a), eps).total
        assert torch.equal(batched[i], alone)
    with pytest.raises(ValueError, match="alpha"):
        ObjectiveSpec(ce="none", brier=True, alpha=(0.5, -1.0))
    with pytest.raises(ValueError, match="alpha"):
        ObjectiveSpec(ce="none", brier=True, alpha=(0.5, float("nan")))


def test_mc_draws_have_the_prefix_property() -> None:
    """The draws of the first n rows do not depend on how many rows follow (batch padding)."""
    assert torch.equal(draw_mc_noise(10, 7, 3, seed=5), draw_mc_noise(25, 7, 3, seed=5)[:10])
    assert torch.equal(draw_mc_noise(10, 7, 3, seed=5, antithetic=True),
                       draw_mc_noise(25, 7, 3, seed=5, antithetic=True)[:10])


def test_antithetic_draws_are_interleaved_pairs() -> None:
    """(e_1, -e_1, e_2, -e_2, ...): every even prefix is antithetic (the warm-up uses a prefix); an odd S
    ends with one unpaired draw; the e's are the generator's first S/2 normals of each row."""
    a = draw_mc_noise(6, 8, 3, seed=2, antithetic=True)
    assert a.shape == (6, 8, 3)
    torch.testing.assert_close(a[:, 1::2], -a[:, 0::2], rtol=0, atol=0)
    assert torch.equal(a[:, 0::2], draw_mc_noise(6, 4, 3, seed=2))
    odd = draw_mc_noise(6, 7, 3, seed=2, antithetic=True)
    assert torch.equal(odd, a[:, :7])
    # a linear function of the draws is estimated exactly: the mean of each row's draws is 0
    assert float(draw_mc_noise(50, 10, 4, seed=0, antithetic=True).mean(1).abs().max()) < 1e-15


def test_antithetic_draws_estimate_the_pbr_objective_better_than_three_times_as_many_iid(cifar10_logits) -> None:
    """The reason S = 32 antithetic draws replaced S = 100 independent ones as the default: across 6
    seeds, at a PBR fit's marginals on 500 real CIFAR-10 rows, the Monte Carlo Brier estimate spreads
    less (here 9.2e-5 vs 1.8e-4; 2-40x on the fitted CIFAR fits of docs/gp_measurements.md)."""
    from pbr_core.recalibrators.gp import PBR

    z, y = cifar10_logits
    z, y = z[:500], y[:500]
    rec = PBR(alpha=0.5, max_iter=60, device="cpu").fit(z, y)
    with torch.no_grad():
        mu, var = rec.model_.marginals(torch.as_tensor(z, dtype=torch.float64))
    labels = torch.as_tensor(y)

    def spread(s: int, antithetic: bool) -> float:
        est = [float(mc_terms_reference(mu, var, labels, draw_mc_noise(500, s, 10, seed, antithetic=antithetic),
                                        ce=False, brier=True)[1].mean()) for seed in range(1, 7)]
        return float(np.std(est, ddof=1))

    anti, iid = spread(32, True), spread(100, False)
    assert anti < 0.75 * iid, (anti, iid)


# ---------------------------------------------------------------------- Wenger's Taylor expansion
def _taylor_vs_mc(scale: float, cifar10_logits, n_draws: int = 20000) -> float:
    """Relative error of the Taylor E[log softmax_y] against a large Monte Carlo estimate."""
    z, y = cifar10_logits
    mu, y = torch.as_tensor(z[:100]), torch.as_tensor(y[:100])
    var = torch.full_like(mu, scale)
    taylor = expected_log_softmax_taylor(mu, var, y).mean()
    eps = torch.as_tensor(np.random.default_rng(0).standard_normal((100, n_draws, 10)))
    ce, _ = mc_terms_reference(mu, var, y, eps, ce=True, brier=False)
    mc = -ce.mean()
    return float(abs(taylor - mc) / abs(mc))


def test_taylor_expected_log_softmax_agrees_with_monte_carlo_at_small_variance(cifar10_logits) -> None:
    assert _taylor_vs_mc(1e-3, cifar10_logits) < 1e-3
    assert _taylor_vs_mc(1e-2, cifar10_logits) < 1e-3


def test_taylor_expected_log_softmax_fails_at_large_variance(cifar10_logits) -> None:
    """The same check at var = 4 fails: the comparison above has the power to catch a bad expansion."""
    assert _taylor_vs_mc(4.0, cifar10_logits, n_draws=4000) > 0.2
