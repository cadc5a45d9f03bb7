"""What the test of calibration tested, in words (audit 3, A1 and C2).

The test is Cox's (mean and slope in logit) with Spiegelhalter's z: it cannot see predictions that are
off in one range only. Audit 3's case: a 10-tree random forest on KITTI (f10: 1,229 scores of exactly 0,
68 of exactly 1) recalibrated by Platt scaling squeezed every other score into 0.19-0.27; rows scored
0.6-0.99 got 0.25 and were right 84 % of the time, yet the test said "no evidence of miscalibration"
(p = 0.153) beside a diagram whose bins lay outside their bands. The counts of f10 per score (10 % steps)
are copied below; the rows are the file's, in another order.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

import pbr_core
from dashboard import texts
from pbr_core import significance as S
from pbr_core.recalibrators import get_recalibrator

#: f10_rf_zero_one.csv: score -> (rows, rows with y = 1)
F10 = {0.0: (1229, 27), 0.1: (681, 16), 0.2: (353, 26), 0.3: (193, 19), 0.4: (110, 21), 0.5: (74, 23),
       0.6: (86, 51), 0.7: (78, 53), 0.8: (53, 47), 0.9: (75, 72), 1.0: (68, 67)}


def _f10() -> pbr_core.Predictions:
    p = np.concatenate([np.full(n, s) for s, (n, k) in F10.items()])
    y = np.concatenate([np.r_[np.ones(k), np.zeros(n - k)] for n, k in F10.values()]).astype(int)
    order = np.random.default_rng(0).permutation(p.size)
    return pbr_core.Predictions.from_arrays(p[order], y[order])


def test_fit_and_apply_does_not_give_an_all_clear_beside_bins_outside_their_bands():
    """Platt on f10, 20 % held out (split seed 3, where the test finds nothing, as in the audit): the
    After sentence says what was tested, that the test does not look at single ranges, and how many of
    the After diagram's bins lie outside their band (3 of 4: more than chance puts there, p < 0.001 from each
    bin's own chance of lying outside; 0.0037 by the coarser binomial bound); it
    never reads "no evidence of miscalibration"."""
    from pbr_core.experiments import FitSettings
    from pbr_core.experiments.runs import run_fit

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Platt's warning about exact 0/1 scores (its own test)
        run = run_fit(_f10(), FitSettings(method="platt", holdout=0.2, seed=3))
    after = run.tests[1]
    assert after.p_value >= S.ALPHA_TEST  # the test sees nothing ...
    table = run.reliability_after
    full = table[table["count"] > 0]
    # ... though the truth is known: held-out rows predicted about 0.24 were right far more often
    assert ((full["mean_confidence"] < 0.3) & (full["accuracy"] > 0.8) & (full["count"] >= 20)).any()
    words = texts.held_out_tests(run.tests, run.n_eval, (run.reliability_before, run.reliability_after))
    outside, with_rows = texts.bins_outside(table)
    assert outside >= 2
    assert f"After: no evidence {S.TESTED}" in words
    assert f"Not an all-clear: {outside} of the {with_rows} bins with rows in the after diagram lie outside" in words
    k, m, p = S.bins_outside_test(table)
    assert p < S.bins_outside_p(k, m) and f"more than chance puts there ({S.p_words(p)})" in words
    assert S.NOT_LOCAL in words and "no evidence of miscalibration" not in words
    assert words.count("Not an all-clear") == 1 and words.count(S.NOT_LOCAL) == 1  # audit 4: once each
    # the bins' ranges of predictions are said to be off; "miscalibrated" stays the test's word
    assert "miscalibrated" not in words.split("After:")[1]


def test_a_test_that_finds_nothing_beside_bins_inside_their_bands_adds_no_warning():
    rng = np.random.default_rng(5)  # a draw with every bin inside its band (seed 4 has 1 of 3 outside)
    p = rng.uniform(0.3, 0.7, 2000)
    y = (rng.random(2000) < p).astype(int)
    test = S.calibration_test(p, y)
    table = pbr_core.reliability_diagram(p, y, 5)
    assert test.p_value >= S.ALPHA_TEST and texts.bins_outside(table)[0] == 0
    assert texts.bands_beside_test(test, table) == ""
    # and a test that finds miscalibration needs no such warning
    bad = S.calibration_test(p, (rng.random(2000) < p + 0.1).astype(int))
    assert bad.p_value < S.ALPHA_TEST and texts.bands_beside_test(bad, table) == ""


def test_what_the_test_does_not_look_at_follows_no_evidence_only():
    """Audit 4: "a range of predictions can be off while the whole looks right" after "miscalibrated beyond
    chance" read as a non sequitur: said only where a test found no evidence."""
    rng = np.random.default_rng(5)
    p = rng.uniform(0.3, 0.7, 2000)
    good = S.calibration_test(p, (rng.random(2000) < p).astype(int))
    bad = S.calibration_test(p, (rng.random(2000) < p + 0.1).astype(int))
    assert good.p_value >= S.ALPHA_TEST and bad.p_value < S.ALPHA_TEST
    assert S.NOT_LOCAL in texts.overall_test_sentence(good)
    assert S.NOT_LOCAL not in texts.overall_test_sentence(bad)
    assert texts.held_out_tests((bad, good), 2000).count(S.NOT_LOCAL) == 1
    assert S.NOT_LOCAL not in texts.held_out_tests((bad, bad), 2000)
    assert texts.held_out_tests((bad, bad), 2000).endswith("After: miscalibrated beyond chance (p < 0.001).")


def test_certain_miscalibration_is_said_once_with_its_count_in_words():
    """Audit 4: f10 (27 rows scored 0 with y = 1, 1 scored 1 with y = 0) read "... probability 0. (certain: 28 outcome(s) ...)"."""
    preds = _f10()
    test = S.calibration_test(*pbr_core.metrics.confidence_and_outcome(*preds.metric_inputs()))
    words = texts.overall_test_sentence(test, pbr_core.reliability_diagram(*preds.metric_inputs(), 14))
    # f10's scores are written with 1 decimal: the certainty holds only if its 0 and 1 are the model's own
    # (audit 9b, finding 4), said once
    assert words.startswith("**Is this model calibrated?** Over all 3,000 rows: miscalibrated for certain: 28 outcomes "
                            "happened that the model gave probability 0, if those scores of 0 and 1 are the model's "
                            "own. But every score in this file is written with at most 1 decimal")
    assert words.count("for certain") == 1 and words.count("rounded to 1 decimal") == 1
    one = S.calibration_test(np.r_[0.0, np.full(99, 0.5)], np.r_[1, np.zeros(99)])
    assert S.verdict(one).startswith("miscalibrated for certain: 1 outcome happened that the model gave probability 0, "
                                     "if those scores of 0 and 1 are the model's own. But every score in this file is 0, "
                                     "1 or a simple fraction such as 0.5: if the file was exported rounded to 1 "
                                     "decimal, say, a score written 1 stands for anything from 0.95")
    assert "outcome(s)" not in S.verdict(test)


def test_p_values_above_099_are_not_written_as_1():
    """C2: calibrated rows whose two p-values both exceed 0.5 give a doubled p of 1: written "p > 0.99",
    which does not read as "perfectly calibrated" (f3: Cox 0.799, Spiegelhalter 0.797)."""
    test = S.calibration_test(np.full(400, 0.3), np.r_[np.ones(120), np.zeros(280)])
    assert test.p_value == 1.0
    words = S.verdict(test)
    assert "(p > 0.99)" in words and "1.000" not in words
    assert texts.p_value(1.0) == S.format_p(1.0) == "> 0.99" and S.p_words(0.995) == "p > 0.99"
    assert S.format_p(0.99) == "0.99"


@pytest.fixture
def f10_platt_csv() -> bytes:
    """Platt's output on all of f10, fitted on those same rows (the audit's in-sample apply): every
    score strictly between 0 and 1 squeezed into 0.19-0.27."""
    preds = _f10()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        q = get_recalibrator("platt").fit(preds).predict_proba(preds)[:, 1]
    lines = ["p_vehicle,is_vehicle", *(f"{a:.17g},{b}" for a, b in zip(q, preds.labels))]
    return "\n".join(lines).encode()


def test_the_reliability_page_says_what_the_test_looked_at(f10_platt_csv):
    at = AppTest.from_file(str(Path(__file__).resolve().parents[2] / "dashboard" / "app.py"), default_timeout=60)
    at.run()
    at.file_uploader(key="data_upload").upload("f10_platt.csv", f10_platt_csv, "text/csv").run()
    assert not at.exception and not at.error
    at.switch_page("views/reliability.py").run()
    assert not at.exception, at.exception
    text = "\n".join(m.value for m in at.markdown).replace("\\", "")
    sentence = next(m for m in text.split("\n") if "Is this model calibrated?" in m)
    assert f"no evidence {S.TESTED}" in sentence and S.NOT_LOCAL in sentence
    assert "Not an all-clear:" in sentence and "outside their 90 % band" in sentence
    assert "whether the model is miscalibrated is what the test" not in text
    # the slider's default in words, its value kept (audit 14 G: "floor(n^(1/3))" in the label)
    n = len(_f10().labels)
    assert at.slider(key="rel_n_bins").label == (f"Number of bins B (default {int(np.floor(n ** (1 / 3) + 1e-9))}: "
                                                 "the paper's choice, the cube root of n rounded down)")
    # the test in plain words, its names in the sentence's "?" (audit 14, item 2)
    assert texts.OVERALL_TEST_PLAIN in sentence and "the test's name is in the help" in sentence
    assert "Cox" not in sentence and "Spiegelhalter" not in sentence
    element = next(m for m in at.markdown if "Is this model calibrated?" in m.value)
    assert "Cox's test" in element.proto.help and "Spiegelhalter" in element.proto.help
