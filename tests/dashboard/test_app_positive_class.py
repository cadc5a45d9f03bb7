"""Audit 12a under AppTest: the Data page's choice of the class a lone score column is the probability
of (shown only where the file does not say it), and the calibrated download of Fit & apply read back
on the Data page (its own ``used_for_fit`` column was offered as the label)."""

from __future__ import annotations

import io

import numpy as np
import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest

from dashboard import runs, texts
from test_app_recal import APP, _finish

DATA, APPLY = "views/data.py", "views/apply.py"


def _credit(n: int = 800, seed: int = 11, score: str = "approval_score") -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    p = np.round(rng.beta(1.2, 2.5, n), 3)
    return pd.DataFrame({"application_id": [f"A{i:05d}" for i in range(n)],
                         "loan_amount": np.round(rng.uniform(500, 50000, n), 2),
                         score: p, "decision": np.where(rng.random(n) < p, "approved", "denied")})


def _excel(df: pd.DataFrame, score: str) -> bytes:
    """';', decimal commas, '93,3%' scores, a BOM and CRLF, as a European Excel writes it."""
    d = df.assign(**{score: df[score].map(lambda v: f"{100 * v:.1f}".replace(".", ",") + "%"),
                     "loan_amount": df["loan_amount"].map(lambda v: f"{v:.2f}".replace(".", ","))})
    return d.to_csv(sep=";", index=False, lineterminator="\r\n").encode("utf-8-sig")


@pytest.fixture
def at() -> AppTest:
    app = AppTest.from_file(APP, default_timeout=60)
    app.run()
    app.switch_page(DATA).run()
    assert not app.exception, app.exception
    return app


def _upload(at: AppTest, name: str, data: bytes) -> None:
    at.file_uploader(key="data_upload").upload(name, data, "text/csv").run()
    assert not at.exception, at.exception


def _loaded(at: AppTest):
    return at.session_state["pbr_loaded"]


def test_the_page_asks_which_class_the_score_is_the_probability_of(at):
    df = _credit()
    _upload(at, "credit_excel.csv", _excel(df, "approval_score"))
    errors = " ".join(e.value for e in at.error)
    assert "does not say which class 'approval_score' is the probability of" in errors
    assert "positive_class" not in errors and "*The score is the probability of*" in errors
    box = at.selectbox(key="data_positive_class")
    assert box.label == texts.POSITIVE_CLASS_LABEL
    assert set(box.options) == {"(choose)", "approved", "denied"}
    box.set_value("approved")
    at.button(key="data_apply").click().run()
    assert not at.exception, at.exception
    preds = _loaded(at).preds
    assert _loaded(at).file_name == "credit_excel.csv" and preds.class_names == ("denied", "approved")
    np.testing.assert_allclose(preds.p_positive, df["approval_score"].to_numpy(), rtol=0, atol=1e-12)
    np.testing.assert_array_equal(preds.labels, (df["decision"] == "approved").to_numpy(int))
    assert at.selectbox(key="data_positive_class").value == "approved"  # shown, to change it


def test_no_class_choice_where_the_file_says_it(at):
    df = _credit(score="p_approved")
    _upload(at, "credit.csv", _excel(df, "p_approved"))
    assert not at.error
    assert dict(_loaded(at).preds.column_roles)["decision"] == "label"
    assert not any(w.key == "data_positive_class" for w in at.selectbox)


def test_the_calibrated_download_reads_back_on_the_data_page(at, monkeypatch):
    from dashboard import recal_ui

    made: dict = {}
    real = recal_ui.lazy_button

    def record(label, make, file_name, mime, key, **kw):  # the page's own download, as the click makes it
        made[key] = make
        real(label, make, file_name, mime, key, **kw)

    monkeypatch.setattr(recal_ui, "lazy_button", record)
    df = _credit(score="p_approved")
    _upload(at, "credit.csv", _excel(df, "p_approved"))
    assert _loaded(at).file_name == "credit.csv"
    at.switch_page(APPLY).run()
    at.slider(key="ship_holdout").set_value(20).run()
    at.button(key="ship_run").click().run()
    result = _finish(at, "ship").result
    download = made["ship_dl_predictions"]()
    at.switch_page(DATA).run()
    _upload(at, "credit_calibrated.csv", download)
    assert not at.error, [e.value for e in at.error]
    back = _loaded(at)
    assert back.file_name == "credit_calibrated.csv"
    roles = dict(back.preds.column_roles)
    assert roles["decision"] == "label" and roles["p_approved"] == "score"
    assert roles[runs.FIT_ROWS_COLUMN] == "metadata"
    # the probabilities read back are the recalibrator's, row for row
    expected = result.recalibrator.predict_proba(_loaded_first(df))[:, 1]
    np.testing.assert_allclose(back.preds.p_positive, expected, rtol=0, atol=1e-9)
    fit = back.preds.metadata[runs.FIT_ROWS_COLUMN].astype(str).str.lower() == "true"
    assert int(fit.sum()) == len(result.fit_rows)


def _loaded_first(df: pd.DataFrame):
    """The uploaded file as the loader reads it (the fit's input), read here without the page."""
    import pbr_core

    return pbr_core.load_predictions(_excel(df, "p_approved"), format="csv")
