"""Benchmark: every claim the audit pages make, measured with a KNOWN truth on real probabilities (issue 33).

Run from the repository root:  python benchmarks/bench_claims.py [--quick] [--only 1,4] [--seed 33]
Prints markdown tables and, without --quick or --only, writes them with the machine description to
benchmarks/RESULTS_claims.md, keeping the file's hand-written "## Reading" section. Cost: about
12 minutes on a shared 2-core machine (729 s at a load average of 3, nearly half of it table 1's
Monte Carlo p-values); --quick about 15 s.

How the truth is known. Probabilities are drawn (with replacement) from three real distributions in
sample_data/:

* **Adult**: UCI Adult, gradient boosting's p(y=1) (16,281 rows; mean 0.24, most rows near 0);
* **CIFAR-10**: ResNet-110's top-label confidence (10,000 rows; mean 0.97, median 0.996);
* **LLM**: verbal confidences of an LLM on QA (85,628 rows; mean 0.90; 7 % of them exactly 1).

Outcomes are then drawn from those probabilities (the model is calibrated: the truth is "no
miscalibration") or from the probabilities shifted by a known amount (the truth is "miscalibrated").
Each table counts how often a claim is made over many such data sets ("trials") and gives the rate with
its exact binomial (Clopper-Pearson) 95 % interval next to the nominal rate (under calibration: at
most the level) or the power asked for (under miscalibration: at least 80 %).

The tables (see RESULTS_claims.md for what each shows):

1. The test of one set of rows (``significance.calibration_test``) under calibration, at levels
   0.05, 0.01, 0.001: the new test (Cox + Spiegelhalter, Monte Carlo p-values where sum p(1 - p) <
   100) against the "before" columns, Spiegelhalter's z alone (the old per-group test) and the same
   combined test with asymptotic p-values only. The before columns are computed here in vectorised
   form over more trials and checked against the library on the first trials of every case.
2. Power against outcomes 8 points more frequent than predicted (towards 1/2 from the rows' mean), n = 2000;
   on Adult's rows with p in (0.2, 0.8) together with their mirror images 1 - p (symmetric around 1/2)
   Spiegelhalter's z, which weights each row by 1 - 2p, cannot see the shift at all.
3. The detectable shift: at the delta the test reports for a set of rows, how often it detects
   that shift (alone: p < 0.05; among 5 groups: p < 0.01, the first step of Holm's method).
4. The largest gap between calibrated groups (``groups.calibration_by_group``): how often it is called
   real, against the OLD rule (re-implemented here: a percentile bootstrap interval of ECE(worst) -
   ECE(best), worst and best by plug-in ECE, excluding 0), and Holm's family-wise false-alarm rate.
5. The largest gap's power: one group's outcomes 8 points above its predictions.
6. Grouping by the predicted class (the library) against the OLD grouping by the true class
   (re-implemented here: rows grouped by their label, ECE and Spiegelhalter's z per group, Holm).
7. Coverage of the 90 % consistency bands of the reliability diagram, per bin.

Every case has its own random stream from (seed, table, case), so a case's figures do not depend on
which other tables ran.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as _dt
import os
import platform
import sys
import time
from pathlib import Path
from typing import Callable

import numpy as np
import pandas as pd
from scipy import special, stats

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import pbr_core  # noqa: E402
from pbr_core import groups as G  # noqa: E402
from pbr_core import metrics as M  # noqa: E402
from pbr_core import significance as S  # noqa: E402

from _machine import cpu_model  # noqa: E402 - benchmarks/_machine.py, beside this script

SAMPLES = ROOT / "sample_data"
RESULTS = ROOT / "benchmarks" / "RESULTS_claims.md"
LEVELS = (0.05, 0.01, 0.001)
SHIFT = 0.08
ALPHA = 0.05


# --------------------------------------------------------------------------- data and helpers
@dataclasses.dataclass(frozen=True)
class Pools:
    """The real probability distributions outcomes are drawn from."""

    adult: np.ndarray       # p(y=1), binary
    adult_race: pd.Series   # Adult's race column (the five groups of table 4)
    cifar: np.ndarray       # top-label confidence
    cifar_probs: np.ndarray  # full 10-class probability vectors (table 6)
    llm: np.ndarray         # confidence

    def get(self, name: str) -> np.ndarray:
        if name == "Adult p in (0.2, 0.8)":
            return self.adult[(self.adult > 0.2) & (self.adult < 0.8)]
        if name == "Adult p in (0.2, 0.8), mirrored":  # symmetric around 1/2: every 1 - 2p has its opposite
            spread = self.get("Adult p in (0.2, 0.8)")
            return np.concatenate([spread, 1 - spread])
        if name == "LLM, 0 < p < 1":
            return self.llm[(self.llm > 0) & (self.llm < 1)]
        return {"Adult": self.adult, "CIFAR-10": self.cifar, "LLM": self.llm}[name]


def load_pools() -> Pools:
    adult = pbr_core.load_predictions(SAMPLES / "adult_gradient_boosting.csv.gz")
    cifar = pbr_core.load_predictions(SAMPLES / "cifar10_resnet110.npz")
    llm = pbr_core.load_predictions(SAMPLES / "llm_qa_confidence_correct.csv.gz")
    return Pools(adult=np.asarray(adult.p_positive, dtype=np.float64), adult_race=adult.metadata["race"],
                 cifar=np.asarray(cifar.confidence, dtype=np.float64),
                 cifar_probs=np.asarray(cifar.probs, dtype=np.float64),
                 llm=np.asarray(llm.confidence, dtype=np.float64))


def case_rng(seed: int, table: int, case: int) -> np.random.Generator:
    return np.random.default_rng([seed, table, case])


def draw(rng: np.random.Generator, q: np.ndarray) -> np.ndarray:
    """0/1 outcomes with P(1) = q."""
    return (rng.random(q.shape) < q).astype(np.float64)


def toward_half(p: np.ndarray) -> float:
    """+1 or -1: the direction towards 1/2 from the rows' mean probability (as ``detectable_shift``)."""
    return -1.0 if p.mean() > 0.5 else 1.0


def clock() -> tuple[float, float]:
    return time.perf_counter(), time.process_time()


def progress(what: str, t0: tuple[float, float]) -> None:
    """A case's wall and CPU seconds on stderr (the machine is shared: CPU time is what a case costs)."""
    wall, cpu = time.perf_counter() - t0[0], time.process_time() - t0[1]
    print(f"{what}: {wall:.1f} s ({cpu:.1f} s CPU)", file=sys.stderr, flush=True)


def rate(k: int, t: int) -> str:
    """'4.8 % [3.6, 6.3]': the rate and its exact (Clopper-Pearson) binomial 95 % interval, in percent."""
    if t == 0:
        return "n/a"
    lo = stats.beta.ppf(0.025, k, t - k + 1) if k > 0 else 0.0
    hi = stats.beta.ppf(0.975, k + 1, t - k) if k < t else 1.0
    return f"{_pct(k / t)} [{_pct(lo, False)}, {_pct(hi, False)}]"


def _pct(x: float, unit: bool = True) -> str:
    v = 100 * x
    text = f"{v:.2f}" if 0 < v < 1 else f"{v:.1f}"
    return text + (" %" if unit else "")


def table(head: list[str], rows: list[list[str]], right: int) -> str:
    """A markdown table; the last ``right`` columns are right-aligned."""
    align = ["---"] * (len(head) - right) + ["---:"] * right
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join(align) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


# --------------------------------------------------------------------------- table 1: level of the test
def asymptotic_pvalues(P: np.ndarray, Y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(Spiegelhalter's p, the combined test's asymptotic p) of each row of ``P`` / ``Y`` (trials, rows),
    vectorised: the formulas of ``significance.calibration_test_from_sums`` (Cox's 2x2 information
    inverted in closed form; a trial whose information is singular gets NaN and is redone by the library)."""
    pc = np.clip(P, S.EPS, 1 - S.EPS)
    x = np.log(pc) - np.log1p(-pc)
    w = P * (1 - P)
    r = Y - P
    u0, u1 = r.sum(1), (r * x).sum(1)
    i00, i01, i11 = w.sum(1), (w * x).sum(1), (w * x * x).sum(1)
    det = i00 * i11 - i01 * i01
    with np.errstate(divide="ignore", invalid="ignore"):
        chi = (i11 * u0 * u0 - 2 * i01 * u0 * u1 + i00 * u1 * u1) / det
        singular = ~(det > 1e-9 * np.maximum(i00, i11) ** 2) | ~(i00 > 0)
        p_cox = np.where(singular, np.nan, special.chdtrc(2, chi))
        s = 1 - 2 * P
        var = (s * s * w).sum(1)
        z = (r * s).sum(1) / np.sqrt(var)
        p_sp = np.where(var > 0, 2 * special.ndtr(-np.abs(z)), np.nan)
    both = np.fmin(p_cox, p_sp)  # fmin: a NaN part is left out, as _combined does
    k = np.isfinite(p_cox).astype(int) + np.isfinite(p_sp)
    comb = np.where(k > 0, np.minimum(1.0, k * both), np.nan)
    comb[singular & (var > 0)] = np.nan  # redone by the library (rank-1 information)
    return p_sp, comb


def new_test(p: np.ndarray, y: np.ndarray, seed: int) -> S.CalibrationTest:
    """The library's test at alpha = 0.001: where it draws outcomes (Monte Carlo) it draws up to 19,999
    sets (as for Holm over 50 groups at 0.05), enough to resolve the 0.001 level. It stops at the 20th
    draw as extreme as the data, so above p = 0.01 the p-value is the one it gives at alpha = 0.05."""
    return S.calibration_test(p, y, alpha=0.001, seed=seed)


def level_case(pool: np.ndarray, n: int, t_new: int, t_before: int, rng: np.random.Generator) -> dict:
    """Table 1, one (distribution, n): p-values of the three tests under calibration."""
    # The before columns: t_before trials, in blocks of about 2e6 cells.
    p_sp, p_as = [], []
    block = max(1, 2_000_000 // n)
    checked = False
    for t0 in range(0, t_before, block):
        m = min(block, t_before - t0)
        P = pool[rng.integers(0, pool.size, size=(m, n))]
        Y = draw(rng, P)
        sp, comb = asymptotic_pvalues(P, Y)
        for i in np.flatnonzero(~np.isfinite(comb) & np.isfinite(sp)):  # singular information: the library
            comb[i] = S.calibration_test_from_sums(S.calibration_sums(P[i], Y[i])).p_value
        if not checked:  # the vectorised p-values are the library's
            for i in range(min(m, 20)):
                lib = S.calibration_test_from_sums(S.calibration_sums(P[i], Y[i]))
                assert np.allclose([sp[i], comb[i]], [lib.p_spiegelhalter, lib.p_value], rtol=1e-6, atol=1e-12,
                                   equal_nan=True), (sp[i], comb[i], lib)
            checked = True
        p_sp.append(sp)
        p_as.append(comb)
    # The new test: the library's calibration_test.
    p_new, mc, V = np.empty(t_new), 0, 0.0
    for t in range(t_new):
        p = pool[rng.integers(0, pool.size, size=n)]
        test = new_test(p, draw(rng, p), seed=t)
        p_new[t] = test.p_value
        mc += test.method.startswith("Monte Carlo")
        V += test.effective_n
    return {"new": p_new, "spiegelhalter": np.concatenate(p_sp), "asymptotic": np.concatenate(p_as),
            "mc": mc / max(t_new, 1), "V": V / max(t_new, 1)}


def table1(pools: Pools, seed: int, quick: bool) -> str:
    ns = (10, 30, 135, 480, 2000, 10000)
    rows = []
    for i, (name, n) in enumerate((d, n) for d in ("Adult", "CIFAR-10", "LLM") for n in ns):
        pool = pools.get(name)
        mc_case = S.needs_exact(n, n * float(np.mean(pool * (1 - pool))))
        # Monte Carlo p-values cost a few ms each (more below p = 0.01): fewer trials at the larger n.
        t_new = (10_000 if n <= 135 else 5000) if mc_case else 4000
        t_before = 20_000 if n <= 2000 else 5000
        if quick:
            t_new, t_before = max(20, t_new // 50), max(200, t_before // 50)
        t0 = clock()
        res = level_case(pool, n, t_new, t_before, case_rng(seed, 1, i))
        progress(f"table 1 {name} n={n}", t0)
        how = f"{res['mc']:.0%} Monte Carlo" if res["mc"] else "analytic"
        for lev in LEVELS:
            cells = [rate(int(np.sum(res[k] < lev)), res[k].size) for k in ("new", "spiegelhalter", "asymptotic")]
            rows.append(["miscalibrated (p < level)", "calibrated", name, f"{n:,}", f"{res['V']:.3g}", how,
                         f"{lev:g}", f"{res['new'].size:,}", cells[0], f"{res['spiegelhalter'].size:,}", cells[1],
                         cells[2]])
    head = ["claim", "truth", "probabilities", "n", "mean V = sum p(1-p)", "new test's p-values", "nominal (level)",
            "trials (new)", "new test: rate [95 % CI]", "trials (before)", "before: Spiegelhalter's z alone",
            "before: combined test, asymptotic p"]
    return table(head, rows, 6)


# --------------------------------------------------------------------------- table 2: power against +0.08
def power_case(pool: np.ndarray, n: int, shift: float, trials: int, rng: np.random.Generator) -> dict:
    found = sp = certain = 0
    for t in range(trials):
        p = pool[rng.integers(0, pool.size, size=n)]
        test = S.calibration_test(p, draw(rng, np.clip(p + shift, 0, 1)), seed=t)
        found += test.p_value < ALPHA
        sp += test.p_spiegelhalter < ALPHA
        certain += test.method.startswith("certain")
    return {"found": found, "sp": sp, "certain": certain, "trials": trials}


def table2(pools: Pools, seed: int, quick: bool) -> str:
    n = 2000
    rows = []
    for i, name in enumerate(("Adult p in (0.2, 0.8)", "Adult", "CIFAR-10", "LLM", "LLM, 0 < p < 1",
                              "Adult p in (0.2, 0.8), mirrored")):
        pool = pools.get(name)
        shift = SHIFT * toward_half(pool)
        trials = 1000 if not quick else 30
        t0 = clock()
        r = power_case(pool, n, shift, trials, case_rng(seed, 2, i))
        progress(f"table 2 {name}", t0)
        note = f" ({r['certain']} by an outcome of probability 0)" if r["certain"] else ""
        rows.append(["miscalibrated (p < 0.05)", f"outcomes {shift:+.2f} from p", name, f"{n:,}", f"{trials:,}",
                     "at least 80 %", rate(r["found"], trials) + note, rate(r["sp"], trials)])
    head = ["claim", "truth", "probabilities", "n", "trials", "power asked", "new test: rate [95 % CI]",
            "before: Spiegelhalter's z alone"]
    return table(head, rows, 5)


# --------------------------------------------------------------------------- table 3: the detectable shift
def detect_case(pool: np.ndarray, n: int, n_tests: int, trials: int, rng: np.random.Generator) -> dict:
    """Each trial: new rows, the delta the test reports for them, outcomes shifted by delta towards 1/2."""
    found, deltas, certain = 0, [], 0
    for t in range(trials):
        p = pool[rng.integers(0, pool.size, size=n)]
        delta = S.calibration_test_from_sums(S.calibration_sums(p, p), n_tests=n_tests, alpha=ALPHA).detectable_shift
        deltas.append(delta)
        y = draw(rng, np.clip(p + toward_half(p) * delta, 0, 1))
        test = S.calibration_test(p, y, n_tests=n_tests, alpha=ALPHA, seed=t)
        found += test.p_value < ALPHA / n_tests   # Holm's first step: flagged whatever the other groups
        certain += test.method.startswith("certain")
    return {"found": found, "delta": np.array(deltas), "certain": certain, "trials": trials}


def table3(pools: Pools, seed: int, quick: bool) -> str:
    rows = []
    cases = [(d, n, k) for d in ("Adult", "CIFAR-10", "LLM", "LLM, 0 < p < 1") for n in (135, 480, 2000, 10000)
             for k in (1, 5)]
    for i, (name, n, k) in enumerate(cases):
        pool = pools.get(name)
        trials = 500 if not quick else 20
        t0 = clock()
        r = detect_case(pool, n, k, trials, case_rng(seed, 3, i))
        progress(f"table 3 {name} n={n} k={k}", t0)
        d = r["delta"]
        note = f" ({r['certain']} by an outcome of probability 0)" if r["certain"] else ""
        claim = "p < 0.05 (alone)" if k == 1 else "p < 0.01 (1 of 5 groups: Holm's first step)"
        rows.append([claim, "outcomes shifted by the reported delta towards 1/2", name, f"{n:,}",
                     f"{np.median(d):.3f} ({d.min():.3f}-{d.max():.3f})", f"{trials:,}", "at least 80 %",
                     rate(r["found"], trials) + note])
    head = ["claim", "truth", "probabilities", "n", "delta reported: median (range)", "trials", "power asked",
            "detected: rate [95 % CI]"]
    return table(head, rows, 4)


# --------------------------------------------------------------------------- tables 4 and 5: the largest gap
def grouped(parts: list[np.ndarray], ys: list[np.ndarray]) -> pbr_core.Predictions:
    """Binary predictions of groups g0, g1, ... with p(y=1) ``parts[i]`` and outcomes ``ys[i]``."""
    p = np.concatenate(parts)
    preds = pbr_core.Predictions.from_arrays(np.c_[1 - p, p], np.concatenate(ys).astype(np.int64))
    g = np.concatenate([np.full(a.size, f"g{i}", dtype=object) for i, a in enumerate(parts)])
    return dataclasses.replace(preds, metadata=pd.DataFrame({"g": g}))


def old_gap_rule(parts: list[np.ndarray], ys: list[np.ndarray], n_boot: int, rng: np.random.Generator,
                 min_rows: int = G.MIN_ROWS, level: float = 0.95) -> tuple[bool, int, float]:
    """The OLD largest-gap claim (pbr_core before issue 33): worst and best group by plug-in ECE (each at
    B = floor(n_g^(1/3))) among groups of at least ``min_rows``, a percentile bootstrap interval of
    ECE(worst) - ECE(best) (rows resampled within each group, B fixed), 'real' when it excludes 0.
    Returns (claimed, worst group, measured gap)."""
    ok = [i for i, a in enumerate(parts) if a.size >= min_rows]
    ece = {i: M.ece(parts[i], ys[i], n_bins=M.optimal_n_bins(parts[i].size)) for i in ok}
    worst, best = max(ok, key=ece.get), min(ok, key=ece.get)
    reps = []
    for i in (worst, best):
        B = M.optimal_n_bins(parts[i].size)
        reps.append(M._bootstrap_eces(M.bin_index(parts[i], B), parts[i] - ys[i], B, n_boot, rng))
    lo = np.quantile(reps[0] - reps[1], (1 - level) / 2)
    return bool(lo > 0), worst, ece[worst] - ece[best]


def gap_case(make: Callable[[np.random.Generator], list[np.ndarray]], shifts: list[float], trials: int,
             n_boot: int, rng: np.random.Generator) -> dict:
    """``trials`` data sets of groups (``make`` draws each group's p; outcomes from p + shift): how often
    the new and the old rule call the largest gap real (and with the shifted group g0 the worst), how
    often Holm flags a group that is calibrated, how often g0 is flagged."""
    out = {k: 0 for k in ("new", "new_g0", "old", "old_g0", "fwer", "g0_flagged")}
    measured, corrected = [], []
    calibrated = [f"g{i}" for i, s in enumerate(shifts) if s == 0]
    for t in range(trials):
        parts = make(rng)
        ys = [draw(rng, np.clip(p + s, 0, 1)) for p, s in zip(parts, shifts)]
        report = G.calibration_by_group(grouped(parts, ys), "g", n_boot=n_boot, seed=t)
        gap = report.largest_gap
        out["new"] += gap["real"]
        out["new_g0"] += gap["real"] and gap["worst"] == "g0"
        flagged = set(report.miscalibrated)
        out["fwer"] += bool(flagged & set(calibrated))
        out["g0_flagged"] += "g0" in flagged
        old, worst, m = old_gap_rule(parts, ys, n_boot, rng)
        out["old"] += old
        out["old_g0"] += old and worst == 0
        measured.append(m)
        corrected.append(gap["gap"])
    out.update(trials=trials, measured=float(np.mean(measured)), corrected=float(np.mean(corrected)))
    return out


def _from_pool(pool: np.ndarray, sizes: list[int]) -> Callable[[np.random.Generator], list[np.ndarray]]:
    return lambda rng: [pool[rng.integers(0, pool.size, size=n)] for n in sizes]


def _adult_race(pools: Pools) -> tuple[Callable[[np.random.Generator], list[np.ndarray]], list[int]]:
    """Adult's five race groups, each with its own rows' p(y=1) (only the outcomes are redrawn)."""
    race = pools.adult_race.astype(str).to_numpy()
    names = pools.adult_race.value_counts().index.tolist()  # largest first: White, Black, ...
    parts = [pools.adult[race == r] for r in names]
    return (lambda rng: parts), [a.size for a in parts]


def table4(pools: Pools, seed: int, quick: bool) -> str:
    race_make, race_sizes = _adult_race(pools)
    cases = [
        ("Adult", [135, 8000], _from_pool(pools.adult, [135, 8000])),
        ("CIFAR-10", [135, 8000], _from_pool(pools.cifar, [135, 8000])),
        ("LLM", [135, 8000], _from_pool(pools.llm, [135, 8000])),
        ("Adult", [135, 13946], _from_pool(pools.adult, [135, 13946])),
        ("Adult, each race group's own rows", race_sizes, race_make),
    ]
    rows = []
    for i, (name, sizes, make) in enumerate(cases):
        trials, n_boot = (200, 200) if not quick else (4, 50)
        t0 = clock()
        r = gap_case(make, [0.0] * len(sizes), trials, n_boot, case_rng(seed, 4, i))
        progress(f"table 4 {name} {sizes}", t0)
        rows.append(["the largest gap is real", "every group calibrated", name, " + ".join(f"{s:,}" for s in sizes),
                     f"{trials:,}", "at most 5 %", rate(r["new"], trials), rate(r["old"], trials),
                     f"{r['measured']:.4f}", f"{r['corrected']:+.4f}", rate(r["fwer"], trials)])
    head = ["claim", "truth", "probabilities", "group sizes", "trials", "nominal", "new rule: rate [95 % CI]",
            "before: old rule (percentile interval excludes 0)", "mean measured ECE gap (old)",
            "mean bias-corrected gap (new)", "Holm: some calibrated group flagged (nominal at most 5 %)"]
    return table(head, rows, 7)


def table5(pools: Pools, seed: int, quick: bool) -> str:
    spread = pools.get("Adult p in (0.2, 0.8)")
    race_make, race_sizes = _adult_race(pools)
    order = (2, 0, 1, 3, 4)  # the race groups with the shifted one, Asian-Pac-Islander (480 rows), first

    def race_480(rng: np.random.Generator) -> list[np.ndarray]:
        parts = race_make(rng)
        return [parts[i] for i in order]

    cases = [
        ("Adult p in (0.2, 0.8)", [135, 135], _from_pool(spread, [135, 135])),
        ("Adult p in (0.2, 0.8)", [500, 500], _from_pool(spread, [500, 500])),
        ("Adult p in (0.2, 0.8)", [2000, 2000], _from_pool(spread, [2000, 2000])),
        ("Adult p in (0.2, 0.8)", [135, 8000], _from_pool(spread, [135, 8000])),
        ("Adult p in (0.2, 0.8)", [8000, 135], _from_pool(spread, [8000, 135])),
        ("Adult", [2000, 2000], _from_pool(pools.adult, [2000, 2000])),
        ("Adult, each race group's own rows", [race_sizes[i] for i in order], race_480),
    ]
    rows = []
    for i, (name, sizes, make) in enumerate(cases):
        trials, n_boot = (100, 200) if not quick else (4, 50)
        t0 = clock()
        r = gap_case(make, [SHIFT] + [0.0] * (len(sizes) - 1), trials, n_boot, case_rng(seed, 5, i))
        progress(f"table 5 {name} {sizes}", t0)
        asked = "at least 80 %" if sizes == [2000, 2000] else "(reported)"
        rows.append(["the largest gap is real, worst = the shifted group",
                     f"first group {SHIFT:+.2f}, others calibrated", name, " + ".join(f"{s:,}" for s in sizes), f"{trials:,}", asked, rate(r["new_g0"], trials),
                     rate(r["g0_flagged"], trials), rate(r["old_g0"], trials), rate(r["fwer"], trials)])
    head = ["claim", "truth", "probabilities", "group sizes (shifted first)", "trials", "power asked",
            "new rule: rate [95 % CI]", "shifted group's own test (Holm) flags it", "before: old rule",
            "a calibrated group flagged (at most 5 %)"]
    return table(head, rows, 6)


# --------------------------------------------------------------------------- table 6: predicted vs true class
def old_true_class(conf: np.ndarray, out: np.ndarray, labels: np.ndarray) -> tuple[list[float], bool]:
    """The OLD grouping by the true class (pbr_core before issue 33): rows grouped by their label, each
    group's ECE of (confidence, outcome) at B = floor(n_g^(1/3)) and Spiegelhalter's z, Holm over the
    groups. Returns (the groups' ECEs, whether some group was called miscalibrated)."""
    eces, ps = [], []
    for k in np.unique(labels):
        m = labels == k
        eces.append(M.ece(conf[m], out[m], n_bins=M.optimal_n_bins(int(m.sum()))))
        ps.append(G.spiegelhalter_z(conf[m], out[m])[1])
    return eces, bool(np.any(G.holm(ps) < ALPHA))


def class_case(kind: str, pools: Pools, n: int, trials: int, rng: np.random.Generator) -> dict:
    old_e, new_e, old_claim, new_claim, new_test_true = [], [], 0, 0, 0
    for t in range(trials):
        if kind == "binary":
            p = pools.adult[rng.integers(0, pools.adult.size, size=n)]
            labels = draw(rng, p).astype(np.int64)
            probs = np.c_[1 - p, p]
        else:  # labels drawn from each row's 10-class probability vector: calibrated in every sense
            probs = pools.cifar_probs[rng.integers(0, pools.cifar_probs.shape[0], size=n)]
            cum = probs.cumsum(axis=1)
            labels = np.minimum((rng.random((n, 1)) > cum).sum(axis=1), probs.shape[1] - 1)
        preds = pbr_core.Predictions.from_arrays(probs, labels, input_type="probabilities")
        report = G.calibration_by_group(preds, G.PREDICTED_CLASS, n_boot=20, seed=t)
        new_e += report.table["ece"].tolist()
        new_claim += bool(report.miscalibrated)
        # What the old grouping measured: binary data p(y=1) against y (the default target), other data
        # the top-label confidence against correctness.
        conf, out = (probs[:, 1], labels.astype(np.float64)) if kind == "binary" else M.confidence_and_outcome(probs,
                                                                                                                labels)
        e, claim = old_true_class(conf, out, labels)
        old_e += e
        old_claim += claim
        # The new test on the old groups: the grouping, not the test, is what is wrong.
        tests = [S.calibration_test(conf[labels == k], out[labels == k], n_tests=len(e), seed=t)
                 for k in np.unique(labels)]
        new_test_true += bool(np.any(G.holm([x.p_value for x in tests]) < ALPHA))
    return {"old_e": np.array(old_e), "new_e": np.array(new_e), "old": old_claim, "new": new_claim,
            "new_test_true": new_test_true, "trials": trials}


def table6(pools: Pools, seed: int, quick: bool) -> str:
    rows = []
    for i, (kind, name, n) in enumerate((("binary", "Adult (binary, p(y=1))", 3000),
                                          ("binary", "Adult (binary, p(y=1))", 16281),
                                          ("multiclass", "CIFAR-10 (10 classes, top label)", 10000))):
        trials = {3000: 200, 16281: 100, 10000: 100}[n] if not quick else 3
        t0 = clock()
        r = class_case(kind, pools, n, trials, case_rng(seed, 6, i))
        progress(f"table 6 {name} n={n}", t0)
        q = lambda e: f"{np.median(e):.3f} ({np.min(e):.3f}-{np.max(e):.3f})"  # noqa: E731
        rows.append(["some class miscalibrated (Holm, p < 0.05)", "calibrated (labels drawn from the probabilities)",
                     name, f"{n:,}", f"{trials:,}", "at most 5 %", rate(r["new"], trials), q(r["new_e"]),
                     rate(r["old"], trials), q(r["old_e"]), rate(r["new_test_true"], trials)])
    head = ["claim", "truth", "probabilities", "n", "trials", "nominal", "new: by predicted class, rate [95 % CI]",
            "per-class ECE, predicted class: median (range)", "before: by true class, Spiegelhalter + Holm",
            "per-class ECE, true class: median (range)", "new test on true-class groups"]
    return table(head, rows, 6)


# --------------------------------------------------------------------------- table 7: consistency bands
def band_case(pool: np.ndarray, n: int, trials: int, rng: np.random.Generator) -> dict:
    B = M.optimal_n_bins(n)
    inside, full = np.zeros(B), np.zeros(B)
    for _ in range(trials):
        p = pool[rng.integers(0, pool.size, size=n)]
        t = pbr_core.reliability_diagram(p, draw(rng, p))
        ok = (t["count"] > 0).to_numpy()
        acc, lo, hi = t["accuracy"].to_numpy(), t["band_low"].to_numpy(), t["band_high"].to_numpy()
        with np.errstate(invalid="ignore"):
            inside += ok & (acc >= lo - 1e-12) & (acc <= hi + 1e-12)
        full += ok
    return {"inside": inside, "full": full, "B": B, "trials": trials}


def table7(pools: Pools, seed: int, quick: bool) -> str:
    rows = []
    for i, (name, n) in enumerate((d, n) for d in ("Adult", "CIFAR-10", "LLM") for n in (300, 1000, 10000)):
        trials = 500 if not quick else 20
        t0 = clock()
        r = band_case(pools.get(name), n, trials, case_rng(seed, 7, i))
        progress(f"table 7 {name} n={n}", t0)
        busy = r["full"] >= 50  # bins non-empty in at least 50 trials: a per-bin rate worth reading
        cover = np.where(busy, r["inside"] / np.maximum(r["full"], 1), np.inf)
        b = int(np.argmin(cover))
        rows.append(["the bin's frequency lies in its band", "calibrated", name, f"{n:,}", str(r["B"]), f"{trials:,}",
                     "at least 90 %", rate(int(r["inside"].sum()), int(r["full"].sum())),
                     f"bin {b + 1}: " + rate(int(r["inside"][b]), int(r["full"][b])),
                     f"{int(busy.sum())} of {r['B']}"])
    head = ["claim", "truth", "probabilities", "n", "bins", "trials", "nominal", "all bins: rate [95 % CI]",
            "least-covered bin: rate [95 % CI]", "bins non-empty in >= 50 trials"]
    return table(head, rows, 6)


TABLES = {
    1: ("1. The test of one set of rows under calibration: false alarms", table1),
    2: (f"2. Power against outcomes {SHIFT:.2f} more frequent than predicted (towards 1/2), n = 2000", table2),
    3: ("3. The detectable shift: is the reported delta detected at least 80 % of the time?", table3),
    4: ("4. The largest gap between calibrated groups: false alarms", table4),
    5: (f"5. The largest gap's power: one group's outcomes {SHIFT:+.2f} from its predictions", table5),
    6: ("6. Grouping by the predicted class (new) against grouping by the true class (old), calibrated model", table6),
    7: ("7. Consistency bands (90 %) of the reliability diagram, per bin, calibrated model", table7),
}


#: The modules whose behaviour the tables measure (their uncommitted changes are named in the header).
MEASURED = ("pbr_core/significance.py", "pbr_core/groups.py", "pbr_core/metrics.py", "pbr_core/predictions.py")


def library_version() -> str:
    """The commit the measured pbr_core is at, and which measured modules had changes not committed
    (the figures depend on the library's random streams: another version gives other trials)."""
    import subprocess

    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                              check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--", *MEASURED], cwd=ROOT, capture_output=True,
                               text=True, check=True).stdout.split()
    except (OSError, subprocess.CalledProcessError):
        return "(commit unknown)"
    changed = [p.split("/")[-1] for p in dirty if p.endswith(".py")]
    return f"at commit {head}" + (f" with changes not committed in {', '.join(changed)}" if changed else
                                  f" ({', '.join(m.split('/')[-1] for m in MEASURED)} as committed)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="a few trials per case (a smoke run; not recorded)")
    ap.add_argument("--only", default="", help="comma-separated table numbers, e.g. 1,4 (not recorded)")
    ap.add_argument("--seed", type=int, default=33)
    args = ap.parse_args()
    only = [int(x) for x in args.only.split(",") if x.strip()] or list(TABLES)
    pools = load_pools()
    t_start, load = time.time(), os.getloadavg()[0]
    parts, secs = [], {}
    for k in only:
        title, fn = TABLES[k]
        t0 = time.time()
        body = fn(pools, args.seed, args.quick)
        secs[k] = time.time() - t0
        parts.append(f"## {title}\n\n{body}\n")
        print(parts[-1], flush=True)
    if args.quick or args.only:
        return
    timing = ", ".join(f"table {k} {s:.0f} s" for k, s in secs.items())
    header = (
        "# Claims benchmark results: every audit claim measured with a known truth on real probabilities\n\n"
        f"- date: {_dt.datetime.now():%Y-%m-%d %H:%M}\n"
        f"- machine: {os.cpu_count()} CPU cores (nproc), {cpu_model()}, {platform.system()} {platform.machine()}\n"
        f"- load average at start: {load:.1f} (shared machine)\n"
        f"- Python {platform.python_version()}, numpy {np.__version__}; pbr_core {library_version()}\n"
        f"- whole script: {time.time() - t_start:.0f} s ({timing}). Command: "
        f"`python benchmarks/bench_claims.py --seed {args.seed}`\n"
        "- data, truth and rules: see the docstring of benchmarks/bench_claims.py. Rates are counts over "
        "trials with their exact (Clopper-Pearson) binomial 95 % interval.\n\n"
    )
    old = RESULTS.read_text() if RESULTS.exists() else ""
    reading = old[old.index("## Reading"):] if "## Reading" in old else ""
    RESULTS.write_text(header + "\n".join(parts) + ("\n" + reading if reading else ""))


if __name__ == "__main__":
    main()
