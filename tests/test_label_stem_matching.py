"""A score column named after the label with the label's ``is_``/``has_``/``_flag`` set aside
(``fraud_score`` beside ``is_fraud``, audit 8's fraud_scores_by_month.csv): the file's score even
beside other numbers (an amount), as ``p_fraud`` beside ``fraud`` always was; an exact match still
decides first, and the generic label names (``y_true``) match nothing."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from pbr_core import load_predictions
from pbr_core.loading._roles import score_named_after

ROOT = Path(__file__).resolve().parents[1]


def fraud_frame(label: str = "is_fraud", score: str = "fraud_score", n: int = 800, seed: int = 8) -> pd.DataFrame:
    """Audit 8's layout: id, date, region, an amount (outside [0, 1]), the score, the 0/1 outcome drawn
    from the score (known truth: the score is calibrated)."""
    rng = np.random.default_rng(seed)
    p = np.round(rng.beta(0.6, 4, n), 4)
    return pd.DataFrame({"transaction_id": [f"TX{1000000 + i}" for i in range(n)],
                         "scored_at": pd.date_range("2026-01-01", periods=n, freq="h").strftime("%Y-%m-%d"),
                         "region": rng.choice(["North", "East", "South"], n),
                         "amount": np.round(rng.lognormal(4, 1, n), 2), score: p,
                         label: (rng.random(n) < p).astype(int)})


@pytest.mark.parametrize("label,score", [
    ("is_fraud", "fraud_score"), ("has_default", "p_default"), ("was_readmitted", "readmitted_prob"),
    ("churn_flag", "churn_proba"), ("label_fraud", "fraud_pred"), ("y_default", "prob_default"),
    ("fraud", "p_is_fraud"), ("default_ind", "default_probability")])
def test_a_score_named_after_the_label_without_its_prefix_is_the_score(label, score):
    df = fraud_frame(label, score)
    preds = load_predictions(df.to_csv(index=False).encode(), format="csv")
    roles = dict(preds.column_roles)
    assert roles[label] == "label" and roles[score] == "score" and roles["amount"] == "metadata"
    np.testing.assert_array_equal(preds.labels, df[label].to_numpy())
    np.testing.assert_allclose(preds.probs[:, 1], df[score].to_numpy())
    assert any(f"{score!r} is the probability of {label!r}, by its name" in n for n in preds.notes)


def test_a_named_label_finds_its_score_by_the_stem_too():
    """label_column='is_fraud' given: fraud_score is its score, amount is metadata (was: ambiguous)."""
    df = fraud_frame()
    preds = load_predictions(df.to_csv(index=False).encode(), format="csv", label_column="is_fraud")
    assert dict(preds.column_roles)["fraud_score"] == "score"
    assert dict(preds.column_roles)["amount"] == "metadata"


def test_an_exact_match_decides_before_the_stem():
    """fraud (0/1) and fraud_flag (0/1) beside fraud_prob: 'fraud' is named exactly, as before."""
    df = fraud_frame("fraud", "fraud_prob")
    df["fraud_flag"] = (df["amount"] > 100).astype(int)
    assert score_named_after("fraud", ["amount", "fraud_prob", "fraud_flag"]) == "fraud_prob"
    preds = load_predictions(df.to_csv(index=False).encode(), format="csv")
    assert dict(preds.column_roles)["fraud"] == "label"


def test_generic_label_names_and_two_matches_name_nothing():
    assert score_named_after("y_true", ["y_prob", "y_pred"]) is None  # y_true -> y would match both
    assert score_named_after("true_label", ["p_true", "amount"]) is None  # 'true' names no outcome
    assert score_named_after("is_fraud", ["fraud_score", "p_fraud"]) is None  # two at the same step
    assert score_named_after("is_fraud", ["amount", "rate"]) is None


def test_the_command_line_evaluates_the_audit_layout(tmp_path):
    path = tmp_path / "fraud_scores_by_month.csv"
    fraud_frame().to_csv(path, index=False)
    run = subprocess.run([sys.executable, "-m", "pbr_core.cli", "evaluate", str(path)], capture_output=True,
                         text=True, cwd=ROOT,
                         env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=120)
    assert run.returncode == 0, run.stderr
    assert "ambiguous" not in run.stderr
