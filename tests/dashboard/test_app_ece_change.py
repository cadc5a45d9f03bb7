"""The PBR page reads a fall of the test ECE against the same noise as a rise (audit 13, item 4).

"Test ECE after 0.0106 (−0.0045), before 0.0151" stood without a word while a rise got "by less than the
two ECEs' own noise": a fall read as a gain. The rule (pbr_core.evaluation.ece_change_shown) is pinned
by simulations with known truth in tests/test_claims_small_n.py; here the page and its report say what
the run's ``better_shown`` says, in the words of the rise's note.
"""

from __future__ import annotations

import dataclasses
import html
import re
from pathlib import Path

from streamlit.testing.v1 import AppTest

from dashboard import jobs, report, texts

APP = str(Path(__file__).resolve().parents[2] / "dashboard" / "app.py")
PBR = "views/pbr.py"


def _show(at: AppTest, result) -> None:
    job = jobs.start_job("pbr", "shown", lambda ctx: result, heavy=False, lock=None)
    assert job.join(5)
    at.session_state["recal_jobs"]["pbr"] = job
    at.run()
    assert not at.exception, at.exception


def _report_text(result) -> str:
    doc = report.build_report([report.pbr_section(result)], data_name="d")
    return html.unescape(re.sub(r"<[^>]+>", " ", doc))


def test_a_fall_of_the_test_ece_is_read_against_the_eces_noise_both_ways():
    at = AppTest.from_file(APP, default_timeout=60)
    at.run()
    at.selectbox(key="data_sample").set_value("cifar10_resnet110.npz").run()
    at.switch_page(PBR).run()
    at.number_input(key="pbr_n_re").set_value(150).run()
    at.number_input(key="pbr_max_iter").set_value(20).run()
    at.button(key="pbr_run").click().run()
    job = at.session_state["recal_jobs"]["pbr"]
    assert job.join(240) and job.status == "done", (job.status, job.error)
    at.run()
    r = job.result
    # The run carries the rule's answer for a fall as it does for a rise (None for the other direction).
    fell = r.after["ece"] < r.before["ece"]
    assert isinstance(r.better_shown, bool) if fell else r.better_shown is None
    before, n_te = r.before["ece"], r.n_te
    base = dict(fit_report={**r.fit_report, "ended_at_prior": False}, worse_shown=None)
    # A fall within the noise: the same words as a rise within it, on the page and in its report.
    within = dataclasses.replace(r, after={**r.after, "ece": before - 0.0045}, better_shown=False, **base)
    _show(at, within)
    expected = (f"The test ECE is lower after this fit than without it ({before - 0.0045:.4f} against {before:.4f}), "
                f"by less than the two ECEs' own noise on {n_te:,} test rows: these rows cannot tell whether the fit "
                "is better or worse than no recalibration.")
    notes = [i.value for i in at.info if "test ECE is lower" in i.value]
    assert len(notes) == 1 and notes[0].startswith(expected), notes
    card = next(m for m in at.metric if m.label == "Test ECE after")
    assert card.proto.delta == "-0.0045" and card.proto.color == card.proto.GRAY
    assert expected in _report_text(within)
    # A fall beyond the noise: said so, and the card is green with a down arrow.
    beyond = dataclasses.replace(within, better_shown=True)
    _show(at, beyond)
    notes = [i.value for i in at.info if "test ECE is lower" in i.value]
    assert len(notes) == 1 and "by more than the two ECEs' own noise" in notes[0] and "better calibrated" in notes[0]
    card = next(m for m in at.metric if m.label == "Test ECE after")
    assert (card.proto.color, card.proto.direction) == (card.proto.GREEN, card.proto.DOWN)
    assert "green when they show it lower" in card.proto.help
    assert "by more than the two ECEs' own noise" in _report_text(beyond)
    # A fit at the prior: its own note says it (as for a rise).
    at_prior = dataclasses.replace(within, fit_report={**r.fit_report, "ended_at_prior": True})
    _show(at, at_prior)
    assert not any("test ECE is lower" in i.value for i in at.info)
    assert texts.ece_fall_note(0.02, 0.03, 750, False, False) is None  # a rise is the other note's
