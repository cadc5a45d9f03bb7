"""Prediction (GP_SPEC section 4): J-sample mean, mean approximation, bounded memory, fixed noise."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch

from pbr_core.gp.model import GPRecalibrationModel, initial_inducing_points
from pbr_core.gp.predict import DEFAULT_MEMORY_BUDGET_BYTES, TEMPORARIES_PER_BATCH, predict_proba, prediction_batch_size

GIB = 2**30


def _fitted_like(z: np.ndarray, seed: int = 0) -> GPRecalibrationModel:
    m = GPRecalibrationModel(torch.as_tensor(initial_inducing_points(z, 10)), "logits")
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in m.parameters():
            p.add_(0.3 * torch.randn(p.shape, generator=g, dtype=p.dtype))
    return m


def test_batch_size_for_the_issue_size_stays_under_two_gib() -> None:
    """10,000 x 100 classes x J = 100 draws: 10^8 draws (0.8 GB each copy) is split into batches."""
    rows = prediction_batch_size(100, 100)
    per_batch = rows * 100 * 100 * 8 * TEMPORARIES_PER_BATCH
    assert per_batch <= DEFAULT_MEMORY_BUDGET_BYTES < 2 * GIB
    assert rows < 10_000 and -(-10_000 // rows) >= 2
    assert prediction_batch_size(100, 100, memory_budget_bytes=2 * GIB) * 100 * 100 * 8 * 3 <= 2 * GIB
    assert prediction_batch_size(10**6, 100, memory_budget_bytes=1) == 1  # never zero rows


def test_prediction_does_not_depend_on_the_batch_size(cifar100_logits) -> None:
    z, _ = cifar100_logits
    z = z[:300]
    m = _fitted_like(z)
    full = predict_proba(m, z, n_samples=50, seed=3)
    small = predict_proba(m, z, n_samples=50, seed=3, memory_budget_bytes=50 * 100 * 8 * 3 * 7)  # 7 rows a batch
    # Same draws; only BLAS blocking may differ with the batch shape (last-ulp differences).
    np.testing.assert_allclose(full, small, rtol=0, atol=1e-14)
    assert not np.array_equal(full, predict_proba(m, z, n_samples=50, seed=4))
    np.testing.assert_allclose(full.sum(1), 1.0, rtol=0, atol=1e-12)


def test_prediction_is_the_mean_of_softmax_draws_and_the_mean_approximation_is_softmax_mu(cifar10_logits) -> None:
    z, _ = cifar10_logits
    z = z[:40]
    m = _fitted_like(z)
    with torch.no_grad():
        mu, var = m.marginals(torch.as_tensor(z))
    eps = np.random.default_rng(7).standard_normal((40, 30, 10))
    expected = torch.softmax(mu[:, None, :] + var.sqrt()[:, None, :] * torch.as_tensor(eps), -1).mean(1).numpy()
    np.testing.assert_allclose(predict_proba(m, z, n_samples=30, seed=7), expected, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(predict_proba(m, z, mean_approx=True), torch.softmax(mu, -1).numpy(), rtol=1e-12)


_PEAK_SCRIPT = textwrap.dedent("""
    import json, resource, sys, numpy as np, torch
    torch.set_num_threads(1)
    from pbr_core.gp.model import GPRecalibrationModel
    from pbr_core.gp.predict import predict_proba
    n, k, j, budget = (int(a) for a in sys.argv[1:5])
    z = np.random.default_rng(0).normal(0, 3, (n, k))
    m = GPRecalibrationModel(torch.linspace(-6, 6, 10, dtype=torch.float64), "logits")
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    p = predict_proba(m, z, n_samples=j, memory_budget_bytes=budget)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(json.dumps({"growth": peak - base, "sum": float(p.sum())}))
""")


def _peak_growth(n: int, k: int, j: int, budget: int) -> int:
    out = subprocess.run([sys.executable, "-c", _PEAK_SCRIPT, str(n), str(k), str(j), str(budget)],
                         capture_output=True, text=True, check=True, timeout=600)
    res = json.loads(out.stdout.strip().splitlines()[-1])
    assert res["sum"] == pytest.approx(n)
    return int(res["growth"])


def test_prediction_peak_memory_follows_the_budget() -> None:
    """Peak RSS growth (in a fresh process) stays near the budget, far below the unbatched size."""
    n, k, j, budget = 2000, 100, 50, 16 * 2**20
    unbatched = n * k * j * 8  # one (N, J, K) float64 array: 80 MB
    growth = _peak_growth(n, k, j, budget)
    assert growth < budget + 32 * 2**20 < unbatched


@pytest.mark.slow
def test_prediction_at_the_issue_size_needs_less_than_two_gib() -> None:
    """10,000 x 100 with J = 100 (10^8 draws; 2.4 GB unbatched) with the default budget."""
    growth = _peak_growth(10_000, 100, 100, DEFAULT_MEMORY_BUDGET_BYTES)
    assert growth < 2 * GIB
    assert growth < DEFAULT_MEMORY_BUDGET_BYTES + 64 * 2**20
