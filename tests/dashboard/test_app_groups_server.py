"""The Groups page on a dataset on the server (AppTest, no browser): every row is measured by a
streamed pass over the column chosen, with the numbers of the whole file in memory."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from streamlit.testing.v1 import AppTest

import pbr_core
from pbr_core.groups import calibration_by_group

ROOT = Path(__file__).resolve().parents[2]
GROUPS = "views/groups.py"


@pytest.fixture(scope="module")
def adult_frame() -> pd.DataFrame:
    """The real UCI Adult predictions with a request id (a value per row) and a time stamp."""
    df = pd.read_csv(ROOT / "sample_data" / "adult_gradient_boosting.csv.gz")
    return df.assign(request_id=np.arange(len(df)),
                     scored_at=pd.date_range("2025-01-01", periods=len(df), freq="3min").strftime("%Y-%m-%d %H:%M"))


@pytest.fixture
def at(tmp_path, monkeypatch, adult_frame):
    root = tmp_path / "data"
    (root / "logs").mkdir(parents=True)
    for i, rows in enumerate(np.array_split(np.arange(len(adult_frame)), 3)):
        pq.write_table(pa.Table.from_pandas(adult_frame.iloc[rows], preserve_index=False),
                       root / "logs" / f"p{i}.parquet", row_group_size=2000)
    pq.write_table(pa.Table.from_pandas(adult_frame, preserve_index=False), tmp_path / "whole.parquet")
    monkeypatch.setenv("PBR_CALIB_DATA_ROOT", str(root))
    monkeypatch.setenv("PBR_CALIB_SAMPLE_ROWS", "3000")
    app = AppTest.from_file(str(ROOT / "dashboard" / "app.py"), default_timeout=90)
    app.run()
    app.text_input(key="data_server_path").set_value("logs/*.parquet")
    app.button(key="data_server_read").click().run()
    assert not app.exception, app.exception
    loaded = app.session_state["pbr_loaded"]
    assert loaded.origin == "server" and loaded.stream.n_total == len(adult_frame)
    app.whole = tmp_path / "whole.parquet"
    return app


def _measure(at: AppTest, **choices: str) -> None:
    for key, value in choices.items():
        at.selectbox(key=f"groups_{key}").set_value(value)
    at.button(key="groups_measure").click().run()
    assert not at.exception, at.exception


def test_groups_of_a_server_dataset_are_measured_on_every_row(at):
    at.switch_page(GROUPS).run()
    assert not at.exception, at.exception
    options = at.selectbox(key="groups_by").options
    assert {"race", "sex", "request_id", "scored_at", "predicted class"} <= set(options)
    assert "true class" not in options
    assert at.selectbox(key="groups_by").value == "race"   # by its name: never request_id, nor age's 73 values
    assert "p_gt50k" not in options and "label" not in options
    # Nothing is read before the user asks: each grouping is a pass over every row.
    assert not at.dataframe and any("Measure the groups" in c.value for c in at.caption)
    _measure(at, by="race")
    assert "groups_stop" not in [b.key for b in at.button]  # Stop is shown only while the pass runs (browser test)
    table = at.dataframe[0].value
    report = calibration_by_group(pbr_core.load_predictions(at.whole, group_columns="race"), "race")
    assert table["Group"].tolist() == report.table["group"].tolist()
    assert table["Rows"].tolist() == report.table["n"].tolist()
    np.testing.assert_allclose(table["ECE"], report.table["ece"], rtol=0, atol=1e-12)
    text = "\n".join(m.value for m in at.markdown).replace("\\", "")
    assert "of all 16,281 rows of the dataset" in text and "Largest gap" in text
    assert "No group is shown to be calibrated worse than another" in text
    assert any("Poisson bootstrap" in c.value for c in at.caption)
    assert at.get("plotly_chart")
    # Over time: the time stamps by week.
    _measure(at, by2="sex")   # two columns: every combination, one pass
    assert "White × Female" in set(at.dataframe[0].value["Group"])
    _measure(at, by="scored_at", by2="(none)", every="week")
    weeks = at.dataframe[0].value
    assert weeks["Group"].tolist()[0] == "week of 2024-12-30" and weeks["Rows"].sum() == 16281


def test_an_id_column_is_refused_in_plain_words(at):
    at.switch_page(GROUPS).run()
    _measure(at, by="request_id")
    errors = "\n".join(e.value for e in at.error)
    assert "more than 1,000 groups" in errors and "such as an id" in errors and "*Dates*" in errors
    assert "every=" not in errors and "Traceback" not in errors
    assert not at.dataframe


def test_the_audit_report_takes_only_groups_already_measured(at):
    from dashboard import recal_ui, state

    at.switch_page(GROUPS).run()
    loaded = at.session_state["pbr_loaded"]
    keys = ("groups_by", "groups_by2", "groups_every", "groups_for")
    view = state.metric_view(loaded, "positive")
    before = recal_ui.audit_choices(view, session={k: at.session_state[k] for k in keys}, data_key=loaded.key)
    html = recal_ui.session_report(loaded, view, before, {})
    assert "press <em>Measure the groups</em>" in html or "press *Measure the groups*" in html
    _measure(at, by="sex")
    after = recal_ui.audit_choices(view, session={k: at.session_state[k] for k in keys}, data_key=loaded.key)
    html = recal_ui.session_report(loaded, view, after, {})
    assert "Calibration by group: sex" in html and "Largest gap" in html and "Poisson bootstrap" in html
