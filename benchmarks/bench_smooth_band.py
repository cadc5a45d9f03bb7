"""Benchmark: the smoothed reliability curve's 95 % interval, coverage with known truth and speed (claims row 21).

Run from the repository root:  python benchmarks/bench_smooth_band.py [--files 60] [--speed-rows 100000]
Prints two markdown tables (recorded in benchmarks/RESULTS_smooth_band.md). Cost on a shared 2-core
machine: about 2 minutes at 60 files a cell (the bootstrap dominates), --files 20 about 40 s.

Coverage. Files of n rows are drawn from a population whose outcome chances are known:

* Adult: UCI Adult's gradient-boosting p(y=1) (``sample_data/adult_gradient_boosting.csv.gz``), rows
  drawn with replacement, outcomes y ~ Bernoulli(q(p)) with q(p) = p (calibrated) or
  sigmoid(0.6 logit p) (under-confident by a curve that bends);
* CIFAR-10 top label: ResNet-110's softmax(z) (``sample_data/cifar10_resnet110.npz``), confidence =
  max_k p_k, correct with chance q = p_true[argmax] for labels drawn from softmax(z) (calibrated) or
  softmax(z / 2) (over-confident).

For each file the interval is computed at the file's own bandwidth sigma and compared, at the points
the page draws (density >= 2 % of its maximum), with the **smoothed population curve** at that
sigma (``_smooth_at`` on the whole population with outcome q: what the interval is for) and with the
**true curve** q(t) where it is a function of t (Adult; CIFAR-10 calibrated: t). Coverage = covered
points / drawn points, pooled over the files. Both rules on the same files: the library's interval
with the window's effective count (``estimators.smooth_reliability``: Wilson's from audit 7,
Clopper-Pearson's on the curve's own weights since audit 10b; the "Wilson n_eff" columns print
whatever the library computes) and the percentile bootstrap it replaced (100 resamples of the rows,
sigma fixed; written out below as it was). One point per file, rare-event files and the Wilson rule
side by side: ``benchmarks/bench_figure_intervals.py``.

Speed: both rules on one file of ``--speed-rows`` Adult rows (sigma found once, outside the timing).
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pbr_core.estimators import _fixed_point_sigma, _smooth_at, smooth_reliability  # noqa: E402
from pbr_core.metrics import confidence_and_outcome  # noqa: E402
from pbr_core.predictions import softmax  # noqa: E402

from _machine import cpu_model  # noqa: E402 - benchmarks/_machine.py, beside this script

SIZES = (200, 1000, 5000)


def bootstrap_band(conf: np.ndarray, out: np.ndarray, sigma: float, n_boot: int = 100, level: float = 0.95,
                   seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """The band before audit 7: pointwise percentile bootstrap of t - r_sigma(t), sigma fixed."""
    rng = np.random.default_rng(seed)
    t = _smooth_at(conf, out, sigma)[0]
    reps = np.empty((n_boot, t.size))
    for b in range(n_boot):
        idx = rng.integers(0, conf.shape[0], conf.shape[0])
        reps[b] = t - _smooth_at(conf[idx], out[idx], sigma)[1]
    return tuple(np.quantile(reps, [(1 - level) / 2, (1 + level) / 2], axis=0))


def populations() -> dict[str, tuple[np.ndarray, np.ndarray, bool]]:
    """name -> (confidence, true chance of the outcome, whether that chance is a function of the confidence)."""
    sig = lambda x: 1 / (1 + np.exp(-x))  # noqa: E731
    pa = pd.read_csv(ROOT / "sample_data" / "adult_gradient_boosting.csv.gz")["p_gt50k"].to_numpy()
    pc = np.clip(pa, 1e-9, 1 - 1e-9)
    z = np.load(ROOT / "sample_data" / "cifar10_resnet110.npz")["logits"].astype(np.float64)
    p = softmax(z)
    conf, top = p.max(1), p.argmax(1)
    return {
        "Adult, calibrated": (pa, pa, True),
        "Adult, sigmoid(0.6 logit p)": (pa, sig(0.6 * np.log(pc / (1 - pc))), True),
        "CIFAR-10 top label, calibrated": (conf, conf, True),
        "CIFAR-10 top label, labels ~ softmax(z/2)": (conf, softmax(z / 2)[np.arange(len(z)), top], False),
    }


def coverage(pop: tuple[np.ndarray, np.ndarray, bool], n: int, files: int, seed: int) -> dict[str, float]:
    """Pooled pointwise coverage of both rules, of the smoothed and the true curve, over ``files`` files."""
    c_pop, q_pop, q_is_curve = pop
    rng = np.random.default_rng(seed)
    hits = dict.fromkeys(("wilson_smooth", "boot_smooth", "wilson_true", "boot_true"), 0)
    drawn = 0
    for f in range(files):
        idx = rng.integers(0, len(c_pop), n)
        c, y = c_pop[idx], (rng.random(n) < q_pop[idx]).astype(float)
        s = smooth_reliability(c, y)
        sigma = float(s["sigma"].iloc[0])
        keep = (s["density"] >= 0.02 * s["density"].max()).to_numpy()
        t = s["t"].to_numpy()
        tt, r, _ = _smooth_at(c_pop, q_pop, sigma)
        smoothed = (tt - r)[keep]
        true = np.interp(t, *_curve(c_pop, q_pop))[keep] if q_is_curve else None
        b_lo, b_hi = bootstrap_band(c, y, sigma, seed=f)
        for rule, lo, hi in (("wilson", s["band_low"].to_numpy(), s["band_high"].to_numpy()), ("boot", b_lo, b_hi)):
            lo, hi = lo[keep], hi[keep]
            hits[f"{rule}_smooth"] += int(np.sum((lo <= smoothed) & (smoothed <= hi)))
            if true is not None:
                hits[f"{rule}_true"] += int(np.sum((lo <= true) & (true <= hi)))
        drawn += int(keep.sum())
    return {k: (v / drawn if (q_is_curve or not k.endswith("true")) else float("nan")) for k, v in hits.items()}


def _curve(c: np.ndarray, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The true curve q(t) as (sorted confidences, chances): q is a function of c here."""
    o = np.argsort(c)
    return c[o], q[o]


def speed(rows: int, repeats: int = 3) -> tuple[float, float, float]:
    """Seconds per call of the new interval (sigma given) and of the 100-resample bootstrap, and sigma."""
    pa = pd.read_csv(ROOT / "sample_data" / "adult_gradient_boosting.csv.gz")["p_gt50k"].to_numpy()
    rng = np.random.default_rng(5)
    c = pa[rng.integers(0, len(pa), rows)]
    y = (rng.random(rows) < c).astype(float)
    conf, out = confidence_and_outcome(c, y)
    sigma = _fixed_point_sigma(conf, out)
    t0 = time.perf_counter()
    for _ in range(repeats):
        smooth_reliability(c, y, sigma=sigma)
    new = (time.perf_counter() - t0) / repeats
    t0 = time.perf_counter()
    bootstrap_band(conf, out, sigma)
    old = time.perf_counter() - t0
    return new, old, sigma


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=60, help="files per cell")
    parser.add_argument("--speed-rows", type=int, default=100_000)
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    print(f"CPU: {cpu_model()}; {args.files} files a cell\n")
    print("| population | rows | smoothed curve: Wilson n_eff | bootstrap | true curve: Wilson n_eff | bootstrap |")
    print("|---|---|---|---|---|---|")
    for k, (name, pop) in enumerate(populations().items()):
        for n in SIZES:
            cov = coverage(pop, n, args.files, seed=100 * k + n)
            print(f"| {name} | {n:,} | {cov['wilson_smooth']:.3f} | {cov['boot_smooth']:.3f} "
                  f"| {cov['wilson_true']:.3f} | {cov['boot_true']:.3f} |", flush=True)
    new, old, sigma = speed(args.speed_rows)
    print(f"\n| rows | sigma | Wilson n_eff (s) | bootstrap, 100 resamples (s) |\n|---|---|---|---|\n"
          f"| {args.speed_rows:,} | {sigma:.4f} | {new:.3f} | {old:.3f} |")


if __name__ == "__main__":
    main()
