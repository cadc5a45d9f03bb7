"""The Groups page's Find the slices (issue 39), its per-slice recalibration and its report section
(AppTest, no browser): a file built from the bundled Adult table with one planted slice."""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

import numpy as np
import pytest

import pbr_core
from dashboard import state

ROOT = Path(__file__).resolve().parents[2]
GROUPS = "views/groups.py"


def planted_adult(shift: float = 0.15, seed: int = 0) -> pbr_core.Predictions:
    """Adult's columns and p(y=1), outcomes drawn from p except for women with a Bachelors degree
    (about 1,000 rows), drawn from p + shift."""
    adult = pbr_core.load_predictions(ROOT / "sample_data" / "adult_gradient_boosting.csv.gz")
    meta = adult.metadata
    p = adult.p_positive
    planted = ((meta["education"] == "Bachelors") & (meta["sex"] == "Female")).to_numpy()
    q = np.where(planted, np.minimum(p + shift, 1.0), p)
    y = (np.random.default_rng(seed).random(p.size) < q).astype(int)
    return dataclasses.replace(pbr_core.Predictions.from_arrays(np.c_[1 - p, p], y), metadata=meta)


@pytest.fixture
def at():
    from streamlit.testing.v1 import AppTest

    app = AppTest.from_file(str(ROOT / "dashboard" / "app.py"), default_timeout=120)
    app.run()
    app.session_state["pbr_loaded"] = state.Loaded(preds=planted_adult(), name="planted adult",
                                                   file_name="planted.csv", origin="upload", key="test:planted-slices")
    return app


def _text(at) -> str:
    parts = [m.value for m in at.markdown] + [c.value for c in at.caption] + [s.value for s in at.success] + \
            [i.value for i in at.info]
    return "\n".join(parts).replace("\\", "")


def test_find_the_slices_names_the_planted_slice(at):
    at.switch_page(GROUPS).run()
    assert not at.exception, at.exception
    assert [h.value for h in at.subheader][-1] == "Find the slices" and _frame(at, "Held-out rows") is None
    at.button(key="slices_run").click().run()
    assert not at.exception, at.exception
    text = _text(at)
    assert ("hold up: calibrated differently from the rest of the file, and miscalibrated, beyond chance on rows "
            "the search never saw") in text or "holds up: calibrated differently from the rest of the file" in text
    assert "Predictions for education = Bachelors and sex = Female, on its " in text and "points too low" in text
    # every figure says which rows it is on: the sentence's and the table's are the held-out rows'
    assert "held-out rows (of " in text and " in all), are " in text
    assert ("names even one slice as calibrated differently from the rest when it is in fact calibrated like the "
            "rest of the file is at most 5%, and the chance that it names even one slice as miscalibrated when it "
            "is in fact calibrated is at most 5%") in text and "(Holm)" not in text
    from dashboard import texts as _texts

    assert "Holm's method" in _texts.SLICES_TABLE_HELP   # the method's name stays in the "?" help
    table = _frame(at, "Held-out rows")
    assert table["Slice"].iloc[0] == "education = Bachelors and sex = Female" and table["Holds up"].iloc[0]
    # the Slice column stays in view when the table is scrolled right (audit 14 E)
    import json

    shown = next(f for f in at.dataframe if "Held-out rows" in f.value.columns)
    assert json.loads(shown.proto.columns)["Slice"]["pinned"] is True
    assert {"Mean predicted (held-out rows)", "Frequency of y = 1 (held-out rows)",
            "Gap = predicted − observed (points, held-out rows)"} <= set(table.columns)
    # the sign: the planted slice's outcomes come from p + 0.15, so "points too low" and a negative gap
    from dashboard import texts

    gap = table["Gap = predicted − observed (points, held-out rows)"].iloc[0]
    assert gap < 0 and f"{abs(gap):.1f} points too low" in text
    assert "below 0 the predictions are too low" in texts.SLICES_GAP_HELP
    # the slice's diagram beside the whole file's
    assert at.selectbox(key="slices_one").value == "education = Bachelors and sex = Female"
    assert len(at.get("plotly_chart")) == 4   # the groups' overlay and one group's; the slice's and the file's
    assert any("held-out rows" in c.value for c in at.caption)


def test_a_recalibrator_for_the_slice_closes_its_gap(at):
    at.switch_page(GROUPS).run()
    at.button(key="slices_run").click().run()
    at.selectbox(key="slices_recal_method").set_value("platt").run()
    at.number_input(key="slices_recal_folds").set_value(2).run()
    at.button(key="slices_recal_run").click().run()
    for _ in range(120):   # the job runs in a thread; the page shows its result on a later run
        time.sleep(0.5)
        at.run()
        if _frame(at, "Largest gap (mean)") is not None:
            break
    assert not at.exception, at.exception
    wide = _frame(at, "Test ECE: one per group")
    assert set(wide["Group"]) == {"this slice", "the rest"}
    ece = wide.set_index("Group")
    # the slice's own recalibrator brings its test ECE below the uncalibrated one
    assert ece.loc["this slice", "Test ECE: one per group"] < ece.loc["this slice", "Test ECE: uncalibrated"]


def _frame(at, column: str):
    """The DataFrame the page shows with ``column`` (None when not shown)."""
    for frame in at.dataframe:
        if column in frame.value.columns:
            return frame.value
    return None


def test_the_report_carries_the_slices(at):
    from dashboard import audit, compute

    at.switch_page(GROUPS).run()
    at.button(key="slices_run").click().run()
    loaded = at.session_state["pbr_loaded"]
    view = state.metric_view(loaded, "positive")
    section = audit.slices_section(loaded, view)
    assert section is not None and section.title.startswith("Find the slices")
    words = " ".join(section.paragraphs)
    assert "education = Bachelors and sex = Female" in words and "How the search is guarded" in words
    assert len(section.figures) == 2   # the held-up slice and the whole file
    assert compute.slice_report(loaded, view, cached_only=True) is not None
    other = dataclasses.replace(loaded, key="test:never-searched")
    assert audit.slices_section(other, state.metric_view(other, "positive")) is None


def test_a_dataset_on_the_server_is_searched_in_streamed_passes(tmp_path, monkeypatch):
    """A dataset on the server: Find the slices reads every row (three streamed passes) and finds what the
    same rows in memory give; the per-slice recalibration is not offered (its rows are not in memory)."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    from streamlit.testing.v1 import AppTest

    from pbr_core.slices import find_slices

    preds = planted_adult()
    frame = preds.metadata.assign(p_gt50k=preds.p_positive, label=preds.labels)
    root = tmp_path / "data"
    root.mkdir()
    pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), root / "planted.parquet", row_group_size=4000)
    monkeypatch.setenv("PBR_CALIB_DATA_ROOT", str(root))
    monkeypatch.setenv("PBR_CALIB_SAMPLE_ROWS", "3000")
    app = AppTest.from_file(str(ROOT / "dashboard" / "app.py"), default_timeout=120)
    app.run()
    app.text_input(key="data_server_path").set_value("planted.parquet")
    app.button(key="data_server_read").click().run()
    assert app.session_state["pbr_loaded"].stream is not None
    app.switch_page(GROUPS).run()
    app.button(key="slices_run").click().run()
    assert not app.exception, app.exception
    table = _frame(app, "Held-out rows")
    mem = find_slices(pbr_core.load_predictions(root / "planted.parquet"))
    from dashboard import texts

    assert table["Slice"].tolist() == [texts.slice_label(row) for row in mem.table.itertuples()]
    assert table["Rows"].tolist() == mem.table["n"].tolist()
    assert any("not offered" in i.value for i in app.info)


def test_slices_named_with_markup_are_shown_as_text():
    """Column names and values holding Markdown and HTML (issue 34): the slices, their sentences and the
    searched columns reach the page's Markdown only through texts.md."""
    import pandas as pd
    from streamlit.testing.v1 import AppTest
    from test_markup_in_names import HTML, IMAGE, _assert_no_raw_name

    from dashboard import texts

    rng = np.random.default_rng(1)
    n = 4000
    p = rng.uniform(0.05, 0.95, n)
    values = np.array([IMAGE, HTML, "[link](http://127.0.0.1:9/)", "plain"])[np.arange(n) % 4]
    q = np.where(values == IMAGE, np.minimum(p + 0.3, 1.0), p)
    frame = pd.DataFrame({"p_positive": p, "label": (rng.random(n) < q).astype(int), HTML: values,
                          IMAGE: rng.choice(["a", "b"], n)})
    at = AppTest.from_file(str(ROOT / "dashboard" / "app.py"), default_timeout=120)
    at.run()
    at.file_uploader(key="data_upload").upload("markup.csv", frame.to_csv(index=False).encode(), "text/csv").run()
    at.switch_page(GROUPS).run()
    at.button(key="slices_run").click().run()
    assert not at.exception, at.exception
    held = f"{HTML} = {IMAGE}"
    assert held in _frame(at, "Held-out rows")["Slice"].tolist()
    assert any(texts.md(held) in m.value for m in at.markdown)
    _assert_no_raw_name(at, "Find the slices")


def test_a_file_too_small_to_cut_describes_no_search():
    """Audit 3, C1: on a 60-row file like f5_small60.csv the page said "No column could be cut into slices
    ... nothing was searched" and then "How the search is guarded: the rows were split at random into two
    halves of 26 and 34 rows ...". Now nothing describes a search, on the page and in the report."""
    from streamlit.testing.v1 import AppTest

    from dashboard import audit
    from test_slices import small_site_file

    at = AppTest.from_file(str(ROOT / "dashboard" / "app.py"), default_timeout=120)
    at.run()
    at.file_uploader(key="data_upload").upload("small60.csv", small_site_file().to_csv(index=False).encode(),
                                               "text/csv").run()
    assert at.session_state["pbr_loaded"].preds.n == 60
    at.switch_page(GROUPS).run()
    at.button(key="slices_run").click().run()
    assert not at.exception, at.exception
    text = _text(at)
    assert "No column could be cut into slices (see why below), so nothing was searched." in text
    assert "How the search is guarded" not in text and "halves" not in text and "split at random" not in text
    assert _frame(at, "Held-out rows") is None
    assert any("Not searched: site" in m.value for m in at.markdown)
    loaded = at.session_state["pbr_loaded"]
    section = audit.slices_section(loaded, state.metric_view(loaded, "positive"))
    words = " ".join(section.paragraphs)
    assert "nothing was searched" in words and "How the search is guarded" not in words


def test_a_slice_that_did_not_hold_up_is_shown_as_a_proposal(at):
    """Audit 8: after 'No slice holds up', the page showed 'One slice's reliability diagram … region = North and
    amount from 71.66 to under 128.4' as if it were a finding. With no slice planted, the slices offered are the
    search's proposals: the label, the title and the caption say it did not hold up; the report draws none."""
    from dashboard import audit, texts

    at.session_state["pbr_loaded"] = state.Loaded(preds=planted_adult(shift=0.0), name="adult", file_name="adult.csv",
                                                  origin="upload", key="test:no-slice")
    at.switch_page(GROUPS).run()
    at.button(key="slices_run").click().run()
    assert not at.exception, at.exception
    assert any("No slice holds up" in i.value for i in at.info)
    box = at.selectbox(key="slices_one")
    assert box.label == texts.SLICES_DIAGRAM_LABEL_PROPOSED
    name = box.value
    markdown = [m.value for m in at.markdown]
    assert texts.slice_title(name, held_up=False) in markdown and "did not hold up" in texts.slice_title(name, False)
    assert any(c.value.startswith(texts.SLICES_NOT_HELD) for c in at.caption)
    loaded = at.session_state["pbr_loaded"]
    section = audit.slices_section(loaded, state.metric_view(loaded, "positive"))
    assert section is not None and not section.figures   # the report draws held-up slices only
    assert texts.slice_title("a = 1") == "**a = 1**"   # a slice that held up: its name alone


def test_a_file_with_no_slice_of_enough_rows_says_how_many_a_slice_needs():
    """Audit 12a: on a 12-row file the page said "none of the 0 slices of 3 columns ..." and described two
    halves of 8 and 4 rows. It now says that no slice could be formed, how many rows a slice needs and
    how many the file has, and describes no search."""
    from streamlit.testing.v1 import AppTest

    from test_slices import tiny_banded_file

    at = AppTest.from_file(str(ROOT / "dashboard" / "app.py"), default_timeout=120)
    at.run()
    at.file_uploader(key="data_upload").upload("tiny12.csv", tiny_banded_file().to_csv(index=False).encode(),
                                               "text/csv").run()
    at.multiselect(key="data_score_columns").set_value(["prob"])
    at.button(key="data_apply").click().run()
    assert at.session_state["pbr_loaded"].preds.n == 12
    at.switch_page(GROUPS).run()
    at.button(key="slices_run").click().run()
    assert not at.exception, at.exception
    text = _text(at)
    assert ("No slice could be formed, so nothing was searched or tested: a slice needs at least 100 rows, and "
            "this file has 12.") in text
    assert "0 slices" not in text and "halves" not in text and "How the search is guarded" not in text
    assert any("Columns cut, but no slice of them has 100 rows: age (5 quantile bands)" in m.value
               for m in at.markdown)
