"""Audit 14, finding B: the Generalization page on a file too small for its fold test (500 rows: n_re = 250,
above a quarter of the rows) says before the run that the test will give no verdict, shows no p-values
beside "Not read", writes the chart's noise figure at the run's own n_re, and marks a mean bound of 1 or
more vacuous in the per-α table, as the chart does."""

from __future__ import annotations

import html
import re

from streamlit.testing.v1 import AppTest

from dashboard import jobs, report, runs, tables, texts
from kl_studies import election_study
from pbr_core.bounds import theorem1_bound
from pbr_core.experiments import KLGapResult
from test_app_fold_runs import GEN, _app
from test_app_recal import _shown


def _infos(at: AppTest) -> str:
    return "\n".join(str(i.value) for i in at.info)


def test_a_fold_test_that_cannot_be_read_is_said_before_the_run():
    at = _app(500)
    at.switch_page(GEN).run()
    assert at.number_input(key="gen_n_re").value == 250
    said = _infos(at)
    assert ("With these settings the chart and the tables will show every fit's KL and gap, but the fold test "
            "cannot give a verdict: n_re = 250 is more than a quarter of the 500 rows") in said
    assert "load a file of at least 576 rows" in said
    at.number_input(key="gen_n_re").set_value(144).run()  # still above 500 / 4 = 125
    assert "n_re = 144 is more than a quarter" in _infos(at)


def test_a_readable_fold_test_gets_no_such_sentence_and_a_larger_n_re_says_what_to_choose():
    at = _app(2000)
    at.switch_page(GEN).run()
    assert at.number_input(key="gen_n_re").value == 500 and "cannot give a verdict" not in _infos(at)
    at.number_input(key="gen_n_re").set_value(700).run()
    assert "n_re = 700 is more than a quarter of the 2,000 rows" in _infos(at)
    assert "choose n_re of at most 500 (a quarter of the rows)" in _infos(at)


def _shown_study(at: AppTest, n_rows: int, bound: float) -> runs.GenResult:
    """The election study (n_re = 250) shown as a finished run on a file of ``n_rows`` rows, the α = 0.75 fits'
    Corollary 1 bound set to ``bound``."""
    study = election_study()
    study.loc[study["alpha"] == 0.75, "bound"] = bound
    study["gap"] += 0.01 * study["alpha"] * (1 - 2 * (study["fold"] == 1))  # folds 1 and 3 agree, fold 2 not
    res = KLGapResult.from_table(study, objective="pbr")
    gen = runs.GenResult(settings=runs.KLGapSettings(alphas=(0.0, 0.01, 0.75), n_folds=3, n_re=250),
                         data_name="d", data_key="k", result=res, n_classes=2, n_rows=n_rows)
    job = jobs.start_job("generalization", "shown", lambda ctx: gen, heavy=False, lock=None)
    assert job.join(5)
    at.session_state["recal_jobs"]["generalization"] = job
    at.run()
    assert not at.exception, at.exception
    return gen


def test_no_p_value_beside_not_read_and_the_caption_and_table_speak_of_this_run():
    at = _app(500)
    at.switch_page(GEN).run()
    gen = _shown_study(at, 500, 2.0669)
    assert any(m.value.startswith("Not read:") for m in at.markdown)
    cards = {m.label: m.value for m in at.metric}
    assert cards[texts.FOLD_METRICS[2]] == cards[texts.FOLD_METRICS[3]] == "not read"
    caption = next(c.value for c in at.caption if "Theorem 1's worst-case bound" in c.value)
    expected = theorem1_bound(250, 6, eps=0.05)  # B = floor(250^(1/3)) = 6: 1/6 + estimation term
    assert 0.8 < expected < 0.82 and f"n_re = 250 (B = 6), Theorem 1's worst-case bound on the error of one ECE " \
        f"(95%, a curve of Lipschitz constant 1) is {expected:.2f}" in caption
    assert "1000" not in caption and "order 0.1" not in caption
    assert "The paper reads its order, 1/n_re^(1/3) (0.16 here; 0.1 at n_re = 1,000)" in caption  # 250^(-1/3)
    table = _shown(next(d for d in at.dataframe if "mean gap" in d.value.columns))
    bounds = dict(zip(table["α"], table[table.columns[-1]]))
    assert bounds["0.75"] == "2.0669 (vacuous)" and bounds["0.01"] == "0.9000"
    built = report.build_report([report.generalization_section(gen)], data_name="d")
    doc = html.unescape(re.sub(r"<[^>]+>", " ", built))
    assert "2.0669 (vacuous)" in doc and "n_re = 250 (B = 6)" in doc
    assert re.search(r"p-value \(size of agreement\)\s+not read", doc)


def test_a_readable_run_keeps_its_p_values():
    at = _app(2000)
    at.switch_page(GEN).run()
    _shown_study(at, 2000, 0.9)
    cards = {m.label: m.value for m in at.metric}
    assert cards[texts.FOLD_METRICS[2]] != "not read" and cards[texts.FOLD_METRICS[3]] != "not read"
    assert not any(m.value.startswith("Not read:") for m in at.markdown)
