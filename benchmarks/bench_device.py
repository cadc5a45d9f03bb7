"""Where a GPU pays: one PBR fit on the CPU and on CUDA over n_re x K x S (issue 40).

``device="auto"`` chooses by the size of the work (:mod:`pbr_core.gp.device`,
``AUTO_CUDA_MIN_SCORES``): the CPU below n x K = 5 x 10^4 scores, a GPU from there. That line rests
on one grid of nine fits (benchmarks/RESULTS_gp.md, 2026-11-28); this benchmark measures the
crossover properly, on a machine with a GPU: every cell of ``--sizes`` x ``--classes`` x ``--draws``
is fitted on the CPU (one torch thread, the library's policy; cells spread over ``--jobs`` worker
processes, so a 16-core device machine measures them side by side) and on CUDA (one warm process,
the cells one after another, synchronised), with the library's defaults otherwise (``staged="auto"``:
fits of 20,000 rows or more run in stages). Written to benchmarks/RESULTS_device.md with, per cell,
the faster device and what "auto" picks.

Data (all in sample_data/, nothing to carry): K = 2 KITTI XGBoost p(y=1), K = 10 CIFAR-10 ResNet-110
logits, K = 100 CIFAR-100 DenseNet-121 logits; n rows drawn with replacement with their labels (a
timing set: the fits' quality is not the point here).

``scripts/gpu_checks.sh crossover`` runs it within one device call (``--time-limit``: cells not
reached are listed as not run). ``--device cpu`` alone checks the script on a machine without a GPU.

Example::

    python benchmarks/bench_device.py --sizes 1000,10000 --classes 10 --draws 32 --device cpu --jobs 2
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "RESULTS_device.md"
DATA = {2: ROOT / "sample_data" / "kitti_xgboost.csv", 10: ROOT / "sample_data" / "cifar10_resnet110.npz",
        100: ROOT / "sample_data" / "cifar100_densenet121.npz"}


def load(k: int, n: int):
    """n rows (drawn with replacement, seed 0) of the K-class sample: (predictions, label)."""
    import numpy as np

    import pbr_core

    path = DATA[k]
    if path.suffix == ".npz":
        d = np.load(path)
        z, y = d["logits"].astype(np.float64), d["labels"].astype(np.int64)
        idx = np.random.default_rng(0).integers(0, len(y), n)
        return pbr_core.Predictions.from_arrays(z[idx], y[idx], input_type="logits")
    preds = pbr_core.load_predictions(path)
    return preds.subset(np.random.default_rng(0).integers(0, preds.n, n))


def fit_cell(cell: dict) -> dict:
    """One fit (in this process): CPU s, wall s, stages, iterations."""
    import torch

    from pbr_core.recalibrators.gp import PBR

    preds = load(cell["k"], cell["n"])
    rec = PBR(alpha=0.5, n_mc=cell["s"], device=cell["device"])
    if cell["device"].startswith("cuda"):
        torch.cuda.synchronize()
    c0, t0 = time.process_time(), time.perf_counter()
    rec.fit(preds)
    if cell["device"].startswith("cuda"):
        torch.cuda.synchronize()
    rep = rec.fit_report_
    return {**cell, "cpu": time.process_time() - c0, "wall": time.perf_counter() - t0,
            "iterations": rep["iterations"], "staged": bool(rep.get("stages")), "objective": rep["objective"]}


def _cpu_worker(cell: dict) -> dict:
    import torch

    torch.set_num_threads(1)
    return fit_cell(cell)


def run_cuda(cells: list[dict], deadline: float) -> list[dict]:
    """The CUDA cells in one warm process (a small fit first pays CUDA's start-up)."""
    out = []
    fit_cell({"n": 200, "k": 10, "s": 8, "device": "cuda"})
    for cell in cells:
        if time.time() > deadline:
            break
        out.append(fit_cell(cell))
        print("cuda", json.dumps(out[-1]), flush=True)
    return out


def run_cpu(cells: list[dict], jobs: int, deadline: float, done=None) -> list[dict]:
    """The CPU cells over ``jobs`` worker processes, smallest first; ``done(rows)`` after each cell
    (the table is rewritten as cells finish, so a run stopped by its limit keeps what it measured).
    At ``deadline`` the cells still running are stopped."""
    out: list[dict] = []
    pool = ProcessPoolExecutor(max_workers=jobs)
    futures = [pool.submit(_cpu_worker, c) for c in sorted(cells, key=lambda c: c["n"] * c["k"] * c["s"])]
    try:
        for f in as_completed(futures, timeout=max(1.0, deadline - time.time())):
            out.append(f.result())
            print("cpu", json.dumps(out[-1]), flush=True)
            if done is not None:
                done(out)
    except TimeoutError:
        print("CPU cells stopped by --time-limit", flush=True)
        for proc in list(getattr(pool, "_processes", {}).values()):
            proc.terminate()
    pool.shutdown(wait=False, cancel_futures=True)
    return out


def write(rows_cpu: list[dict], rows_cuda: list[dict], cells: list[dict], gpu: str) -> None:
    from pbr_core.gp.device import AUTO_CUDA_MIN_SCORES

    def key(c):
        return (c["n"], c["k"], c["s"])

    cpu = {key(r): r for r in rows_cpu}
    cuda = {key(r): r for r in rows_cuda}
    body = [f"PBR, alpha = .5, one fit per cell, the library's defaults otherwise (`staged=\"auto\"`); CPU: one torch "
            f"thread per fit, {os.cpu_count()} cores, cells side by side in worker processes; CUDA: {gpu}, one "
            "warm process, cells one after another. Wall s of the fit. 'auto picks': the device of "
            f"`device=\"auto\"` (CUDA from n x K = {AUTO_CUDA_MIN_SCORES:,} scores); 'right?': whether that is "
            "the faster one (a tie within 20 % counts as right).", "",
            "| n | K | S | n x K | CPU wall s | CUDA wall s | CPU / CUDA | staged | auto picks | right? |",
            "|---|---|---|---|---|---|---|---|---|---|"]
    right = total = 0
    for c in cells:
        a, b = cpu.get(key(c)), cuda.get(key(c))
        scores = c["n"] * c["k"]
        picks = "cuda" if scores >= AUTO_CUDA_MIN_SCORES else "cpu"
        if a and b:
            ratio = a["wall"] / b["wall"]
            ok = (picks == "cuda" and ratio >= 1 / 1.2) or (picks == "cpu" and ratio <= 1.2)
            right += ok
            total += 1
            body.append(f"| {c['n']:,} | {c['k']} | {c['s']} | {scores:,} | {a['wall']:.2f} | {b['wall']:.2f} | "
                        f"{ratio:.2f} | {'yes' if a['staged'] else 'no'} | {picks} | {'yes' if ok else 'NO'} |")
        else:
            body.append(f"| {c['n']:,} | {c['k']} | {c['s']} | {scores:,} | {a['wall'] if a else float('nan'):.2f} | "
                        f"{b['wall'] if b else float('nan'):.2f} | - | - | {picks} | not run |")
    body += ["", f"'auto' picked the faster device (or one within 20 %) in {right} of {total} cells measured on both."]
    begin, end = "<!-- begin crossover -->", "<!-- end crossover -->"
    text = RESULTS.read_text() if RESULTS.exists() else "# Where a GPU pays (issue 40)\n"
    block = "\n".join([begin, f"## CPU against CUDA, one PBR fit ({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())})",
                       "", *body, end])
    pattern = re.compile(re.escape(begin) + ".*?" + re.escape(end), re.S)
    text = pattern.sub(lambda _: block, text) if pattern.search(text) else text.rstrip() + "\n\n" + block + "\n"
    RESULTS.write_text(text)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", default="300,1000,3000,10000,30000,100000")
    p.add_argument("--classes", default="2,10,100")
    p.add_argument("--draws", default="8,32")
    p.add_argument("--device", default="both", choices=["both", "cpu", "cuda"])
    p.add_argument("--jobs", type=int, default=min(8, os.cpu_count() or 1))
    p.add_argument("--time-limit", type=float, default=500.0, help="seconds for all cells (then the table)")
    args = p.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    import torch

    deadline = time.time() + args.time_limit
    cells = [{"n": int(n), "k": int(k), "s": int(s)} for k in args.classes.split(",") for s in args.draws.split(",")
             for n in args.sizes.split(",")]
    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no GPU"
    rows_cuda: list[dict] = []
    rows_cpu: list[dict] = []
    if args.device in ("both", "cuda") and torch.cuda.is_available():
        # CUDA first, in a child process so that the CPU workers (forked) never inherit a CUDA context.
        code = (f"import sys, json; sys.path.insert(0, {str(ROOT)!r}); sys.path.insert(0, {str(ROOT / 'benchmarks')!r})\n"
                "import bench_device as b\n"
                f"rows = b.run_cuda([dict(c, device='cuda') for c in {cells!r}], {deadline - args.time_limit / 2!r})\n"
                "print('RESULT', json.dumps(rows))")
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
        sys.stderr.write(out.stderr[-3000:])
        for line in out.stdout.splitlines():
            if line.startswith("RESULT "):
                rows_cuda = json.loads(line[7:])
    write(rows_cpu, rows_cuda, cells, gpu)
    if args.device in ("both", "cpu"):
        rows_cpu = run_cpu([dict(c, device="cpu") for c in cells], args.jobs, deadline,
                           done=lambda rows: write(rows, rows_cuda, cells, gpu))
    write(rows_cpu, rows_cuda, cells, gpu)


if __name__ == "__main__":
    main()
