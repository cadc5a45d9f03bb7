#!/usr/bin/env python3
"""Regenerate the two audit samples in ``sample_data/``: a model's predictions with demographic
group columns, and LLM (confidence, correct) records with model and benchmark columns.

1. ``adult_gradient_boosting.csv.gz``: the UCI Adult census table (Becker & Kohavi 1996), original
   split. A scikit-learn ``HistGradientBoostingClassifier(random_state=0)`` (every other parameter
   at its default; the eight text attributes as categorical features, "?" as missing) is trained
   on the 32,561 ``adult.data`` rows to predict income > 50K, and its p(income > 50K) on the
   16,281 ``adult.test`` rows is written with the person's attributes as they are in the data
   (``age, workclass, education, marital_status, occupation, relationship, race, sex,
   hours_per_week, native_country``), then ``p_gt50k`` (9 significant digits) and ``label``
   (1 = income > 50K). ``fnlwgt``, ``education_num`` and the capital columns are left out of the
   file (they are model inputs, not audit segments).
2. ``llm_qa_confidence_correct.csv.gz``: from Plaut, Nguyen & Trinh (2024), the zero-shot
   multiple-choice answers of four chat LLMs (gpt-4-turbo, Llama3-70b, Yi-34b, Mistral) on five
   benchmarks (arc, hellaswag, mmlu, truthfulqa, winogrande), first prompt phrasing only:
   ``model, dataset, question_idx, confidence, correct`` (confidence = the probability of the
   generated answer token; correct = 1 when the answer was right, unparseable answers count as
   wrong, as in the authors' analysis).

Both sources are described in the project's shared data notes (SOURCES.md there); the licenses
are in ``sample_data/SOURCES.md``. Deterministic (fixed seed); re-reads every file it writes and
prints n, accuracy and the ECE with 15 bins.

Usage (from the repository root; ~20 s)::

    python scripts/make_audit_samples.py [--data /work/shared/data] [--out sample_data]
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd

REPO_ROOT = Path(__file__).resolve().parents[1]
ADULT_KEEP = ["age", "workclass", "education", "marital_status", "occupation", "relationship", "race",
              "sex", "hours_per_week", "native_country"]
ADULT_CATEGORICAL = ["workclass", "education", "marital_status", "occupation", "relationship", "race",
                     "sex", "native_country"]
ADULT_FEATURES = ["age", "fnlwgt", "education_num", "capital_gain", "capital_loss", "hours_per_week",
                  *ADULT_CATEGORICAL]
LLM_MODELS = ["gpt-4-turbo", "Llama3-70b", "Yi-34b", "Mistral"]


def adult(data: Path, out: Path) -> Path:
    from sklearn.ensemble import HistGradientBoostingClassifier

    df = pd.read_csv(data / "raw" / "uci_adult.csv.gz", na_values="?", keep_default_na=False)
    X = df[ADULT_FEATURES].copy()
    for c in ADULT_CATEGORICAL:
        X[c] = X[c].astype("category")
    train, test = (df["split"] == "train").to_numpy(), (df["split"] == "test").to_numpy()
    model = HistGradientBoostingClassifier(random_state=0, categorical_features="from_dtype")
    model.fit(X[train], df.loc[train, "income_gt50k"])
    p = model.predict_proba(X[test])[:, 1]
    raw = pd.read_csv(data / "raw" / "uci_adult.csv.gz", keep_default_na=False)  # "?" kept as written
    rows = raw.loc[test, ADULT_KEEP].reset_index(drop=True)
    rows["p_gt50k"] = p
    rows["label"] = df.loc[test, "income_gt50k"].to_numpy()
    path = out / "adult_gradient_boosting.csv.gz"
    rows.to_csv(path, index=False, float_format="%.9g", compression={"method": "gzip", "mtime": 0})
    return path


def llm(data: Path, out: Path) -> Path:
    df = pd.read_csv(data / "predictions" / "llm_plaut2024_msp.csv.gz")
    keep = df["model"].isin(LLM_MODELS) & (df["prompt"] == "first")
    rows = df.loc[keep, ["model", "dataset", "question_idx", "confidence", "correct"]]
    rows = rows.sort_values(["model", "dataset", "question_idx"], kind="stable").reset_index(drop=True)
    path = out / "llm_qa_confidence_correct.csv.gz"
    rows.to_csv(path, index=False, float_format="%.9g", compression={"method": "gzip", "mtime": 0})
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--data", type=Path, default=Path("/work/shared/data"))
    parser.add_argument("--out", type=Path, default=REPO_ROOT / "sample_data")
    args = parser.parse_args()
    import sys

    sys.path.insert(0, str(REPO_ROOT))
    import pbr_core

    print("| file | kind | n | accuracy | top-label ECE, 15 bins | binary ECE on p(y=1), 15 bins | size |")
    print("|---|---|---|---|---|---|---|")
    for path in (adult(args.data, args.out), llm(args.data, args.out)):
        preds = pbr_core.load_predictions(path)
        c, y = preds.metric_inputs()
        binary = f"{pbr_core.ece(preds.p_positive, preds.labels, 15):.4f}" if preds.kind == "binary" else "-"
        print(f"| `{path.name}` | {preds.kind} | {preds.n} | {preds.accuracy:.4f} | {pbr_core.ece(c, y, 15):.4f} "
              f"| {binary} | {path.stat().st_size / 1024:.0f} KB |")


if __name__ == "__main__":
    main()
