"""The Data page with binary labels of one name only (audit 10a, finding 4): 'no' on every row loads,
with the note saying how it was read; a name that says nothing of its class is refused in words that
say what to change in the file."""

from __future__ import annotations

import numpy as np
import pandas as pd


def _csv(word: str) -> bytes:
    rng = np.random.default_rng(0)
    df = pd.DataFrame({"p_churn": rng.uniform(0.01, 0.5, 200), "churn": [word] * 200})
    return df.to_csv(index=False).encode()


def _page_text(at) -> str:
    return "\n".join(str(e.value) for e in (*at.error, *at.info, *at.markdown, *at.caption, *at.warning))


def test_a_day_without_churn_loads_with_a_note(at):
    at.file_uploader(key="data_upload").upload("quiet_day.csv", _csv("no"), "text/csv").run()
    assert not at.exception, at.exception
    assert not at.error, [e.value for e in at.error]
    preds = at.session_state["pbr_loaded"].preds
    assert preds.class_names == ("no", "yes") and not preds.labels.any()
    assert any("one class name only, 'no'" in n for n in preds.notes)


def test_an_unknown_single_name_says_what_to_do(at):
    # 'stayed' beside p_churn: the header names class 1, so 'stayed' is class 0 (audit 12a)
    at.file_uploader(key="data_upload").upload("stayed.csv", _csv("stayed"), "text/csv").run()
    assert not at.exception, at.exception
    assert not at.error
    preds = at.session_state["pbr_loaded"].preds
    assert preds.class_names == ("stayed", "churn") and not preds.labels.any()
    # 'churned' may be a form of the class the header names: not read as its opposite
    at.file_uploader(key="data_upload").upload("churned.csv", _csv("churned"), "text/csv").run()
    assert not at.exception, at.exception
    shown = " ".join(str(e.value) for e in at.error)
    assert "one class name only, 'churned'" in shown and "Write the labels as 0/1" in shown
    assert "label_column=" not in shown
