"""pbr_core.bounds against the paper's formulas written out literally and numeric optimisation."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.optimize import minimize_scalar

import pbr_core
from pbr_core import bounds as Bd

LOG2 = math.log(2.0)


def literal_theorem1(n, B, L, eps, lam):
    """Paper Eq. bias_ECE: (1+L)/B + (B log 2 + log(1/eps) + 2 lambda^2/n) / lambda."""
    return (1 + L) / B + (B * math.log(2) + math.log(1 / eps) + 2 * lam**2 / n) / lam


def literal_kl(n, B, kl, eps, lam, quad, L=None):
    """Theorem 2 / Corollary 2 (quad = 2, with (1+L)/B) and Corollary 1 (quad = 4, no binning term)."""
    bias = 0.0 if L is None else (1 + L) / B
    return bias + (kl + B * math.log(2) + math.log(1 / eps) + quad * lam**2 / n) / lam


def literal_theorem3(n, Bp, K, L, eps, kl, lam):
    """Paper Eq. eq_total_bias_multi with B = B'^K: K(1+L)/B^(1/K) + (KL + BK log 2 + log(1/eps) + K^2 lam^2/(2n))/lam."""
    B = Bp**K
    return K * (1 + L) / B ** (1 / K) + (kl + B * K * math.log(2) + math.log(1 / eps) + K**2 * lam**2 / (2 * n)) / lam


def numeric_min_over_lambda(f):
    res = minimize_scalar(lambda t: f(math.exp(t)), bounds=(-10.0, 40.0), method="bounded",
                          options={"xatol": 1e-10, "maxiter": 2000})
    return res.fun, math.exp(res.x)


# --------------------------------------------------------------------------- Theorem 1
@pytest.mark.parametrize("n", [50, 10_000, 10**7])
@pytest.mark.parametrize("B", [1, 5, 21, 200])
@pytest.mark.parametrize("L,eps", [(1.0, 0.05), (0.0, 0.01), (3.0, 0.2)])
def test_theorem1_closed_form_lambda_is_the_numeric_minimiser(n, B, L, eps):
    best, lam = numeric_min_over_lambda(lambda l: literal_theorem1(n, B, L, eps, l))
    assert pbr_core.theorem1_bound(n, B, lipschitz=L, eps=eps) == pytest.approx(best, rel=1e-9)
    assert float(Bd.theorem1_optimal_lambda(n, B, eps)) == pytest.approx(lam, rel=1e-4)


@pytest.mark.parametrize("lam", [0.3, 10.0, 707.1])
def test_theorem1_with_given_lambda_is_the_paper_formula(lam):
    for n, B, L, eps in [(1000, 10, 1.0, 0.05), (123, 4, 0.5, 0.1)]:
        assert pbr_core.theorem1_bound(n, B, L, eps, lam=lam) == pytest.approx(literal_theorem1(n, B, L, eps, lam), rel=1e-13)


def test_theorem1_terms_add_up_and_vectorise():
    Bs = np.arange(1, 101)
    total = pbr_core.theorem1_bound(5000, Bs, lipschitz=2.0, eps=0.1)
    binning = pbr_core.theorem1_binning_bias(Bs, 2.0)
    estimation = pbr_core.theorem1_estimation_bias(5000, Bs, 0.1)
    np.testing.assert_allclose(binning, 3.0 / Bs, rtol=1e-15)
    np.testing.assert_allclose(estimation, 2 * np.sqrt(2 * (Bs * LOG2 + math.log(10)) / 5000), rtol=1e-13)
    np.testing.assert_allclose(total, binning + estimation, rtol=1e-15)
    np.testing.assert_allclose(total, [pbr_core.theorem1_bound(5000, int(B), 2.0, 0.1) for B in Bs], rtol=1e-15)
    assert np.all(np.diff(binning) < 0) and np.all(np.diff(estimation) > 0)  # the trade-off in B


def test_bound_minimising_B_scales_like_cube_root_of_n():
    ns = [10**k for k in range(6, 13)]
    Bs = [pbr_core.bound_minimizing_n_bins(n) for n in ns]
    slope = np.polyfit(np.log(ns), np.log(Bs), 1)[0]
    assert slope == pytest.approx(1 / 3, abs=0.005)
    # Setting d/dB = 0 for large B gives B* ~ ((1 + L)^2 n / (2 log 2))^(1/3).
    for L in (0.0, 1.0, 4.0):
        n = 10**12
        assert pbr_core.bound_minimizing_n_bins(n, lipschitz=L) == pytest.approx(
            ((1 + L) ** 2 * n / (2 * LOG2)) ** (1 / 3), rel=0.01)
    # It is the argmin of the bound over B.
    n = 20_000
    B = pbr_core.bound_minimizing_n_bins(n)
    assert pbr_core.theorem1_bound(n, B) == min(pbr_core.theorem1_bound(n, np.arange(1, 201)))


@pytest.mark.parametrize("n, B", [(1, 1), (7, 1), (8, 2), (999, 9), (1000, 10), (1001, 10), (10_000, 21),
                                  (10**18 - 1, 10**6 - 1), (10**18, 10**6), (10**600, 10**200),
                                  (10**600 - 1, 10**200 - 1)])
def test_optimal_n_bins_is_exact_on_cubes(n, B):
    assert pbr_core.optimal_n_bins(n) == B
    assert pbr_core.optimal_n_bins_per_axis(n, 1) == B


@pytest.mark.parametrize("n, K, Bp", [(10_000, 10, 2), (3**12, 10, 3), (3**12 - 1, 10, 2), (1, 5, 1),
                                      (10**6, 4, 10), (10**6 - 1, 4, 9), (100, 100, 1)])
def test_optimal_n_bins_per_axis(n, K, Bp):
    assert pbr_core.optimal_n_bins_per_axis(n, K) == Bp


# --------------------------------------------------------------------------- KL bounds
@pytest.mark.parametrize("lam", [5.0, 50.0, 1234.5])
@pytest.mark.parametrize("kl", [0.0, 3.7, 250.0])
def test_kl_bounds_with_one_given_lambda_are_the_paper_formulas(kl, lam):
    n, B, L, eps = 1000, 10, 1.5, 0.05
    assert pbr_core.corollary1_bound(n, B, kl, eps, lambdas=[lam]) == pytest.approx(
        literal_kl(n, B, kl, eps, lam, 4), rel=1e-13)
    assert pbr_core.corollary2_bound(n, B, kl, L, eps, lambdas=[lam]) == pytest.approx(
        literal_kl(n, B, kl, eps, lam, 2, L), rel=1e-13)
    assert pbr_core.theorem2_bound(n, B, kl, L, eps, lambdas=[lam]) == pbr_core.corollary2_bound(n, B, kl, L, eps, lambdas=[lam])


@pytest.mark.parametrize("kl", [0.0, 12.0, 800.0])
@pytest.mark.parametrize("which", ["corollary1", "corollary2"])
def test_union_bound_over_the_lambda_grid(which, kl):
    n, B, L, eps = 1000, 10, 1.0, 0.05
    grid = Bd.lambda_grid(n)
    G = grid.size
    quad, Lb = (4, None) if which == "corollary1" else (2, L)
    value = (pbr_core.corollary1_bound(n, B, kl, eps) if which == "corollary1"
             else pbr_core.corollary2_bound(n, B, kl, L, eps))
    single = np.array([literal_kl(n, B, kl, eps, lam, quad, Lb) for lam in grid])
    with_union = single + math.log(G) / grid  # each lambda at confidence eps / G
    j = int(np.argmin(with_union))
    assert value == pytest.approx(with_union[j], rel=1e-13)
    assert value >= single[j] and value - single[j] == pytest.approx(math.log(G) / grid[j], rel=1e-9)
    assert value >= single.min()
    # The grid is fine enough: neighbouring points differ by 10^0.1, so the worst mismatch
    # 10^0.05 costs (10^0.05 + 10^-0.05) / 2 - 1 < 0.7% against the (invalid) bound with lambda
    # tuned after the fact at confidence eps / G.
    c = kl + B * LOG2 + math.log(G / eps)
    tuned = (0.0 if Lb is None else (1 + L) / B) + 2 * math.sqrt(quad * c / n)
    assert tuned <= value <= tuned * 1.007


def test_kl_bounds_vectorise_over_bins_and_validate():
    Bs = np.array([3, 10, 30])
    vec = pbr_core.corollary2_bound(2000, Bs, 5.0)
    np.testing.assert_allclose(vec, [pbr_core.corollary2_bound(2000, int(B), 5.0) for B in Bs], rtol=1e-15)
    with pytest.raises(ValueError, match="`kl` to be >= 0"):
        pbr_core.corollary1_bound(100, 5, -1.0)
    with pytest.raises(ValueError, match="lambda to be positive"):
        pbr_core.corollary1_bound(100, 5, 1.0, lambdas=[1.0, 0.0])


# --------------------------------------------------------------------------- Theorem 3
@pytest.mark.parametrize("n", [1000, 10**6])
@pytest.mark.parametrize("Bp, K", [(1, 10), (2, 3), (3, 5), (10, 2), (5, 1)])
@pytest.mark.parametrize("L,eps", [(1.0, 0.05), (0.0, 0.2)])
def test_theorem3_closed_form_is_the_numeric_minimiser(n, Bp, K, L, eps):
    best, lam = numeric_min_over_lambda(lambda l: literal_theorem3(n, Bp, K, L, eps, 0.0, l))
    assert pbr_core.theorem3_bound(n, Bp, K, lipschitz=L, eps=eps) == pytest.approx(best, rel=1e-9)
    assert float(Bd.theorem3_optimal_lambda(n, Bp, K, eps)) == pytest.approx(lam, rel=1e-4)


@pytest.mark.parametrize("kl", [0.0, 4.0, 300.0])
def test_theorem3_with_given_lambda_and_grid(kl):
    n, Bp, K, L, eps = 5000, 3, 4, 1.0, 0.05
    for lam in (10.0, 400.0):
        assert pbr_core.theorem3_bound(n, Bp, K, L, eps, kl=kl, lambdas=[lam]) == pytest.approx(
            literal_theorem3(n, Bp, K, L, eps, kl, lam), rel=1e-13)
    if kl > 0:
        grid = Bd.theorem3_optimal_lambda(n, Bp, K, eps) * np.logspace(-1, 3, 41)
        expected = min(literal_theorem3(n, Bp, K, L, eps / 41, kl, lam) for lam in grid)
        assert pbr_core.theorem3_bound(n, Bp, K, L, eps, kl=kl) == pytest.approx(expected, rel=1e-12)
        # Never below the bound with lambda tuned after the fact at confidence eps / G, and close to it.
        tuned, _ = numeric_min_over_lambda(lambda l: literal_theorem3(n, Bp, K, L, eps / 41, kl, l))
        assert tuned <= pbr_core.theorem3_bound(n, Bp, K, L, eps, kl=kl) <= tuned * 1.007


def test_theorem3_vectorises_and_shows_the_curse_of_dimensionality():
    Bps = np.array([1, 2, 3, 4])
    np.testing.assert_allclose(pbr_core.theorem3_bound(10**5, Bps, 3),
                               [pbr_core.theorem3_bound(10**5, int(b), 3) for b in Bps], rtol=1e-15)
    np.testing.assert_allclose(pbr_core.theorem3_bound(10**5, Bps, 3, kl=2.0),
                               [pbr_core.theorem3_bound(10**5, int(b), 3, kl=2.0) for b in Bps], rtol=1e-15)
    # The same n and B' give a much looser bound over all K = 10 classes than over K' = 2 of them.
    assert pbr_core.theorem3_bound(10**5, 2, 10) > 5 * pbr_core.theorem3_bound(10**5, 2, 2)


# --------------------------------------------------------------------------- bad input
@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: pbr_core.theorem1_bound(0, 5), "`n` to be a positive integer"),
        (lambda: pbr_core.theorem1_bound(100, 0), r"`n_bins` to be an integer larger than 0"),
        (lambda: pbr_core.theorem1_bound(100, [5, 0]), r"`n_bins` to be an integer larger than 0"),
        (lambda: pbr_core.theorem1_bound(100, 5, eps=0.0), r"`eps` in \(0, 1\)"),
        (lambda: pbr_core.theorem1_bound(100, 5, eps=1.0), r"`eps` in \(0, 1\)"),
        (lambda: pbr_core.theorem1_bound(100, 5, lipschitz=-1.0), "`lipschitz` to be >= 0"),
        (lambda: pbr_core.theorem1_bound(100, 5, lam=0.0), "lambda to be positive"),
        (lambda: pbr_core.theorem1_binning_bias(0), "larger than 0"),
        (lambda: pbr_core.optimal_n_bins(0), "`n` to be a positive integer"),
        (lambda: pbr_core.optimal_n_bins(2.5), "`n` to be a positive integer"),
        (lambda: pbr_core.optimal_n_bins(True), "`n` to be a positive integer"),
        (lambda: pbr_core.optimal_n_bins_per_axis(100, 0), "`n_classes` to be a positive integer"),
        (lambda: pbr_core.corollary2_bound(100, 0, 1.0), "larger than 0"),
        (lambda: pbr_core.theorem3_bound(100, 0, 3), "`n_bins_per_axis` to be an integer larger than 0"),
        (lambda: pbr_core.theorem3_bound(100, 2, 0), "`n_classes` to be a positive integer"),
        (lambda: pbr_core.theorem3_bound(100, 2, 3, kl=-0.5), "`kl` to be >= 0"),
    ],
)
def test_bad_input_raises_value_error(call, match):
    with pytest.raises(ValueError, match=match):
        call()
