#!/usr/bin/env python
"""KITTI: the GP family on log p (``prob_input="log"``) against Wenger's GP on p (``"wenger"``).

Reads the per-fold CSVs that ``scripts/reproduce_paper.py --part kitti --prob-input {log,wenger}
--out docs/reproduction_results/prob_input/{log,wenger}`` wrote (nothing is refitted) and writes
``docs/reproduction_results/prob_input/comparison.md``: per model and GP method, the top-label ECE
(and NLL) mean ± std over the folds both variants have, the paper's ECE (Table ``table:kitti``),
and the paired tests of :func:`pbr_core.experiments.paired_tests` on wenger - log (same splits for
both): mean difference with its 95 % interval (the corrected test's, the model's 6 methods' intervals
holding together), paired t-test, Wilcoxon signed-rank (exact) and the
Nadeau-Bengio corrected resampled t-test (n_te / n_re = 8). Verdict by the library's rule (the one
of ``docs/reproduction.md``): "better" only when the corrected t-test's p, after Holm's correction
over the 6 GP methods of the model (*decides p*), is below 0.05 and the Wilcoxon test agrees. The
verdict is the library's own, not a copy of its rule, so the two cannot drift apart.

Usage::

    python scripts/compare_prob_input.py
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pbr_core.experiments import paired_tests  # noqa: E402

MODELS = ("xgboost", "random_forest", "mlp")
METHODS = ("gp", "gp_app", "pbr", "pbr_app", "pbr_total", "pbr_total_app")
LABELS = {"gp": "GP calibration", "gp_app": "GP calibration (app.)", "pbr": "PBR", "pbr_app": "PBR app.",
          "pbr_total": "PBR total", "pbr_total_app": "PBR app. total"}

#: Table "KITTI (binary)" (label table:kitti) of the paper: ECE mean ± std over 10 splits.
PAPER_ECE = {
    "xgboost": {"uncalibrated": "0.0113 ± 0.0004", "gp": "0.0063 ± 0.0020", "gp_app": "0.0079 ± 0.0033",
                "pbr": "0.0076 ± 0.0030", "pbr_total": "0.0063 ± 0.0014", "pbr_app": "0.0079 ± 0.0033",
                "pbr_total_app": "0.0063 ± 0.0012"},
    "random_forest": {"uncalibrated": "0.0736 ± 0.0014", "gp": "0.0070 ± 0.0032", "gp_app": "0.0074 ± 0.0029",
                      "pbr": "0.0076 ± 0.0031", "pbr_total": "0.0068 ± 0.0033", "pbr_app": "0.0074 ± 0.0029",
                      "pbr_total_app": "0.0068 ± 0.0037"},
    "mlp": {"uncalibrated": "0.0049 ± 0.0008", "gp": "0.0047 ± 0.0008", "gp_app": "0.0047 ± 0.0008",
            "pbr": "0.0047 ± 0.0008", "pbr_total": "0.0046 ± 0.0007", "pbr_app": "0.0047 ± 0.0008",
            "pbr_total_app": "0.0045 ± 0.0008"},
}
MODEL_LABELS = {"xgboost": "XGBoost", "random_forest": "Random forest", "mlp": "1-layer NN"}


def _ms(x: pd.Series, digits: int = 4) -> str:
    return f"{x.mean():.{digits}f} ± {x.std(ddof=1):.{digits}f}" if len(x) > 1 else f"{x.mean():.{digits}f}"


def _p(p: float) -> str:
    return "-" if not np.isfinite(p) else (f"{p:.3f}" if p >= 0.001 else f"{p:.1e}")


def _variant_table(tables: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """Both variants in one per-fold table, each GP method named ``"<method>@<variant>"``."""
    parts = []
    for variant, t in tables.items():
        t = t[t["method"].isin(METHODS)].copy()
        t["method"] = t["method"] + "@" + variant
        parts.append(t)
    return pd.concat(parts, ignore_index=True)


def compare(results: Path, metric: str = "ece") -> tuple[str, pd.DataFrame]:
    tables = {v: pd.read_csv(results / v / "kitti_per_fold.csv") for v in ("log", "wenger")}
    tables = {v: t[t["error"].isna()] for v, t in tables.items()}
    both = _variant_table(tables)
    rows = []
    for model in MODELS:
        part = both[both["model"] == model]
        present = set(part["method"])
        pairs = [(f"{m}@wenger", f"{m}@log") for m in METHODS if {f"{m}@wenger", f"{m}@log"} <= present]
        if not pairs:
            continue
        # One family per model: the 6 questions "wenger or log for this GP method?" (Holm over them).
        tests = paired_tests(part, metric, pairs).set_index("a")
        for method in METHODS:
            if f"{method}@wenger" not in tests.index:
                continue
            res = tests.loc[f"{method}@wenger"]
            a = tables["wenger"].query("model == @model and method == @method").set_index("fold")
            b = tables["log"].query("model == @model and method == @method").set_index("fold")
            folds = sorted(set(a[a[metric].notna()].index) & set(b[b[metric].notna()].index))
            if len(folds) < 2:
                continue
            better = res["better"]
            verdict = (f"{better.split('@')[1]} better" if isinstance(better, str) else "no difference shown")
            rows.append({"model": model, "method": method, "folds": len(folds),
                         "log": _ms(b.loc[folds, metric]), "wenger": _ms(a.loc[folds, metric]),
                         "paper": PAPER_ECE[model][method] if metric == "ece" else "-",
                         "mean_diff": res["mean_diff"], "ci": f"[{res['ci_low']:+.4f}, {res['ci_high']:+.4f}]",
                         "t_p": res["t_p"], "wilcoxon_p": res["wilcoxon_p"], "corrected_t_p": res["corrected_t_p"],
                         "decisive_p": res["decisive_p"], "holm_pairs": int(res["holm_pairs"]),
                         "wenger_lower_folds": int((a.loc[folds, metric] < b.loc[folds, metric]).sum()),
                         "verdict": verdict,
                         "kl_log": _ms(b.loc[folds, "kl"], 2), "kl_wenger": _ms(a.loc[folds, "kl"], 2),
                         "fit_s_log": float(b.loc[folds, "fit_seconds"].mean()),
                         "fit_s_wenger": float(a.loc[folds, "fit_seconds"].mean())})
    df = pd.DataFrame(rows)
    name = {"ece": "top-label ECE", "nll": "NLL"}.get(metric, metric)
    header = ["model", "method", "folds", f"paper {name}" if metric == "ece" else "paper", f"log p: {name}",
              f"wenger: {name}", "wenger - log (95 % interval, the model's 6 together)", "decides p", "verdict", "corrected p", "t p",
              "Wilcoxon p", "wenger lower", "KL log / wenger"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for r in df.itertuples():
        lines.append("| " + " | ".join([
            MODEL_LABELS[r.model], LABELS[r.method], str(r.folds), r.paper, r.log, r.wenger,
            f"{r.mean_diff:+.4f} {r.ci}", _p(r.decisive_p), r.verdict, _p(r.corrected_t_p), _p(r.t_p),
            _p(r.wilcoxon_p), f"{r.wenger_lower_folds}/{r.folds}", f"{r.kl_log} / {r.kl_wenger}"]) + " |")
    return "\n".join(lines) + "\n", df


def main(argv: list[str] | None = None) -> str:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--results", default=str(ROOT / "docs" / "reproduction_results" / "prob_input"))
    args = ap.parse_args(argv)
    results = Path(args.results)
    ece_md, ece_df = compare(results, "ece")
    nll_md, _ = compare(results, "nll")
    text = ("# KITTI: GP on log p (prob_input='log') vs Wenger's GP on p (prob_input='wenger')\n\n"
            "Generated by `python scripts/compare_prob_input.py` from `log/kitti_per_fold.csv` and "
            "`wenger/kitti_per_fold.csv` (no refit). Mean ± std (ddof = 1) over the folds both variants have; "
            "paired tests on wenger - log over the same folds (t-test, exact Wilcoxon signed-rank, Nadeau-Bengio "
            "corrected resampled t-test with n_te/n_re = 8). Verdict (pbr_core.experiments.paired_tests): 'better' "
            "only when the corrected t-test's p, after Holm's correction over the 6 GP methods of the model "
            "(*decides p*), is below 0.05 and the Wilcoxon test agrees (p < 0.05); the plain t-test and Wilcoxon "
            "alone assume independent folds, and these folds share rows.\n\n## Top-label ECE\n\n" + ece_md + "\n## NLL\n\n" + nll_md)
    (results / "comparison.md").write_text(text, encoding="utf-8")
    ece_df.to_csv(results / "comparison_ece.csv", index=False)
    print(text)
    return text


if __name__ == "__main__":
    main()
