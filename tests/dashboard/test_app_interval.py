"""The ECE's interval and the bound ranges on the pages (AppTest, no browser).

* The Reliability page shows the interval `pbr-calib evaluate` prints, and one sentence saying
  what it means and that it (not Theorem 1's range) answers "how miscalibrated is my model?".
* The Bins & bias page says the same about Theorem 1's range (the PBR page's Corollary 2
  sentence is checked after a real fit in test_app_recal.py).
* Above 8 million rows floor(n^(1/3)) exceeds 200: the Reliability page's B is still the cube
  root, as its label says, so its ECE and MCE are the command line's.
"""

from __future__ import annotations


import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

import pbr_core
from dashboard import compute, state, texts
from pbr_core.cli import evaluation_table

RELIABILITY, BINS = "views/reliability.py", "views/bins_bias.py"


def _metric(at: AppTest, label_start: str) -> str:
    for m in at.metric:
        if m.label.startswith(label_start):
            return m.value
    raise AssertionError(f"no metric {label_start!r}; have {[m.label for m in at.metric]}")


def _captions(at: AppTest) -> list[str]:
    return [c.value for c in at.caption]


@pytest.mark.parametrize("sample", ["cifar100_densenet121.npz", "kitti_random_forest.csv"])
def test_reliability_interval_is_the_command_lines_and_says_what_it_means(at, sample):
    if sample != state.DEFAULT_SAMPLE:
        at.selectbox(key="data_sample").set_value(sample).run()
    preds = at.session_state["pbr_loaded"].preds
    at.switch_page(RELIABILITY).run()
    assert not at.exception
    cli = evaluation_table(preds)
    ece = float(_metric(at, "ECE"))
    assert f"{cli['ece']:.4f}" == _metric(at, "ECE")
    assert texts.ece_interval_caption(cli["ece_ci_low"], cli["ece_ci_high"]) in _captions(at)
    assert round(cli["ece_ci_low"], 4) <= ece <= round(cli["ece_ci_high"], 4)  # never contradicts the ECE
    assert texts.RELIABILITY_RANGE_MEANING in _captions(at)
    assert "how miscalibrated is my model?" in texts.RELIABILITY_RANGE_MEANING


def test_bins_page_says_what_theorem1_range_means(at):
    at.switch_page(BINS).run()
    assert not at.exception
    assert texts.THEOREM1_RANGE_MEANING in _captions(at)
    assert "Reliability page" in texts.THEOREM1_RANGE_MEANING


@pytest.mark.slow  # 8 million rows: ~5 s on an idle core
def test_above_8_million_rows_the_default_b_is_still_the_cube_root(at, monkeypatch):
    # 201^3 rows: floor(n^(1/3)) = 201, one more than the slider's former cap of 200.
    n = 201**3
    rng = np.random.default_rng(0)
    conf = rng.uniform(0.5, 1.0, size=n)
    predicted = np.zeros(n, dtype=np.int64)
    labels = (rng.uniform(size=n) >= conf).astype(np.int64)  # label 0 (= predicted) with probability conf
    preds = pbr_core.Predictions.from_top_label(conf, predicted, labels)
    at.session_state["pbr_loaded"] = state.Loaded(preds=preds, name="eight million rows", file_name="big.csv",
                                                  origin="upload", key=f"test-big-{n}")
    # The bootstrap (O(n x resamples)) is not what this test is about: keep it to 2 resamples.
    monkeypatch.setattr(compute, "bootstrap_resamples", lambda rows: 2)
    at.switch_page(RELIABILITY).run()
    assert not at.exception, at.exception
    slider = at.slider(key="rel_n_bins")
    assert pbr_core.optimal_n_bins(n) == 201
    assert slider.value == 201 and slider.max >= 201
    assert slider.label == "Number of bins B (default 201: the paper's choice, the cube root of n rounded down)"
    cli = evaluation_table(preds, interval=False)
    assert cli["optimal_n_bins"] == 201
    assert _metric(at, "ECE") == f"{cli['ece']:.4f}"
    assert _metric(at, "MCE") == f"{cli['mce']:.4f}"


def test_an_interval_reaching_zero_is_not_a_verdict_beside_the_test():
    """A 1,500-row audit file (recidivism scores, one group 8 points too high, another 5 too low) had an
    ECE interval reaching 0 and a test of calibration with p = 0.01. The caption said "these rows
    cannot rule out a calibrated model" beside "miscalibrated beyond chance": two verdicts that
    disagree. A lower end of 0 now makes no verdict and sends the reader to the test."""
    words = texts.ece_interval_caption(0.0, 0.0526)
    assert words == "95% interval 0.0000 – 0.0526 (reaches 0: see below the cards)"  # short: a fifth of the page
    note = texts.ECE_INTERVAL_ZERO_NOTE
    assert "cannot rule out a calibrated model" not in note
    assert "test of calibration below the chart" in note
    assert texts.ece_interval_caption(0.01, 0.05) == "95% interval 0.0100 – 0.0500"


def test_the_note_of_an_interval_reaching_zero_is_drawn_under_the_cards_at_full_width(at):
    """Audit 4: the note under the ECE card wrapped to about 10 lines in its narrow column (an LLM file,
    a 200,000-row calibrated file, the Adult sample). Now the card says "reaches 0: see below the cards"
    and the note is one caption under all five cards; an interval above 0 has neither."""
    rng = np.random.default_rng(0)
    p = rng.uniform(0.05, 0.95, 3000)
    y = (rng.uniform(size=3000) < p).astype(int)  # calibrated: the interval reaches 0
    preds = pbr_core.Predictions.from_arrays(p, y)
    at.session_state["pbr_loaded"] = state.Loaded(preds=preds, name="calibrated", file_name="calibrated.csv",
                                                  origin="upload", key="test-calibrated-interval")
    at.switch_page(RELIABILITY).run()
    assert not at.exception
    captions = _captions(at)
    cli = evaluation_table(preds)
    assert cli["ece_ci_low"] <= 0.0
    assert texts.ece_interval_caption(cli["ece_ci_low"], cli["ece_ci_high"]) in captions
    assert texts.ECE_INTERVAL_ZERO_NOTE in captions
    assert captions.index(texts.ECE_INTERVAL_ZERO_NOTE) + 1 == captions.index(texts.RELIABILITY_RANGE_MEANING)


def test_the_corp_band_inside_its_chance_share_is_no_verdict():
    """40 overconfident rows: 20 % of the CORP curve outside its band, "no more than chance gives a
    calibrated model", beside a test of calibration with p = 0.008. The band's words now say only
    that the band alone shows no miscalibration, and name the stronger check."""
    for share in (0.0, 0.2):
        words = texts.corp_band_reading(share, 0.25)
        assert "no sign of miscalibration" not in words
        assert "the band alone shows no miscalibration" in words and "test of calibration" in words
    assert "the predictions are off there" in texts.corp_band_reading(0.4, 0.25)
