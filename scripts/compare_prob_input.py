#!/usr/bin/env python
"""KITTI: the GP family on log p (``prob_input="log"``) against Wenger's GP on p (``"wenger"``).

Reads the per-fold CSVs that ``scripts/reproduce_paper.py --part kitti --prob-input {log,wenger}
--out docs/reproduction_results/prob_input/{log,wenger}`` wrote (nothing is refitted) and writes
``docs/reproduction_results/prob_input/comparison.md``: per model and GP method, the top-label ECE
(and NLL) mean ± std over the folds both variants have, the paper's ECE (Table ``table:kitti``),
and the paired tests of :func:`pbr_core.experiments.paired.paired_test` on wenger - log (same
splits for both): mean difference with its 95 % t interval, paired t-test, Wilcoxon signed-rank
(exact) and the Nadeau-Bengio corrected resampled t-test (n_te / n_re = 8). Verdict by the rule of
``docs/reproduction.md``: "better" only when the t-test and the Wilcoxon test both give p < 0.05.

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

from pbr_core.experiments.paired import paired_test  # noqa: E402

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


def compare(results: Path, metric: str = "ece") -> tuple[str, pd.DataFrame]:
    tables = {v: pd.read_csv(results / v / "kitti_per_fold.csv") for v in ("log", "wenger")}
    tables = {v: t[t["error"].isna()] for v, t in tables.items()}
    rows = []
    for model in MODELS:
        for method in METHODS:
            a = tables["wenger"].query("model == @model and method == @method").set_index("fold")
            b = tables["log"].query("model == @model and method == @method").set_index("fold")
            folds = sorted(set(a.index) & set(b.index))
            if len(folds) < 2:
                continue
            ratio = float((a.loc[folds, "n_te"] / a.loc[folds, "n_re"]).mean())
            res = paired_test(a.loc[folds, metric].to_numpy(), b.loc[folds, metric].to_numpy(), test_fraction=ratio)
            better = res["t_p"] < 0.05 and res["wilcoxon_p"] < 0.05
            verdict = ("wenger better" if better and res["mean_diff"] < 0 else
                       "log better" if better else "no difference shown")
            rows.append({"model": model, "method": method, "folds": len(folds),
                         "log": _ms(b.loc[folds, metric]), "wenger": _ms(a.loc[folds, metric]),
                         "paper": PAPER_ECE[model][method] if metric == "ece" else "-",
                         "mean_diff": res["mean_diff"], "ci": f"[{res['ci_low']:+.4f}, {res['ci_high']:+.4f}]",
                         "t_p": res["t_p"], "wilcoxon_p": res["wilcoxon_p"], "corrected_t_p": res["corrected_t_p"],
                         "wenger_lower_folds": int((a.loc[folds, metric] < b.loc[folds, metric]).sum()),
                         "verdict": verdict,
                         "kl_log": _ms(b.loc[folds, "kl"], 2), "kl_wenger": _ms(a.loc[folds, "kl"], 2),
                         "fit_s_log": float(b.loc[folds, "fit_seconds"].mean()),
                         "fit_s_wenger": float(a.loc[folds, "fit_seconds"].mean())})
    df = pd.DataFrame(rows)
    name = {"ece": "top-label ECE", "nll": "NLL"}.get(metric, metric)
    header = ["model", "method", "folds", f"paper {name}" if metric == "ece" else "paper", f"log p: {name}",
              f"wenger: {name}", "wenger - log (95 % CI)", "t p", "Wilcoxon p", "corrected p", "wenger lower",
              "verdict", "KL log / wenger"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for r in df.itertuples():
        lines.append("| " + " | ".join([
            MODEL_LABELS[r.model], LABELS[r.method], str(r.folds), r.paper, r.log, r.wenger,
            f"{r.mean_diff:+.4f} {r.ci}", _p(r.t_p), _p(r.wilcoxon_p), _p(r.corrected_t_p),
            f"{r.wenger_lower_folds}/{r.folds}", r.verdict, f"{r.kl_log} / {r.kl_wenger}"]) + " |")
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
            "corrected resampled t-test with n_te/n_re = 8). Verdict: 'better' only when the t-test and the Wilcoxon "
            "test both give p < 0.05.\n\n## Top-label ECE\n\n" + ece_md + "\n## NLL\n\n" + nll_md)
    (results / "comparison.md").write_text(text, encoding="utf-8")
    ece_df.to_csv(results / "comparison_ece.csv", index=False)
    print(text)
    return text


if __name__ == "__main__":
    main()
