"""Benchmark of the GP recalibrators (GP calibration / PBR): fit time, iterations, test ECE.

Prints tables and writes them into benchmarks/RESULTS_gp.md (each run replaces its own section,
keyed by device and part, so CPU and GPU results live side by side).

Parts
-----
* ``grid`` (default): one PBR fit (alpha = 0.5, S = J = 100, default optimiser) for n_re in
  {100, 1000, 5000} x K in {2, 10, 100} on real predictions: CIFAR-100 DenseNet-121 logits (K = 100),
  CIFAR-10 ResNet-110 logits (K = 10), KITTI XGBoost p(y=1) (K = 2, probabilities -> log-probs).
  Columns: iterations, objective evaluations, wall and CPU seconds, final objective, KL, test ECE
  before / after (B = floor(n_te^(1/3))).
* ``alpha``: the alpha grid x 5 folds of :func:`pbr_core.alpha_selection.select_alpha` fitted
  sequentially (default L-BFGS; Adam) and as one batch (Adam).
* ``protocol``: the paper's protocol on one CIFAR-100 model: 10 random splits (n_re = 1000,
  n_te = 9000) x 8 alpha values, all 80 fits as one batched GPyTorch model (Adam); plus one split's
  8 fits one by one (Adam, to compare time and check batched == alone) and the per-split test ECE.
* ``precision``: PBR at alpha 0, .5, 1 on CIFAR-100 (n_re = 1000) with float32 and with float64
  Monte Carlo draws on the chosen device, judged on the float64 objective (the check behind
  ``pbr_core.gp.objectives.MC_DTYPE``; on a GPU it is the CUDA version of the fast-PBR quality bar).
* ``consistency`` (needs CUDA): the same fit on the CPU and on the GPU, max |difference| of the
  predictions and of the objective.
* ``stability``: the stability requirement of the paper's protocol, fit by fit, on every CIFAR-100
  model in ../shared/data: 10 splits (n_re = 1000, the rest as test rows) x 8 alpha values, each a
  PBR fit alone with the default optimiser (what ``PBR(alpha).fit`` does on a CPU). Every fit is
  appended to ``benchmarks/stability/<device>_<model>.csv`` as it ends, so an interrupted run resumes where it
  stopped (``--stability-models`` picks and orders the networks); the section summarises that file:
  fits that are not sound (NaN, failed training-set check, test ECE above uncalibrated + 0.01).

Examples
--------
CPU (this machine)::

    python benchmarks/bench_gp.py --threads 1                      # grid, writes RESULTS_gp.md
    python benchmarks/bench_gp.py --parts alpha --threads 1
    python benchmarks/bench_gp.py --parts stability --threads 1    # hours; resumable

The whole GPU table in one command (the later GPU session)::

    python benchmarks/bench_gp.py --device cuda --parts grid,protocol,consistency
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import sys
import time
import warnings
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

import pbr_core  # noqa: E402
from pbr_core.alpha_selection import select_alpha  # noqa: E402
from pbr_core.paper import PAPER_ALPHAS  # noqa: E402
from pbr_core.gp.batch import fit_batch  # noqa: E402
from pbr_core.gp.device import resolve_device  # noqa: E402
from pbr_core.gp.objectives import ObjectiveSpec  # noqa: E402
from pbr_core.gp.predict import predict_proba  # noqa: E402
from pbr_core.gp.problem import TrainCheck, TrainSettings  # noqa: E402
from pbr_core.predictions import Predictions  # noqa: E402
from pbr_core.recalibrators.gp import PBR  # noqa: E402

SHARED = ROOT.parent / "shared" / "data" / "predictions"
CIFAR100_MODELS = ("densenet121", "resnet110", "resnet50", "wrn26-10")
RESULTS = ROOT / "benchmarks" / "RESULTS_gp.md"


# ---------------------------------------------------------------------- data
def _npz(shared_name: str, sample_name: str) -> tuple[np.ndarray, np.ndarray, str]:
    path = SHARED / shared_name if (SHARED / shared_name).exists() else ROOT / "sample_data" / sample_name
    d = np.load(path)
    return d["logits"].astype(np.float64), d["labels"].astype(np.int64), path.name


def load_dataset(k: int) -> tuple[Predictions, str]:
    """Real predictions with K classes (see the module docstring)."""
    if k == 100:
        z, y, name = _npz("aigen_c100_densenet121.npz", "cifar100_densenet121.npz")
        return Predictions.from_arrays(z, y, input_type="logits"), f"CIFAR-100 DenseNet-121 logits ({name})"
    if k == 10:
        z, y, name = _npz("aigen_c10_resnet110.npz", "cifar10_resnet110.npz")
        return Predictions.from_arrays(z, y, input_type="logits"), f"CIFAR-10 ResNet-110 logits ({name})"
    if k == 2:
        import pandas as pd

        df = pd.read_csv(ROOT / "sample_data" / "kitti_xgboost.csv")
        return (Predictions.from_arrays(df["p_positive"].to_numpy(), df["label"].to_numpy()),
                "KITTI XGBoost p(y=1) (sample_data/kitti_xgboost.csv)")
    raise ValueError(f"No benchmark data with K = {k}.")


def split(preds: Predictions, n_re: int, seed: int, n_te: int | None = None) -> tuple[Predictions, Predictions]:
    idx = np.random.default_rng(seed).permutation(preds.n)
    te = idx[n_re:] if n_te is None else idx[n_re:n_re + n_te]
    return preds.subset(idx[:n_re]), preds.subset(te)


def test_ece(probs: np.ndarray, preds: Predictions) -> float:
    if preds.kind == "binary":
        return pbr_core.ece(probs[:, 1], preds.labels)
    return pbr_core.ece(probs, preds.labels)


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


# ---------------------------------------------------------------------- parts
def part_grid(device: torch.device, ns, ks, objective: str, time_limit: float) -> list[str]:
    rows = ["| K | n_re | data | iterations | evaluations | wall s | CPU s | objective | KL | test ECE before | after | stop |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    skipped = False
    for k in ks:
        preds, name = load_dataset(k)
        for n in ns:
            if skipped:
                rows.append(f"| {k} | {n} | {name} | skipped (time limit) | | | | | | | | |")
                continue
            fit, test = split(preds, n, seed=0, n_te=min(5000, preds.n - n))
            rec = PBR(alpha=0.5, objective=objective, device=str(device))
            _sync(device)
            t0, c0 = time.perf_counter(), time.process_time()
            rec.fit(fit)
            _sync(device)
            wall, cpu = time.perf_counter() - t0, time.process_time() - c0
            rep = rec.fit_report_
            before = test_ece(test.probs, test)
            after = test_ece(rec.predict_proba(test), test)
            row = (f"| {k} | {n} | {name} | {rep['iterations']} | {rep['evaluations']} | {wall:.1f} | {cpu:.1f} | "
                   f"{rep['objective']:.5f} | {rep['kl']:.2f} | {before:.4f} | {after:.4f} | {rep['stop_reason']} |")
            print(row, flush=True)
            rows.append(row)
            if wall > time_limit:
                skipped = k == max(ks) and n != max(ns)
    return rows


def part_alpha(device: torch.device, k: int, n: int, n_splits: int) -> list[str]:
    preds, name = load_dataset(k)
    fit, _ = split(preds, n, seed=0)
    rows = [f"Alpha grid {list(PAPER_ALPHAS)} x {n_splits} folds on {n} rows of {name} ({len(PAPER_ALPHAS) * n_splits} fits).",
            "", "| mode | wall s | CPU s | summed iterations | best alpha |", "|---|---|---|---|---|"]
    results = {}
    for label, kw in (("sequential, default (Adam warm-up + L-BFGS)", {"batched": False}),
                      ("sequential, Adam", {"batched": False, "optimizer": "adam"}),
                      ("batched, Adam", {"batched": True, "optimizer": "adam"})):
        _sync(device)
        t0, c0 = time.perf_counter(), time.process_time()
        sel = select_alpha(fit, n_splits=n_splits, device=str(device), **kw)
        _sync(device)
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        results[label] = sel
        row = f"| {label} | {wall:.1f} | {cpu:.1f} | {int(sel.scores.iterations.sum())} | {sel.best_alpha:g} |"
        print(row, flush=True)
        rows.append(row)
    a, b = results["sequential, Adam"].scores, results["batched, Adam"].scores
    same = np.isclose(a.kl.values, b.kl.values, rtol=1e-6)
    rows += ["", f"Batched vs sequential Adam: {int(same.sum())}/{len(same)} fits with equal KL (rtol 1e-6); "
             f"max |difference of held-out ECE| {np.abs(a.score.values - b.score.values).max():.2e}."]
    return rows


def part_protocol(device: torch.device, n_splits: int, n_re: int, chunk: int) -> list[str]:
    preds, name = load_dataset(100)
    z = np.asarray(preds.scores)
    splits = [split(preds, n_re, seed) for seed in range(n_splits)]
    pairs = [(s, a) for s in range(n_splits) for a in PAPER_ALPHAS]
    settings = TrainSettings(optimizer="adam", max_iter=1000)
    check = TrainCheck("brier", False, 100, 0)
    rows = [f"Paper protocol on {name}: {n_splits} splits (n_re = {n_re}) x {len(PAPER_ALPHAS)} alpha values "
            f"= {len(pairs)} PBR fits (S = J = 100, Adam), device {device}.", ""]
    # All fits as batches of `chunk` GPs.
    _sync(device)
    t0 = time.perf_counter()
    reports, models = [], []
    for start in range(0, len(pairs), chunk):
        part = pairs[start:start + chunk]
        model, reps = fit_batch([np.asarray(splits[s][0].scores) for s, _ in part],
                                [splits[s][0].labels for s, _ in part], [a for _, a in part], ObjectiveSpec.pbr(),
                                "logits", device, settings=settings, check=check)
        reports += reps
        models.append((start, model))
    _sync(device)
    t_fit = time.perf_counter() - t0
    ece_rows, n_bad = [], 0
    t1 = time.perf_counter()
    for start, model in models:
        for i in range(min(chunk, len(pairs) - start)):
            s, alpha = pairs[start + i]
            test = splits[s][1]
            probs = predict_proba(model.member(i), np.asarray(test.scores), False, 100, 0, device=device)
            before, after = test_ece(test.probs, test), test_ece(probs, test)
            n_bad += int(not np.isfinite(after) or after > before + 0.01)
            ece_rows.append((s, alpha, before, after, reports[start + i].kl, reports[start + i].iterations))
    t_pred = time.perf_counter() - t1
    rows += [f"Batched ({chunk} GPs per batch): fit {t_fit:.1f} s, test predictions {t_pred:.1f} s, "
             f"total {t_fit + t_pred:.1f} s. Fits with test ECE worse than uncalibrated + 0.01 or NaN: {n_bad}/{len(pairs)}.",
             ""]
    # One split's 8 fits alone (the same Adam settings): time and equality with the batch.
    t2 = time.perf_counter()
    diffs = []
    for j, alpha in enumerate(PAPER_ALPHAS):
        rec = PBR(alpha=alpha, optimizer="adam", device=str(device)).fit(splits[0][0])
        diffs.append(abs(rec.kl_ - reports[j].kl) / max(1.0, abs(rec.kl_)))
    _sync(device)
    t_seq = time.perf_counter() - t2
    rows += [f"Sequential, one split's {len(PAPER_ALPHAS)} fits alone: {t_seq:.1f} s "
             f"(x {n_splits} splits ~ {t_seq * n_splits:.0f} s for the protocol). "
             f"Relative KL difference batched vs alone: max {max(diffs):.1e} "
             "(alpha <= 0.01 fits are chaotic over long Adam runs, see the notes).", "",
             "| split | alpha | test ECE before | after | KL | iterations |", "|---|---|---|---|---|---|"]
    rows += [f"| {s} | {a:g} | {b:.4f} | {c:.4f} | {kl:.2f} | {it} |" for s, a, b, c, kl, it in ece_rows]
    summary = {a: np.mean([r[3] for r in ece_rows if r[1] == a]) for a in PAPER_ALPHAS}
    rows += ["", "Mean test ECE per alpha: " + ", ".join(f"{a:g}: {v:.4f}" for a, v in summary.items()) +
             f" (uncalibrated {np.mean([r[2] for r in ece_rows]):.4f})."]
    for r in rows[:4]:
        print(r, flush=True)
    return rows


def part_klgap(device: torch.device, n_folds: int, n_re: int) -> list[str]:
    """The library's KL-gap study (``kl_vs_ece_gap``, the paper's protocol) as a user runs it: with
    Adam on this device (``batched="auto"``: one batch on CUDA, one fit after another on a CPU), and
    one fold with the default L-BFGS one fit after another, for the whole study's time by scaling."""
    from pbr_core.experiments import kl_vs_ece_gap, split_indices
    from pbr_core.experiments.kl_gap import _use_batch

    preds, name = load_dataset(100)
    alphas = list(PAPER_ALPHAS)
    dev = str(device)
    batched = _use_batch("auto", "pbr", alphas, {"optimizer": "adam", "device": dev}, False, 1)
    _sync(device)
    t0 = time.perf_counter()
    adam = kl_vs_ece_gap(preds, alphas=alphas, n_re=n_re, n_folds=n_folds, optimizer="adam", device=dev,
                         on_error="warn")
    _sync(device)
    t_adam = time.perf_counter() - t0
    t1 = time.perf_counter()
    lbfgs = kl_vs_ece_gap(preds, alphas=alphas, n_re=n_re, n_folds=1, device=dev, on_error="warn")
    _sync(device)
    t_lbfgs = time.perf_counter() - t1
    rows = [f"`kl_vs_ece_gap` on {name}: {n_folds} folds x {len(alphas)} alpha (n_re = n_te = {n_re}), "
            f"device {device}.", "",
            "| run | optimiser | batched | fits | wall s | failed fits | test ECE above the uncalibrated's + 0.01 |",
            "|---|---|---|---|---|---|---|"]
    for label, res, opt, bat, secs in (("the study", adam, "Adam", batched, t_adam),
                                       ("fold 0", lbfgs, "L-BFGS (default)", False, t_lbfgs)):
        table = res.table
        unc = {}
        for f in set(table.fold):  # the uncalibrated test ECE with the study's B = floor(n_re^(1/3))
            _, te = split_indices(preds.n, n_re, fold=int(f), seed=0, n_te=n_re)
            test = preds.subset(te)
            unc[f] = pbr_core.ece(np.asarray(test.probs), test.labels, n_bins=int(table.n_bins.iloc[0]))
        worse = int(sum(not np.isfinite(e) or e > unc[f] + 0.01 for f, e in zip(table.fold, table.ece_te)))
        rows.append(f"| {label} | {opt} | {'yes' if bat else 'no'} | {len(table)} | {secs:.1f} | "
                    f"{int(table.error.notna().sum())} | {worse} |")
    rows += ["", f"The default study (L-BFGS, one fit after another) for {n_folds} folds: ~{t_lbfgs * n_folds:.0f} s "
             f"(fold 0 x {n_folds}). Pearson's r of KL and gap (Adam study): {adam.pearson_r:.2f}; mean test ECE per "
             "alpha: " + ", ".join(f"{a:g}: {adam.table[adam.table.alpha == a].ece_te.mean():.4f}" for a in alphas) + "."]
    for r in rows:
        print(r, flush=True)
    return rows


def part_precision(device: torch.device) -> list[str]:
    """float32 vs float64 Monte Carlo draws (``pbr_core.gp.objectives.MC_DTYPE``) for the same fit on
    ``device``: both fits' parameters judged on the float64 objective (S = 100, the same draws)."""
    import pbr_core.gp.objectives as objectives
    from pbr_core.gp.training import FitData

    preds, name = load_dataset(100)
    fit, test = split(preds, 1000, seed=0)
    rows = [f"{name}, n_re = 1000, test = the other 9000 rows, device {device}. 'float64 objective' = the "
            "objective with float64 draws (S = 100, seed 0) at each fit's parameters.", "",
            "| fit | draws | float64 objective | relative to float64 fit | test ECE | iterations | fit s |",
            "|---|---|---|---|---|---|---|"]
    default = objectives.MC_DTYPE
    for alpha in (0.0, 0.5, 1.0):
        out = {}
        for dt in (torch.float64, torch.float32):
            objectives.MC_DTYPE = dt
            try:
                _sync(device)
                t0 = time.perf_counter()
                rec = PBR(alpha=alpha, device=str(device)).fit(fit)
                _sync(device)
                took = time.perf_counter() - t0
            finally:
                objectives.MC_DTYPE = default
            model = rec.model_
            eps = objectives.draw_mc_noise(fit.n, 100, fit.n_classes, 0, device=device, dtype=torch.float64)
            data = FitData(z=torch.as_tensor(np.asarray(fit.scores), device=device),
                           labels=torch.as_tensor(fit.labels, device=device), spec=rec._spec(), eps=eps)
            with torch.no_grad():
                value = float(data.terms(model).total)
            out[dt] = (value, test_ece(rec.predict_proba(test), test), rec.fit_report_["iterations"], took)
        ref = out[torch.float64][0]
        for dt, (value, ece, it, took) in out.items():
            rows.append(f"| PBR alpha = {alpha:g} | {str(dt).split('.')[-1]} | {value:.7f} | {(value - ref) / abs(ref):+.2e} | "
                        f"{ece:.4f} | {it} | {took:.1f} |")
            print(rows[-1], flush=True)
    return rows


def part_consistency(device: torch.device) -> list[str]:
    if device.type != "cuda":
        return ["Skipped: needs --device cuda."]
    preds, name = load_dataset(100)
    fit, test = split(preds, 300, seed=0, n_te=2000)
    import pbr_core.gp.problem as problem

    rows = ["CIFAR-100 DenseNet-121, n_re = 300, 2000 test rows. Same data, same fixed training draws (drawn on the host); "
            "the CPU fit computes the marginals at every input as CUDA does (INTERPOLATE_MARGINALS = False). "
            "Mean-approximation predictions must "
            "agree to float precision; J-sample predictions use device-side draws on the GPU, so they agree "
            "up to Monte Carlo error.", "",
            "| fit | objective CPU | objective CUDA | KL CPU | KL CUDA | max abs diff softmax(mu) | max abs diff J-sample | fit s CPU | fit s CUDA |",
            "|---|---|---|---|---|---|---|---|---|"]
    z_te = np.asarray(test.scores)
    for label, kw in (("PBR alpha=0.5, default optimiser", {}),
                      ("PBR total alpha=0.5, Adam", {"objective": "pbr_total", "optimizer": "adam"})):
        out = {}
        for dev in ("cpu", str(device)):
            _sync(device)
            t0 = time.perf_counter()
            interpolate, problem.INTERPOLATE_MARGINALS = problem.INTERPOLATE_MARGINALS, False  # same arithmetic
            try:
                rec = PBR(alpha=0.5, device=dev, **kw).fit(fit)
            finally:
                problem.INTERPOLATE_MARGINALS = interpolate
            _sync(device)
            took = time.perf_counter() - t0
            mean_p = predict_proba(rec.model_, z_te, mean_approx=True)
            out[dev] = (rec.fit_report_["objective"], rec.kl_, mean_p, rec.predict_proba(test), took)
        (oc, kc, mc, pc, tc), (og, kg, mg, pg, tg) = out["cpu"], out[str(device)]
        rows.append(f"| {label} | {oc:.8f} | {og:.8f} | {kc:.5f} | {kg:.5f} | {np.abs(mc - mg).max():.2e} | "
                    f"{np.abs(pc - pg).max():.2e} | {tc:.1f} | {tg:.1f} |")
        print(rows[-1], flush=True)
    return rows


STABILITY_COLUMNS = ["model", "split", "alpha", "n_re", "n_te", "ece_before", "ece_after", "nll_before",
                     "nll_after", "kl", "outputscale", "objective", "iterations", "restarts", "converged", "train_check",
                     "wall_s", "cpu_s", "device", "stop", "error"]


def _stability_fit(z, y, seed: int, alpha: float, n_re: int, device: torch.device) -> dict:
    fit, test = split(Predictions.from_arrays(z, y, input_type="logits"), n_re, seed)
    row = {"split": seed, "alpha": alpha, "n_re": fit.n, "n_te": test.n, "device": str(device), "error": "",
           "ece_before": test_ece(test.probs, test), "nll_before": pbr_core.nll(test.probs, test.labels)}
    _sync(device)
    t0, c0 = time.perf_counter(), time.process_time()
    try:
        rec = PBR(alpha=alpha, device=str(device)).fit(fit)
        probs = rec.predict_proba(test)
    except Exception as exc:  # a failure is a result here: recorded, and the run goes on
        row.update(error=f"{type(exc).__name__}: {exc}"[:300], wall_s=time.perf_counter() - t0,
                   cpu_s=time.process_time() - c0)
        return row
    _sync(device)
    rep = rec.fit_report_
    row.update(ece_after=test_ece(probs, test), nll_after=pbr_core.nll(probs, test.labels), kl=rep["kl"],
               outputscale=float(rec.model_.scaled_rbf.outputscale.detach().cpu()), stop=rep["stop_reason"],
               objective=rep["objective"], iterations=rep["iterations"], restarts=rep["restarts"],
               converged=rep["converged"], train_check=rep["train_check"]["passed"],
               wall_s=time.perf_counter() - t0, cpu_s=time.process_time() - c0)
    return row


def stability_sound(row) -> bool:
    """The issue's criterion: finite, training-set check passed, test ECE <= uncalibrated + 0.01."""
    return (not row["error"] and bool(row["train_check"]) and np.isfinite(row["ece_after"])
            and np.isfinite(row["kl"]) and row["ece_after"] <= row["ece_before"] + 0.01)


def part_stability(device: torch.device, models: list[str], n_splits: int, n_re: int) -> list[str]:
    import pandas as pd

    folder = ROOT / "benchmarks" / "stability"
    folder.mkdir(exist_ok=True)
    for model in models:
        file = SHARED / f"aigen_c100_{model}.npz"
        if not file.exists():
            print(f"{file} missing: {model} skipped", flush=True)
            continue
        path = folder / f"{device.type}_{model}.csv"
        done = pd.read_csv(path, keep_default_na=False) if path.exists() else pd.DataFrame(columns=STABILITY_COLUMNS)
        have = {(int(s), float(a), int(n)) for s, a, n in zip(done["split"], done["alpha"], done["n_re"])}
        d = np.load(file)
        z, y = d["logits"].astype(np.float64), d["labels"].astype(np.int64)
        for seed in range(n_splits):
            for alpha in PAPER_ALPHAS:
                if (seed, float(alpha), n_re) in have:
                    continue
                row = {"model": model, **_stability_fit(z, y, seed, alpha, n_re, device)}
                pd.DataFrame([row], columns=STABILITY_COLUMNS).to_csv(path, mode="a", header=not path.exists(),
                                                                      index=False)
                print(f"{model} split {seed} alpha {alpha:g}: ECE {row['ece_before']:.4f} -> "
                      f"{row.get('ece_after', float('nan')):.4f}, KL {row.get('kl', float('nan')):.2f}, "
                      f"{row['wall_s']:.0f} s {row['error']}", flush=True)
    files = sorted(folder.glob(f"{device.type}_*.csv"))
    return stability_summary(pd.concat([pd.read_csv(f, keep_default_na=False) for f in files], ignore_index=True),
                             folder) if files else ["No fits yet."]


def stability_summary(df, folder: Path) -> list[str]:
    for col in ("ece_before", "ece_after", "nll_before", "nll_after", "kl", "cpu_s", "wall_s"):
        df[col] = df[col].replace("", "nan").astype(float)
    df["sound"] = [stability_sound(r) for _, r in df.iterrows()]
    df["delta"] = df["ece_after"] - df["ece_before"]
    rows = [f"Every row of the CSV files in `{folder.relative_to(ROOT)}/`: one PBR fit alone (default optimiser) per split x alpha, "
            "n_re = 1000, the other 9000 rows as the test set, B = floor(n_te^(1/3)) = 20. Sound = no error, "
            "finite, training-set check passed, test ECE <= uncalibrated + 0.01.", "",
            "| model | fits | sound | max test-ECE change | mean ECE uncal. | " +
            " | ".join(f"mean ECE a={a:g}" for a in PAPER_ALPHAS) + " | KL = 0 (prior) | escaped the prior | median CPU s |",
            "|---|---|---|---|---|" + "---|" * len(PAPER_ALPHAS) + "---|---|---|"]
    for model, g in df.groupby("model", sort=False):
        means = [g.loc[g["alpha"].astype(float) == a, "ece_after"].mean() for a in PAPER_ALPHAS]
        escaped = int(g["stop"].str.contains("restarted: the first fit ended at the prior").sum())
        rows.append(f"| {model} | {len(g)} | {int(g['sound'].sum())} | {g['delta'].max():+.4f} | "
                    f"{g['ece_before'].mean():.4f} | " + " | ".join(f"{m:.4f}" for m in means) +
                    f" | {int((g['kl'] < 0.01).sum())} | {escaped} | {g['cpu_s'].median():.0f} |")
    bad = df[~df["sound"]]
    rows += ["", f"Not sound: {len(bad)} of {len(df)} fits." +
             ("" if bad.empty else " " + "; ".join(f"{r.model} split {r.split} alpha {r.alpha}: {r.error or 'ECE ' + format(r.delta, '+.4f')}"
                                                 for r in bad.itertuples()))]
    for r in rows:
        print(r, flush=True)
    return rows


# ---------------------------------------------------------------------- results file
def write_section(key: str, title: str, body: list[str]) -> None:
    begin, end = f"<!-- begin {key} -->", f"<!-- end {key} -->"
    text = RESULTS.read_text() if RESULTS.exists() else "# GP calibration / PBR benchmarks\n"
    block = "\n".join([begin, f"## {title}", "", *body, end])
    pattern = re.compile(re.escape(begin) + ".*?" + re.escape(end), re.S)
    text = pattern.sub(lambda _: block, text) if pattern.search(text) else text.rstrip() + "\n\n" + block + "\n"
    RESULTS.write_text(text)


def machine(device: torch.device) -> str:
    if device.type == "cuda":
        what = torch.cuda.get_device_name(device)
    else:
        what = f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, {torch.get_num_threads()} torch thread(s)"
    return f"{what}; torch {torch.__version__}; {time.strftime('%Y-%m-%d')}"


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="cpu", help="cpu, cuda or auto")
    ap.add_argument("--parts", default="grid", help="comma-separated: grid, alpha, protocol, klgap, precision, consistency, stability")
    ap.add_argument("--ns", default="100,1000,5000")
    ap.add_argument("--ks", default="2,10,100")
    ap.add_argument("--objective", default="pbr", choices=["pbr", "pbr_total"])
    ap.add_argument("--time-limit", type=float, default=600.0,
                    help="after a K = 100 fit slower than this (s), skip the larger K = 100 cells")
    ap.add_argument("--alpha-k", type=int, default=10)
    ap.add_argument("--alpha-n", type=int, default=300)
    ap.add_argument("--protocol-splits", type=int, default=10)
    ap.add_argument("--protocol-chunk", type=int, default=80, help="GPs per batch in the protocol")
    ap.add_argument("--protocol-n-re", type=int, default=1000)
    ap.add_argument("--stability-models", default=",".join(CIFAR100_MODELS),
                    help="CIFAR-100 networks of ../shared/data for the stability part, in this order")
    ap.add_argument("--threads", type=int, default=None, help="torch CPU threads (1 on a shared machine)")
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    device = resolve_device(args.device)
    warnings.simplefilter("ignore", RuntimeWarning)
    tag = device.type
    for part in args.parts.split(","):
        print(f"== {part} on {device} ==", flush=True)
        if part == "grid":
            body = part_grid(device, [int(v) for v in args.ns.split(",")], [int(v) for v in args.ks.split(",")],
                             args.objective, args.time_limit)
            title = f"Single {args.objective} fit, alpha = 0.5 ({tag}: {machine(device)})"
        elif part == "alpha":
            body = part_alpha(device, args.alpha_k, args.alpha_n, 5)
            title = f"Alpha selection: sequential vs batched ({tag}: {machine(device)})"
        elif part == "protocol":
            body = part_protocol(device, args.protocol_splits, args.protocol_n_re, args.protocol_chunk)
            title = f"Paper protocol, 10 splits x 8 alpha, batched ({tag}: {machine(device)})"
        elif part == "klgap":
            body = part_klgap(device, args.protocol_splits, args.protocol_n_re)
            title = f"The library's KL-gap study, Adam and L-BFGS ({tag}: {machine(device)})"
        elif part == "stability":
            body = part_stability(device, args.stability_models.split(","), args.protocol_splits,
                                  args.protocol_n_re)
            title = f"Stability of the paper's protocol, fit by fit ({tag}: {machine(device)})"
        elif part == "precision":
            body = part_precision(device)
            title = f"float32 vs float64 Monte Carlo draws ({tag}: {machine(device)})"
        elif part == "consistency":
            body = part_consistency(device)
            title = f"CPU vs CUDA, same fit ({machine(device)})"
        else:
            raise SystemExit(f"unknown part {part!r}")
        if not args.no_write:
            write_section(f"{part}-{tag}", title, body)
    print(f"results in {RESULTS}" if not args.no_write else "", flush=True)


if __name__ == "__main__":
    main()
