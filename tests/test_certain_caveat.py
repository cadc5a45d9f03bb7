""""Miscalibrated for certain" is said with its condition when the file's values lie on a coarse grid (audit 9b,
finding 4): Adult's probabilities written with 1 decimal, outcomes drawn from the unrounded ones, read "for
certain" in 8 / 11 / 23 / 42 / 71 % of files of 10 / 20 / 40 / 80 / 200 rows (a row written 0.0 or 1.0 with the
other outcome). A 1- or 2-decimal grid is still never read as a rounding (:data:`pbr_core.resolution.MIN_DECIMALS`:
small forests and nearest-neighbours models write such values themselves); the verdict now says that it is
certain only if those 0s and 1s are the model's own, and how to tell."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import pbr_core.significance as S
from pbr_core.cli import main
from pbr_core.groups import calibration_by_group, group_statements
from pbr_core.loading import load_predictions
from pbr_core.resolution import COARSE_CAVEAT_MARK, coarse_caveat, evidence_counts
from test_nll_infinite import forest_scores

ROOT = Path(__file__).resolve().parents[1]
P_ADULT = pd.read_csv(ROOT / "sample_data" / "adult_gradient_boosting.csv.gz")["p_gt50k"].to_numpy()


def _rounded_file(n: int, decimals: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Audit 9b's cell: the model's p written with ``decimals``, the outcome drawn from the p it had."""
    rng = np.random.default_rng(seed)
    p = P_ADULT[rng.integers(0, P_ADULT.size, n)]
    return p.round(decimals), (rng.random(n) < p).astype(int)


def _certain_rounded_file(n: int, decimals: int) -> tuple[np.ndarray, np.ndarray]:
    for seed in range(200):
        q, y = _rounded_file(n, decimals, seed)
        if S.calibration_test(q, y).method.startswith("certain"):
            return q, y
    raise AssertionError("no file read 'for certain'")


@pytest.mark.parametrize("decimals", [1, 2])
def test_a_certain_verdict_on_a_coarse_file_carries_the_caveat(decimals):
    q, y = _certain_rounded_file(40, decimals)
    words = S.verdict(S.calibration_test(q, y))
    assert words.startswith("miscalibrated for certain: ")
    assert COARSE_CAVEAT_MARK in words
    d = "1 decimal" if decimals == 1 else "2 decimals"
    assert f"every score in this file is written with at most {d}: if the file was exported rounded to {d}" in words
    h = 0.5 * 10.0 ** -decimals
    assert f"a score written 1 stands for anything from {1 - h:.{decimals + 1}f}" in words
    assert f"one written 0 for anything below {h:.{decimals + 1}f}" in words
    assert "export the scores with more decimals" in words


def test_every_certain_verdict_on_a_1_decimal_file_carries_it():
    """The claim is made as often as before (the design keeps the grid unread), never bare: 100 files of 10, 40
    and 200 rows."""
    certain = 0
    for n in (10, 40, 200):
        for seed in range(100):
            test = S.calibration_test(*_rounded_file(n, 1, 1000 * n + seed))
            if test.method.startswith("certain"):
                certain += 1
                assert COARSE_CAVEAT_MARK in S.verdict(test)
    assert certain > 50


def test_full_precision_scores_with_a_true_0_or_1_get_no_caveat():
    """Float64 scores (on no grid) whose exact 0 or 1 went wrong: the 0 and 1 are the model's, certain, bare."""
    rng = np.random.default_rng(3)
    p = np.r_[0.0, 1.0, rng.uniform(0.01, 0.99, 300)]
    y = np.r_[1, 1, (rng.random(300) < p[2:]).astype(int)]
    words = S.verdict(S.calibration_test(p, y))
    assert words == "miscalibrated for certain: 1 outcome happened that the model gave probability 0."
    assert coarse_caveat(evidence_counts(p)) == ""
    # only 0, 1 and 0.5: no value shows how the file wrote them, and a 1-decimal export writes them too
    assert "0, 1 or a simple fraction such as 0.5" in coarse_caveat(evidence_counts(np.r_[0.0, 1.0, np.full(20, 0.5)]))


def test_a_ten_tree_forest_gets_the_caveat_too():
    """Its vote shares are steps of 0.1, exactly what a 1-decimal export writes: nothing in the file tells the
    two apart (the reason MIN_DECIMALS leaves such grids unread), so its verdict says the condition, which holds
    for it (its 0 and 1 are its own): the verdict stands, with the way to check."""
    p, y = forest_scores()
    words = S.verdict(S.calibration_test(p, y))
    assert words.startswith("miscalibrated for certain: ") and COARSE_CAVEAT_MARK in words
    assert "at most 1 decimal" in words and "A small random forest or a nearest-neighbours model" in words


def test_three_decimals_shown_by_too_few_values_get_the_caveat_and_enough_are_read_as_rounding():
    """A 3-decimal grid shown by fewer than MIN_EVIDENCE values is not read as a rounding (it could be float32's
    chance): certain, with the caveat; shown by enough values it is read as the rounding (audit 8)."""
    rng = np.random.default_rng(4)
    few = np.r_[1.0, rng.uniform(0.1, 0.9, 10).round(3)]
    test = S.calibration_test(few, np.r_[0, np.ones(10, int)])
    assert test.method.startswith("certain") and "at most 3 decimals" in test.method
    many = np.r_[1.0, rng.uniform(0.1, 0.9, 200).round(3)]
    test = S.calibration_test(many, np.r_[0, (rng.random(200) < many[1:]).astype(int)])
    assert not test.method.startswith("certain") and test.rounded_rows == 1


def test_the_cli_says_it_in_text_and_json(tmp_path, capsys):
    q, y = _certain_rounded_file(40, 1)
    path = tmp_path / "rounded.csv"
    pd.DataFrame({"p": q, "label": y}).to_csv(path, index=False)
    assert main(["evaluate", str(path)]) == 0
    text = capsys.readouterr().out
    assert "miscalibrated for certain" in text and COARSE_CAVEAT_MARK in text
    assert main(["evaluate", str(path), "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert COARSE_CAVEAT_MARK in out["calibration_verdict"] and COARSE_CAVEAT_MARK in out["calibration_test"]
    assert main(["evaluate", str(path), "--stream"]) == 0  # one pass: the same sums, the same caveat
    assert COARSE_CAVEAT_MARK in capsys.readouterr().out


def test_groups_say_it_in_their_sentences_and_cells():
    import dashboard.texts as texts

    q, y = _certain_rounded_file(200, 1)
    preds = load_predictions(pd.DataFrame({"p": q, "label": y, "g": np.arange(q.size) % 2}),
                             group_columns=["g"])
    report = calibration_by_group(preds, "g")
    certain = report.table[report.table.test_method.str.startswith("certain")]
    assert len(certain) >= 1
    lines = [line for line in group_statements(report) if "for certain" in line]
    assert lines and all(COARSE_CAVEAT_MARK in line for line in lines)
    cell = texts.group_verdict(0.0, float("nan"), 0.05, certain.test_method.iloc[0])
    assert cell.startswith("miscalibrated (an outcome it called impossible happened, unless the file's 0 and 1")
