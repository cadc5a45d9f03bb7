"""Benchmark: the reliability diagram's whisker (claims row 20) and the smoothed curve's band (row 21),
coverage with known truth, one point per file, before (Wilson) and after (Clopper-Pearson) on the same files.

Run from the repository root:
    python benchmarks/bench_figure_intervals.py whisker [--files 1000]
    python benchmarks/bench_figure_intervals.py band [--files 300] [--cells mean1pct:1000,adult:200]
Prints markdown tables (recorded in benchmarks/RESULTS_figure_intervals.md). Cost on a shared 2-core
machine: whisker about 2 minutes at 1,000 files a cell; band 30 s to 5 minutes a cell at 300 files
(5,000 rows of mean 0.1 % the slowest).

Populations (outcome chances known, rows drawn with replacement, y ~ Bernoulli(q), calibrated):
UCI Adult's gradient-boosting p(y=1) (``adult``), the same moved to a mean of 1 % or 0.1 % with
sigmoid(logit p + a) (``mean1pct``, ``mean0.1pct``: audit 10b's rare-event files), Adult rounded to
1 decimal (``dec1``), CIFAR-10 ResNet-110 top-label confidences (``cifar``).

* whisker: ``metrics.reliability_diagram`` at its default B; the bar holding the population's median
  score, one per file (independent trials), and all bars pooled; its truth is the mean chance of the
  bar's rows. Width: Clopper-Pearson's / Wilson's whisker, median over the bars.
* band: ``estimators.smooth_reliability`` at the file's own bandwidth; the grid point nearest the
  population's median and 90th-percentile score, where the page draws it (density >= 2 % of its
  maximum); truth: the population's smoothed curve at the file's sigma (``_smooth_at``, as
  ``tests/test_estimators.py::_smooth_coverage``). "before": the Wilson interval on the continuous
  kernel's sums (the code before audit 10b, written out below); "after": the library. Width: after /
  before, median over the drawn points of every file.
Rates are k/N = % [95 % Clopper-Pearson].
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.optimize import brentq
from scipy.special import expit, logit, ndtri
from scipy.stats import beta

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import pbr_core  # noqa: E402
from pbr_core import estimators as E  # noqa: E402
from pbr_core.metrics import bin_index, reliability_diagram  # noqa: E402


def population(name: str) -> tuple[np.ndarray, np.ndarray]:
    pa = pd.read_csv(ROOT / "sample_data" / "adult_gradient_boosting.csv.gz")["p_gt50k"].to_numpy()
    lp = logit(np.clip(pa, 1e-9, 1 - 1e-9))
    if name in ("mean1pct", "mean0.1pct"):
        m = 0.01 if name == "mean1pct" else 0.001
        q = expit(lp + brentq(lambda a: expit(lp + a).mean() - m, -20, 5))
    elif name == "dec1":
        q = np.round(pa, 1)
    elif name == "cifar":
        q = pbr_core.load_predictions(ROOT / "sample_data" / "cifar10_resnet110.npz").probs.max(1)
    else:
        q = pa
    return q, q


def fmt(k: int, n: int) -> str:
    lo = 0.0 if k == 0 else beta.ppf(0.025, k, n - k + 1)
    hi = 1.0 if k == n else beta.ppf(0.975, k + 1, n - k)
    return f"{k}/{n} = {100 * k / n:.1f} % [{100 * lo:.1f}, {100 * hi:.1f}]"


def whisker(files: int) -> None:
    print("| scores | rows | B | one bar per file: Wilson | Clopper-Pearson | pooled bars: Wilson | Clopper-Pearson "
          "| width CP / Wilson (median) |\n|---|---|---|---|---|---|---|---|")
    for name, sizes in (("mean0.1pct", (60, 100, 150, 200, 300, 1000)), ("mean1pct", (50, 200, 1000)),
                        ("adult", (50, 200, 1000, 2000)), ("dec1", (60, 200, 1000)), ("cifar", (50, 200, 1000))):
        C, Q = population(name)
        tstar = np.median(C)
        for n in sizes:
            rng = np.random.default_rng(n + 101)
            one = {r: [0, 0] for r in ("wilson", "clopper-pearson")}
            pool = {r: [0, 0] for r in one}
            ratio = []
            for _ in range(files):
                idx = rng.integers(0, C.size, n)
                c, q = C[idx], Q[idx]
                y = (rng.random(n) < q).astype(int)
                tabs = {r: reliability_diagram(c, y, interval=r) for r in one}
                B = len(tabs["wilson"])
                cnt = tabs["wilson"]["count"].to_numpy()
                full = cnt > 0
                truth = np.bincount(bin_index(c, B), weights=q, minlength=B)[full] / cnt[full]
                jstar = int(bin_index(np.array([tstar]), B)[0])
                for r, t in tabs.items():
                    ok = (t["ci_low"].to_numpy()[full] <= truth + 1e-15) & (truth <= t["ci_high"].to_numpy()[full] + 1e-15)
                    pool[r][0] += int(ok.sum())
                    pool[r][1] += int(full.sum())
                    if cnt[jstar] > 0:
                        one[r][0] += bool(ok[int(np.cumsum(full)[jstar]) - 1])
                        one[r][1] += 1
                w = {r: (t["ci_high"] - t["ci_low"]).to_numpy()[full] for r, t in tabs.items()}
                ratio.append(w["clopper-pearson"] / w["wilson"])
            print(f"| {name} | {n:,} | {B} | {fmt(*one['wilson'])} | {fmt(*one['clopper-pearson'])} "
                  f"| {fmt(*pool['wilson'])} | {fmt(*pool['clopper-pearson'])} | {np.median(np.concatenate(ratio)):.3f} |",
                  flush=True)


def _before_kernel_sums(conf, out, sigma, t):
    """The band's sums before audit 10b: the continuous reflected kernel (each image c, -c, 2 - c), not
    the weights of the drawn curve (relplot's grid)."""
    points = max(1001, int(np.ceil(10 / sigma)) + 1)
    step = 1 / (points - 1)
    counts, outcomes = E._splat(conf, np.ones_like(conf), points), E._splat(conf, out, points)
    reach = min(8 * sigma, 0.5)
    offsets = np.arange(-int(np.ceil(reach / step)), int(np.ceil(reach / step)) + 1)
    j = np.rint(t / step).astype(np.int64)[:, None] + offsets[None, :]
    inside = (j >= 0) & (j < points)
    j = np.clip(j, 0, points - 1)
    x = j * step
    w = np.zeros(j.shape)
    for image in (x, -x, 2 - x):
        d = t[:, None] - image
        w += np.where(np.abs(d) <= 0.5, np.exp(-d**2 / (2 * sigma**2)), 0.0)
    w *= inside
    return np.sum(counts[j] * w, axis=1), np.sum(outcomes[j] * w, axis=1), np.sum(counts[j] * w**2, axis=1)


def _before_band(conf, out, sigma, t, observed, level=0.95):
    s0, s_out, s2 = _before_kernel_sums(conf, out, sigma, t)
    with np.errstate(invalid="ignore", divide="ignore"):
        n = np.where(s2 > 0, s0**2 / s2, 0.0)
        m = np.clip(s_out / s0, 0.0, 1.0)
        z = ndtri(0.5 + level / 2)
        centre = (m + z**2 / (2 * n)) / (1 + z**2 / n)
        half = z * np.sqrt(m * (1 - m) / n + z**2 / (4 * n**2)) / (1 + z**2 / n)
    return observed - (m - (centre - half)), observed + (centre + half - m)


def band(files: int, cells: list[tuple[str, int]]) -> None:
    print("| scores | rows | at t* | before (Wilson) | after (Clopper-Pearson, curve's weights) | width after / before |"
          "\n|---|---|---|---|---|---|")
    for name, n in cells:
        C, Q = population(name)
        ts = {"median": np.median(C), "90th pct": np.quantile(C, 0.9)}
        rng = np.random.default_rng(n * 7 + sum(map(ord, name)))
        hits = {(a, r): [0, 0] for a in ts for r in ("before", "after")}
        ratio = []
        for _ in range(files):
            idx = rng.integers(0, C.size, n)
            c, y = C[idx], (rng.random(n) < Q[idx]).astype(float)
            curve = E.smooth_reliability(c, y)
            sigma = float(curve["sigma"].iloc[0])
            t, obs = curve["t"].to_numpy(), curve["observed"].to_numpy()
            keep = (curve["density"] >= 0.02 * curve["density"].max()).to_numpy()
            b_lo, b_hi = _before_band(c, y, sigma, t, obs)
            a_lo, a_hi = curve["band_low"].to_numpy(), curve["band_high"].to_numpy()
            tt, rr, _ = E._smooth_at(C, Q, sigma)
            truth = tt - rr
            for a, tstar in ts.items():
                j = int(np.argmin(np.abs(t - tstar)))
                if not keep[j]:
                    continue
                for r, lo, hi in (("before", b_lo, b_hi), ("after", a_lo, a_hi)):
                    hits[(a, r)][0] += bool(lo[j] <= truth[j] <= hi[j])
                    hits[(a, r)][1] += 1
            ok = keep & (b_hi - b_lo > 0)
            ratio.append((a_hi - a_lo)[ok] / (b_hi - b_lo)[ok])
        med = np.median(np.concatenate(ratio))
        for a, tstar in ts.items():
            print(f"| {name} | {n:,} | {a} ({tstar:.4f}) | {fmt(*hits[(a, 'before')])} | {fmt(*hits[(a, 'after')])} "
                  f"| {med:.3f} |", flush=True)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("what", choices=("whisker", "band"))
    ap.add_argument("--files", type=int, default=None)
    ap.add_argument("--cells", default="mean0.1pct:200,mean0.1pct:1000,mean0.1pct:5000,mean1pct:200,mean1pct:1000,"
                                        "mean1pct:5000,adult:200,adult:1000,adult:5000,dec1:200,dec1:1000,cifar:200,"
                                        "cifar:1000")
    args = ap.parse_args()
    if args.what == "whisker":
        whisker(args.files or 1000)
    else:
        band(args.files or 300, [(c.split(":")[0], int(c.split(":")[1])) for c in args.cells.split(",")])
