"""Streamed diagnostics and apply on prediction logs beyond memory (issue 14).

Prints tables (markdown) of:

1. ``evaluate`` on synthetic top-label Parquet logs (confidence, predicted, label; files of 10M rows
   in row groups of 1M): the streamed pass (ECE at B = floor(n^(1/3)), the ECE curve B = 1..200,
   reliability statistics with Wilson intervals, MCE, accuracy, the split interval with
   ``default_n_boot(n)`` Poisson-bootstrap replicates) against the in-memory numpy path on the
   same file (``load_predictions`` + ``ece`` + ``ece_curve(1..200)`` + ``reliability_diagram`` +
   ``mce`` + ``ece_bootstrap_ci`` with the same number of resamples). Each run is a fresh
   subprocess; CPU seconds (user + sys of the process and its children) and peak RSS
   (``ru_maxrss``) are measured by the parent, interleaved stream / in-memory per size.
2. The same streamed pass on a Dask LocalCluster of 2 worker processes: equal numbers, times.
3. ``apply`` of a temperature scaling to full-vector rows (K = 10, float64 probabilities): rows/s
   and peak RSS.
4. ``--coverage R``: the streamed interval (random halves, Poisson bootstrap) against the in-memory
   split interval on R simulated data sets with a known CE_B (confidence ~ U(0.5, 1),
   P(correct | c) = c - shift, so CE_B = shift for every B): coverage of CE_B and width.

Usage::

    python benchmarks/bench_stream.py --dir /tmp/pbr_stream_bench --sizes 1e6,1e7 --big 1e8 --apply 1e7

The data are written once to ``--dir`` (about 17 bytes per top-label row and 90 per K = 10 row).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
FILE_ROWS = 10_000_000
GROUP_ROWS = 1_000_000


def _top_label_files(folder: Path, n: int, seed: int = 0) -> Path:
    """n rows in files of FILE_ROWS: confidence ~ U(0.1, 1), correct ~ Bernoulli(confidence - 0.05)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    folder.mkdir(parents=True, exist_ok=True)
    done = folder / "_complete"
    if done.exists():
        return folder
    rng = np.random.default_rng(seed)
    for i, start in enumerate(range(0, n, FILE_ROWS)):
        rows = min(FILE_ROWS, n - start)
        with pq.ParquetWriter(folder / f"part-{i:04d}.parquet", pa.schema(
                [("confidence", pa.float64()), ("predicted", pa.int32()), ("label", pa.int32()),
                 ("request_id", pa.int64())])) as w:
            for g in range(0, rows, GROUP_ROWS):
                m = min(GROUP_ROWS, rows - g)
                c = rng.uniform(0.1, 1.0, m)
                pred = rng.integers(0, 10, m).astype(np.int32)
                right = rng.uniform(size=m) < c - 0.05
                label = np.where(right, pred, (pred + 1 + rng.integers(0, 9, m)) % 10).astype(np.int32)
                w.write_table(pa.table({"confidence": c, "predicted": pred, "label": label,
                                        "request_id": np.arange(start + g, start + g + m)}))
    done.touch()
    return folder


def _full_vector_files(folder: Path, n: int, K: int = 10, seed: int = 1) -> Path:
    import pyarrow as pa
    import pyarrow.parquet as pq

    from pbr_core.predictions import softmax

    folder.mkdir(parents=True, exist_ok=True)
    done = folder / "_complete"
    if done.exists():
        return folder
    rng = np.random.default_rng(seed)
    names = [f"class_{k}" for k in range(K)]
    for i, start in enumerate(range(0, n, FILE_ROWS)):
        rows = min(FILE_ROWS, n - start)
        with pq.ParquetWriter(folder / f"part-{i:04d}.parquet", pa.schema(
                [*[(c, pa.float64()) for c in names], ("label", pa.int32()), ("request_id", pa.int64())])) as w:
            for g in range(0, rows, GROUP_ROWS):
                m = min(GROUP_ROWS, rows - g)
                z = rng.normal(size=(m, K)) * 2.5
                p = softmax(z)
                y = (p.cumsum(axis=1) < rng.uniform(size=(m, 1))).sum(axis=1).clip(0, K - 1).astype(np.int32)
                cols = {c: p[:, k] for k, c in enumerate(names)}
                w.write_table(pa.table({**cols, "label": y, "request_id": np.arange(start + g, start + g + m)}))
    done.touch()
    return folder


# ------------------------------------------------------------------------------ the measured children
_CHILD = {
    "stream": """
import json, sys, time
import pbr_core.stream as ps
ds = ps.open_dataset(sys.argv[1])
t0 = time.perf_counter()
st = ps.compute_statistics(ds, curve_bins=range(1, 201))
curve = st.ece_curve(range(1, 201)); rel = st.reliability_diagram(); lo, hi = st.ece_interval()
print(json.dumps({"n": st.n, "B": st.config.n_bins, "n_boot": st.config.n_boot, "ece": st.ece(), "mce": st.mce(),
                  "curve_sum": float(curve.sum()), "lo": lo, "hi": hi, "wall": time.perf_counter() - t0}))
""",
    "dask": """
import json, sys, time
import pbr_core.stream as ps
ds = ps.open_dataset(sys.argv[1])
t0 = time.perf_counter()
st = ps.compute_statistics(ds, curve_bins=range(1, 201), local_cluster=2)
curve = st.ece_curve(range(1, 201)); lo, hi = st.ece_interval()
print(json.dumps({"n": st.n, "B": st.config.n_bins, "n_boot": st.config.n_boot, "ece": st.ece(), "mce": st.mce(),
                  "curve_sum": float(curve.sum()), "lo": lo, "hi": hi, "wall": time.perf_counter() - t0}))
""",
    "memory": """
import json, sys, time, glob
import pbr_core
from pbr_core import metrics
t0 = time.perf_counter()
files = sorted(glob.glob(sys.argv[1] + "/*.parquet"))
assert len(files) == 1, "the in-memory path reads one file"
p = pbr_core.load_predictions(files[0])
c, k = p.metric_inputs()
B = pbr_core.optimal_n_bins(p.n)
nb = metrics.default_n_boot(p.n)
ece = pbr_core.ece(c, k, B); curve = pbr_core.ece_curve(c, k, range(1, 201))
rel = metrics.reliability_diagram(c, k, B); mce = metrics.mce(c, k, B)
lo, hi = metrics.ece_bootstrap_ci(c, k, B, n_boot=nb)
print(json.dumps({"n": p.n, "B": B, "n_boot": nb, "ece": ece, "mce": mce, "curve_sum": float(curve.sum()),
                  "lo": lo, "hi": hi, "wall": time.perf_counter() - t0}))
""",
    "apply": """
import json, sys, time, shutil
import numpy as np
import pbr_core.stream as ps
from pbr_core.recalibrators import TemperatureScaling
ds = ps.open_dataset(sys.argv[1])
rec = TemperatureScaling().fit(ps.sample_dataset(ps.open_dataset(sorted(ds.files)[:1]), 20000, seed=0))
out = sys.argv[2]
shutil.rmtree(out, ignore_errors=True)
t0 = time.perf_counter()
written = ps.apply_to_dataset(rec, ds, out)
print(json.dumps({"n": ds.num_rows(), "files": len(written), "temperature": float(rec.temperature_),
                  "wall": time.perf_counter() - t0}))
""",
}


def _peak_rss_mb(kind: str, *args: str) -> dict:
    """Run one child: its JSON line, CPU seconds (with its own children) and its peak RSS (wait4)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    proc = subprocess.Popen([sys.executable, "-c", _CHILD[kind], *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)
    _, status, usage = os.wait4(proc.pid, 0)
    out_text = proc.stdout.read()
    err_text = proc.stderr.read()
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"{kind} failed:\n{err_text[-3000:]}")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = json.loads(out_text.strip().splitlines()[-1])
    # CPU of the child and of anything it waited for (Dask worker processes), peak RSS of the child itself.
    out["cpu"] = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    out["peak_mb"] = usage.ru_maxrss / 1024
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dir", type=Path, default=Path("/tmp/pbr_stream_bench"))
    ap.add_argument("--sizes", default="1e6,1e7", help="sizes compared stream vs in memory (one file each)")
    ap.add_argument("--big", type=float, default=0, help="a streamed-only size (e.g. 1e8); 0: none")
    ap.add_argument("--dask", type=float, default=1e7, help="size run on a Dask LocalCluster of 2 workers; 0: none")
    ap.add_argument("--apply", type=float, default=1e7, help="full-vector rows (K = 10) for apply; 0: none")
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--coverage", type=int, default=0, help="simulated data sets for the interval's coverage")
    args = ap.parse_args(argv)
    if args.coverage:
        _coverage(args.coverage)
        return
    sizes = [int(float(s)) for s in args.sizes.split(",") if s]

    print(f"# bench_stream: {os.cpu_count()} CPUs visible; {time.strftime('%Y-%m-%d %H:%M:%S')}")
    print()
    print("| rows | path | B | n_boot | CPU s | CPU ns/row | peak RSS MB | ECE | |ECE - stream| | curve sum | interval |")
    print("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    results = {}
    for n in sizes:
        folder = _top_label_files(args.dir / f"top_{n}", n)
        for _ in range(args.repeats):
            for kind in ("stream", "memory"):  # interleaved, same file
                r = _peak_rss_mb(kind, str(folder))
                results[(n, kind)] = r
                ref = results.get((n, "stream"), r)
                print(f"| {n:,} | {kind} | {r['B']} | {r['n_boot']} | {r['cpu']:.1f} | {1e9 * r['cpu'] / n:.0f} | "
                      f"{r['peak_mb']:.0f} | {r['ece']:.6f} | {abs(r['ece'] - ref['ece']):.1e} | {r['curve_sum']:.6f} | "
                      f"[{r['lo']:.5f}, {r['hi']:.5f}] |", flush=True)
    if args.big:
        n = int(args.big)
        folder = _top_label_files(args.dir / f"top_{n}", n)
        r = _peak_rss_mb("stream", str(folder))
        print(f"| {n:,} | stream | {r['B']} | {r['n_boot']} | {r['cpu']:.1f} | {1e9 * r['cpu'] / n:.0f} | "
              f"{r['peak_mb']:.0f} | {r['ece']:.6f} | - | {r['curve_sum']:.6f} | [{r['lo']:.5f}, {r['hi']:.5f}] |",
              flush=True)
    if args.dask:
        n = int(args.dask)
        folder = _top_label_files(args.dir / f"top_{n}", n)
        print()
        print("| rows | path | wall s | CPU s (client + workers) | client peak RSS MB | ECE | |ECE - stream| | interval |")
        print("|---:|---|---:|---:|---:|---:|---:|---|")
        for kind in ("stream", "dask"):
            r = _peak_rss_mb(kind, str(folder))
            results[(n, kind)] = r
            ref = results[(n, "stream")]
            print(f"| {n:,} | {kind} | {r['wall']:.1f} | {r['cpu']:.1f} | {r['peak_mb']:.0f} | {r['ece']:.6f} | "
                  f"{abs(r['ece'] - ref['ece']):.1e} | [{r['lo']:.6f}, {r['hi']:.6f}] |", flush=True)
    if args.apply:
        n = int(args.apply)
        folder = _full_vector_files(args.dir / f"full_{n}", n)
        r = _peak_rss_mb("apply", str(folder), str(args.dir / f"calibrated_{n}"))
        print()
        print("| rows (K = 10) | files | wall s | CPU s | rows/s (CPU) | peak RSS MB |")
        print("|---:|---:|---:|---:|---:|---:|")
        print(f"| {r['n']:,} | {r['files']} | {r['wall']:.1f} | {r['cpu']:.1f} | {r['n'] / r['cpu']:,.0f} | "
              f"{r['peak_mb']:.0f} |", flush=True)


def _coverage(reps: int) -> None:
    from pbr_core import metrics
    from pbr_core.predictions import Predictions
    from pbr_core.stream import CalibrationStatistics, StatsConfig

    print("| n | B | n_boot | CE_B | interval | coverage of CE_B | mean width | mean lower end | mean upper end |")
    print("|---:|---:|---:|---:|---|---:|---:|---:|---:|")
    for n, B, shift in ((2000, 10, 0.1), (2000, 10, 0.0), (20000, 27, 0.02), (20000, 27, 0.0)):
        rng = np.random.default_rng(100 + n + int(shift * 1000))
        res = {"stream (halves by row, Poisson bootstrap)": [], "in memory (split, default)": []}
        for rep in range(reps):
            c = rng.uniform(0.5, 1.0, n)
            k = rng.uniform(size=n) < c - shift
            preds = Predictions.from_confidence_correct(c, k)
            st = CalibrationStatistics.empty(StatsConfig("top_label", 1, B, (B,), 200, rep)).update(preds, (0, 0))
            res["stream (halves by row, Poisson bootstrap)"].append(st.ece_interval())
            res["in memory (split, default)"].append(metrics.ece_bootstrap_ci(c, k.astype(int), n_bins=B, n_boot=200,
                                                                             seed=rep))
        for name, iv in res.items():
            a = np.array(iv)
            cover = np.mean((a[:, 0] <= shift) & (shift <= a[:, 1]))
            print(f"| {n:,} | {B} | 200 | {shift:g} | {name} | {cover:.1%} | {np.mean(a[:, 1] - a[:, 0]):.4f} | "
                  f"{a[:, 0].mean():.4f} | {a[:, 1].mean():.4f} |", flush=True)


if __name__ == "__main__":
    main()
