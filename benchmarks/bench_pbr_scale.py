"""PBR at every size (issue 40): fits by n_re, the staged fit against the full-batch fit, the first fit of a process.

Data. Real CIFAR-10 logits (``../shared/data/predictions/aigen_c10_<net>.npz``: the 10,000 test rows
and the 5,000 validation rows, 15,000 rows per network). There are not 10^5 or 10^6 real rows, so
every set of n rows is built the same way: n rows drawn with replacement from the network's 15,000,
each with a fresh outcome drawn from a fitted calibrated model, the "truth": GP calibration
(Wenger's model, the mean approximation) fitted on all 15,000 real rows with their real labels. The
truth is cached under ``--cache``. The test rows (``--test-rows``, 20,000) are drawn the same way with
another seed, so test ECEs measure calibration against the same truth.

Parts
-----
* ``table``: one PBR fit (alpha = .5, the library's defaults, one torch thread) per n of ``--sizes``
  (10^3, 10^4, 10^5, 10^6), each in a fresh worker process: CPU s and wall s of the fit, the peak
  resident memory of the process and what the fit added to it, iterations, the draws per entry of
  each stage, objective, KL, Corollary 1, test ECE. With ``--full-up-to N`` the full-batch fit
  (``staged=False``) is added for every size up to N (10^5 by default) for comparison.
* ``quality``: at n = ``--quality-n`` (10^5) for every network of ``--nets`` and alpha of ``--alphas``:
  the full-batch fit with random_state 0 (the reference), the full-batch fit with random_state 1 (the
  noise floor: other draws and inducing points) and the default fit (staged), each judged on the
  reference's own objective (its S = 32 draws, seed 0) and on 32 fresh draws (seed 99): relative
  objective difference to the reference, and the test ECE. "inside the floor": the staged fit's
  objective difference is no larger than the larger of the optimiser's tolerance (1e-4 relative,
  issue 15's bar) and the floor's, and its test ECE no more than .002 above the reference's.
* ``first-fit``: ``--repeats`` fresh ``python -c`` processes, each timing the import of the
  library (``from pbr_core.recalibrators import PBR``), the first fit (K = 10, the first 1000 rows
  of sample_data/cifar10_resnet110.npz, alpha = .5) and a second fit of the same rows; and, in
  separate processes, what the imports cost on their own (torch, gpytorch, the library). ``--python``
  runs them in another interpreter (``--label`` names its section): a virtual environment with only
  pbr-calib's own requirements is what a user's install imports (no pyro, which netcal brings).

Writes its tables into benchmarks/RESULTS_pbr_scale.md between ``<!-- begin/end PART -->`` markers.

Examples
--------
::

    python benchmarks/bench_pbr_scale.py --parts first-fit --repeats 5
    python -m venv /tmp/user && /tmp/user/bin/pip install "torch==2.13.0" . && \
        python benchmarks/bench_pbr_scale.py --parts first-fit --python /tmp/user/bin/python --label user-install
    python benchmarks/bench_pbr_scale.py --parts table --sizes 1000,10000,100000,1000000
    python benchmarks/bench_pbr_scale.py --parts quality --nets resnet110,densenet121 --alphas 0.1,0.5,1
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
from _machine import cpu_model  # noqa: E402

RESULTS = ROOT / "benchmarks" / "RESULTS_pbr_scale.md"
SHARED = ROOT.parent / "shared" / "data" / "predictions"
if not SHARED.exists():  # a copy of the tree elsewhere (a snapshot of a commit): the project's shared data
    SHARED = Path("/work/shared/data/predictions")
SAMPLE = ROOT / "sample_data" / "cifar10_resnet110.npz"
NETS = {"resnet110": "ResNet-110", "densenet121": "DenseNet-121", "resnet50": "ResNet-50", "wrn26-10": "WRN-26-10"}
#: Seeds of the drawn sets: the rows and outcomes of a fit set of n rows, and of the test rows.
FIT_SEED, TEST_SEED = 1000, 2000
#: The reference objective's draws (the full-batch fit's own, random_state 0) and the fresh ones.
REF_S, FRESH_SEED = 32, 99
#: Issue 15's bar, relative objective difference, and the test-ECE margin.
OBJECTIVE_BAR, ECE_BAR = 1e-4, 0.002


# ---------------------------------------------------------------------- data
def truth(net: str, cache: Path) -> tuple:
    """The network's 15,000 real logits and the truth's probabilities for them (cached)."""
    import numpy as np

    path = cache / f"truth_c10_{net}.npz"
    if path.exists():
        d = np.load(path)
        return d["z"], d["p"]
    from pbr_core.recalibrators.gp import GPCalibration

    d = np.load(SHARED / f"aigen_c10_{net}.npz")
    z = np.concatenate([d["logits"], d["logits_val"]]).astype(np.float64)
    y = np.concatenate([d["labels"], d["labels_val"]]).astype(np.int64)
    p = GPCalibration(mean_approx=True, device="cpu").fit(z, y).predict_proba(z)
    cache.mkdir(parents=True, exist_ok=True)
    np.savez(path, z=z, p=p)
    return z, p


def drawn_set(net: str, n: int, seed: int, cache: Path) -> tuple:
    """n rows of the network's logits drawn with replacement, outcomes drawn from the truth."""
    import numpy as np

    z, p = truth(net, cache)
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(z), n)
    cdf = p[idx].cumsum(1)
    y = (cdf < rng.random(n)[:, None] * cdf[:, -1:]).sum(1)
    return z[idx], y.astype(np.int64)


# ---------------------------------------------------------------------- worker (a fresh process per fit)
def rss_mb() -> float:
    """The resident memory of this process now (Linux), in MB."""
    try:
        return int(Path("/proc/self/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
    except (OSError, ValueError, IndexError):
        return float("nan")


def worker(task: dict) -> dict:
    import resource

    import numpy as np
    import torch

    torch.set_num_threads(1)
    import warnings

    warnings.simplefilter("ignore")
    import pbr_core
    from pbr_core.gp.objectives import ObjectiveSpec, draw_mc_noise
    from pbr_core.gp.problem import FitData
    from pbr_core.recalibrators.gp import PBR

    cache = Path(task["cache"])
    z, y = drawn_set(task["net"], task["n"], FIT_SEED, cache)
    z_te, y_te = drawn_set(task["net"], task["test_rows"], TEST_SEED, cache)
    rec = PBR(alpha=task["alpha"], device="cpu", random_state=task.get("random_state", 0),
              staged=task.get("staged", "auto"))
    before = rss_mb()
    c0, t0 = time.process_time(), time.perf_counter()
    rec.fit(z, y)
    cpu, wall = time.process_time() - c0, time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    rep = rec.fit_report_
    out = {"cpu": cpu, "wall": wall, "peak_mb": peak, "before_mb": before, "iterations": rep["iterations"],
           "evaluations": rep["evaluations"], "objective": rep["objective"], "kl": rep["kl"],
           "stages": rep.get("stages"), "n_mc": rep.get("n_mc"), "corollary1": rec.bounds_["corollary1"],
           "ended_at_prior": rep["ended_at_prior"], "train_check_rows": rep["train_check"].get("rows"),
           "ece_before": float(pbr_core.ece(pbr_core.predictions.softmax(z_te), y_te)),
           "ece_after": float(pbr_core.ece(rec.predict_proba(z_te), y_te))}
    if task.get("evaluate"):
        spec = ObjectiveSpec.pbr(task["alpha"])
        for key, seed in (("ref", 0), ("fresh", FRESH_SEED)):
            data = FitData(z=torch.as_tensor(z), labels=torch.as_tensor(y), spec=spec,
                           eps=draw_mc_noise(len(z), REF_S, z.shape[1], seed, dtype=torch.float32, antithetic=True))
            with torch.no_grad():
                out[key] = float(data.terms(rec.model_, exact=True).total)
            del data
    return out


def run_worker(task: dict) -> dict:
    """One fit in a fresh worker process; its result is kept under the cache folder (keyed by the task
    and the checkout's commit, when there is a COMMIT file or a git checkout), so that a second run
    of a part measures only what is missing."""
    import hashlib

    commit = (ROOT / "COMMIT").read_text().strip() if (ROOT / "COMMIT").exists() else _git_commit()
    key = hashlib.sha1(json.dumps({**task, "commit": commit}, sort_keys=True).encode()).hexdigest()[:16]
    path = Path(task["cache"]) / f"result_{key}.json"
    if path.exists():
        return json.loads(path.read_text())
    out = subprocess.run([sys.executable, __file__, "--worker", json.dumps(task)], capture_output=True, text=True,
                         cwd=ROOT)
    if out.returncode:
        raise RuntimeError(f"worker failed ({task}):\n{out.stderr[-3000:]}")
    result = json.loads(out.stdout.strip().splitlines()[-1])
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result))
    return result


def _git_commit() -> str:
    out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT)
    return out.stdout.strip() or "unknown"


# ---------------------------------------------------------------------- first fit
FIRST_FIT = r"""
import time, json
c0, t0 = time.process_time(), time.perf_counter()
from pbr_core.recalibrators import PBR
c1, t1 = time.process_time(), time.perf_counter()
import numpy as np
d = np.load({sample!r})
z, y = d["logits"][:1000].astype(float), d["labels"][:1000]
c2, t2 = time.process_time(), time.perf_counter()
PBR(alpha=0.5, device="cpu").fit(z, y)
c3, t3 = time.process_time(), time.perf_counter()
PBR(alpha=0.5, device="cpu").fit(z, y)
c4, t4 = time.process_time(), time.perf_counter()
print(json.dumps({{"import_cpu": c1 - c0, "import_wall": t1 - t0, "first_cpu": c3 - c2, "first_wall": t3 - t2,
                  "second_cpu": c4 - c3, "second_wall": t4 - t3, "total_cpu": c3 - c0, "total_wall": t3 - t0}}))
"""

IMPORTS = {
    "torch": "import torch",
    "torch + gpytorch": "import torch, gpytorch",
    "pbr_core.recalibrators.PBR (everything a fit imports)": "from pbr_core.recalibrators import PBR",
}


def _environment(python: str) -> str:
    """What the interpreter's environment holds that a first fit's imports read: GPyTorch imports pyro
    when it is installed (0.12 s here; pbr-calib's own requirements do not bring it, netcal does)."""
    code = ("import importlib.util as u, sys; print(sys.prefix, 'with' if u.find_spec('pyro') else 'without')")
    prefix, pyro = subprocess.run([python, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    return f"Run by the interpreter of `{prefix}`, {pyro} pyro installed"


def first_fit(args) -> None:
    python = args.python or sys.executable
    rows = []
    for _ in range(args.repeats):
        out = subprocess.run([python, "-c", FIRST_FIT.format(sample=str(SAMPLE))], capture_output=True,
                             text=True, cwd=ROOT, check=True)
        rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
    imports = {}
    for label, code in IMPORTS.items():
        times = []
        for _ in range(args.repeats):
            out = subprocess.run([python, "-c", "import time; c, t = time.process_time(), time.perf_counter()\n"
                                  f"{code}\nprint(time.process_time() - c, time.perf_counter() - t)"],
                                 capture_output=True, text=True, cwd=ROOT, check=True)
            times.append([float(x) for x in out.stdout.split()])
        imports[label] = times
    med = {k: statistics.median(r[k] for r in rows) for k in rows[0]}
    body = [f"{args.repeats} fresh processes (`python -c`), one after another; median (min-max). PBR, alpha = .5, "
            "K = 10, the first 1000 rows of sample_data/cifar10_resnet110.npz, the library's defaults (one torch "
            "thread by its thread policy). 'import' is `from pbr_core.recalibrators import PBR`; 'first fit' "
            f"includes everything the first fit of a process pays once. {_environment(python)}.", "",
            "| step | CPU s | wall s |", "|---|---|---|"]
    for key, label in (("import", "import"), ("first", "first fit"), ("total", "import + first fit"),
                       ("second", "second fit (a warm process)")):
        def cell(kind: str) -> str:
            vals = [r[f"{key}_{kind}"] for r in rows]
            return f"{med[f'{key}_{kind}']:.2f} ({min(vals):.2f}-{max(vals):.2f})"
        body.append(f"| {label} | {cell('cpu')} | {cell('wall')} |")
    body += ["", "What the imports cost on their own (fresh processes, median CPU s / wall s):", "",
             "| import | CPU s | wall s |", "|---|---|---|"]
    for label, times in imports.items():
        body.append(f"| `{IMPORTS[label]}` | {statistics.median(t[0] for t in times):.2f} | "
                    f"{statistics.median(t[1] for t in times):.2f} |")
    key = "first-fit" + (f"-{args.label}" if args.label else "")
    title = "The first fit of a process" + (f", {args.label.replace('-', ' ')}" if args.label else "")
    write_section(key, f"{title} ({machine()})", body)


# ---------------------------------------------------------------------- table by n
def table(args) -> None:
    sizes = [int(float(s)) for s in args.sizes.split(",")]
    truth(args.nets.split(",")[0], args.cache)  # here, not in a worker whose peak memory is measured
    rows = []
    for n in sizes:
        variants = [("auto", "auto")]
        if n <= args.full_up_to and n >= 20_000:
            variants.append(("full-batch", False))
        for label, staged in variants:
            task = {"net": args.nets.split(",")[0], "n": n, "alpha": 0.5, "staged": staged, "cache": str(args.cache),
                    "test_rows": args.test_rows}
            res = run_worker(task)
            rows.append((n, label, res))
            print(n, label, {k: v for k, v in res.items() if k != "stages"}, flush=True)
    net = args.nets.split(",")[0]
    body = [f"PBR, alpha = .5, K = 10: CIFAR-10 {NETS[net]} logits drawn with replacement, outcomes drawn from "
            "the truth (module docstring); the library's defaults (`staged=\"auto\"`: in stages from 20,000 rows), "
            f"one torch thread, each fit in a fresh process. Test ECE on {args.test_rows:,} other drawn rows "
            "(B = floor(n^(1/3))). 'peak MB': the process's peak resident memory (imports and data included); "
            "'fit MB': that peak minus the memory before the fit. 'S': draws per entry of each stage "
            "(rows: S).", "",
            "| n | fit | stages (rows: S) | iterations | CPU s | wall s | peak MB | fit MB | objective | KL | "
            "Corollary 1 | test ECE before | after |", "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for n, label, r in rows:
        stages = (", ".join(f"{s['rows']:,}: {s['n_mc']}" for s in r["stages"]) if r["stages"]
                  else f"{n:,}: {r['n_mc']}")
        its = (" + ".join(str(s["iterations"]) for s in r["stages"]) if r["stages"] else str(r["iterations"]))
        body.append(f"| {n:,} | {label}{' (staged)' if r['stages'] and label == 'auto' else ''} | {stages} | {its} | "
                    f"{r['cpu']:.1f} | {r['wall']:.1f} | {r['peak_mb']:.0f} | {r['peak_mb'] - r['before_mb']:.0f} | "
                    f"{r['objective']:.6f} | {r['kl']:.2f} | {r['corollary1']:.4f} | {r['ece_before']:.4f} | "
                    f"{r['ece_after']:.4f} |")
    write_section("table", f"PBR by n_re ({machine()})", body)


# ---------------------------------------------------------------------- quality at n = 10^5
def quality(args) -> None:
    n = args.quality_n
    body = [f"n = {n:,}, K = 10 (rows and outcomes drawn as in the module docstring), PBR. 'full 0': the full-batch "
            "fit (`staged=False`, S = 32 on every row) with random_state 0, the reference; 'full 1': the same with "
            "random_state 1 (other draws and inducing points: the noise floor); 'staged': the library's default "
            f"fit (random_state 0). Objectives on the reference's own draws (S = {REF_S}, seed 0) and on {REF_S} fresh "
            f"antithetic draws (seed {FRESH_SEED}); differences relative to the reference. 'inside': the staged "
            f"fit's difference is at most the larger of {OBJECTIVE_BAR:g} and the floor's (on both draws), and its "
            f"test ECE at most +{ECE_BAR} from the reference's.", "",
            "| data | alpha | full 0: objective | full 0: CPU s | full 1: rel. diff (own / fresh draws) | "
            "full 1: test ECE diff | staged: rel. diff (own / fresh) | staged: test ECE diff | staged: CPU s | "
            "inside |", "|---|---|---|---|---|---|---|---|---|---|"]
    inside = 0
    cells = 0
    for net in args.nets.split(","):
        truth(net, args.cache)
        for alpha in [float(a) for a in args.alphas.split(",")]:
            base = {"net": net, "n": n, "alpha": alpha, "cache": str(args.cache), "test_rows": args.test_rows,
                    "evaluate": True}
            ref = run_worker({**base, "staged": False, "random_state": 0})
            floor = run_worker({**base, "staged": False, "random_state": 1})
            new = run_worker({**base, "staged": "auto", "random_state": 0})

            def rel(r: dict, key: str) -> float:
                return (r[key] - ref[key]) / abs(ref[key])

            limit = max(OBJECTIVE_BAR, abs(rel(floor, "ref")), abs(rel(floor, "fresh")))
            ok = (max(rel(new, "ref"), rel(new, "fresh")) <= limit
                  and new["ece_after"] - ref["ece_after"] <= max(ECE_BAR, floor["ece_after"] - ref["ece_after"]))
            inside += ok
            cells += 1
            body.append(f"| CIFAR-10 {NETS[net]} | {alpha:g} | {ref['ref']:.7f} | {ref['cpu']:.1f} | "
                        f"{rel(floor, 'ref'):+.2e} / {rel(floor, 'fresh'):+.2e} | "
                        f"{floor['ece_after'] - ref['ece_after']:+.4f} | {rel(new, 'ref'):+.2e} / {rel(new, 'fresh'):+.2e} | "
                        f"{new['ece_after'] - ref['ece_after']:+.4f} | {new['cpu']:.1f} | {'yes' if ok else 'NO'} |")
            print(body[-1], flush=True)
            write_section(f"quality-{n}", f"The staged fit against the full-batch fit at n = {n:,} ({machine()})",
                          body + ["", f"(running: {cells} cells so far)"])
    body += ["", f"Inside: {inside} of {cells} cells. (A lower objective is better: negative differences are "
             "the staged fit ending below the reference.)"]
    write_section(f"quality-{n}", f"The staged fit against the full-batch fit at n = {n:,} ({machine()})", body)


# ---------------------------------------------------------------------- output
def machine() -> str:
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    import torch

    commit = (ROOT / "COMMIT").read_text().strip() if (ROOT / "COMMIT").exists() else _git_commit()
    return (f"{cpu_model()}, {os.cpu_count()} cores, load average {load:.1f} at the end, torch {torch.__version__}, "
            f"commit {commit}; {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")


def write_section(key: str, title: str, body: list[str]) -> None:
    begin, end = f"<!-- begin {key} -->", f"<!-- end {key} -->"
    text = RESULTS.read_text() if RESULTS.exists() else "# PBR at every size (issue 40)\n"
    block = "\n".join([begin, f"## {title}", "", *body, end])
    pattern = re.compile(re.escape(begin) + ".*?" + re.escape(end), re.S)
    text = pattern.sub(lambda _: block, text) if pattern.search(text) else text.rstrip() + "\n\n" + block + "\n"
    RESULTS.write_text(text)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--parts", default="first-fit,table,quality")
    p.add_argument("--sizes", default="1000,10000,100000,200000,1000000")
    p.add_argument("--full-up-to", type=int, default=100_000)
    p.add_argument("--nets", default="resnet110")
    p.add_argument("--alphas", default="0.5")
    p.add_argument("--quality-n", type=int, default=100_000)
    p.add_argument("--test-rows", type=int, default=20_000)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--cache", type=Path, default=Path("/tmp/pbr_scale_cache"))
    p.add_argument("--python", help="the interpreter of the first-fit processes (default: this one), e.g. a "
                   "virtual environment with only pbr-calib's own requirements")
    p.add_argument("--label", default="", help="the first-fit section's name suffix, e.g. user-install")
    p.add_argument("--worker")
    args = p.parse_args(argv)
    if args.worker:
        sys.path.insert(0, str(ROOT))
        print(json.dumps(worker(json.loads(args.worker))))
        return
    parts = args.parts.split(",")
    if "first-fit" in parts:
        first_fit(args)
    if "table" in parts:
        table(args)
    if "quality" in parts:
        quality(args)


if __name__ == "__main__":
    main()
