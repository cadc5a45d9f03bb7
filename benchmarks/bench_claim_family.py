"""Benchmark: the three "beyond chance" claims about one set of rows, alone and together (audit 5).

Run from the repository root:  python benchmarks/bench_claim_family.py [--quick]
Prints a markdown table (and, without --quick, writes it to benchmarks/RESULTS_claim_family.md). Cost:
about 2 minutes on a shared 2-core machine; --quick about 10 s.

The Reliability page, the audit report and ``pbr-calib evaluate`` make three claims about the same rows:
the test of calibration (``significance.verdict``: p < ALPHA_TEST), the bins note after a "no evidence"
(``significance.bins_note``: the bins count's p-value < ALPHA_BINS; since audit 7 the Poisson-binomial tail of
each bin's chance of lying outside, ``significance.bins_outside_test``, before it P(Binomial(m, 0.1) >= k)) and the CORP MCB against chance
(``corp.mcb_against_chance``: above the reference of 199 draws at 1 - ALPHA_MCB). Per file the script
keeps the p-values (the bins count's by both rules; the MCB's is (1 + draws at least as large) / 200, so "beyond chance" at level
1 - a is p <= floor(a x 200) / 200) and counts, for the split in the code and for the earlier 5 % each,
how often each claim and any of the three is made:

* calibrated: outcomes drawn from UCI Adult's p(y=1), 300 rows (Monte Carlo test, B = 6) and 2,000 rows
  (analytic test, B = 12): the truth is "no miscalibration", every claim is a false alarm;
* shifted: outcomes 0.03 more frequent than predicted, 300 rows (power of the test and the MCB);
* squeezed: a Platt fit that squeezes f10-like scores into 0.19-0.26 (tests/test_bins_outside_claim.py),
  3,000 rows (B = 14) and 600 rows (B = 8): one range of predictions badly off, what the bins note is for.
"""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import pbr_core  # noqa: E402
from pbr_core import significance as S  # noqa: E402
from pbr_core.corp import MCB_CHANCE_DRAWS, mcb_against_chance  # noqa: E402


def _squeezer(rng: np.random.Generator):
    """f10-like scores and their Platt fit (as tests/test_bins_outside_claim.py::_squeezed)."""
    from pbr_core.recalibrators import get_recalibrator

    counts = np.array([1229, 681, 353, 193, 110, 74, 86, 78, 53, 75, 68])
    rate = np.array([27, 16, 26, 19, 21, 23, 51, 53, 47, 72, 67]) / counts
    scores = np.linspace(0, 1, 11)
    i = rng.choice(11, 3000, p=counts / counts.sum())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Platt's warning about exact 0/1 scores
        platt = get_recalibrator("platt").fit(
            pbr_core.Predictions.from_arrays(scores[i], (rng.random(3000) < rate[i]).astype(int)))
        q = platt.predict_proba(pbr_core.Predictions.from_arrays(scores, (scores > 0.5).astype(int)))[:, 1]

    def draw(n: int):
        j = rng.choice(11, n, p=counts / counts.sum())
        return q[j], (rng.random(n) < rate[j]).astype(int)
    return draw


def p_values(scenario: str, n: int, files: int, seed: int) -> np.ndarray:
    """(files, 4): the test's, the bins count's (Poisson-binomial: the code's rule), the MCB's and the bins count's
    by the binomial rule before audit 7, per file."""
    adult = pbr_core.load_predictions(ROOT / "sample_data" / "adult_gradient_boosting.csv.gz").p_positive
    rng = np.random.default_rng(seed)
    squeeze = _squeezer(rng) if scenario == "squeezed" else None
    out = np.empty((files, 4))
    for t in range(files):
        if squeeze is not None:
            p, y = squeeze(n)
        else:
            p = rng.choice(adult, n)
            q = p if scenario == "calibrated" else np.clip(p + 0.03, 0, 1)
            y = (rng.random(n) < q).astype(int)
        test = S.calibration_test(p, y, seed=t)
        k, m, p_bins = S.bins_outside_test(pbr_core.reliability_diagram(np.c_[1 - p, p], y, pbr_core.optimal_n_bins(n),
                                                                             binary_target="top_label"))
        out[t] = test.p_value, p_bins, mcb_against_chance(p, y, seed=t)["brier"].p_value, S.bins_outside_p(k, m)
    return out


def counts(ps: np.ndarray, a_test: float, a_bins: float, a_mcb: float, binomial: bool = False) -> tuple[int, int, int, int]:
    """(test, bins note, MCB, any of the three) claims at the given levels; the note only after "no evidence"
    (``binomial``: by the bins count's rule before audit 7)."""
    test = ps[:, 0] < a_test
    bins = ~test & (ps[:, 3 if binomial else 1] < a_bins)
    mcb = ps[:, 2] * (MCB_CHANCE_DRAWS + 1) <= np.floor(a_mcb * (MCB_CHANCE_DRAWS + 1) + 1e-9)
    return int(test.sum()), int(bins.sum()), int(mcb.sum()), int((test | bins | mcb).sum())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    f = 0.1 if args.quick else 1.0
    cases = [("calibrated", 300, 1500), ("calibrated", 2000, 600), ("shifted 0.03", 300, 300),
             ("squeezed", 3000, 100), ("squeezed", 600, 200)]
    split = (S.ALPHA_TEST, S.ALPHA_BINS, S.ALPHA_MCB)
    splits = {"5 % each, binomial bins count (before audit 5)": (0.05, 0.05, 0.05, True),
              "split, binomial bins count (audit 5)": (*split, True),
              "split, Poisson-binomial bins count (now)": (*split, False)}
    lines = ["| case | rows | files | levels (test / bins / MCB) | test | bins note | MCB | any of the three |",
             "|---|---|---|---|---|---|---|---|"]
    for i, (case, n, files) in enumerate(cases):
        files = max(10, int(files * f))
        ps = p_values(case.split()[0], n, files, seed=1000 + i)
        for name, levels in splits.items():
            c = counts(ps, *levels)
            lines.append(f"| {case} | {n:,} | {files:,} | {name}: {' / '.join(f'{a:g}' for a in levels[:3])} | "
                         + " | ".join(f"{v} ({v / files:.1%})" for v in c) + " |")
        print(*lines[-len(splits):], sep="\n", flush=True)
    table = "\n".join(lines)
    print(table)
    if not args.quick:
        (ROOT / "benchmarks" / "RESULTS_claim_family.md").write_text(
            "# The three claims about one set of rows, alone and together (bench_claim_family.py)\n\n"
            "Counts of files on which each claim is made (the bins note only after the test found no evidence), "
            "with the levels and the bins count's rule of the code and the earlier ones. Calibrated rows: every claim is a false alarm "
            "(any of the three: at most 5 % by the union bound now). Shifted and squeezed rows: power.\n\n"
            + table + "\n")


if __name__ == "__main__":
    main()
