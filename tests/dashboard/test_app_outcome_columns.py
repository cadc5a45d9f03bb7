"""A column that restates the outcome on the Groups page (audit 9a): the page never opens on it, warns
when it is chosen, and Find the slices says it left it out (AppTest, no browser)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

import pbr_core
from dashboard import state

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))
from test_outcome_columns import plaut_like  # noqa: E402

GROUPS = "views/groups.py"


@pytest.fixture
def at():
    from streamlit.testing.v1 import AppTest

    app = AppTest.from_file(str(ROOT / "dashboard" / "app.py"), default_timeout=120)
    app.run()
    preds = pbr_core.load_predictions(plaut_like())
    app.session_state["pbr_loaded"] = state.Loaded(preds=preds, name="plaut-like", file_name="plaut.csv",
                                                   origin="upload", key="test:plaut-like-grade")
    return app


def test_grade_is_never_the_default_warned_when_chosen_and_left_out_of_the_slices(at):
    at.switch_page(GROUPS).run()
    assert not at.exception, at.exception
    assert at.selectbox(key="groups_by").value == "model"
    assert not any("restates the outcome" in w.value for w in at.warning)
    at.selectbox(key="groups_by").set_value("grade").run()
    assert not at.exception, at.exception
    warned = [w.value.replace("\\", "") for w in at.warning if "restates the outcome" in w.value]
    assert warned and warned[0].startswith("**grade restates the outcome.**")
    assert "where grade is Correct, the prediction was always right" in warned[0]
    at.button(key="slices_run").click().run()
    assert not at.exception, at.exception
    notes = [i.value.replace("\\", "") for i in at.info if "Left out" in i.value]
    assert notes and notes[0].startswith("**Left out grade**: each of its values goes with a single outcome")
    assert "Slices by it would look miscalibrated whatever the model did" in notes[0]
