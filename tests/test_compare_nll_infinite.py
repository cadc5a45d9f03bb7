"""Compare reads the NLL as the Reliability page does (user audit 12a): a fold where a method gives an
outcome that happened a probability of 0 (or below the floor of 2.2e-16) has an infinite NLL. Before,
the table showed a mean of floored numbers (0.3337 ± 0.0121) and the paired tests read them: "PBR better
than Uncalibrated (p < 0.001)" while "Temperature scaling: no difference shown", although temperature
scaling is the method that removes the infinite loss."""

from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from pbr_core.experiments import paired_tests, shown_best, summarize, summary_table
from pbr_core.metrics import NLL_EPS, nll_infinite_rows

ROOT = Path(__file__).resolve().parents[1]


def _fold_table(floored: dict[str, list[float]], infinite: dict[str, list[int]]) -> pd.DataFrame:
    rows = []
    for m, values in floored.items():
        for f, v in enumerate(values):
            rows.append({"method": m, "fold": f, "n_re": 1000, "n_te": 2000, "nll": v,
                         "nll_infinite_rows": infinite.get(m, [0] * len(values))[f], "error": None})
    return pd.DataFrame(rows)


def _audit_like_table() -> pd.DataFrame:
    """The audit's shape: Uncalibrated infinite on 2 of 10 folds (floored: +0.017 there), PBR below the
    floor on the same folds (floored lower than both), temperature scaling finite everywhere."""
    rng = np.random.default_rng(0)
    base = 0.32 + 0.005 * rng.standard_normal(10)
    hit = [1, 1, 0, 0, 0, 0, 0, 0, 0, 0]
    return _fold_table({"uncalibrated": list(base + 0.017 * np.array(hit)),
                        "temperature": list(base - 0.001 + 0.004 * rng.standard_normal(10)),
                        "pbr": list(base - 0.024 + 0.002 * rng.standard_normal(10))},
                       {"uncalibrated": hit, "pbr": hit})


def test_a_probability_below_the_floor_counts_as_zero():
    y = np.array([1, 0, 1, 1])
    assert nll_infinite_rows(np.array([4.9e-308, 0.5, 0.9, 0.0]), y) == 2  # 4.9e-308 and exactly 0
    assert nll_infinite_rows(np.array([NLL_EPS, 0.5, 0.9, 0.7]), y) == 0   # at the floor: its own value
    assert nll_infinite_rows(np.array([0.9, 1 - 1e-20, 0.9, 0.9]), y) == 1  # stored as 1: 0 for y = 0


def test_no_paired_test_is_read_from_floored_numbers():
    out = paired_tests(_audit_like_table(), "nll")
    by = {frozenset((r.a, r.b)): r for r in out.itertuples(index=False)}
    t_u = by[frozenset(("temperature", "uncalibrated"))]
    assert t_u.better == "temperature" and math.isnan(t_u.decisive_p) and math.isnan(t_u.wilcoxon_p)
    p_u = by[frozenset(("pbr", "uncalibrated"))]  # both infinite on folds 1-2: nobody is better
    assert p_u.better is None and math.isnan(p_u.decisive_p) and p_u.a_infinite_folds == p_u.b_infinite_folds == 2
    # shown "better" before: PBR's floored mean was the lowest; now it is infinite and never best
    assert shown_best(_audit_like_table(), "nll") == "temperature"


def test_the_summary_says_infinite_and_keeps_numbers_for_json():
    s = summarize(_audit_like_table(), metrics=["nll"])
    text = summary_table(s)
    assert text.loc["uncalibrated", "nll"] == "infinite (on 2 of 10 folds)"
    assert text.loc["pbr", "nll"] == "infinite (on 2 of 10 folds)"
    assert "±" in text.loc["temperature", "nll"]
    assert s.set_index("method").loc["temperature", "best"] and not s.set_index("method").loc["pbr", "best"]
    assert np.isfinite(s["mean"]).all()  # the JSON keeps the floored number beside the count


def test_the_page_words_say_infinite_without_a_p_value():
    from dashboard import tables, texts

    frame = tables.paired_frame(_audit_like_table(), False, "nll")
    verdicts = " | ".join(frame["verdict"])
    assert "NLL is infinite on 2 of 10 folds" in verdicts and "no test is needed" in verdicts
    assert "both NLLs are infinite" in verdicts
    row = frame[frame["verdict"].str.startswith("Temperature scaling better")].iloc[0]
    assert row[list(texts.PAIRED_P_COLUMNS)[0]] == "–"
    diff = [c for c in frame.columns if c.startswith("mean ")][0]
    assert set(frame[diff]) <= {"+infinite", "−infinite", "–"} and "–" in set(frame[diff])


def test_equal_methods_without_zeros_still_get_the_tests():
    """No infinite fold: the paired tests run as before (their level is pinned in test_paired.py)."""
    t = _audit_like_table()
    t["nll_infinite_rows"] = 0
    out = paired_tests(t, "nll")
    assert out["decisive_p"].notna().all() and (out["a_infinite_folds"] == 0).all()


def test_compare_end_to_end_and_the_cli(tmp_path):
    """A binary file whose scores are exactly 0 for some rows that happened: uncalibrated is infinite on
    the folds holding them, temperature scaling (whose output stays above 0) finite everywhere."""
    from pbr_core.experiments import compare

    rng = np.random.default_rng(3)
    n = 1200
    p = rng.uniform(0.05, 0.95, n)
    y = (rng.random(n) < p).astype(int)
    p[:40], y[:40] = 0.0, 0  # a random forest's unanimous votes: 40 rows at exactly 0 ...
    y[:3] = 1  # ... three of which happened (every fit set holds some zeros: temperature scaling lifts them)
    path = tmp_path / "zeros.csv"
    pd.DataFrame({"p_positive": p, "label": y}).to_csv(path, index=False)
    import pbr_core

    preds = pbr_core.load_predictions(path)
    table = compare(preds, ["uncalibrated", "temperature"], n_re=400, n_folds=8)
    unc = table[table["method"] == "uncalibrated"]
    assert (unc["nll_infinite_rows"] > 0).sum() >= 1
    assert (table[table["method"] == "temperature"]["nll_infinite_rows"] == 0).all()
    out = paired_tests(table, "nll")
    assert list(out["better"]) == ["temperature"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    run = subprocess.run([sys.executable, "-m", "pbr_core.cli", "compare", str(path), "--methods",
                          "uncalibrated,temperature", "--n-re", "400", "--folds", "8", "--quiet", "--paired-metric", "nll"],
                         capture_output=True, text=True, cwd=ROOT, env=env, timeout=300)
    assert run.returncode == 0, run.stderr
    assert "infinite (on" in run.stdout and "NLL is infinite on" in run.stdout, run.stdout
