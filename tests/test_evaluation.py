"""The one table of metrics, the one choice of binary ECE and the paper's constants (issue 36)."""

from __future__ import annotations

import math

import numpy as np
import pytest

import pbr_core
from pbr_core import paper
from pbr_core.evaluation import (CV_SCORES, EVALUATION_METRICS, METRICS, evaluation_metrics, measured_ece,
                                 reliability_table)
from pbr_core.experiments import HIGHER_IS_BETTER, LOWER_IS_BETTER, compare, summarize
from pbr_core.metrics import BINARY_TARGET, DEFAULT_BINARY_TARGET


def test_metrics_table_is_what_the_summaries_and_tables_read() -> None:
    assert tuple(METRICS)[:4] == EVALUATION_METRICS == ("ece", "accuracy", "nll", "brier")
    assert HIGHER_IS_BETTER == {"accuracy"} and LOWER_IS_BETTER == set(METRICS) - {"accuracy"}
    assert set(CV_SCORES) <= set(EVALUATION_METRICS) and all(not METRICS[m].higher_is_better for m in CV_SCORES)
    assert METRICS["ece"].format(0.012345) == "0.0123" and METRICS["kl"].format(1234.5) == "1234"
    assert METRICS["fit_seconds"].format(math.nan) == "–" and METRICS["accuracy"].in_words == "accuracy"
    # every metric of a compare table is in the table, and summarize finds exactly those
    rng = np.random.default_rng(0)
    p = rng.dirichlet(np.ones(3), 400)
    preds = pbr_core.Predictions.from_arrays(p, rng.integers(0, 3, 400))
    table = compare(preds, ["uncalibrated", "temperature"], n_re=200, n_folds=2)
    assert set(EVALUATION_METRICS) <= set(table.columns)
    assert set(summarize(table)["metric"]) == {m for m in METRICS if m in table and table[m].notna().any()}


def test_binary_target_is_one_choice() -> None:
    assert BINARY_TARGET.values == ("positive", "top_label") and BINARY_TARGET.default == DEFAULT_BINARY_TARGET
    assert set(BINARY_TARGET.words) == set(BINARY_TARGET.values)
    assert BINARY_TARGET.measured("binary", "positive") == "positive"
    assert BINARY_TARGET.measured("binary", "top_label") == "top_label"
    assert BINARY_TARGET.measured("multiclass", "positive") == "top_label"
    assert BINARY_TARGET.measured("top_label", "positive") == "top_label"
    with pytest.raises(ValueError, match="Expected argument `binary_ece` to be 'positive' or 'top_label', but got 'p1'"):
        BINARY_TARGET.check("p1", "binary_ece")


def test_evaluation_metrics_measure_the_chosen_target() -> None:
    rng = np.random.default_rng(1)
    p1 = rng.uniform(size=500)
    y = (rng.uniform(size=500) < p1 ** 1.5).astype(int)
    probs = np.column_stack([1 - p1, p1])
    pos, top = evaluation_metrics(probs, y, "binary", "positive"), evaluation_metrics(probs, y, "binary", "top_label")
    B = pbr_core.optimal_n_bins(500)
    assert pos["n_bins"] == B and pos["ece"] == pbr_core.ece(p1, y, n_bins=B) == measured_ece(probs, y, "binary")
    assert top["ece"] == pbr_core.ece(probs, y, n_bins=B, binary_target="top_label") != pos["ece"]
    assert pos["brier"] == pytest.approx(top["brier"] / 2) and pos["accuracy"] == top["accuracy"]
    assert reliability_table(probs, y, "binary").equals(pbr_core.reliability_diagram(p1, y, n_bins=B))


def test_the_papers_constants() -> None:
    assert paper.PAPER_ALPHAS == (0.0, 0.01, 0.1, 0.25, 0.5, 0.75, 0.9, 1.0)
    assert paper.PAPER_N_RE == 1000 and paper.PAPER_N_RE_VALUES[-1] == 5000
    assert paper.PAPER_BINARY_ECE in BINARY_TARGET.values and paper.PAPER_BINARY_ECE != BINARY_TARGET.default
    assert paper.continuation_order([0.5, 0.0, 1.0, 0.5, 0.1]) == [1, 4, 0, 3, 2]
