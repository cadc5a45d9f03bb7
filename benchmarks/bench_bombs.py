"""Benchmark: peak memory and time of reading small files that expand into very large ones.

Run from the repository root:  python benchmarks/bench_bombs.py [--kinds ...] [--scale 1.0] [--write --label L]
Prints a markdown table (and, with --write, appends it with the machine description to
benchmarks/RESULTS_bombs.md under the given --label).

Each bomb (tests/bombs.py builds them; cached under $PBR_BENCH_DATA, default /tmp/pbr_bench_data)
is read in a fresh Python process, one at a time, by

* ``library``: ``pbr_core.load_predictions(path)``;
* ``dashboard``: what the Data page does with an upload (``dashboard.state.load_upload(bytes, name)``,
  Streamlit in bare mode), which also lists the columns of a file that failed.

The child reports its peak resident memory (VmHWM from /proc/self/status), its RSS after the read
and, for the dashboard, after the session ended (its state cleared and released as
dashboard/sessions.py does for a closed tab: what stays is the parse cache shared by every session);
the table shows them above the same process's RSS after its imports (``import pbr_core`` and, for the
dashboard, ``dashboard.state``), so the figures are what the read itself cost. The child runs under a
cap on its address space (``--cap-gb``, RLIMIT_AS) and a time limit (``--timeout``), so a read that
would take the machine down ends as "MemoryError at the cap" or "timeout" instead.

Sizes (the issue's, scaled by ``--scale``; never more than about 1 GiB decompressed): a ``.csv.gz``
of 44.7 M rows (256 MiB of text), one of 15 M rows of 10 probabilities (630 MB: over the memory limit,
within the dashboard's 20 M rows read in a stream), a ``.jsonl.gz`` of 8.7 M records (200 MB), one of 5 M records
without a label column (95 MB; the file fails to load after it was read), an NPZ of 12.5 M x 10
probabilities (1.1 GB of arrays), a Parquet file with one row group of 50 M rows (800 MB as Arrow),
a ``.csv.gz`` with one 300 MB cell, an ``.xlsx`` with one 200 MB shared string.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
import bombs  # noqa: E402 - after the path

DATA_DIR = Path(os.environ.get("PBR_BENCH_DATA", "/tmp/pbr_bench_data")) / "bombs"

#: kind -> (size argument at scale 1, what it is)
SIZES = {
    "csv.gz rows": (44_739_242, "rows"),        # 256 MiB of "0.5,1\n"
    "csv.gz wide rows": (15_000_000, "rows x 10"),  # 630 MB of 10 probabilities and a label a row
    "jsonl.gz rows": (8_695_652, "rows"),       # 200 MB of records
    "jsonl.gz no label": (5_000_000, "rows"),   # 95 MB of records, then "no label column"
    "npz rows": (12_500_000, "rows x 10"),      # 1.0 GB of probabilities + 0.1 GB of labels
    "parquet row group": (50_000_000, "rows"),  # one row group
    "csv.gz cell": (300_000_000, "bytes"),      # one cell
    "xlsx cell": (200_000_000, "bytes"),        # one shared string
    # audit 12c: small files whose reading expanded (sizes of the audit's files)
    "npz one-hot": (10_000, "rows x 1,000 classes"),             # 80 MB of probabilities, ~100 KB on disk
    "csv.gz one-hot wide": (20_000, "score columns x 2,000 rows"),
    "csv.gz score vectors": (200_000, "classes in a cell x 200 rows"),
    "parquet score vectors": (100_000, "classes in a cell x 100 rows"),
    "csv.gz long text": (1_000, "rows of a 900 KB cell"),
    "csv.gz text columns": (20_000, "text columns x 200 rows"),
    "parquet long text": (300, "rows of a 900 KB cell"),  # 270 MB of distinct text in ~1 MB of zstd
}

_CHILD = r"""
import json, os, resource, sys, time
cap = int(sys.argv[1]); mode = sys.argv[2]; path = sys.argv[3]
resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
def status(key):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) / 1024
import pbr_core
if mode == "dashboard":
    import logging, warnings
    logging.disable(logging.CRITICAL)
    warnings.simplefilter("ignore")
    from dashboard import state
base = status("VmRSS")
with open("/proc/self/clear_refs", "w") as f:
    f.write("5")  # VmHWM := VmRSS: the peak from here on
t0, c0 = time.perf_counter(), time.process_time()
outcome, message, held, gone, elapsed = "loaded", "", None, None, None
try:
    if mode == "library":
        preds = pbr_core.load_predictions(path)
        message = f"n = {preds.n:,}"
    else:
        with open(path, "rb") as f:
            data = f.read()
        err = state.load_upload(data, os.path.basename(path))
        if err is not None:
            outcome, message = "refused", err
        else:
            message = f"n = {state.current().preds.n:,}"
        # The session ends (its tab closed): what dashboard/sessions.py does, then what stays is the
        # shared parse cache's.
        import gc
        import streamlit as st
        from dashboard import memory, sessions
        held, elapsed = status("VmRSS"), time.perf_counter() - t0
        del data
        st.session_state.clear()
        getattr(sessions, "release_unheld", memory.release_free_memory)()
        gc.collect()
        gone = status("VmRSS")
except MemoryError:
    outcome, message = "MemoryError at the cap", ""
except Exception as exc:
    outcome, message = "refused" if type(exc).__name__.endswith("Error") else "failed", f"{type(exc).__name__}: {exc}"
print("RESULT " + json.dumps({"outcome": outcome, "message": message[:300], "seconds": elapsed or time.perf_counter() - t0,
                              "base": base, "hwm": status("VmHWM"), "end": held or status("VmRSS"), "gone": gone,
                              "cpu": time.process_time() - c0}))
"""


def build(kind: str, scale: float) -> tuple[Path, int]:
    size = max(1, int(SIZES[kind][0] * scale))
    fn, name = bombs.BUILDERS[kind]
    DATA_DIR.mkdir(parents=True, exist_ok=True)
    path = DATA_DIR / f"{size}_{name}"
    if not path.exists():
        part = path.with_name(path.name + ".part")
        fn(part, size)
        part.rename(path)
    return path, size


def run_one(path: Path, mode: str, cap_gb: float, timeout: float) -> dict:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    try:
        proc = subprocess.run([sys.executable, "-c", _CHILD, str(int(cap_gb * 2**30)), mode, str(path)],
                              capture_output=True, text=True, timeout=timeout, cwd=ROOT, env=env)
    except subprocess.TimeoutExpired:
        return {"outcome": f"timeout ({timeout:.0f} s)", "message": "", "seconds": timeout, "base": 0, "hwm": 0,
                "end": 0}
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT "):])
    tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or [""]
    return {"outcome": f"crashed (exit {proc.returncode})", "message": tail[0][:300], "seconds": 0, "base": 0,
            "hwm": 0, "end": 0}


def table(rows: list[dict]) -> str:
    lines = ["| bomb | file (KB) | expands to | read by | outcome | peak above imports (MB) | "
             "held after (MB) | after the session ended (MB) | time (s) | CPU (s) | message |",
             "|---|---:|---|---|---|---:|---:|---:|---:|---:|---|"]
    for r in rows:
        peak = f"{r['hwm'] - r['base']:.0f}" if r["hwm"] else "-"
        held = f"{r['end'] - r['base']:.0f}" if r["end"] else "-"
        gone = f"{r['gone'] - r['base']:.0f}" if r.get("gone") else "-"
        message = r["message"].replace("|", "/").replace("\n", " ")
        lines.append(f"| {r['kind']} | {r['file_kb']:.0f} | {r['expands']} | {r['mode']} | {r['outcome']} | {peak} | "
                     f"{held} | {gone} | {r['seconds']:.1f} | {r.get('cpu', 0):.1f} | {message[:160]} |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kinds", default=",".join(SIZES), help="comma-separated bomb kinds: " + ", ".join(SIZES))
    ap.add_argument("--modes", default="library,dashboard", help="library, dashboard or both")
    ap.add_argument("--scale", type=float, default=1.0, help="multiplies every size (at most 1)")
    ap.add_argument("--cap-gb", type=float, default=10.0, help="address-space cap of the reading process")
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds per read")
    ap.add_argument("--write", action="store_true", help="append the table to benchmarks/RESULTS_bombs.md")
    ap.add_argument("--label", default="", help="heading of the appended section (e.g. 'before', 'after')")
    args = ap.parse_args()
    if args.scale > 1:
        sys.exit("--scale above 1 would build bombs over ~1 GiB decompressed")
    t0 = time.time()
    load = os.getloadavg()[0]
    rows = []
    for kind in [k.strip() for k in args.kinds.split(",") if k.strip()]:
        path, size = build(kind, args.scale)
        what = SIZES[kind][1]
        expands = (f"{size / 1e6:.0f} MB cell" if what == "bytes" else f"{size / 1e6:.1f} M {what}"
                   if what.startswith("rows") and size >= 1e6 else f"{size:,} {what}")
        for mode in [m.strip() for m in args.modes.split(",") if m.strip()]:
            r = run_one(path, mode, args.cap_gb, args.timeout)
            r.update(kind=kind, mode=mode, expands=expands, file_kb=path.stat().st_size / 1024)
            print(f"{kind} ({mode}): {r['outcome']}, peak +{r['hwm'] - r['base']:.0f} MB, {r['seconds']:.1f} s "
                  f"{r['message'][:120]}", flush=True)
            rows.append(r)
    out = table(rows)
    print(out)
    if args.write:
        import numpy
        import pandas
        import pyarrow

        head = [
            f"\n## {args.label or 'run'} ({_dt.datetime.now():%Y-%m-%d %H:%M})\n",
            f"- machine: {os.cpu_count()} CPU cores, {platform.machine()}, load average at start {load:.1f} (shared machine)",
            f"- Python {platform.python_version()}, pandas {pandas.__version__}, pyarrow {pyarrow.__version__}, "
            f"numpy {numpy.__version__}",
            f"- command: `python benchmarks/bench_bombs.py --kinds '{args.kinds}' --modes {args.modes} "
            f"--scale {args.scale:g} --cap-gb {args.cap_gb:g}` ({time.time() - t0:.0f} s)\n",
        ]
        with open(ROOT / "benchmarks" / "RESULTS_bombs.md", "a") as f:
            f.write("\n".join(head) + "\n" + out + "\n")


if __name__ == "__main__":
    main()
