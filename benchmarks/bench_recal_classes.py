"""Fit time of the recalibrators whose parameters grow like K^2 (matrix scaling, Dirichlet calibration,
structured matrix scaling), by number of classes K, against the dashboard's estimate.

Why: the dashboard queues these fits with the GP fits above a class count, says how long a fit will
take before it starts, and refuses beyond a limit (dashboard.fit_estimate.recal_seconds /
recal_problem); this script measures real fits to check the estimate. Synthetic logits (each row's K
scores standard normal times 3, the label drawn from softmax(z / 1.5): overconfident), n rows, the
library's default settings (max_iter 2000), one BLAS thread.

Usage::

    python benchmarks/bench_recal_classes.py                      # K = 10 50 100 200 300, n = 2000
    python benchmarks/bench_recal_classes.py --ks 10 100 --rows 1000 --no-write

Prints a Markdown table and writes it to benchmarks/RESULTS_recal_classes.md (unless --no-write).
"""

from __future__ import annotations

import os

for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_v, "1")

import argparse  # noqa: E402
import platform  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402
from datetime import datetime, timezone  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pbr_core import Predictions  # noqa: E402
from pbr_core.recalibrators import get_recalibrator  # noqa: E402

RESULTS = ROOT / "benchmarks" / "RESULTS_recal_classes.md"
METHODS = ("matrix_scaling", "dirichlet", "sms")


def data(n: int, k: int, seed: int = 0) -> Predictions:
    rng = np.random.default_rng(seed)
    z = 3.0 * rng.standard_normal((n, k))
    p = np.exp(z / 1.5 - (z / 1.5).max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    labels = (p.cumsum(1) < rng.random((n, 1))).sum(1).clip(0, k - 1)
    return Predictions.from_arrays(z, labels, input_type="logits")


def fit_seconds(method: str, preds: Predictions) -> float:
    rec = get_recalibrator(method)
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rec.fit(preds)
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ks", type=int, nargs="+", default=[10, 50, 100, 200, 300])
    ap.add_argument("--rows", type=int, default=2000)
    ap.add_argument("--methods", nargs="+", default=list(METHODS))
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args()
    lines = ["| method | K | n | fit (s) | estimate (s) | estimate / fit |", "|---|---:|---:|---:|---:|---:|"]
    for k in args.ks:
        preds = data(args.rows, k)
        for method in args.methods:
            secs = fit_seconds(method, preds)
            from dashboard.fit_estimate import recal_seconds

            est = recal_seconds(method, args.rows, k)
            lines.append(f"| {method} | {k} | {args.rows:,} | {secs:.2f} | {est:.2f} | {est / secs:.2f} |")
            print(lines[-1], flush=True)
    head = [f"# Recalibrators whose parameters grow like K^2: fit time by K, against the dashboard's estimate", "",
            f"Synthetic logits (N(0, 9) scores, labels from softmax(z / 1.5)), the library's default settings, one BLAS "
            f"thread. Machine: {platform.machine()}, {os.cpu_count()} CPUs (shared), Python {platform.python_version()}, "
            f"numpy {np.__version__}. {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC. Command: "
            f"`python benchmarks/bench_recal_classes.py {' '.join(sys.argv[1:])}`.", ""]
    if not args.no_write:
        RESULTS.write_text("\n".join(head + lines) + "\n")


if __name__ == "__main__":
    main()
