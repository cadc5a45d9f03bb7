"""How long Stop takes to act: each kind of dashboard run, stopped at random moments.

Every scenario runs the dashboard's own work function (``dashboard.runs.run_*``, or
``pbr_core.alpha_selection.select_alpha`` for the batched alpha selection the dashboard uses on a
GPU) in a background job exactly as the pages start it (``dashboard.jobs.start_job``). It is run
once to the end (its duration D), then ``--trials`` times with Stop pressed
(``Job.request_cancel``) at a moment drawn uniformly from [0.03 D, 0.97 D] (seeded). The latency is
the time from the request to the job's end (status "stopped", lock free). A trial whose job ended
before the request counts as "finished first" and is drawn again (up to 3 times) with D set to that
shorter duration (the load of a shared machine changes from run to run).

The run to the end also records every call of the job's stop check (``JobContext.cancelled``, the
callable every part of the code asks, before and after the fix) and reports the longest stretch
between two checks (from the job's start to its end): the worst Stop latency of that run, found
without having to press Stop at the worst moment.

Usage::

    python benchmarks/bench_stop.py                       # all scenarios, 5 trials each
    python benchmarks/bench_stop.py --scenarios pbr compare --trials 3 --label after

Prints a Markdown table (one row per scenario: D, median / max latency, the latencies) and, with
``--write``, appends it to benchmarks/RESULTS_stop.md under a heading naming ``--label``.
Torch keeps its default thread count (as in the dashboard's server) unless ``--threads`` is given.
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import statistics
import sys
import time
import warnings
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import pbr_core  # noqa: E402
from dashboard import jobs, runs  # noqa: E402
from pbr_core import Predictions  # noqa: E402

RESULTS = ROOT / "benchmarks" / "RESULTS_stop.md"
DATA = ROOT / "sample_data"


def _npz(name: str) -> Predictions:
    d = np.load(DATA / name)
    return Predictions.from_arrays(d["logits"].astype(np.float64), d["labels"])


@dataclass
class Scenario:
    name: str
    what: str
    work: Callable[[Any], Any]     # work(ctx) -> result, as a page's job runs it


def scenarios() -> dict[str, Scenario]:
    runs.preload_gp()  # as the recalibration pages do before any fit
    c100 = _npz("cifar100_densenet121.npz")
    c10 = _npz("cifar10_resnet110.npz")
    kitti = pbr_core.load_predictions(DATA / "kitti_mlp.parquet")

    def batched_selection(ctx: Any) -> Any:
        from pbr_core.alpha_selection import select_alpha
        from pbr_core.recalibrators import report_progress

        fit_set = c100.subset(np.arange(500))
        with report_progress(ctx.fit_progress):
            return select_alpha(fit_set, grid=(0.1, 0.5), n_splits=2, batched=True, optimizer="adam",
                                cancel=ctx.cancelled, progress=lambda d, t, m: ctx.step(m))

    out = [
        Scenario("pbr", "PBR page, CIFAR-100 (K = 100), n_re = 1000, α = .5",
                 lambda ctx: runs.run_pbr(c100, runs.PBRSettings(alpha=0.5, n_re=1000), ctx)),
        Scenario("pbr_prior", "PBR page, KITTI MLP (binary), n_re = 1000, α = .5: ends at the prior, redone "
                              "from smaller α",
                 lambda ctx: runs.run_pbr(kitti, runs.PBRSettings(alpha=0.5, n_re=1000), ctx)),
        Scenario("pbr_auto", "PBR page, α chosen by 2-fold CV over {.1, .5}, CIFAR-100, n_re = 500",
                 lambda ctx: runs.run_pbr(c100, runs.PBRSettings(alpha=None, alpha_grid=(0.1, 0.5), cv_folds=2,
                                                                 n_re=500), ctx)),
        Scenario("select_batched", "select_alpha(batched=True, Adam), 4 GPs, CIFAR-100, 500 rows",
                 batched_selection),
        Scenario("compare", "Compare page: uncalibrated, temperature, GP calibration (app.), PBR; CIFAR-100, "
                            "n_re = 500, 2 folds",
                 lambda ctx: runs.run_compare(c100, runs.CompareSettings.of(
                     ["uncalibrated", "temperature", "gp_app", "pbr"], 500, 2, 0), ctx)),
        Scenario("generalization", "Generalization page: PBR α = .5, CIFAR-100, n_re = 1000, 2 folds",
                 lambda ctx: runs.run_generalization(c100, runs.KLGapSettings(alphas=(0.5,), n_re=1000, n_folds=2),
                                                     ctx)),
        Scenario("ship", "Fit & apply page: PBR on 80 % of CIFAR-10 (8,000 rows, K = 10)",
                 lambda ctx: runs.run_ship(c10, runs.FitSettings(method="pbr", alpha=0.5), ctx)),
    ]
    return {s.name: s for s in out}


#: Times (time.time) of the stop checks of the running job (one job runs at a time here).
_CHECKS: list[float] = []
_ask = jobs.JobContext.cancelled


def _recorded(self: jobs.JobContext) -> bool:
    _CHECKS.append(time.time())
    return _ask(self)


jobs.JobContext.cancelled = _recorded


def longest_unchecked(job: jobs.Job) -> tuple[float, int]:
    """(longest time between two stop checks of ``job``'s run, incl. its start and end; checks)."""
    times = [job.started] + [t for t in _CHECKS if job.started <= t <= job.finished] + [job.finished]
    return float(np.max(np.diff(times))), len(times) - 2


def run_once(s: Scenario, stop_after: float | None, timeout: float = 1800.0) -> tuple[float, float | None, str]:
    """(duration, latency or None, final status) of one job; Stop is pressed ``stop_after`` s in."""
    _CHECKS.clear()
    job = jobs.start_job(s.name, s.what, s.work, heavy=False, lock=None)
    t0 = time.time()
    latency = None
    if stop_after is not None:
        while time.time() - t0 < stop_after and job.active:
            time.sleep(0.01)
        if job.active:
            asked = time.time()
            job.request_cancel()
            job.join(timeout)
            latency = job.finished - asked
    job.join(timeout)
    if job.status == "failed":
        raise RuntimeError(f"{s.name} failed: {job.error}\n{job.traceback}")
    run_once.last_job = job
    return job.finished - t0, latency, job.status


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenarios", nargs="*", default=None)
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--label", default="")
    parser.add_argument("--write", action="store_true")
    args = parser.parse_args()
    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    warnings.simplefilter("ignore")
    all_s = scenarios()
    names = args.scenarios or list(all_s)
    rng = random.Random(args.seed)
    lines = ["| scenario | run to the end (s) | stop checks | longest stretch without one (s) | "
             "Stop latency median (s) | max (s) | latencies (s) |",
             "|---|---:|---:|---:|---:|---:|---|"]
    print(lines[0], lines[1], sep="\n", flush=True)
    for name in names:
        s = all_s[name]
        duration, _, status = run_once(s, None)
        gap, checks = longest_unchecked(run_once.last_job)
        lat: list[float] = []
        first = 0
        shortest = duration
        for _ in range(args.trials):
            for _ in range(4):
                at = rng.uniform(0.03, 0.97) * shortest
                took, latency, status = run_once(s, at)
                if latency is not None:
                    lat.append(latency)
                    break
                first += 1
                shortest = min(shortest, took)
        shown = ", ".join(f"{x:.2f}" for x in lat) + (f" ({first} finished first)" if first else "")
        row = (f"| {name} | {duration:.1f} | {checks:,} | {gap:.2f} | "
               f"{statistics.median(lat) if lat else float('nan'):.2f} | "
               f"{max(lat) if lat else float('nan'):.2f} | {shown} |")
        lines.append(row)
        print(row, flush=True)
    if args.write:
        load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
        head = (f"\n## {args.label or 'run'}\n\n{datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC, "
                f"{platform.machine()}, {os.cpu_count()} CPUs (load average {load} at the end), torch threads "
                f"{torch.get_num_threads()}, {args.trials} trials per scenario, seed {args.seed}. "
                f"Command: `python benchmarks/bench_stop.py {' '.join(sys.argv[1:])}`.\n\n")
        with open(RESULTS, "a") as fh:
            fh.write(head + "\n".join(lines) + "\n\nScenarios:\n\n" +
                     "\n".join(f"- `{n}`: {all_s[n].what}" for n in names) + "\n")


if __name__ == "__main__":
    main()
