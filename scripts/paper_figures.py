#!/usr/bin/env python
"""The paper's figures: KL vs ECE gap (Section 6.1, Figures 2, 5, 6) and n_re vs test ECE (Figures 3, 7, 10).

Fujisawa & Futami, "PAC-Bayes Analysis for Recalibration in Classification" (ICML 2025). Two
experiments, each run with the library's protocol, one fit per call, so that a run can be stopped
at any time and resumed (every finished fit is written to its CSV at once, and a resumed run skips
the rows that are already there):

* ``kl_gap``: :func:`pbr_core.experiments.kl_vs_ece_gap`. PBR (Eq. vi_obj2) at each alpha of the
  paper's grid {0, .01, .1, .25, .5, .75, .9, 1}, 10 folds, n_re = 1000, and the ECE gap
  |ECE(test subset) - ECE(recalibration set)| with n_te = n_re and B = floor(n_re^(1/3)) = 10 on
  both sides (Appendix F). CSV ``kl_gap_<dataset>.csv``, one row per (model, fold, alpha).
* ``n_re``: :func:`pbr_core.experiments.n_re_sweep`. Test ECE of each method for n_re in
  {10, 50, 100, 250, 500, 1000, 3000, 5000}, 10 folds; within a fold the test set is fixed (the
  last n - 5000 rows of the fold's permutation: 4090 on KITTI, 5000 on CIFAR-100) and the
  recalibration sets are nested. PBR's alpha is FIXED (``--alpha``, default 0.5, as in every other
  table of docs/reproduction.md); the paper selects it by a grid search it does not describe
  further, and alpha by inner cross-validation would cost 24 more GP fits per PBR fit. CSV
  ``n_re_<dataset>.csv``, one row per (model, fold, n_re, method).
* ``plots``: reads the CSVs (nothing is fitted) and writes the figures, drawn by the library's own
  :mod:`pbr_core.plot` (the dashboard's KL-gap and n_re charts: one drawing code), one per model on
  one HTML page per data set (``kl_gap_<dataset>.html``, ``n_re_<dataset>.html``), and the summaries:
  ``kl_gap_summary.{md,csv}`` (per model, next to the paper's statement: Kendall's tau of KL against the gap within each fold, tested across the folds by a
  Wilcoxon signed-rank test and a sign test, :func:`~pbr_core.experiments.fold_kendall`; not one
  correlation over all fits, whose p-values are too small because a fold's fits share its rows)
  and ``n_re_summary.md`` (mean ± std over folds).

Every row records the seed of the splits, the commit (short hash, "-dirty" if pbr_core/ or scripts/ had uncommitted changes), the CPU
seconds of its call (``time.process_time``; torch runs on ``--threads`` threads, default 1) and
when it finished. Failed fits are kept with their error (``on_error="warn"``) and not retried
unless ``--retry-failed`` is given.

Run one process per CSV at a time: each process rewrites its CSV from its own copy of the rows
(atomically, so a killed run never leaves a broken file), so two at once lose each other's rows.

Data: :mod:`reproduce_paper`'s models: KITTI XGBoost, random forest, 1-layer network
(``sample_data/kitti_*``) and the CIFAR-100 test logits of DenseNet-121, ResNet-110, ResNet-50,
WRN-26-10 (``/work/shared/data/predictions/aigen_c100_*.npz``; not the paper's networks).

Examples::

    python scripts/paper_figures.py --experiment kl_gap --datasets kitti
    python scripts/paper_figures.py --experiment kl_gap --datasets cifar100 --models densenet121
    python scripts/paper_figures.py --experiment n_re --datasets kitti
    python scripts/paper_figures.py --experiment n_re --datasets cifar100 --models densenet121 --folds 3
    python scripts/paper_figures.py --experiment plots
"""

from __future__ import annotations

import argparse
import datetime as _dt
import math
import os
import subprocess
import sys
import time
import warnings
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
for _p in (ROOT, ROOT / "scripts"):
    if str(_p) not in sys.path:
        sys.path.insert(0, str(_p))

import reproduce_paper as rp  # noqa: E402  (the data sets and the per-method parameters)
from pbr_core.experiments import (  # noqa: E402
    KL_GAP_COLUMNS,
    PAPER_ALPHAS,
    PAPER_BINARY_ECE,
    PAPER_N_RE_VALUES,
    fold_kendall,
    kl_vs_ece_gap,
    n_re_sweep,
)
from pbr_core.experiments.compare import COMPARE_COLUMNS  # noqa: E402

OUT = ROOT / "docs" / "reproduction_results" / "figures"
DATASETS = ("kitti", "cifar100")

#: Methods of the n_re figure. CIFAR-100: the paper's Figure 3 / Table 1 methods. KITTI: the base
#: methods of the paper's Table `table:kitti` (the "app." variants differ from their base methods by
#: less than the fold-to-fold spread in every table of docs/reproduction.md, and would double the lines).
N_RE_METHODS = {
    "kitti": ["uncalibrated", "temperature", "platt", "isotonic", "beta", "bbq", "gp", "pbr", "pbr_total"],
    "cifar100": ["uncalibrated", "temperature", "gp", "pbr", "pbr_total"],
}

#: What the paper says about each data set's KL-gap correlation (Section 6.1 and Appendix G).
PAPER_STATEMENT = {
    "kitti": "binary: \"no strong correlation was observed\" (Appendix G, Figure 5)",
    "cifar100": "multiclass: \"well correlated\" / \"positive correlation\" (Section 6.1, Figures 2 and 6; "
                "other networks: ResNeXt-29 x2, WRN-28-10, DenseNet-BC-190, AlexNet)",
}

META_COLUMNS = ["dataset", "model", "seed", "cpu_seconds", "commit", "finished"]
KL_COLUMNS = ["dataset", "model", "objective", *[c for c in KL_GAP_COLUMNS], "n_te", "seed", "params",
              "cpu_seconds", "commit", "finished"]
KL_KEY = ("model", "objective", "alpha", "fold", "n_re", "seed")
N_RE_COLUMNS = ["dataset", "model", *COMPARE_COLUMNS, "alpha_mode", "alpha", "seed", "params", "cpu_seconds",
                "commit", "finished"]
N_RE_KEY = ("model", "method", "fold", "n_re", "n_te", "seed")


# ---------------------------------------------------------------------------- bookkeeping
def git_commit() -> str:
    """The checkout's commit, with "-dirty" when the code (pbr_core/, scripts/) has uncommitted changes.

    Only the code counts: a results run goes on while its CSVs and the documents change in the
    same checkout. "unknown" outside a git checkout.
    """
    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=True,
                              timeout=30).stdout.strip()

    try:
        dirty = git("status", "--porcelain", "--untracked-files=no", "--", "pbr_core", "scripts")
        return git("rev-parse", "--short", "HEAD") + ("-dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def _key_value(v: Any) -> Any:
    """One key cell, normalised so that a value read back from the CSV equals the value written."""
    if isinstance(v, (bool, np.bool_)):
        return bool(v)
    if isinstance(v, (int, np.integer)):
        return int(v)
    if isinstance(v, (float, np.floating)):
        return int(v) if float(v).is_integer() else round(float(v), 12)
    return str(v)


class ResultStore:
    """A CSV of finished fits, rewritten atomically after every new row; knows which keys are done.

    A row counts as done when it has no error, or always with ``retry_failed=False``; a new row
    with the key of an old one replaces it (a retried failure).
    """

    def __init__(self, path: Path, columns: Sequence[str], key: Sequence[str], retry_failed: bool = False) -> None:
        self.path, self.columns, self.key = Path(path), list(columns), tuple(key)
        if self.path.exists():
            self.table = pd.read_csv(self.path)
            missing = [c for c in self.key if c not in self.table.columns]
            if missing:
                raise SystemExit(f"{self.path} has no column(s) {missing}: it was not written by this script.")
        else:
            self.table = pd.DataFrame(columns=self.columns)
        done = self.table if not retry_failed else self.table[self.table["error"].isna()]
        self.done = {self.key_of(r) for r in done.to_dict("records")}

    def key_of(self, row: dict[str, Any]) -> tuple[Any, ...]:
        return tuple(_key_value(row[k]) for k in self.key)

    def __contains__(self, key: tuple[Any, ...]) -> bool:
        return tuple(_key_value(v) for v in key) in self.done

    def add(self, row: dict[str, Any]) -> None:
        key = self.key_of(row)
        old = self.table
        if len(old):
            keep = [self.key_of(r) != key for r in old.to_dict("records")]
            old = old[keep]
        new = pd.DataFrame([row], columns=self.columns)
        self.table = pd.concat([old, new], ignore_index=True) if len(old) else new
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".csv.tmp")
        self.table.to_csv(tmp, index=False)
        os.replace(tmp, self.path)  # a run killed mid-write leaves the previous complete file
        self.done.add(key)


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def _timed(call: Callable[[], Any]) -> tuple[Any, float]:
    start = time.process_time()
    result = call()
    return result, time.process_time() - start


def _params_text(params: dict[str, Any]) -> str:
    return ";".join(f"{k}={v}" for k, v in sorted(params.items()))


# ---------------------------------------------------------------------------- experiments
def run_kl_gap(dataset: str, models: Sequence[str], folds: Sequence[int], alphas: Sequence[float], *,
               n_re: int, seed: int, objective: str, device: str, out: Path, retry_failed: bool = False,
               load: Callable[[str, str], Any] = rp.load_model, extra_params: dict[str, Any] | None = None,
               log: Callable[[str], None] = print) -> Path:
    """KL vs ECE gap, one (model, fold, alpha) fit per call of :func:`kl_vs_ece_gap`, fold by fold."""
    store = ResultStore(out / f"kl_gap_{dataset}.csv", KL_COLUMNS, KL_KEY, retry_failed)
    commit = git_commit()
    params = {"device": device, **(extra_params or {})}
    for model in models:
        preds = load(dataset, model)
        for fold in folds:
            for alpha in alphas:
                if (model, objective, alpha, fold, n_re, seed) in store:
                    continue
                with warnings.catch_warnings():
                    # One fit per call: the protocol's correlations need 3; they are computed over the CSV.
                    warnings.filterwarnings("ignore", message="KL-gap correlations need", category=RuntimeWarning)
                    # The paper's top-label ECE, explicitly: the library's default is the app's p(y=1).
                    res, cpu = _timed(lambda: kl_vs_ece_gap(preds, alphas=[alpha], objective=objective, n_re=n_re,
                                                            folds=[fold], seed=seed, on_error="warn",
                                                            binary_ece=PAPER_BINARY_ECE, **params))
                row = {**res.table.iloc[0].to_dict(), "dataset": dataset, "model": model, "objective": objective,
                       "n_te": n_re, "seed": seed, "params": _params_text(params), "cpu_seconds": cpu,
                       "commit": commit, "finished": _now()}
                store.add(row)
                failed = f", ERROR {row['error']}" if isinstance(row["error"], str) else ""
                log(f"kl_gap {dataset} {model} fold {fold} alpha {alpha:g}: KL {row['kl']:.3g}, gap "
                    f"{row['gap']:.4f}, {cpu:.1f} CPU s{failed}")
    return store.path




def run_n_re(dataset: str, models: Sequence[str], folds: Sequence[int], n_re_values: Sequence[int],
             methods: Sequence[str], *, alpha: float, seed: int, device: str, out: Path, retry_failed: bool = False,
             max_iter: int | None = None, load: Callable[[str, str], Any] = rp.load_model,
             log: Callable[[str], None] = print) -> Path:
    """n_re vs test ECE, one (model, fold, n_re, method) fit per call of :func:`n_re_sweep`.

    The test set is n_re_sweep's default, n - (largest usable n_re), passed explicitly so that every
    call of a fold uses the same test rows.
    """
    store = ResultStore(out / f"n_re_{dataset}.csv", N_RE_COLUMNS, N_RE_KEY, retry_failed)
    commit = git_commit()
    for model in models:
        preds = load(dataset, model)
        usable = [v for v in n_re_values if v < preds.n]
        n_te = preds.n - max(usable)
        values = [v for v in usable if v + n_te <= preds.n]
        for fold in folds:
            for n_re in values:
                for method in methods:
                    if (model, method, fold, n_re, n_te, seed) in store:
                        continue
                    params = rp._params(method, float(alpha), device, max_iter)
                    table, cpu = _timed(lambda: n_re_sweep(
                        preds, [method], n_re_values=[n_re], n_te=n_te, folds=[fold], seed=seed,
                        method_params={method: params} if params else None, on_error="warn",
                        binary_ece=PAPER_BINARY_ECE))  # the paper's ECE, not the library's default p(y=1)
                    row = {**table.iloc[0].to_dict(), "dataset": dataset, "model": model,
                           "alpha_mode": "fixed" if "alpha" in params else None,
                           "alpha": params.get("alpha", math.nan), "seed": seed, "params": _params_text(params),
                           "cpu_seconds": cpu, "commit": commit, "finished": _now()}
                    store.add(row)
                    failed = f", ERROR {row['error']}" if isinstance(row["error"], str) else ""
                    log(f"n_re {dataset} {model} fold {fold} n_re {n_re} {method}: ECE {row['ece']:.4f}, "
                        f"{cpu:.1f} CPU s{failed}")
    return store.path


# ---------------------------------------------------------------------------- statistics
#: Columns of :func:`kl_gap_statistics`.
STAT_COLUMNS = ["dataset", "model", "fits", "folds", "mean_tau", "folds_positive", "folds_negative", "wilcoxon_p",
                "sign_p", "verdict"]


def kl_gap_statistics(table: pd.DataFrame, exclude_alpha_zero: bool = False) -> pd.DataFrame:
    """Kendall's tau of KL against the ECE gap within each fold, tested across folds, per (dataset, model).

    :func:`pbr_core.experiments.fold_kendall`. Not one correlation over all (fold, alpha) fits:
    the fits of a fold share its rows, so a pooled test counts 80 fits where the folds give 10
    independent answers, and its p-values are too small. Failed fits (NaN KL or gap) are left out;
    ``exclude_alpha_zero`` leaves out the alpha = 0 fits too (no KL term: their KL is one to two
    orders of magnitude above the others'). Columns :data:`STAT_COLUMNS`: ``fits`` (fits used),
    ``folds`` (folds with a tau), the mean tau, the folds with tau > 0 and < 0, the two-sided
    Wilcoxon signed-rank and sign-test p-values of the folds' taus, and ``verdict``
    (:attr:`FoldKendall.verdict <pbr_core.experiments.FoldKendall.verdict>`).
    """
    rows = []
    for (dataset, model), g in table.groupby(["dataset", "model"], sort=False):
        if exclude_alpha_zero:
            g = g[g["alpha"] > 0]
        ok = g.dropna(subset=["kl", "gap"])
        res = fold_kendall(g)
        rows.append({"dataset": dataset, "model": model, "fits": int(len(ok)), "folds": res.folds,
                     "mean_tau": res.mean_tau, "folds_positive": res.folds_positive,
                     "folds_negative": res.folds_negative, "wilcoxon_p": res.wilcoxon_p, "sign_p": res.sign_p,
                     "verdict": res.verdict})
    return pd.DataFrame(rows, columns=STAT_COLUMNS)


def _p(p: float) -> str:
    return "-" if not np.isfinite(p) else (f"{p:.1e}" if p < 1e-3 else f"{p:.3f}")


def verdict_words(verdict: str, folds_positive: int, folds_negative: int, folds: int) -> str:
    """What a verdict of :func:`kl_gap_statistics` says in the summary table.

    "positive in 9 of 10 folds" names how many folds carry it; "none shown" is not "no
    relation": the folds' taus are not consistently on one side of 0 (or too few folds to tell).
    """
    if verdict == "positive":
        return f"positive in {folds_positive} of {folds} folds"
    if verdict == "negative":
        return f"negative in {folds_negative} of {folds} folds"
    if verdict == "none shown":
        return "none shown"
    return "-"


def _fold_cells(r: Any) -> list[str]:
    if not r.folds:
        return ["-", "-", "-", "-", "-"]
    return [f"{r.mean_tau:+.3f}", f"{r.folds_positive} / {r.folds_negative}", _p(r.wilcoxon_p), _p(r.sign_p),
            verdict_words(r.verdict, r.folds_positive, r.folds_negative, r.folds)]


def kl_gap_summary_markdown(stats_all: pd.DataFrame, stats_no0: pd.DataFrame) -> str:
    lines = ["| data | model | fits (folds) | mean tau within folds | folds tau > 0 / < 0 | Wilcoxon p | sign p | "
             "verdict | without alpha = 0: mean tau | folds > 0 / < 0 | Wilcoxon p | sign p | verdict | paper |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    no0 = stats_no0.set_index(["dataset", "model"])
    for r in stats_all.itertuples():
        cells = [r.dataset, r.model, f"{r.fits} ({r.folds})", *_fold_cells(r)]
        if (r.dataset, r.model) in no0.index:
            o = no0.loc[(r.dataset, r.model)]
            cells += _fold_cells(o)
        else:
            cells += ["-"] * 5
        cells.append(PAPER_STATEMENT.get(r.dataset, "-"))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def kl_gap_alpha_means(table: pd.DataFrame) -> str:
    """Markdown: mean ± std of KL, recalibration-set ECE, test ECE and gap per (dataset, model, alpha)."""
    ok = table.dropna(subset=["kl", "gap"])
    lines = ["| data | model | alpha | fits | KL | ECE recal. | ECE test | gap |", "|---|---|---|---|---|---|---|---|"]
    for (dataset, model, alpha), g in ok.groupby(["dataset", "model", "alpha"], sort=False):
        cells = [dataset, model, f"{alpha:g}", str(len(g))]
        for col, digits in (("kl", 2), ("ece_re", 4), ("ece_te", 4), ("gap", 4)):
            v = g[col].to_numpy(float)
            cells.append(f"{v.mean():.{digits}f} ± {v.std(ddof=1) if v.size > 1 else 0.0:.{digits}f}")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def n_re_summary_markdown(table: pd.DataFrame) -> str:
    """Per (dataset, model): test ECE mean ± std (folds) with n_re as rows and methods as columns."""
    ok = table[table["error"].isna()]
    out = []
    for (dataset, model), g in ok.groupby(["dataset", "model"], sort=False):
        methods = [m for m in N_RE_METHODS.get(dataset, []) if m in set(g["method"])]
        methods += sorted(set(g["method"]) - set(methods))
        n_te = sorted(set(g["n_te"].astype(int)))
        out.append(f"**{dataset} / {model}** (test ECE, mean ± std over folds (folds); fixed test set n_te = "
                   f"{', '.join(map(str, n_te))}, B = floor(n_te^(1/3)))\n")
        out.append("| n_re | " + " | ".join(methods) + " |")
        out.append("|---|" + "---|" * len(methods))
        for n_re, h in g.groupby("n_re"):
            cells = []
            for m in methods:
                e = h[h["method"] == m]["ece"].to_numpy(float)
                cells.append("-" if not e.size else
                             f"{e.mean():.4f} ± {e.std(ddof=1) if e.size > 1 else 0.0:.4f} ({e.size})")
            out.append(f"| {int(n_re)} | " + " | ".join(cells) + " |")
        failed = table[(table["dataset"] == dataset) & (table["model"] == model) & table["error"].notna()]
        if len(failed):
            out.append("\nFailed fits: " + "; ".join(f"{r.method} n_re={r.n_re} fold {r.fold}: {r.error}"
                                                     for r in failed.itertuples()))
        out.append("")
    return "\n".join(out)


# ---------------------------------------------------------------------------- figures
# Drawn by the library's own figures (pbr_core.plot: the Generalization and Compare pages' KL-gap and
# n_re charts), not by a second drawing code here: one figure per model, a data set's figures on one
# HTML page. No PNG: plotly's static export needs kaleido and a Chrome, and kaleido 1.5 with this
# machine's Chromium wrote four images and then hung on the fifth.
def kl_gap_figures(table: pd.DataFrame, stats: pd.DataFrame, title: str) -> list[tuple[str, Any]]:
    """(model, figure) per model: :func:`pbr_core.plot.kl_gap` of its fits (KL axes logarithmic),
    the within-fold Kendall statistics in the title."""
    from pbr_core import plot

    st = stats.set_index("model")
    out = []
    for model in dict.fromkeys(table["model"]):
        s = st.loc[model]
        head = (f"{title}<br>{model}: τ within folds mean {s.mean_tau:+.2f}, > 0 in {s.folds_positive} of {s.folds}; "
                f"across folds Wilcoxon p {_p(s.wilcoxon_p)}, sign p {_p(s.sign_p)}")
        out.append((model, plot.kl_gap(table[table["model"] == model], log_kl=True, title=head)))
    return out


def n_re_figures(table: pd.DataFrame, title: str, methods: Sequence[str]) -> list[tuple[str, Any]]:
    """(model, figure) per model: :func:`pbr_core.plot.n_re_sweep` of its fits that did not fail,
    methods in ``methods``' order."""
    from pbr_core import plot

    ok = table[table["error"].isna()]
    out = []
    for model in dict.fromkeys(ok["model"]):
        g = ok[ok["model"] == model]
        order = [m for m in methods if m in set(g["method"])] + sorted(set(g["method"]) - set(methods))
        g = g.assign(method=pd.Categorical(g["method"], categories=order, ordered=True)).sort_values("method")
        g = g.assign(method=g["method"].astype(str))
        folds = int(g["fold"].nunique())
        head = f"{title}<br>{model}: test n_te = {int(g['n_te'].iloc[0])}, {folds} folds"
        out.append((model, plot.n_re_sweep(g, title=head)))
    return out


def write_figures(figures: list[tuple[str, Any]], path: Path, plotlyjs: str = "cdn") -> Path:
    """A data set's figures, one per model, on one HTML page (``path``; plotly.js from its CDN, or
    ``"inline"``: a page that needs no network, 3.6 MB larger)."""
    parts = [fig.to_html(full_html=False, include_plotlyjs=plotlyjs if i == 0 else False)
             for i, (_, fig) in enumerate(figures)]
    page = ("<!DOCTYPE html><html><head><meta charset='utf-8'><title>" + path.stem + "</title></head><body>"
            + "".join(f"<section>{p}</section>" for p in parts) + "</body></html>")
    path.write_text(page, encoding="utf-8")
    return path


def make_plots(out: Path, datasets: Iterable[str] = DATASETS, figures: bool = True,
               plotlyjs: str = "cdn") -> list[Path]:
    """Summaries (and, with ``figures``, the HTML figures) from the CSVs in ``out``; returns the files
    written."""
    written: list[Path] = []
    kl_tables = [pd.read_csv(out / f"kl_gap_{d}.csv") for d in datasets if (out / f"kl_gap_{d}.csv").exists()]
    if kl_tables:
        kl = pd.concat(kl_tables, ignore_index=True)
        s_all, s_no0 = kl_gap_statistics(kl), kl_gap_statistics(kl, exclude_alpha_zero=True)
        s_all.assign(alpha_zero="included").pipe(
            lambda a: pd.concat([a, s_no0.assign(alpha_zero="excluded")], ignore_index=True)
        ).to_csv(out / "kl_gap_summary.csv", index=False)
        md = ["# KL vs ECE gap: correlations per model", "",
              "Generated by `python scripts/paper_figures.py --experiment plots` from `kl_gap_*.csv` "
              "(`pbr_core.experiments.fold_kendall`). Within each fold, Kendall's tau-b "
              "(`scipy.stats.kendalltau`) of KL against the ECE gap over the fold's alphas; across the folds, "
              "two-sided exact Wilcoxon signed-rank and sign tests of those taus against 0. Verdict: positive "
              "or negative when both p < 0.05 (and the mean and the majority of folds agree), else none "
              "shown. Not one correlation over all (fold, alpha) fits: the fits of a fold share its rows, "
              "so such a test counts each fold's noise 8 times and its p-values are too small.", "",
              kl_gap_summary_markdown(s_all, s_no0), "",
              "Means per alpha (failed fits left out):", "", kl_gap_alpha_means(kl), ""]
        (out / "kl_gap_summary.md").write_text("\n".join(md), encoding="utf-8")
        written += [out / "kl_gap_summary.csv", out / "kl_gap_summary.md"]
        if figures:
            for d, t in zip([d for d in datasets if (out / f"kl_gap_{d}.csv").exists()], kl_tables):
                n_re = int(t["n_re"].iloc[0])
                figs = kl_gap_figures(
                    t, s_all[s_all["dataset"] == d],
                    f"{d}: KL vs ECE gap, PBR at α ∈ {{0, .01, .1, .25, .5, .75, .9, 1}}, "
                    f"n_re = n_te = {n_re}, B = {int(t['n_bins'].iloc[0])}, one point per (fold, α)")
                written.append(write_figures(figs, out / f"kl_gap_{d}.html", plotlyjs=plotlyjs))
    nre_tables = {d: pd.read_csv(out / f"n_re_{d}.csv") for d in datasets if (out / f"n_re_{d}.csv").exists()}
    if nre_tables:
        md = ["# n_re vs test ECE", "", "Generated by `python scripts/paper_figures.py --experiment plots` from "
              "`n_re_*.csv`. PBR / PBR total with alpha fixed (column `alpha`).", ""]
        for d, t in nre_tables.items():
            md.append(n_re_summary_markdown(t))
            if figures:
                figs = n_re_figures(t, f"{d}: test ECE vs recalibration set size n_re (PBR α fixed)",
                                    N_RE_METHODS.get(d, []))
                written.append(write_figures(figs, out / f"n_re_{d}.html", plotlyjs=plotlyjs))
        (out / "n_re_summary.md").write_text("\n".join(md), encoding="utf-8")
        written.append(out / "n_re_summary.md")
    return written


# ---------------------------------------------------------------------------- main
def _csv_list(text: str | None, kind: Callable[[str], Any] = str) -> list[Any] | None:
    return None if text is None else [kind(v) for v in text.split(",") if v.strip()]


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--experiment", choices=["kl_gap", "n_re", "plots"], required=True)
    ap.add_argument("--datasets", default=",".join(DATASETS), help="comma-separated: kitti, cifar100")
    ap.add_argument("--models", default=None, help="comma-separated model names (default: all of each data set)")
    ap.add_argument("--folds", type=int, default=10, help="number of folds (default 10)")
    ap.add_argument("--first-fold", type=int, default=0, help="run folds first_fold .. first_fold+folds-1")
    ap.add_argument("--seed", type=int, default=0, help="seed of the splits")
    ap.add_argument("--alphas", default=None, help="kl_gap: comma-separated alphas (default: the paper's grid)")
    ap.add_argument("--objective", default="pbr", help="kl_gap: the PBR objective (default pbr, Eq. vi_obj2)")
    ap.add_argument("--n-re", type=int, default=1000, help="kl_gap: n_re = n_te (default 1000)")
    ap.add_argument("--n-re-values", default=None, help="n_re: comma-separated sizes (default: the paper's)")
    ap.add_argument("--methods", default=None, help="n_re: comma-separated methods (default: per data set)")
    ap.add_argument("--alpha", type=float, default=0.5, help="n_re: PBR's fixed alpha (default 0.5)")
    ap.add_argument("--device", choices=["cpu", "cuda", "auto"], default="cpu")
    ap.add_argument("--max-iter", type=int, default=None,
                    help="override the GP methods' iteration budget (quick checks only; default: the library's)")
    ap.add_argument("--threads", type=int, default=1, help="torch CPU threads (default 1)")
    ap.add_argument("--retry-failed", action="store_true", help="refit rows that failed before")
    ap.add_argument("--no-figures", action="store_true", help="plots: summaries only, no figures")
    ap.add_argument("--plotlyjs", choices=["cdn", "inline"], default="cdn",
                    help="plots: the HTML pages load plotly.js from its CDN (small files, default) or carry it")
    ap.add_argument("--out", default=str(OUT))
    args = ap.parse_args(argv)
    if args.folds < 1 or args.first_fold < 0:
        ap.error("--folds must be >= 1 and --first-fold >= 0")
    unknown = [d for d in _csv_list(args.datasets) if d not in DATASETS]
    if unknown:
        ap.error(f"unknown data sets {unknown}; known: {list(DATASETS)}")
    return args


def main(argv: Sequence[str] | None = None) -> list[Path]:
    args = parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    datasets = _csv_list(args.datasets)
    if args.experiment == "plots":
        written = make_plots(out, datasets, figures=not args.no_figures, plotlyjs=args.plotlyjs)
        for p in written:
            print(p)
        return written
    import torch

    torch.set_num_threads(max(1, args.threads))
    folds = list(range(args.first_fold, args.first_fold + args.folds))
    log = lambda msg: print(f"[{_now()}] {msg}", flush=True)  # noqa: E731 - the run's log on stdout
    written = []
    for dataset in datasets:
        models = _csv_list(args.models) or list(rp.PARTS[dataset]["models"])
        models = [m for m in models if m in rp.PARTS[dataset]["models"]]
        if not models:
            continue
        if args.experiment == "kl_gap":
            alphas = _csv_list(args.alphas, float) or list(PAPER_ALPHAS)
            extra = {} if args.max_iter is None else {"max_iter": args.max_iter}
            written.append(run_kl_gap(dataset, models, folds, alphas, n_re=args.n_re, seed=args.seed,
                                      objective=args.objective, device=args.device, out=out,
                                      retry_failed=args.retry_failed, extra_params=extra, log=log))
        else:
            values = _csv_list(args.n_re_values, int) or list(PAPER_N_RE_VALUES)
            methods = _csv_list(args.methods) or N_RE_METHODS[dataset]
            written.append(run_n_re(dataset, models, folds, values, methods, alpha=args.alpha, seed=args.seed,
                                    device=args.device, out=out, retry_failed=args.retry_failed,
                                    max_iter=args.max_iter, log=log))
    return written


if __name__ == "__main__":
    main()
