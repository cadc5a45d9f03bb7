"""Every registered recalibrator ranked on held-out CIFAR logits, beside the authors' own code.

For each network of the shared data with validation and test splits
(``../shared/data/predictions/aigen_c{10,100}_<net>.npz``: 5000 validation rows to fit, 10000 test
rows), every registered method with its defaults is fitted on the validation rows and scored on the
test rows: NLL, Brier score, top-label ECE with B = floor(n^(1/3)) (paper Eq. 2; 21 for 10000 rows)
and with 15 bins. Beside them, on the same splits, the references: probmetrics 1.3's temperature
scaling ("ts-mix"), SVS and SMS (``get_calibrator`` defaults, the paper's), and dirichletcal's
``FullDirichletCalibrator`` with our Dirichlet defaults (lambda = mu = 1, normalised, no reference row;
K = 10 only unless ``--dirichletcal-all``: its fit at K = 100 takes many minutes).

Paired comparisons (the same 10000 test rows): each method's per-row NLL minus the uncalibrated
model's, and each of our implementations minus its reference, as mean +- 2 standard errors.

The GP family (GP calibration, PBR, PBR with alpha by cross-validation) is added by ``--gp``
(slow on a CPU: hours for all eight networks); ``--gp-folds`` sets PBR-CV's inner folds.

Usage::

    nice python benchmarks/bench_recalibrators_ranked.py                      # all eight networks
    nice python benchmarks/bench_recalibrators_ranked.py --networks c10_resnet110 --gp

Writes benchmarks/RESULTS_ranked.md after every network (so a stopped run keeps what it did).
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
from scipy.special import softmax

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import pbr_core  # noqa: E402
from pbr_core import Predictions  # noqa: E402
from pbr_core.metrics import brier_terms, nll_terms  # noqa: E402
from pbr_core.recalibrators import REGISTRY, available_methods, get_recalibrator  # noqa: E402
from pbr_core.recalibrators.base import LAZY_MODULES  # noqa: E402

DATA = ROOT.parent / "shared" / "data" / "predictions"
RESULTS = ROOT / "benchmarks" / "RESULTS_ranked.md"
NETWORKS = [f"c{k}_{net}" for k in (10, 100) for net in ("densenet121", "resnet110", "resnet50", "wrn26-10")]
GP_METHODS = ("gp_app", "pbr_app", "pbr_cv")


def classical_methods() -> list[str]:
    lazy = tuple(LAZY_MODULES)
    return [m for m in available_methods() if not REGISTRY[m].__module__.startswith(lazy)]


def scores(P: np.ndarray, y: np.ndarray) -> dict:
    conf, correct = P.max(axis=1), (P.argmax(axis=1) == y).astype(float)
    return {"nll_rows": nll_terms(P, y), "nll": pbr_core.nll(P, y), "brier": pbr_core.brier_score(P, y),
            "ece": pbr_core.ece(conf, correct), "ece15": pbr_core.ece(conf, correct, n_bins=15),
            "accuracy": float(correct.mean())}


def ours(method: str, fit: Predictions, test: Predictions, gp_folds: int) -> tuple[np.ndarray, float, str]:
    params = {"cv": gp_folds} if method == "pbr_cv" else {}
    rec = get_recalibrator(method, **params)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        t0 = time.perf_counter()
        rec.fit(fit)
        P = rec.predict_proba(test)
    note = "; ".join(sorted({str(w.message)[:70] for w in caught}))[:160]
    return P, time.perf_counter() - t0, note


def references(p_fit: np.ndarray, y_fit: np.ndarray, p_test: np.ndarray, K: int, dirichletcal_all: bool) -> dict:
    out: dict[str, tuple[np.ndarray, float]] = {}
    try:
        from probmetrics.calibrators import get_calibrator
    except ImportError:  # pragma: no cover - the test extra
        get_calibrator = None
    if get_calibrator is not None:
        for name, key in (("ts-mix", "probmetrics ts-mix"), ("svs", "probmetrics svs"), ("sms", "probmetrics sms")):
            t0 = time.perf_counter()
            kw = {f"{name}_print_init_info": False} if name in ("svs", "sms") else {}
            cal = get_calibrator(name, **kw).fit(p_fit, y_fit)
            out[key] = (np.asarray(cal.predict_proba(p_test), dtype=np.float64), time.perf_counter() - t0)
    if K <= 10 or dirichletcal_all:
        try:
            from dirichletcal.calib.fulldirichlet import FullDirichletCalibrator
        except ImportError:  # pragma: no cover
            FullDirichletCalibrator = None
        if FullDirichletCalibrator is not None:
            t0 = time.perf_counter()
            from pbr_core.recalibrators.dirichlet import default_penalty  # our default's lambda = mu for K classes

            lam = default_penalty(K)
            cal = FullDirichletCalibrator(reg_lambda=lam, reg_mu=lam, reg_norm=True, ref_row=False).fit(p_fit, y_fit)
            out["dirichletcal"] = (np.asarray(cal.predict_proba(p_test), dtype=np.float64), time.perf_counter() - t0)
    return out


PAIRS = {"temperature": "probmetrics ts-mix", "svs": "probmetrics svs", "sms": "probmetrics sms",
         "dirichlet": "dirichletcal"}


def paired(a: np.ndarray, b: np.ndarray) -> str:
    d = a - b
    mean, se2 = d.mean(), 2 * d.std(ddof=1) / np.sqrt(d.size)
    if abs(mean) < 5e-5 and se2 < 5e-5:  # an implementation against its reference: show the digits
        return f"{mean:+.1e} ± {se2:.1e}"
    return f"{mean:+.4f} ± {se2:.4f}"


def run_network(name: str, methods: list[str], gp_folds: int, dirichletcal_all: bool) -> list[dict]:
    d = np.load(DATA / f"aigen_{name}.npz", allow_pickle=False)
    fit = Predictions.from_arrays(d["logits_val"].astype(np.float64), d["labels_val"], input_type="logits")
    test = Predictions.from_arrays(d["logits"].astype(np.float64), d["labels"], input_type="logits")
    rows = []
    base = scores(test.probs, test.labels)
    for m in methods:
        P, secs, note = ours(m, fit, test, gp_folds)
        rows.append({"network": name, "method": m, "secs": secs, "note": note, **scores(P, test.labels)})
        print(f"  {name} {m:<18} NLL {rows[-1]['nll']:.4f} ({secs:.1f} s)", file=sys.stderr, flush=True)
    refs = references(softmax(fit.logits, axis=1), fit.labels, softmax(test.logits, axis=1), fit.n_classes,
                      dirichletcal_all)
    for key, (P, secs) in refs.items():
        rows.append({"network": name, "method": key, "secs": secs, "note": "reference", **scores(P, test.labels)})
        print(f"  {name} {key:<18} NLL {rows[-1]['nll']:.4f} ({secs:.1f} s)", file=sys.stderr, flush=True)
    by = {r["method"]: r for r in rows}
    for r in rows:
        r["vs_uncal"] = paired(r["nll_rows"], base["nll_rows"])
        d = r["nll_rows"] - base["nll_rows"]
        r["excess"], r["excess_se"] = float(d.mean()), float(d.std(ddof=1) / np.sqrt(d.size))
        ref = PAIRS.get(r["method"])
        r["vs_ref"] = paired(r["nll_rows"], by[ref]["nll_rows"]) if ref in by else ""
    return rows


def worse_overall(all_rows: list[dict]) -> list[str]:
    """The table's claim "no registered method is worse than uncalibrated", tested once over every
    (network, method) pair: one-sided paired z-tests (10000 test rows each), Holm-corrected at 5 %."""
    from scipy.stats import norm

    from pbr_core.groups import holm

    rows = [r for r in all_rows if r["note"] != "reference" and r["method"] != "uncalibrated"]
    if not rows:
        return []
    p = np.array([norm.sf(r["excess"] / r["excess_se"]) if r["excess_se"] > 0 else 1.0 for r in rows])
    reject = holm(p) <= 0.05
    beyond = [f"{r['network']} {r['method']} ({r['excess']:+.4f}, p = {q:.2g})"
              for r, q in zip(rows, p) if r["excess"] > 2 * r["excess_se"]]
    held = [f"{r['network']} {r['method']}" for r, k in zip(rows, reject) if k]
    return ["## Worse than uncalibrated, over the whole table", "",
            f"{len(rows)} comparisons of a registered method with the uncalibrated model (one-sided paired z-test "
            f"of the per-row NLL difference). More than 2 SE above 0 (one-sided p < .023 each, uncorrected): "
            f"{'; '.join(beyond) if beyond else 'none'}. Worse after Holm's correction for the {len(rows)} "
            f"comparisons at 5 %: {', '.join(held) if held else 'none'}.", ""]


def write(all_rows: list[dict], args: argparse.Namespace, started: float) -> str:
    lines = [
        "# Recalibrators ranked on held-out CIFAR logits, beside the authors' code",
        "",
        "Fit on the 5000 validation rows, tested on the 10000 test rows of each network "
        "(`../shared/data/predictions/aigen_*.npz`, AIgen/df-posthoc-calibration). NLL and Brier: mean over "
        "test rows; ECE: top-label, uniform bins, B = floor(n^(1/3)) = 21 and 15. 'vs uncal': per-row NLL "
        "difference from the uncalibrated model, mean ± 2 SE (negative: better). 'vs ref': our implementation "
        "minus the authors' on the same rows. References: probmetrics 1.3 (`get_calibrator('ts-mix' | 'svs' | "
        "'sms')`), dirichletcal 0.5.3 (`FullDirichletCalibrator(1, 1, reg_norm=True, ref_row=False)`, K = 10).",
        "",
        f"Command: `nice python benchmarks/bench_recalibrators_ranked.py {' '.join(sys.argv[1:])}`. Machine: "
        f"{platform.machine()}, {os.cpu_count()} CPUs shared with other jobs, Python {platform.python_version()}, "
        f"numpy {np.__version__}; {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC, "
        f"{(time.time() - started) / 60:.0f} min so far. Seconds are wall time of fit + predict on a busy machine.",
        "",
    ]
    for name in dict.fromkeys(r["network"] for r in all_rows):
        rows = [r for r in all_rows if r["network"] == name]
        unc = next(r for r in rows if r["method"] == "uncalibrated")
        lines += [f"## {name} (uncalibrated: NLL {unc['nll']:.4f}, accuracy {unc['accuracy']:.4f})", "",
                  "| method | test NLL | Brier | ECE (B=21) | ECE (15) | accuracy | vs uncal (NLL) | vs ref (NLL) | s |",
                  "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
        for r in sorted(rows, key=lambda r: r["nll"]):
            lines.append(f"| {r['method']} | {r['nll']:.4f} | {r['brier']:.4f} | {r['ece']:.4f} | {r['ece15']:.4f} | "
                         f"{r['accuracy']:.4f} | {r['vs_uncal']} | {r['vs_ref']} | {r['secs']:.1f} |")
        worse = [r["method"] for r in rows if r["nll"] > unc["nll"] and r["note"] != "reference"]
        beyond = [r["method"] for r in rows if r["method"] in worse and r["excess"] > 2 * r["excess_se"]]
        lines += ["", f"Worse than uncalibrated in test NLL: {', '.join(worse) if worse else 'none'}; "
                  f"by more than 2 SE: {', '.join(beyond) if beyond else 'none'}.", ""]
    lines += worse_overall(all_rows)
    text = "\n".join(lines) + "\n"
    if not args.no_write:
        args.out.write_text(text)
    return text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--networks", nargs="*", default=NETWORKS, choices=NETWORKS)
    parser.add_argument("--gp", action="store_true", help=f"add the GP family ({', '.join(GP_METHODS)})")
    parser.add_argument("--methods", nargs="*", default=None, help="run only these methods (and 'uncalibrated')")
    parser.add_argument("--gp-folds", type=int, default=3, help="inner folds of PBR with alpha by CV (default 3)")
    parser.add_argument("--dirichletcal-all", action="store_true", help="run dirichletcal at K = 100 too (slow)")
    parser.add_argument("--threads", type=int, default=1, help="BLAS threads (default 1)")
    parser.add_argument("--out", type=Path, default=RESULTS, help="the results file (default RESULTS_ranked.md)")
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args(argv)
    methods = classical_methods() + (list(GP_METHODS) if args.gp else [])
    if args.methods:
        methods = ["uncalibrated"] + [m for m in args.methods if m != "uncalibrated"]
    from threadpoolctl import threadpool_limits

    started, all_rows = time.time(), []
    with threadpool_limits(limits=args.threads, user_api="blas"):
        for name in args.networks:
            all_rows += run_network(name, methods, args.gp_folds, args.dirichletcal_all)
            text = write(all_rows, args, started)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
