"""A score of exactly 0 or 1 that is wrong makes the NLL infinite (audit 3, B1: a 10-tree random
forest, 28 such rows of 3,000). The library keeps scikit-learn's floored value under ``nll`` and counts
those rows (``nll_infinite_rows``); the CLI, the dashboard and the report say "infinite" and never
show a change of NLL computed from the floored value."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import pbr_core
from pbr_core.metrics import NLL_EPS, calibration_summary, nll_infinite_rows, target_brier_nll

ROOT = Path(__file__).resolve().parents[1]


def forest_scores(n: int = 3000, seed: int = 7) -> tuple[np.ndarray, np.ndarray]:
    """A 10-tree random forest's p(y=1): a vote share in steps of 0.1, exactly 0 or 1 where every tree
    agrees (about 4 in 10 rows), outcomes drawn from a truth a little less sure than the votes, so
    that a few exact 0s and 1s are wrong."""
    rng = np.random.default_rng(seed)
    truth = rng.beta(0.3, 0.6, n)
    votes = rng.binomial(10, truth) / 10.0
    y = (rng.random(n) < 0.02 + 0.96 * truth).astype(int)
    return votes, y


def forest_csv(path: Path, n: int = 3000, seed: int = 7) -> Path:
    p, y = forest_scores(n, seed)
    pd.DataFrame({"p_positive": p, "label": y}).to_csv(path, index=False)
    return path


def _slow_counts(p, y):
    """An independent loop: rows whose probability for what happened is 0, and the floored mean."""
    infinite, total = 0, 0.0
    for pi, yi in zip(p.tolist(), y.tolist()):
        q = pi if yi == 1 else 1.0 - pi
        infinite += q == 0.0
        total += -math.log(max(q, NLL_EPS))
    return infinite, total / len(p)


def test_the_count_and_the_floored_value_match_a_slow_loop():
    p, y = forest_scores()
    infinite, floored = _slow_counts(p, y)
    assert infinite > 5  # the fixture has what it is for
    s = calibration_summary(p, y)
    assert s["nll_infinite_rows"] == infinite == nll_infinite_rows(p, y)
    assert s["nll"] == pytest.approx(floored, rel=1e-12)
    assert target_brier_nll(p, y)["nll_infinite_rows"] == infinite
    # (n, 2) matrices and multiclass: the probability of the true class
    two = np.column_stack([1 - p, p])
    assert nll_infinite_rows(two, y) == infinite
    assert nll_infinite_rows(np.array([[0.0, 1.0, 0.0], [0.2, 0.3, 0.5]]), np.array([0, 2])) == 1
    # no exact 0 for what happened: nothing counted, and the notebook table shows the number
    q = np.clip(p, 0.01, 0.99)
    assert calibration_summary(q, y)["nll_infinite_rows"] == 0
    assert "infinite" not in calibration_summary(q, y)._repr_html_()
    assert f"infinite ({infinite} rows" in s._repr_html_()


def test_the_cli_says_infinite_and_its_json_keeps_the_count(tmp_path):
    path = forest_csv(tmp_path / "forest.csv")
    p, y = forest_scores()
    infinite, floored = _slow_counts(p, y)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    run = lambda *a: subprocess.run([sys.executable, "-m", "pbr_core.cli", "evaluate", str(path), *a],
                                    capture_output=True, text=True, cwd=ROOT, env=env, timeout=120)
    text = run().stdout
    nll_line = next(line for line in text.splitlines() if line.startswith("nll "))
    assert f"infinite ({infinite} rows gave what happened a probability of 0 (or below 2.2e-16); {floored:.4f}" in nll_line
    table = json.loads(run("--format", "json").stdout)
    assert table["nll_infinite_rows"] == infinite and table["nll"] == pytest.approx(floored, rel=1e-9)
    # The CORP log loss is the same probability's (p(y=1)): infinite with its MCB in the text (audit 4:
    # they were printed as 0.5245 and 0.3234 beside an infinite NLL); the JSON keeps the floored numbers.
    lines = {line.split()[0]: line for line in text.splitlines() if line.startswith("corp_log")}
    assert lines["corp_log"].split(None, 1)[1].startswith(f"infinite ({infinite} rows; {table['corp_log']:.6g}")
    assert lines["corp_log_mcb"].split(None, 1)[1].startswith("infinite (")
    assert "infinite" not in lines["corp_log_dsc"] and "infinite" not in lines["corp_log_unc"]
    assert table["corp_log_infinite_rows"] == infinite and table["corp_log"] == pytest.approx(floored, rel=1e-9)


def test_the_corp_log_counts_its_own_probability_on_multiclass_data():
    """Multiclass: the CORP log loss is of the top probability against correctness, infinite only where a
    top probability of exactly 1 was wrong; a true class given 0 under a softer top is finite there."""
    from pbr_core.cli.evaluate import corp_columns

    rng = np.random.default_rng(3)
    probs = rng.dirichlet([2.0, 2.0, 2.0], 400)
    y = np.array([rng.choice(3, p=row) for row in probs])
    probs[0], y[0] = [0.0, 0.4, 0.6], 0  # NLL infinite, the top (0.6) finite
    assert corp_columns(probs, y)["corp_log_infinite_rows"] == 0
    probs[1], y[1] = [0.0, 0.0, 1.0], 1  # a wrong top of exactly 1
    assert corp_columns(probs, y)["corp_log_infinite_rows"] == 1


def test_the_report_table_and_the_fit_and_apply_card_never_show_a_floored_change():
    from dashboard import recal_ui, tables

    p, y = forest_scores()
    s = calibration_summary(p, y)
    assert tables.metric_cards_frame(s).loc["NLL", "value"] == "infinite"
    before = {"nll": s["nll"], "nll_infinite_rows": s["nll_infinite_rows"]}
    after = {"nll": 0.2971, "nll_infinite_rows": 0}
    card = recal_ui.nll_card(before, after)
    assert card["value"] == "0.2971" and card["delta"] == "from infinite" and card["delta_color"] == "off"
    assert recal_ui.nll_card(after, before)["value"] == "infinite"
    assert recal_ui.nll_card(after, before)["delta"] == "from 0.2971"
    finite = recal_ui.nll_card({"nll": 0.40, "nll_infinite_rows": 0}, after)
    assert finite["delta"] == "-0.1029" and finite["value"] == "0.2971"
