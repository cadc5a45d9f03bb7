"""Calibration by group on a streamed dataset: cost of the groups, against the streamed pass alone
and against the in-memory ``calibration_by_group``.

Synthetic binary Parquet logs (p(y=1), label, a ``segment`` column with G values; files of 1M rows
in row groups of 250k). Each run is a fresh subprocess; CPU seconds (user + sys) are measured by the
parent, peak RSS (``ru_maxrss``) by the run itself; the three runs interleaved per size:

* ``stream``: ``compute_statistics`` (the overall numbers only);
* ``stream + groups``: ``compute_group_statistics(..., overall=config)``: the counting pass over the
  segment column, then the overall and per-group statistics in one pass;
* ``in memory``: ``load_predictions`` + ``calibration_by_group`` with the same number of resamples.

Usage::

    python benchmarks/bench_stream_groups.py --dir /tmp/pbr_groups_bench --sizes 1e6,4e6 --groups 20,1000
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

ROOT = Path(__file__).resolve().parents[1]
FILE_ROWS = 1_000_000

_CHILD = r"""
import json, sys, time
mode, folder, n_boot = sys.argv[1], sys.argv[2], int(sys.argv[3])
import pbr_core, pbr_core.stream as ps
from pbr_core.groups import calibration_by_group
if mode == "stream":
    stats = ps.compute_statistics(ps.open_dataset(folder), n_boot=n_boot)
    out = {"n": stats.n, "ece": stats.ece()}
elif mode == "groups":
    ds = ps.open_dataset(folder, group_columns="segment")
    config = ps.stats_config(ds, n_boot=n_boot)
    groups, stats = ps.compute_group_statistics(ds, "segment", n_boot=n_boot, overall=config)
    t = groups.report().table
    out = {"n": stats.n, "ece": stats.ece(), "groups": len(t), "ece_first": float(t["ece"].iloc[0])}
else:  # the same rows as one file, read whole
    preds = pbr_core.load_predictions(folder + ".whole.parquet", group_columns="segment")
    t = calibration_by_group(preds, "segment", n_boot=n_boot).table
    out = {"n": preds.n, "groups": len(t), "ece_first": float(t["ece"].iloc[0])}
import resource
out["rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps(out))
"""


def _write(folder: Path, n: int, groups: int, seed: int = 0) -> Path:
    import pyarrow as pa
    import pyarrow.parquet as pq

    done = folder / "_complete"
    if done.exists():
        return folder
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    tables = []
    for i, start in enumerate(range(0, n, FILE_ROWS)):
        rows = min(FILE_ROWS, n - start)
        p = rng.uniform(0.01, 0.99, rows)
        seg = rng.integers(0, groups, rows)
        y = (rng.uniform(size=rows) < np.clip(p + 0.02 * (seg % 3 - 1), 0, 1)).astype(np.int8)
        table = pa.table({"p_yes": p, "label": y, "segment": pa.array([f"s{g:04d}" for g in seg])})
        pq.write_table(table, folder / f"part-{i:04d}.parquet", row_group_size=250_000)
        tables.append(table)
    pq.write_table(pa.concat_tables(tables), f"{folder}.whole.parquet")
    done.touch()
    return folder


def _run(mode: str, folder: Path, n_boot: int) -> dict:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    proc = subprocess.run([sys.executable, "-c", _CHILD, mode, str(folder), str(n_boot)], capture_output=True,
                          text=True, cwd=ROOT, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode:
        raise RuntimeError(proc.stderr[-2000:])
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    out["cpu"] = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", type=Path, default=Path("/tmp/pbr_groups_bench"))
    ap.add_argument("--sizes", default="1e6")
    ap.add_argument("--groups", default="20,1000")
    args = ap.parse_args()
    from pbr_core.metrics import default_n_boot

    print("| rows | groups | n_boot | run | CPU s | peak RSS MB | groups found |")
    print("|---:|---:|---:|---|---:|---:|---:|")
    for n in (int(float(s)) for s in args.sizes.split(",")):
        for G in (int(g) for g in args.groups.split(",")):
            folder = _write(args.dir / f"n{n}_g{G}", n, G)
            nb = default_n_boot(n)
            for mode, name in (("stream", "stream (overall only)"), ("groups", "stream + groups"),
                               ("memory", "in memory")):
                r = _run(mode, folder, nb)
                print(f"| {n:,} | {G:,} | {nb} | {name} | {r['cpu']:.1f} | {r['rss_mb']:.0f} | {r.get('groups', '')} |",
                      flush=True)


if __name__ == "__main__":
    main()
