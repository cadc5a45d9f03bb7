"""Smoke test of benchmarks/bench_claims.py (the full simulation table of issue 33's claims, recorded in
benchmarks/RESULTS_claims.md): its pieces run on a few trials, its vectorised 'before' p-values are the
library's, and the OLD rules it re-implements make the claims the issue measured. No timing."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def bench():
    sys.path.insert(0, str(ROOT / "benchmarks"))  # the script imports its neighbour _machine.py
    try:
        spec = importlib.util.spec_from_file_location("bench_claims", ROOT / "benchmarks" / "bench_claims.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    return module


def test_table_one_case_runs_and_its_before_columns_are_the_library_s(bench):
    """level_case asserts on its first trials that the vectorised Spiegelhalter and asymptotic combined
    p-values equal significance.calibration_test_from_sums'."""
    rng = np.random.default_rng(0)
    pool = rng.beta(5, 1.2, 2000)  # top-label-like confidences
    res = bench.level_case(pool, 30, t_new=4, t_before=300, rng=rng)
    assert res["new"].size == 4 and res["spiegelhalter"].size == res["asymptotic"].size == 300
    assert res["mc"] == 1.0   # 30 such rows carry little information: Monte Carlo p-values
    assert np.all((res["asymptotic"] >= 0) & (res["asymptotic"] <= 1))


def test_old_largest_gap_rule_claims_a_gap_between_calibrated_groups(bench):
    """The issue's case, with the rule the library used to apply: two calibrated groups of 135 and 8000
    rows, the percentile interval of ECE(worst) - ECE(best) excludes 0 (20 of 20 in the issue)."""
    rng = np.random.default_rng(1)
    pool = rng.uniform(0.0, 0.5, 5000)
    claims = 0
    for _ in range(3):
        parts = [pool[rng.integers(0, pool.size, n)] for n in (135, 8000)]
        ys = [bench.draw(rng, p) for p in parts]
        claimed, worst, gap = bench.old_gap_rule(parts, ys, 100, rng)
        claims += claimed and worst == 0 and gap > 0
    assert claims >= 2


def test_rates_carry_their_exact_binomial_interval(bench):
    assert bench.rate(5, 100) == "5.0 % [1.6, 11.3]"   # Clopper-Pearson 5/100: [0.0164, 0.1128]
    assert bench.rate(0, 200) == "0.0 % [0.0, 1.8]"
    assert bench.table(["a", "b"], [["x", "1"]], 1).splitlines()[1] == "|---|---:|"
