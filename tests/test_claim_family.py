"""The three "beyond chance" claims about one set of rows hold 5 % together (audit 5).

The Reliability page, the audit report and ``pbr-calib evaluate`` answer "is this model miscalibrated?"
three times about the same rows: the test of calibration ("miscalibrated beyond chance",
:func:`pbr_core.significance.verdict`), the bins note after a "no evidence" ("Not an all-clear: k of the
m bins ...", :func:`pbr_core.significance.bins_note`) and the CORP MCB against chance ("beyond chance",
:func:`pbr_core.corp.mcb_against_chance`). Each at 5 %, a calibrated model drew at least one of them in
11.5 % of 400 calibrated Adult files of 300 rows and 9.0 % of 300 of 2,000 rows (audit 5; 137 of 1,500,
8.3 %, at 300 rows in benchmarks/bench_claim_family.py). The 5 % is now split between them
(``ALPHA_TEST`` + ``ALPHA_BINS`` + ``ALPHA_MCB``, a union bound), and each is still decided on its own.

Known truth, counted: outcomes drawn from the predictions (calibrated), the product's own sentences,
any of the three counted per file.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import pbr_core
from pbr_core import significance as S
from pbr_core.corp import MCB_CHANCE_DRAWS, mcb_against_chance

SAMPLES = Path(__file__).resolve().parents[1] / "sample_data"


def _at_most(claims: int, trials: int, rate: float) -> bool:
    """``claims`` of ``trials`` is within three binomial standard deviations above ``rate``."""
    return claims <= trials * rate + 3 * np.sqrt(trials * rate * (1 - rate))


def test_the_levels_split_the_family_s_5_percent_and_the_mcb_s_is_attainable():
    assert S.ALPHA_TEST + S.ALPHA_BINS + S.ALPHA_MCB == pytest.approx(S.ALPHA_FAMILY) and S.ALPHA_FAMILY == 0.05
    assert np.floor(S.ALPHA_MCB * (MCB_CHANCE_DRAWS + 1) + 1e-9) >= 1  # the Monte Carlo test can reach it
    # every default is the family's share, so no front end can fall back to 5 % for one of them
    rng = np.random.default_rng(0)
    p = rng.uniform(0.1, 0.9, 1000)
    y = (rng.random(1000) < p).astype(int)
    assert mcb_against_chance(p, y)["brier"].level == pytest.approx(1 - S.ALPHA_MCB)
    test = S.calibration_test(p, y)  # sum p(1 - p) about 200: the analytic test
    assert test.method == "analytic" and test.level == pytest.approx(S.ALPHA_TEST / 2)  # each statistic at half
    # the Monte Carlo test (sum p(1 - p) < 100: 400 such rows) states its shift at the whole level (audit 9b)
    assert S.calibration_test(p[:400], y[:400]).level == pytest.approx(S.ALPHA_TEST)
    from dashboard import texts
    assert f"{1 - S.ALPHA_MCB:.0%} of calibrated draws" in texts.MCB_CHANCE_COLUMN


def test_a_calibrated_model_draws_any_of_the_three_claims_at_most_5_percent_of_the_time():
    """300 calibrated files of 300 rows of UCI Adult's p(y=1) (the Monte Carlo test; B = 6): the page's
    sentence (test and bins note, :func:`dashboard.texts.overall_test_sentence`) or the MCB's "beyond
    chance" on at most 5 % + 3 sd of files. The same files at 5 % each (the earlier levels) fail the
    tolerance: the check has power. Here 17 now, 31 at 5 % each (limit 26); the benchmark's 1,500 files:
    125 (8.3 %) at 5 % each, 47 (3.1 %) now (test 46, bins note 0, MCB 10)."""
    from dashboard import texts

    adult = pbr_core.load_predictions(SAMPLES / "adult_gradient_boosting.csv.gz").p_positive
    rng = np.random.default_rng(300)
    R, n, any_now, any_before = 300, 300, 0, 0
    for t in range(R):
        p = rng.choice(adult, n)
        y = (rng.random(n) < p).astype(int)
        test = S.calibration_test(p, y, seed=t)
        table = pbr_core.reliability_diagram(np.c_[1 - p, p], y, pbr_core.optimal_n_bins(n))
        words = texts.overall_test_sentence(test, table)
        mcb = mcb_against_chance(p, y, seed=t)["brier"]
        any_now += "miscalibrated beyond chance" in words or "Not an all-clear" in words or mcb.beyond_chance
        # the same rows at 5 % each: the MCB's p-value is (1 + draws at least as large) / 200
        k, m = S.bins_outside(table)
        any_before += test.p_value < 0.05 or S.bins_outside_p(k, m) < 0.05 or mcb.p_value <= 0.05
    assert _at_most(any_now, R, S.ALPHA_FAMILY), any_now
    assert not _at_most(any_before, R, S.ALPHA_FAMILY), any_before


def test_a_p_value_under_0_05_but_above_the_test_s_share_says_the_level():
    """p = 0.041 reads "no evidence" now: the sentence says why (the test's share of the family's 5 %),
    where a p-value under 0.05 would otherwise look like a contradiction; above 0.05, and for groups
    tested at their own 5 %, the sentence is as before."""
    import dataclasses

    rng = np.random.default_rng(3)
    p = rng.uniform(0.1, 0.9, 500)
    test = S.calibration_test(p, (rng.random(500) < p).astype(int))
    between = S.verdict(dataclasses.replace(test, p_value=0.041))
    assert between.startswith("no evidence") and "p = 0.041, above the 0.035 this test is held to" in between
    assert "share 5%" in between
    above = S.verdict(dataclasses.replace(test, p_value=0.2))
    assert "held to" not in above and "share" not in above
    groups = S.verdict(dataclasses.replace(test, p_value=0.041), alpha=0.05)
    assert groups.startswith("miscalibrated beyond chance")
