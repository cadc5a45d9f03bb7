"""Benchmark: coverage of 95% intervals for the binned calibration error, on data with a KNOWN truth.

Run from the repository root:  python benchmarks/bench_interval.py [--quick] [--large]
Prints a markdown table and writes it, with the machine description, to benchmarks/RESULTS_interval.md
(whose "Reading" section is written by hand after a run). Cost: about 50 minutes with --large on a
busy 2-core machine (most of it n = 1e6 and 1e7).

What an interval is for (its estimand). The binned ECE (paper Eq. 2) with B bins fixed in advance
estimates the population binned calibration error

    CE_B = sum_b P(bin b) * |E[confidence - outcome | bin b]| = sum_b |E[(C - Y) 1{C in bin b}]|,

which is at most the true calibration error TCE = E|C - P(Y = 1 | C)| (Jensen), with equality when
C - P(Y = 1 | C) keeps one sign (a model that is over-confident everywhere). An interval is judged
by how often it contains CE_B; how often it contains the TCE is shown too.

Data: confidence C ~ Beta(5, 1.2) (mean 0.81, like a classifier's top-label confidence: the bins
near 0 are nearly empty), outcome Y ~ Bernoulli(f(C)) for a known calibration curve f:

* calibrated   f(c) = c                               (CE_B = TCE = 0)
* slight       f(c) = c^1.01                          (TCE 0.0016, like the 10M-row file of the issue)
* mild         f(c) = c^1.03                          (slightly over-confident everywhere)
* moderate     f(c) = c^1.3                           (over-confident everywhere)
* temperature  f(c) = sigmoid(logit(c) / 1.5)         (over-confident above 0.5, under below)
* wiggly       f(c) = c + 0.05 sin(25 c)              (crosses the diagonal every 0.126: coarse bins
                                                       average the gaps away, so CE_B < TCE)

CE_B and the TCE are computed by numerical integration (scipy.integrate.quad, per bin). For each
(f, n) the script draws ``reps`` independent data sets, computes every method's interval from the
SAME bootstrap replicates (rows resampled with replacement, B = floor(n^(1/3)) fixed, seeded; the
random split into halves is drawn first, so "percentile" here uses other resamples than
``ece_bootstrap_ci(method="percentile")`` with the same seed, by the same rule), and
reports coverage of CE_B (share of intervals that contain it; its Monte-Carlo standard error is
about sqrt(0.95 * 0.05 / reps)), coverage of the TCE, how often the interval contains the plug-in
ECE of its own data set, and the mean width.

Methods (z = 1.96; every interval is cut to [0, 1]):

* percentile   the old interval: the 2.5% and 97.5% quantiles of the bootstrap ECEs.
* basic        reverse percentile: [2 ECE - q97.5, 2 ECE - q2.5].
* bc           bias-corrected percentile: quantiles shifted down by twice the bootstrap bias
               (mean of the bootstrap ECEs - ECE), i.e. centred on the bias-corrected estimate.
* bca          bias-corrected and accelerated (Efron), acceleration from the exact jackknife.
* debiased     percentile interval of the bootstrapped debiased ECE of Kumar et al. (2019),
               2 |gap_b| - E|gap_b + noise_b| per bin with the Gaussian expectation in closed form.
* split        pbr_core's ``method="split"`` (the default): lower end from a split-sample estimate
               that never overstates CE_B on average, upper end from the plug-in ECE, which never
               understates it on average; each -/+ z bootstrap standard deviations. The script
               draws the split and the resamples exactly as ``pbr_core.ece_bootstrap_ci`` does and
               checks, on the first data set of every case, that its interval is the library's.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import math
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np
from scipy import integrate, special, stats

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import pbr_core  # noqa: E402
from pbr_core import metrics as M  # noqa: E402

from _machine import cpu_model  # noqa: E402 - benchmarks/_machine.py, beside this script

LEVEL = 0.95
Z = stats.norm.ppf(0.5 + LEVEL / 2)
CONF_A, CONF_B = 5.0, 1.2
CURVES = {
    "calibrated": lambda c: c,
    "slight": lambda c: c ** 1.01,
    "mild": lambda c: c ** 1.03,
    "moderate": lambda c: c ** 1.3,
    "temperature": lambda c: special.expit(special.logit(np.clip(c, 1e-300, 1 - 1e-16)) / 1.5),
    "wiggly": lambda c: np.clip(c + 0.05 * np.sin(25 * c), 0.0, 1.0),
}
METHODS = ("percentile", "basic", "bc", "bca", "debiased", "split")


# --------------------------------------------------------------------------- the truth
def _pdf(c: float) -> float:
    return stats.beta.pdf(c, CONF_A, CONF_B)


def exact_ce_b(f, n_bins: int) -> float:
    """CE_B = sum_b |integral over bin b of (c - f(c)) p(c) dc| (numerical integration)."""
    total = 0.0
    for b in range(n_bins):
        lo, hi = b / n_bins, (b + 1) / n_bins
        val, _ = integrate.quad(lambda c: (c - float(f(c))) * _pdf(c), lo, hi, epsabs=1e-13, epsrel=1e-10,
                                points=[0.5] if lo < 0.5 < hi else None)
        total += abs(val)
    return total


def exact_tce(f) -> float:
    """TCE = integral of |c - f(c)| p(c) dc, on 1000 pieces so that every kink of |.| is resolved."""
    edges = np.linspace(0.0, 1.0, 1001)
    return sum(integrate.quad(lambda c: abs(c - float(f(c))) * _pdf(c), lo, hi, epsabs=1e-14, epsrel=1e-10)[0]
               for lo, hi in zip(edges[:-1], edges[1:]))


# --------------------------------------------------------------------------- the intervals
def _folded_mean(m: np.ndarray, s: np.ndarray) -> np.ndarray:
    """E|m + s Z| for Z ~ N(0, 1) (mean of a folded normal); s = 0 gives |m|."""
    with np.errstate(divide="ignore", invalid="ignore"):
        r = np.where(s > 0, m / s, 0.0)
    return np.where(s > 0, s * math.sqrt(2 / math.pi) * np.exp(-r**2 / 2) + m * (1 - 2 * stats.norm.cdf(-r)),
                    np.abs(m))


def intervals(conf: np.ndarray, out: np.ndarray, n_bins: int, n_boot: int, seed: int) -> tuple[float, dict]:
    """The plug-in ECE and every method's interval, all from one set of bootstrap replicates."""
    n = conf.shape[0]
    rng = np.random.default_rng(seed)
    idx = M.bin_index(conf, n_bins)
    gap = conf - out
    half = M._random_halves(n, rng)
    keys = idx + n_bins * half
    sums = M._bootstrap_bin_sums(keys, gap, 2 * n_bins, n_boot, rng)  # (n_boot, 2B): half 0, half 1
    full = np.bincount(keys, weights=gap, minlength=2 * n_bins)
    a, b = full[:n_bins], full[n_bins:]
    S = a + b
    ece = np.abs(S).sum() / n
    reps = np.abs(sums[:, :n_bins] + sums[:, n_bins:]).sum(axis=1) / n
    lo_q, hi_q = np.quantile(reps, [(1 - LEVEL) / 2, (1 + LEVEL) / 2])
    res = {"percentile": (lo_q, hi_q), "basic": (2 * ece - hi_q, 2 * ece - lo_q)}
    bias = reps.mean() - ece
    res["bc"] = (lo_q - 2 * bias, hi_q - 2 * bias)

    # BCa: z0 from the share of replicates below the estimate, acceleration from the jackknife
    # (leaving row i out changes only its bin's sum, so every leave-one-out ECE is O(1)).
    share = np.clip((reps < ece).mean(), 0.5 / n_boot, 1 - 0.5 / n_boot)
    z0 = stats.norm.ppf(share)
    Si = S[idx]
    jack = (np.abs(S).sum() - np.abs(Si) + np.abs(Si - gap)) / (n - 1)
    d = jack.mean() - jack
    acc = (d**3).sum() / (6 * ((d**2).sum()) ** 1.5) if np.any(d) else 0.0
    zq = stats.norm.ppf([(1 - LEVEL) / 2, (1 + LEVEL) / 2])
    adj = stats.norm.cdf(z0 + (z0 + zq) / (1 - acc * (z0 + zq)))
    res["bca"] = tuple(np.quantile(reps, adj))

    # Kumar et al. (2019): Gaussian noise of each bin's sum, sd from the within-bin spread.
    sq = np.bincount(idx, weights=gap**2, minlength=n_bins)
    sd = np.sqrt(np.maximum(sq - S**2 / n, 0.0))
    deb = lambda s_: (2 * np.abs(s_) - _folded_mean(s_, sd)).sum(axis=-1) / n  # noqa: E731
    deb_reps = deb(sums[:, :n_bins] + sums[:, n_bins:])
    res["debiased"] = tuple(np.quantile(deb_reps, [(1 - LEVEL) / 2, (1 + LEVEL) / 2]))

    res["split"] = M._split_interval(a, b, sums[:, :n_bins], sums[:, n_bins:], n, LEVEL)
    return ece, {k: (max(0.0, float(lo)), min(1.0, float(hi))) for k, (lo, hi) in res.items()}


# --------------------------------------------------------------------------- the experiment
def run_case(name: str, n: int, reps: int, n_boot: int, seed: int) -> list[dict]:
    f = CURVES[name]
    B = pbr_core.optimal_n_bins(n)
    ce_b, tce = exact_ce_b(f, B), exact_tce(f)
    rng = np.random.default_rng(seed)
    hits = {m: np.zeros(3) for m in METHODS}  # CE_B, TCE, own ECE
    width = {m: 0.0 for m in METHODS}
    eces = np.empty(reps)
    t0 = time.perf_counter()
    for r in range(reps):
        conf = rng.beta(CONF_A, CONF_B, size=n)
        out = (rng.uniform(size=n) < f(conf)).astype(np.float64)
        boot_seed = int(rng.integers(2**32))
        ece, ivs = intervals(conf, out, B, n_boot, seed=boot_seed)
        if r == 0:  # the "split" column is the library's interval, not a re-implementation
            lib = pbr_core.ece_bootstrap_ci(conf, out, n_bins=B, n_boot=n_boot, seed=boot_seed, level=LEVEL)
            assert np.allclose(lib, ivs["split"], rtol=0, atol=1e-12), (lib, ivs["split"])
        eces[r] = ece
        for m, (lo, hi) in ivs.items():
            hits[m] += [lo <= ce_b <= hi, lo <= tce <= hi, lo <= ece <= hi]
            width[m] += hi - lo
    secs = time.perf_counter() - t0
    return [{
        "curve": name, "n": n, "B": B, "reps": reps, "n_boot": n_boot, "ce_b": ce_b, "tce": tce,
        "mean_ece": float(eces.mean()), "sd_ece": float(eces.std()), "method": m,
        "cover_ce_b": hits[m][0] / reps, "cover_tce": hits[m][1] / reps, "has_ece": hits[m][2] / reps,
        "width": width[m] / reps, "secs": secs,
    } for m in METHODS]


def _table(rows: list[dict]) -> str:
    head = ("| curve | n | B | CE_B | TCE | mean ECE (sd) | method | covers CE_B | covers TCE | "
            "contains its ECE | mean width |\n|---|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|")
    lines = [head]
    for r in rows:
        lines.append(
            f"| {r['curve']} | {r['n']:,} | {r['B']} | {r['ce_b']:.4f} | {r['tce']:.4f} | "
            f"{r['mean_ece']:.4f} ({r['sd_ece']:.4f}) | {r['method']} | {r['cover_ce_b']:.1%} | "
            f"{r['cover_tce']:.1%} | {r['has_ece']:.0%} | {r['width']:.4f} |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="few repetitions, small n (a smoke run; not recorded)")
    ap.add_argument("--large", action="store_true",
                    help="add n = 10,000,000 (B = 215): calibrated and mild curves, 20 data sets each")
    args = ap.parse_args()
    if args.quick:
        plan = [(n, 40, 100) for n in (1_000, 10_000)]
    else:
        # (n, data sets, resamples): the cost is about reps * n * n_boot resampled rows per curve.
        plan = [(1_000, 300, 200), (10_000, 300, 200), (100_000, 200, 100), (1_000_000, 60, 50)]
        if args.large:
            plan.append((10_000_000, 20, 50))  # pbr_core.default_n_boot(1e7) = 50, as on the dashboard
    t_start = time.time()
    load = os.getloadavg()[0]
    rows = []
    for n, reps, n_boot in plan:
        curves = CURVES if n < 10_000_000 else ("calibrated", "mild")
        for i, name in enumerate(curves):
            case = run_case(name, n, reps, n_boot, seed=1000 * i + n % 997)
            rows += case
            print(f"{name} n={n:,}: {case[0]['secs']:.0f} s\n{_table(case)}", file=sys.stderr, flush=True)
    table = _table(rows)
    print(table)
    if args.quick:
        return
    header = (
        "# Interval benchmark results: coverage of 95% intervals for the binned calibration error\n\n"
        f"- date: {_dt.datetime.now():%Y-%m-%d %H:%M}\n"
        f"- machine: {os.cpu_count()} CPU cores (nproc), {cpu_model()}, {platform.system()} {platform.machine()}\n"
        f"- load average at start: {load:.1f} (shared machine)\n"
        f"- Python {platform.python_version()}, numpy {np.__version__}\n"
        f"- whole script: {time.time() - t_start:.0f} s. Command: `python benchmarks/bench_interval.py"
        f"{' --large' if args.large else ''}`\n"
        f"- data, estimand and methods: see the docstring of benchmarks/bench_interval.py. B = floor(n^(1/3)); "
        "'reps' data sets per row group, each with its own seeded bootstrap.\n\n"
    )
    (ROOT / "benchmarks" / "RESULTS_interval.md").write_text(header + table + "\n")


if __name__ == "__main__":
    main()
