"""Fit and predict times of the recalibrators on n = 1000, K = 100 (CIFAR-100 DenseNet-121 logits).

The first 1000 rows of ../shared/data/predictions/aigen_c100_densenet121.npz are the
recalibration set, the other 9000 the test set. For every method: wall time of ``fit`` (once) and
of ``predict_proba`` on the 9000 test rows (best of 3), and the test ECE (top-label, paper Eq. 2,
B = floor(9000^(1/3)) = 20) before and after, with accuracy and NLL after. The binary families
(Platt, isotonic, histogram binning, beta, BBQ) run one-vs-all: 100 binary maps.

Usage::

    python benchmarks/bench_recalibrators.py                 # the classical methods
    python benchmarks/bench_recalibrators.py --methods all   # also the GP family (slow on a CPU)
    python benchmarks/bench_recalibrators.py --methods temperature bbq --no-write

Prints a Markdown table and writes it to benchmarks/RESULTS_recalibrators.md (unless --no-write).
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
import warnings
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import pbr_core  # noqa: E402
from pbr_core import Predictions  # noqa: E402
from pbr_core.recalibrators import REGISTRY, available_methods, get_recalibrator  # noqa: E402
from pbr_core.recalibrators.base import LAZY_MODULES  # noqa: E402

DATA = ROOT.parent / "shared" / "data" / "predictions" / "aigen_c100_densenet121.npz"
RESULTS = ROOT / "benchmarks" / "RESULTS_recalibrators.md"
N_FIT = 1000


def classical_methods() -> list[str]:
    lazy = tuple(LAZY_MODULES)
    return [m for m in available_methods() if not REGISTRY[m].__module__.startswith(lazy)]


def bench(method: str, fit: Predictions, test: Predictions, repeats: int = 3) -> dict:
    rec = get_recalibrator(method)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        t0 = time.perf_counter()
        rec.fit(fit)
        fit_s = time.perf_counter() - t0
    predict_s = np.inf
    for _ in range(repeats):
        t0 = time.perf_counter()
        P = rec.predict_proba(test)
        predict_s = min(predict_s, time.perf_counter() - t0)
    notes = []
    maps = getattr(rec, "maps_", [])
    n_platt = sum(1 for m in maps if m.get("targets") == "platt")
    if n_platt:
        notes.append(f"{n_platt} of {len(maps)} one-vs-all maps separable: fitted on Platt's targets (warned)")
    zero = float(np.mean(P[np.arange(test.n), test.labels] == 0.0))
    if zero:
        notes.append(f"true class gets p = 0 in {zero:.1%} of test rows (NLL clips log 0 at -708)")
    others = sorted({str(w.message)[:80] for w in caught if "Platt's smoothed targets" not in str(w.message)})
    notes.extend(f"warning: {o}" for o in others)
    return {
        "method": method,
        "fit_s": fit_s,
        "predict_s": predict_s,
        "ece": pbr_core.ece(P, test.labels),
        "accuracy": pbr_core.accuracy(P, test.labels),
        "nll": pbr_core.nll(P, test.labels),
        "notes": "; ".join(notes),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--methods", nargs="*", default=None, help="method names, or 'all' (default: the classical ones)")
    parser.add_argument("--threads", type=int, default=1, help="BLAS threads (default 1, for stable timings)")
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--no-write", action="store_true", help="print only, do not write the results file")
    args = parser.parse_args(argv)
    methods = classical_methods() if not args.methods else (available_methods() if args.methods == ["all"] else args.methods)

    d = np.load(args.data, allow_pickle=False)
    preds = Predictions.from_arrays(d["logits"].astype(np.float64), d["labels"], input_type="logits", source=args.data.name)
    fit, test = preds.subset(np.arange(N_FIT)), preds.subset(np.arange(N_FIT, preds.n))
    before = {"ece": pbr_core.ece(test.probs, test.labels), "accuracy": test.accuracy, "nll": pbr_core.nll(test.probs, test.labels)}

    from threadpoolctl import threadpool_limits

    rows = []
    with threadpool_limits(limits=args.threads, user_api="blas"):
        for m in methods:
            row = bench(m, fit, test)
            rows.append(row)
            print(f"  {m:<18} fit {row['fit_s']:8.3f} s  predict {row['predict_s']:7.3f} s  ECE {row['ece']:.4f}",
                  file=sys.stderr)

    B = pbr_core.optimal_n_bins(test.n)
    lines = [
        "# Recalibrators: fit and predict times, n = 1000, K = 100",
        "",
        f"Data: `{args.data.name}` (CIFAR-100, DenseNet-121 logits, {preds.n} rows): rows 0-999 fit, "
        f"rows 1000-{preds.n - 1} ({test.n}) test. Test ECE: top-label, uniform bins, B = floor(n^(1/3)) = {B}. "
        f"Uncalibrated test ECE {before['ece']:.4f}, accuracy {before['accuracy']:.4f}, NLL {before['nll']:.4f}. "
        "Binary families run one-vs-all (100 maps). Fit: one run; predict: best of 3 on the test rows.",
        "",
        f"Machine: {platform.machine()}, {os.cpu_count()} CPUs (shared with other jobs; load average "
        f"{', '.join(f'{x:.1f}' for x in os.getloadavg())} at the end), Python {platform.python_version()}, "
        f"numpy {np.__version__}, BLAS threads {args.threads}. {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC. "
        "Command: `python benchmarks/bench_recalibrators.py`.",
        "",
        "| method | fit (s) | predict 9000 rows (s) | test ECE before | test ECE after | accuracy after | NLL after | notes |",
        "|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in rows:
        lines.append(f"| {r['method']} | {r['fit_s']:.3f} | {r['predict_s']:.4f} | {before['ece']:.4f} | {r['ece']:.4f} | "
                     f"{r['accuracy']:.4f} | {r['nll']:.4f} | {r['notes']} |")
    missing = [m for m in available_methods() if m not in methods]
    if missing:
        lines += ["", f"Not run here: {', '.join(missing)} (the GP family, not timed by "
                      "default here; `--methods all` adds it)."]
    lines += ["", "Isotonic regression and histogram binning give probability 0 to classes whose one-vs-all map "
                  "is 0 there, so their NLL is dominated by log 0 (clipped); their ECE on K = 100 with 1000 "
                  "recalibration rows (about 10 positives per class) is worse than uncalibrated."]
    text = "\n".join(lines) + "\n"
    print(text)
    if not args.no_write:
        RESULTS.write_text(text)
        print(f"wrote {RESULTS.relative_to(ROOT)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
