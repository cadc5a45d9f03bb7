"""Find the slices (issue 39): how often a planted slice is found, how often a calibrated model gets a
false discovery, and what the search costs, in memory and streamed.

Known truth on real covariates: the bundled UCI Adult table (16,281 rows; age, workclass, education,
marital status, occupation, relationship, race, sex, hours per week, native country) with its
gradient-boosting p(y=1). Outcomes are drawn from p itself (a calibrated model), except in one
**planted slice** S, where they are drawn from min(1, p + shift). S is drawn at random, every trial,
among Adult's real slices (a value of one column, or a pair of values of two, as the search cuts them)
whose size is within 20 % of the size asked. Each trial runs ``find_slices`` with its default settings
and a new seed:

* **found**: a slice that holds up shares at least half its rows with S (Jaccard index >= 0.5; a slice
  is measured on its own rows, those in no slice chosen before it);
* **exact**: a slice that holds up is S itself;
* **located**: the slices that hold up, together, share at least half their rows with S (the
  miscalibration may be reported in pieces: the shift adds most evidence where p is small, e.g. the
  young or never married rows of a planted race);
* **false**: a slice that holds up has no row in S (its rows are calibrated: a false discovery).

With no planted slice, any slice that holds up is a false discovery; the promise is at most 5 % of
trials. **Shared curve** (audit 12b): outcomes from one curve g shared by every row (p + 0.08, a bend,
sigmoid(0.6 logit p), odds doubled on scores moved to a mean of 1 %), files of 1,000 to 16,281 of
Adult's rows: no slice is calibrated differently from the rest, so any slice named breaks the first
half of the guarantee. Cost: the in-memory search over every single column and pair of Adult (median of repeats),
and a streamed run over R rows built from Adult by repetition with fresh outcomes (Parquet files of
1M rows, row groups of 250k, in a temporary folder), in a fresh process: CPU seconds and peak RSS.

Usage::

    python benchmarks/bench_slices.py                       # the full table (several minutes)
    python benchmarks/bench_slices.py --trials 10 --null-trials 40 --stream-rows 1e6   # quicker
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import pbr_core  # noqa: E402
from pbr_core.slices import find_slices, slice_mask  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
ADULT = ROOT / "sample_data" / "adult_gradient_boosting.csv.gz"


def _with_outcomes(adult: pbr_core.Predictions, y: np.ndarray) -> pbr_core.Predictions:
    p = adult.p_positive
    return dataclasses.replace(pbr_core.Predictions.from_arrays(np.c_[1 - p, p], y), metadata=adult.metadata)


def real_slices(adult: pbr_core.Predictions) -> list[tuple[str, np.ndarray]]:
    """Every slice the search cuts Adult into (single values and pairs), as (name, row mask)."""
    plan = find_slices(adult).plan
    codes = {i: col.codes(adult.metadata[col.name]) for i, col in enumerate(plan.columns)}
    out = []
    for i, col in enumerate(plan.columns):
        for k in range(len(col.levels)):
            out.append((col.condition(k), codes[i] == k))
    for i in range(len(plan.columns)):
        for j in range(i + 1, len(plan.columns)):
            a, b = plan.columns[i], plan.columns[j]
            cell = codes[i] * b.n_codes + codes[j]
            counts = np.bincount(cell, minlength=a.n_codes * b.n_codes)
            for c in np.flatnonzero(counts >= 100):
                k, m = divmod(int(c), b.n_codes)
                if k < len(a.levels) and m < len(b.levels):
                    out.append((f"{a.condition(k)} and {b.condition(m)}", cell == c))
    return out


def trial(adult: pbr_core.Predictions, planted: np.ndarray | None, shift: float, rng: np.random.Generator,
          seed: int, **settings) -> dict[str, bool | int]:
    p = adult.p_positive
    q = p if planted is None else np.where(planted, np.minimum(p + shift, 1.0), p)
    preds = _with_outcomes(adult, (rng.random(p.size) < q).astype(int))
    report = find_slices(preds, seed=seed, **settings)
    found = exact = false = False
    union = np.zeros(p.size, dtype=bool)
    for name in report.held_up:
        m = slice_mask(preds, report, name)
        union |= m
        if planted is None:
            false = True
            continue
        both = int((m & planted).sum())
        found |= both / int((m | planted).sum()) >= 0.5
        exact |= bool(np.array_equal(m, planted))
        false |= both == 0
    located = planted is not None and (union & planted).sum() / max((union | planted).sum(), 1) >= 0.5
    return {"found": found, "exact": exact, "located": bool(located), "false": false, "held_up": len(report.held_up),
            "tested": report.tested}


def power_table(adult, sizes, shifts, trials: int, null_trials: int, **settings) -> tuple[list[dict], dict]:
    slices = real_slices(adult)
    rows = []
    rng = np.random.default_rng(39)
    for size in sizes:
        pool = [(n, m) for n, m in slices if 0.8 * size <= m.sum() <= 1.2 * size]
        for shift in shifts:
            got = {"found": 0, "exact": 0, "located": 0, "false": 0, "tested": 0}
            for t in range(trials):
                name, mask = pool[rng.integers(len(pool))]
                r = trial(adult, mask, shift, rng, seed=t, **settings)
                for k in got:
                    got[k] += int(r[k])
            rows.append({"size": size, "pool": len(pool), "shift": shift, "trials": trials, **got})
            print(f"  size ~{size}, shift {shift}: found {got['found']}/{trials}, exact {got['exact']}, "
                  f"located {got['located']}, false {got['false']}", file=sys.stderr)
    false = tested = 0
    t0 = time.process_time()
    for t in range(null_trials):
        r = trial(adult, None, 0.0, rng, seed=1000 + t, **settings)
        false += r["false"]
        tested += r["tested"]
    null = {"trials": null_trials, "false": false, "tested": tested,
            "cpu_s_per_search": (time.process_time() - t0) / null_trials}
    return rows, null


def search_time(adult, repeats: int = 5) -> float:
    find_slices(adult)  # imports and caches warm
    times = []
    for _ in range(repeats):
        t0 = time.process_time()
        find_slices(adult)
        times.append(time.process_time() - t0)
    return float(np.median(times))


_CHILD = r"""
import json, resource, sys, time
import pbr_core.stream as ps
folder = sys.argv[1]
t0 = time.time()
report = ps.compute_slices(ps.open_dataset(folder))
out = {"wall_s": time.time() - t0, "held_up": report.held_up, "scored": report.scored, "tested": report.tested,
       "n": report.n_rows, "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}
print(json.dumps(out))
"""


def write_stream(adult, folder: Path, rows: int, planted: np.ndarray, shift: float, seed: int = 0) -> None:
    """Adult repeated to ``rows`` rows with fresh outcomes (shifted in the planted slice), Parquet files
    of 1M rows in row groups of 250k."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(seed)
    meta = adult.metadata.reset_index(drop=True)
    p = adult.p_positive
    q = np.where(planted, np.minimum(p + shift, 1.0), p)
    folder.mkdir(parents=True, exist_ok=True)
    per_file = 1_000_000
    for f, start in enumerate(range(0, rows, per_file)):
        n = min(per_file, rows - start)
        idx = (np.arange(start, start + n)) % p.size
        table = pa.Table.from_pandas(meta.iloc[idx].reset_index(drop=True), preserve_index=False)
        table = table.append_column("p_gt50k", pa.array(p[idx])).append_column(
            "label", pa.array((rng.random(n) < q[idx]).astype(np.int64)))
        pq.write_table(table, folder / f"part-{f:03d}.parquet", row_group_size=250_000)


def stream_run(folder: Path) -> dict:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = subprocess.run([sys.executable, "-c", _CHILD, str(folder)], capture_output=True, text=True, check=True,
                         cwd=ROOT)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    res = json.loads(out.stdout.strip().splitlines()[-1])
    res["cpu_s"] = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return res


def _to_mean(p: np.ndarray, mean: float) -> np.ndarray:
    """p moved to mean ``mean`` by one common logit shift (the ranking kept): rare events."""
    from scipy.optimize import brentq

    x = np.log(np.clip(p, 1e-12, 1 - 1e-12)) - np.log1p(-np.clip(p, 1e-12, 1 - 1e-12))
    c = brentq(lambda c: (1 / (1 + np.exp(-(x + c)))).mean() - mean, -30, 30)
    return 1 / (1 + np.exp(-(x + c)))


#: One curve g shared by every row (so no slice is calibrated differently from the rest): name, g, rows
#: kept (p <= 0.9 for p + 0.08, so nothing is clipped), and a mean to move p to first (rare events).
SHARED_CURVES = {
    "p + 0.08 (p <= 0.9)": (lambda p: p + 0.08, 0.9, None),
    "bend: p below 0.5, 0.5 + 0.6 (p - 0.5) above": (lambda p: np.where(p < 0.5, p, 0.5 + 0.6 * (p - 0.5)), None, None),
    "sigmoid(0.6 logit p)": (lambda p: 1 / (1 + (p / (1 - p)) ** -0.6), None, None),
    "odds x 2, p moved to a mean of 1 %": (lambda p: 2 * p / (1 + p), None, 0.01),
}


def shared_curve_table(adult, cells: list[tuple[str, int]], trials: int, seed: int = 7) -> list[dict]:
    """Audit 12b: files of n of Adult's rows (its real columns), outcomes from one shared curve g: how
    often a search names a slice (each one is a false "calibrated differently from the rest")."""
    rng = np.random.default_rng(seed)
    out = []
    for name, n in cells:
        g, pmax, mean = SHARED_CURVES[name]
        p_all = adult.p_positive
        keep = np.flatnonzero(p_all <= pmax) if pmax else np.arange(p_all.size)
        named = tested = 0
        for t in range(trials):
            rows = rng.choice(keep, min(n, keep.size), replace=False)
            p = p_all[rows] if mean is None else _to_mean(p_all[rows], mean)
            y = (rng.random(rows.size) < np.clip(g(p), 0, 1)).astype(int)
            preds = dataclasses.replace(pbr_core.Predictions.from_arrays(np.c_[1 - p, p], y),
                                        metadata=adult.metadata.iloc[rows].reset_index(drop=True))
            report = find_slices(preds, seed=t)
            named += bool(report.held_up)
            tested += report.tested
        out.append({"curve": name, "n": int(min(n, keep.size)), "trials": trials, "named": named,
                    "tested": tested / max(trials, 1)})
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="250,500,1000,2000,4000")
    ap.add_argument("--shifts", default="0.03,0.05,0.1,0.15")
    ap.add_argument("--trials", type=int, default=40)
    ap.add_argument("--null-trials", type=int, default=200)
    ap.add_argument("--max-slices", type=int, default=None)
    ap.add_argument("--screen", type=float, default=None)
    ap.add_argument("--stream-rows", type=float, default=1e7, help="0: no streamed run")
    ap.add_argument("--shared-trials", type=int, default=100, help="files per cell of the shared-curve table; 0: none")
    ap.add_argument("--shared-rows", default="1000,3000,16281")
    ap.add_argument("--dir", default=None, help="where the streamed rows are written (default: a temp folder)")
    args = ap.parse_args(argv)
    settings = {k: v for k, v in (("max_slices", args.max_slices), ("screen", args.screen)) if v is not None}
    adult = pbr_core.load_predictions(ADULT)
    sizes = [int(float(s)) for s in args.sizes.split(",")]
    shifts = [float(s) for s in args.shifts.split(",")]
    print(f"Adult: {adult.n:,} rows; settings {settings or 'default'}")
    print(f"in-memory search, every single column and pair: {search_time(adult):.2f} CPU s (median of 5)")
    rows, null = power_table(adult, sizes, shifts, args.trials, args.null_trials, **settings)
    print(f"\nno planted slice: a false discovery in {null['false']} of {null['trials']} trials "
          f"({null['false'] / null['trials']:.1%}; promised at most 5 %); {null['tested'] / null['trials']:.1f} "
          f"slices tested per trial; {null['cpu_s_per_search']:.2f} CPU s per search")
    print("\n| planted size | slices of that size | shift (points) | found | exact | located | false discovery |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        t = r["trials"]
        print(f"| ~{r['size']:,} | {r['pool']} | {100 * r['shift']:g} | {r['found'] / t:.0%} | {r['exact'] / t:.0%} | "
              f"{r['located'] / t:.0%} | {r['false'] / t:.0%} |")
    if args.shared_trials > 0:
        from scipy.stats import beta

        cells = [(c, int(float(n))) for c in SHARED_CURVES for n in args.shared_rows.split(",")]
        print("\n| one curve g shared by every row | rows | files | a slice named (no slice differs) | 95 % interval "
              "| slices tested per file |")
        print("|---|---:|---:|---:|---:|---:|")
        for r in shared_curve_table(adult, cells, args.shared_trials):
            k, t = r["named"], r["trials"]
            lo = beta.ppf(0.025, k, t - k + 1) if k else 0.0
            hi = beta.ppf(0.975, k + 1, t - k) if k < t else 1.0
            print(f"| {r['curve']} | {r['n']:,} | {t} | {k} ({k / t:.1%}) | [{lo:.1%}, {hi:.1%}] | {r['tested']:.1f} |")
    if args.stream_rows > 0:
        n = int(args.stream_rows)
        meta = adult.metadata
        planted = ((meta["education"] == "Bachelors") & (meta["sex"] == "Female")).to_numpy()
        with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
            folder = Path(tmp) / "logs"
            t0 = time.time()
            write_stream(adult, folder, n, planted, 0.05)
            print(f"\nstreamed: {n:,} rows written in {time.time() - t0:.0f} s "
                  f"(planted: education = Bachelors and sex = Female, +5 points)")
            res = stream_run(folder)
        print(f"streamed find_slices: {res['n']:,} rows, {res['cpu_s']:.0f} CPU s, {res['wall_s']:.0f} s wall, "
              f"peak RSS {res['rss_mb']:.0f} MB; {res['scored']} slices scored, {res['tested']} tested; "
              f"held up: {res['held_up']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
