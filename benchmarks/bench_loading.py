"""Benchmark: the library's load of a wide CSV (50,000 columns) and of a 300 MB CSV, in-process.

Run from the repository root:  python benchmarks/bench_loading.py [--skip-big]
Prints two markdown tables (and, with --write, appends them to benchmarks/RESULTS_memory.md).

(a) Wide file: 50,000 class columns (``c0`` ... ``c49999``) and a label, 5 rows of probabilities
    written with 4 significant digits (2.8 MB). ``load_predictions`` from bytes, best of 3, in CPU
    seconds (process time; the machine is shared) and wall seconds. Before the duplicate-header
    check was made linear it took 55-64 s, 49 s of them in that check.
(b) The 300 MB CSV of bench_memory.py (10 probability columns with 9 significant digits, label, id,
    text segment, date; 1,850,000 rows), loaded from bytes in a fresh process per case. RSS is
    sampled every 5 ms (VmRSS); "above the bytes" is measured from the moment the file's bytes are
    in memory. Each sample notes the deepest pbr_core function on the main thread's stack, so the
    table says in which step the peak happened. Cases: the library with Python's default
    allocators, and with the dashboard's settings (``dashboard.memory.configure()``: glibc mmap
    threshold 4 MiB, Arrow on the system allocator), plus the CSV read alone by pandas' pyarrow
    engine (what the loader used before) and by the loader's reader (types from the first block).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import threading
import time
import traceback
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
#: The checkout whose pbr_core is measured (--root, e.g. an older commit for a before/after table).
CODE = Path(os.environ.get("PBR_BENCH_ROOT", ROOT))
sys.path.insert(0, str(CODE))
sys.path.insert(0, str(Path(__file__).resolve().parent))

WIDE_K = 50_000
WIDE_ROWS = 5


def wide_csv() -> bytes:
    rng = np.random.default_rng(0)
    p = rng.dirichlet(np.ones(WIDE_K), size=WIDE_ROWS)
    lines = [",".join(f"c{j}" for j in range(WIDE_K)) + ",label"]
    for i in range(WIDE_ROWS):
        lines.append(",".join(f"{v:.4g}" for v in p[i]) + f",{i % WIDE_K}")
    return ("\n".join(lines) + "\n").encode()


def bench_wide(repeats: int = 3) -> dict:
    import pbr_core

    data = wide_csv()
    best_cpu = best_wall = float("inf")
    for _ in range(repeats):
        c0, w0 = time.process_time(), time.perf_counter()
        preds = pbr_core.load_predictions(data, format="csv", name="wide.csv")
        best_cpu = min(best_cpu, time.process_time() - c0)
        best_wall = min(best_wall, time.perf_counter() - w0)
    return {"mb": len(data) / 1e6, "k": preds.n_classes, "n": preds.n, "cpu": best_cpu, "wall": best_wall}


# ------------------------------------------------------------------------------ one child process
def _rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def child(case: str, path: str) -> dict:
    """Runs in a fresh process: load ``path`` as ``case`` says, sampling RSS and the current step."""
    import pandas as pd
    import pyarrow as pa  # noqa: F401  (imported before the baseline, like the dashboard)

    import pbr_core
    from pbr_core.loading import _tables
    from pbr_core.loading._source import _resolve_source

    if case.startswith("dashboard"):
        from dashboard import memory

        memory.configure()
    data = Path(path).read_bytes()
    main = threading.get_ident()
    samples: list[tuple[float, str]] = []
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            frame = sys._current_frames().get(main)
            step = "-"
            if frame is not None:
                for fs in reversed(traceback.extract_stack(frame)):
                    if "pbr_core" in fs.filename or "pandas" in fs.filename:
                        step = f"{Path(fs.filename).stem}.{fs.name}"
                        if "pbr_core" in fs.filename:
                            break
            samples.append((_rss_mb(), step))
            stop.wait(0.005)

    base = _rss_mb()
    thread = threading.Thread(target=sample, daemon=True)
    thread.start()
    c0, w0 = time.process_time(), time.perf_counter()
    if case == "read: pandas pyarrow engine":
        import io

        result = pd.read_csv(io.BytesIO(data), engine="pyarrow", skip_blank_lines=False)
    elif case == "read: types from the first block":
        result = _tables._read_csv_frame(_resolve_source(data, "big.csv"), ",", None, "utf-8")
    else:
        result = pbr_core.load_predictions(data, name="big.csv")
    cpu, wall = time.process_time() - c0, time.perf_counter() - w0
    time.sleep(0.05)
    stop.set()
    thread.join()
    after = _rss_mb()
    peak, step = max(samples)
    if isinstance(result, pd.DataFrame):
        kept = result.memory_usage(deep=True).sum() / 2**20
    else:
        arrays = [result.probs, result.logits, result.labels, result.confidence, result.predicted]
        kept = sum(a.nbytes for a in arrays if a is not None) / 2**20
        kept += result.metadata.memory_usage(deep=True).sum() / 2**20 if result.metadata is not None else 0
    del result
    try:
        from dashboard.memory import release_free_memory
    except ImportError:  # a checkout from before dashboard/memory.py (--root)
        import ctypes
        import gc

        def release_free_memory() -> None:
            gc.collect()
            ctypes.CDLL("libc.so.6").malloc_trim(0)
            pa.default_memory_pool().release_unused()
    release_free_memory()
    return {"case": case, "bytes_mb": len(data) / 2**20, "cpu": cpu, "wall": wall, "peak": peak - base,
            "step": step, "after": after - base, "trimmed": _rss_mb() - base, "kept": kept}


def run_child(case: str, path: Path, root: Path = ROOT) -> dict:
    out = subprocess.run([sys.executable, __file__, "--child", case, str(path)], capture_output=True, text=True,
                         cwd=root, env={**os.environ, "PYTHONPATH": str(root), "PBR_BENCH_ROOT": str(root)})
    if out.returncode != 0:
        raise RuntimeError(out.stderr[-3000:])
    return json.loads(out.stdout.strip().splitlines()[-1])


CASES = ["library (default allocators)", "dashboard (its allocator settings)",
         "read: pandas pyarrow engine", "read: types from the first block"]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--child", nargs=2, metavar=("CASE", "PATH"), help=argparse.SUPPRESS)
    ap.add_argument("--skip-big", action="store_true", help="only the wide file")
    ap.add_argument("--root", type=Path, default=ROOT,
                    help="checkout whose pbr_core is measured (default: this one), e.g. a worktree of an older commit")
    ap.add_argument("--cases", default=",".join(CASES), help="comma-separated cases of table (b)")
    ap.add_argument("--write", action="store_true", help="append the tables to benchmarks/RESULTS_memory.md")
    ap.add_argument("--label", default="", help="heading of the appended section")
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(*args.child)))
        return

    load = os.getloadavg()[0]
    if args.root.resolve() != ROOT:
        os.environ["PBR_BENCH_ROOT"] = str(args.root.resolve())
        sys.path.insert(0, str(args.root.resolve()))
        for name in [m for m in sys.modules if m == "pbr_core" or m.startswith("pbr_core.")]:
            del sys.modules[name]
    wide = bench_wide()
    lines = ["| file | MB | K | n | CPU s (best of 3) | wall s |", "|---|---:|---:|---:|---:|---:|",
             f"| wide CSV | {wide['mb']:.1f} | {wide['k']:,} | {wide['n']} | {wide['cpu']:.2f} | {wide['wall']:.2f} |"]
    tables = ["\n".join(lines)]
    if not args.skip_big:
        from bench_memory import make_csv

        path = make_csv("meta")
        rows = ["| case | CSV (MB) | CPU s | wall s | peak above the bytes (MB) | step at the peak "
                "| after, before trimming (MB) | after trimming (MB) | result's own size (MB) |",
                "|---|---:|---:|---:|---:|---|---:|---:|---:|"]
        for case in args.cases.split(","):
            r = run_child(case, path, args.root.resolve())
            rows.append(f"| {case} | {r['bytes_mb']:.0f} | {r['cpu']:.1f} | {r['wall']:.1f} | {r['peak']:.0f} | "
                        f"`{r['step']}` | {r['after']:.0f} | {r['trimmed']:.0f} | {r['kept']:.0f} |")
            print(rows[-1], flush=True)
        tables.append("\n".join(rows))
    out = "\n\n".join(tables)
    print(out)
    if args.write:
        import pandas
        import pyarrow

        head = [f"\n## {args.label or 'bench_loading'} ({time.strftime('%Y-%m-%d %H:%M')})\n",
                f"- machine: {os.cpu_count()} CPU cores, {platform.machine()}, load average at start {load:.1f} "
                "(shared machine)",
                f"- Python {platform.python_version()}, pandas {pandas.__version__}, pyarrow {pyarrow.__version__}, "
                f"numpy {np.__version__}",
                f"- code measured: {args.root.resolve()}",
                f"- command: `python benchmarks/bench_loading.py{' --skip-big' if args.skip_big else ''}`\n"]
        with open(ROOT / "benchmarks" / "RESULTS_memory.md", "a") as f:
            f.write("\n".join(head) + "\n" + out + "\n")


if __name__ == "__main__":
    main()
