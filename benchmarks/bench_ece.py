"""Benchmark: ECE for every B in one pass, and ECE at one B on ten million rows.

Run from the repository root:  python benchmarks/bench_ece.py
Prints a markdown table and writes it, with the machine description, to benchmarks/RESULTS_ece.md.

(a) ``pbr_core.ece_curve`` for B = 1..200 on n = 1,000,000, K = 10 against a Python loop of
    torchmetrics' ``multiclass_calibration_error`` over the same B values. The data are the real
    CIFAR-10 ResNet-110 test logits from sample_data/ tiled 100 times with a little Gaussian jitter
    (so values are distinct), softmaxed to float32 probabilities as a model would emit them; both
    sides get the same float32 array. torchmetrics' cost per call does not depend on B, so when the
    full loop would exceed LOOP_BUDGET_S, an evenly spaced subset of B values is timed and the total
    extrapolated linearly (the table says so).
(b) ``pbr_core.ece`` at B = floor(n^(1/3)) on n = 10,000,000 top-label confidences (1-D path),
    and the 2-D path on n = 10,000,000, K = 10 float64 probabilities (800 MB).
(c) ``pbr_core.ece_bootstrap_ci`` with 1000 resamples of n = 100,000 rows (1e8 draws).
"""

from __future__ import annotations

import datetime as _dt
import os
import platform
import time
from pathlib import Path

import numpy as np

import pbr_core
from pbr_core.predictions import softmax

from _machine import cpu_model  # benchmarks/_machine.py, beside this script

ROOT = Path(__file__).resolve().parents[1]
LOOP_BUDGET_S = 60.0
REPEATS = 3


def _best_of(fn, repeats: int = REPEATS) -> tuple[float, object]:
    best, result = float("inf"), None
    for _ in range(repeats):
        t0 = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - t0)
    return best, result


def _softmax32(z: np.ndarray) -> np.ndarray:
    return softmax(z).astype(np.float32)


def case_curve(rows: list[dict]) -> None:
    import torch
    from torchmetrics.functional.classification import binary_calibration_error, multiclass_calibration_error

    d = np.load(ROOT / "sample_data" / "cifar10_resnet110.npz", allow_pickle=False)
    rng = np.random.default_rng(0)
    logits = np.tile(d["logits"].astype(np.float64), (100, 1))
    logits += rng.normal(0.0, 0.05, size=logits.shape)
    probs = _softmax32(logits)
    labels = np.tile(d["labels"], 100)
    del logits
    n, K = probs.shape
    Bs = list(range(1, 201))

    t_ours, curve = _best_of(lambda: pbr_core.ece_curve(probs, labels, Bs))

    tp, tl = torch.from_numpy(probs), torch.from_numpy(labels)

    def tm(B: int) -> float:
        return multiclass_calibration_error(tp, tl, num_classes=K, n_bins=B, norm="l1").item()

    tm(15)  # warm-up
    t0 = time.perf_counter()
    probe = [tm(B) for B in Bs[:5]]
    per_call = (time.perf_counter() - t0) / 5
    if per_call * len(Bs) <= LOOP_BUDGET_S:
        timed_Bs, note = Bs, "all 200 B timed"
        t0 = time.perf_counter()
        ref = [tm(B) for B in timed_Bs]
        t_ref = time.perf_counter() - t0
    else:
        timed_Bs = Bs[9::10]  # B = 10, 20, ..., 200
        t0 = time.perf_counter()
        ref = [tm(B) for B in timed_Bs]
        t_ref = (time.perf_counter() - t0) * len(Bs) / len(timed_Bs)
        note = f"{len(timed_Bs)} of 200 B timed (B = 10, 20, ..., 200), extrapolated linearly"
    del probe
    diff = float(np.max(np.abs(curve[np.array(timed_Bs) - 1] - np.array(ref))))
    # torchmetrics' multiclass path casts confidences to float32 and sums them in float32, which
    # drifts by ~1e-3 at n = 1e6. Its binary path keeps float64: on (confidence, correct) it must
    # match ece_curve to rounding at every timed B.
    conf = probs.max(axis=1).astype(np.float64)
    correct = torch.from_numpy((probs.argmax(axis=1) == labels).astype(np.int64))
    ref64 = [binary_calibration_error(torch.from_numpy(conf), correct, n_bins=B, norm="l1").item() for B in timed_Bs]
    diff64 = float(np.max(np.abs(curve[np.array(timed_Bs) - 1] - np.array(ref64))))
    rows.append({
        "case": "ECE for B = 1..200 (`ece_curve`) vs torchmetrics loop",
        "n": n, "K": K, "B": "1..200",
        "ours": t_ours, "ref": t_ref,
        "note": (f"{note}. Values at the timed B: max difference {diff:.1e} to the multiclass loop (it casts "
                 f"to float32 and accumulates in float32), {diff64:.1e} to torchmetrics' float64 "
                 f"`binary_calibration_error` on (confidence, correct)"),
    })


def case_one_B(rows: list[dict]) -> None:
    n = 10_000_000
    rng = np.random.default_rng(1)
    conf = rng.uniform(0.1, 1.0, size=n)
    correct = (rng.uniform(size=n) < conf**1.3).astype(np.int64)
    B = pbr_core.optimal_n_bins(n)
    t, value = _best_of(lambda: pbr_core.ece(conf, correct))
    rows.append({"case": "ECE at one B, 1-D top-label confidences (`ece`)", "n": n, "K": "-", "B": B,
                 "ours": t, "ref": None, "note": f"target < 2 s; ECE = {value:.4f}"})
    del conf, correct

    K = 10
    z = rng.standard_normal((n, K))
    z *= 2.5
    z = softmax(z)
    labels = rng.integers(0, K, size=n)
    t, value = _best_of(lambda: pbr_core.ece(z, labels))
    rows.append({"case": "ECE at one B, full probability matrix (`ece`)", "n": n, "K": K, "B": B,
                 "ours": t, "ref": None, "note": f"float64 input (800 MB); ECE = {value:.4f}"})


def case_bootstrap(rows: list[dict]) -> None:
    n = 100_000
    rng = np.random.default_rng(2)
    conf = rng.uniform(0.1, 1.0, size=n)
    correct = (rng.uniform(size=n) < conf - 0.05).astype(np.int64)
    t, (lo, hi) = _best_of(lambda: pbr_core.ece_bootstrap_ci(conf, correct, n_boot=1000), repeats=1)
    rows.append({"case": "Bootstrap 95% interval of the ECE (`ece_bootstrap_ci`, 1000 resamples)",
                 "n": n, "K": "-", "B": pbr_core.optimal_n_bins(n), "ours": t, "ref": None,
                 "note": f"1e8 draws; interval [{lo:.4f}, {hi:.4f}]"})


def render(rows: list[dict]) -> str:
    lines = [
        "| case | n | K | B | pbr_core (s) | reference (s) | speed-up | note |",
        "|---|---:|---:|---|---:|---:|---:|---|",
    ]
    for r in rows:
        ref = "-" if r["ref"] is None else f"{r['ref']:.2f}"
        speed = "-" if r["ref"] is None else f"{r['ref'] / r['ours']:.0f}x"
        lines.append(f"| {r['case']} | {r['n']:,} | {r['K']} | {r['B']} | {r['ours']:.3f} | {ref} | {speed} | {r['note']} |")
    return "\n".join(lines)


def main() -> None:
    import torch
    import torchmetrics

    rows: list[dict] = []
    load_before = os.getloadavg()
    t0 = time.perf_counter()
    case_curve(rows)
    case_one_B(rows)
    case_bootstrap(rows)
    total = time.perf_counter() - t0
    table = render(rows)
    print(table)
    header = [
        "# ECE benchmark results",
        "",
        f"- date: {_dt.datetime.now().strftime('%Y-%m-%d %H:%M')}",
        f"- machine: {os.cpu_count()} CPU cores (nproc), {cpu_model()}, {platform.system()} {platform.machine()}",
        f"- load average at start: {load_before[0]:.1f} (the machine is shared; timings are best of {REPEATS} "
        "runs for pbr_core, a single pass for the torchmetrics loop)",
        f"- Python {platform.python_version()}, numpy {np.__version__}, torch {torch.__version__}, "
        f"torchmetrics {torchmetrics.__version__}, torch threads {torch.get_num_threads()}",
        f"- whole script: {total:.0f} s. Command: `python benchmarks/bench_ece.py`",
        "",
        "",
    ]
    (ROOT / "benchmarks" / "RESULTS_ece.md").write_text("\n".join(header) + table + "\n")


if __name__ == "__main__":
    main()
