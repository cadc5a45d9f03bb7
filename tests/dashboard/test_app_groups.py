"""The Groups page: calibration per group on the bundled audit samples (AppTest, no browser)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from apptest_tools import sent_figure
from streamlit.testing.v1 import AppTest

import pbr_core
from pbr_core.groups import calibration_by_group

ROOT = Path(__file__).resolve().parents[2]
GROUPS = "views/groups.py"


def _sample(at: AppTest, name: str) -> None:
    at.selectbox(key="data_sample").set_value(name).run()
    assert not at.exception and at.session_state["pbr_loaded"].file_name == name


def test_groups_of_the_adult_sample(at):
    _sample(at, "adult_gradient_boosting.csv.gz")
    at.switch_page(GROUPS).run()
    assert not at.exception, at.exception
    # It opens on race: a column audits group by, five values with enough rows each (not age, not an id)
    assert at.selectbox(key="groups_by").value == "race"
    assert "true class" not in at.selectbox(key="groups_by").options
    table = at.dataframe[0].value
    # the Group column stays in view when the table is scrolled right (audit 14 E)
    import json

    assert json.loads(at.dataframe[0].proto.columns)["Group"]["pinned"] is True
    preds = pbr_core.load_predictions(ROOT / "sample_data" / "adult_gradient_boosting.csv.gz")
    report = calibration_by_group(preds, "race")
    assert table["Group"].tolist() == report.table["group"].tolist()
    assert table["ECE"].tolist() == pytest.approx(report.table["ece"].tolist(), abs=1e-15)
    # The estimate as it is, written "≈ 0 (-0.0108: noise)" below 0 (audit 13: a negative error misread)
    assert table["ECE without noise"].tolist() == [f"{v:.4f}" if v >= 0 else f"≈ 0 ({v:.4f}: noise)"
                                                  for v in report.table["ece_corrected"]]
    assert all(v.startswith("no evidence; a shift of") for v in table["What the test says"])
    text = "\n".join(m.value for m in at.markdown).replace("\\", "")
    # The page's sentence about the gap is the library's, word for word (the CLI and the report say it too)
    from pbr_core.groups import gap_statement

    assert "Largest gap" in text and gap_statement(report) in text
    assert "No group is shown to be calibrated worse than another" in text
    assert "No group shows evidence of miscalibration" in text
    assert len(at.get("plotly_chart")) == 2   # the overlay, and one group's diagram with its bands
    assert any("consistency band" in c.value for c in at.caption)
    # the per-group ECE intervals are said to be uncorrected (audit 5)
    from dashboard import texts

    assert texts.GROUPS_INTERVAL_NOTE in [c.value for c in at.caption]
    assert ("(we simulated files of 30 calibrated groups of 100 to 200 rows each: about 1 file in 10 had such a "
            "group)") in texts.GROUPS_INTERVAL_NOTE   # audit 14 G: a clause that reads in one go
    # Two columns: every combination; the small ones are flagged, not hidden.
    at.selectbox(key="groups_by2").set_value("sex").run()
    assert not at.exception
    table = at.dataframe[0].value
    assert "Other × Female" in set(table["Group"]) and "yes" in set(table["Too few rows"])
    assert set(table["Too few rows"]) == {"yes", ""}   # words, not True / False (audit 14 G)
    assert any("too few rows" in w.value for w in at.warning)


def test_groups_of_llm_records_and_no_classes(at):
    _sample(at, "llm_qa_confidence_correct.csv.gz")
    at.switch_page(GROUPS).run()
    assert not at.exception
    options = at.selectbox(key="groups_by").options
    assert "predicted class" not in options and "question_idx" in options   # no classes in these records
    assert at.selectbox(key="groups_by").value == "model"   # never the question id
    table = at.dataframe[0].value
    assert set(table["Group"]) == {"gpt-4-turbo", "Llama3-70b", "Yi-34b", "Mistral"}
    assert "Accuracy" in table.columns
    # Two models said "confidence 1.0" on answers that were wrong; the file is written with 9 decimals, so
    # 1.0 may be a rounding (audit 8): those rows are tested within it, and the cell says so
    assert table["What the test says"].str.startswith("miscalibrated").all()
    assert table["What the test says"].str.contains(r"wrong at a rounded 0 or 100 %").any()
    assert not table["What the test says"].str.contains("called impossible").any()
    assert any("4 of 4 groups are miscalibrated beyond chance" in m.value for m in at.markdown)


def test_a_file_without_group_columns_offers_the_classes_not_the_true_class(at):
    at.switch_page(GROUPS).run()   # the default sample: CIFAR-100 logits, no other columns
    assert not at.exception
    assert at.selectbox(key="groups_by").options == ["(choose a column)", "predicted class", "each class"]
    assert any("no other columns" in i.value for i in at.info)
    assert not at.dataframe   # nothing measured until a choice is made
    at.selectbox(key="groups_by").set_value("each class").run()
    assert not at.exception
    table = at.dataframe[0].value
    assert len(table) == 100 and (table["Rows"] == 10000).all()
    # Each class against the rest: the rate is the class's frequency, not an accuracy (audit 10a), and the
    # page and the audit report say what is measured
    from dashboard import recal_ui, state, texts

    assert "Frequency of the class" in table.columns and "Accuracy" not in table.columns
    assert any(texts.GROUPS_EACH_CLASS_WHAT in m.value for m in at.markdown)
    loaded = at.session_state["pbr_loaded"]
    ss = {k: at.session_state[k] for k in ("groups_by", "groups_by2", "groups_every", "groups_for")}
    view = state.metric_view(loaded)
    html = recal_ui.session_report(loaded, view, recal_ui.audit_choices(view, session=ss, data_key=loaded.key), {})
    assert "Frequency of the class" in html and texts.GROUPS_EACH_CLASS_WHAT.replace("'", "&#x27;") in html
    assert "Observed frequency of the class" in html


def test_the_audit_report_includes_the_groups_chosen_on_the_page(at):
    from dashboard import recal_ui, state

    _sample(at, "adult_gradient_boosting.csv.gz")
    at.switch_page(GROUPS).run()
    at.selectbox(key="groups_by").set_value("sex").run()
    assert not at.exception
    loaded = at.session_state["pbr_loaded"]
    ss = {k: at.session_state[k] for k in ("groups_by", "groups_by2", "groups_every", "groups_for")}
    view = state.metric_view(loaded, "positive")
    choices = recal_ui.audit_choices(view, session=ss, data_key=loaded.key)
    assert choices.group_by == ("sex",)
    html = recal_ui.session_report(loaded, view, choices, {})
    assert "Calibration by group: sex" in html and "Spiegelhalter" in html and "Largest gap" in html
    assert "What each group&#x27;s test says" in html or "What each group's test says" in html
    assert "no evidence that the predictions are off on average, too confident or not confident enough, at this sample size" in html
    # Another file: the grouping chosen for this one is not carried over.
    assert recal_ui.audit_choices(view, session=ss, data_key="another file").group_by == ()


def _group_gap_run(at, by: str, n_folds: int):
    """Adult on the Compare page, n_re = 3000: a group-gap run of Platt scaling by ``by``, finished."""
    from test_app_recal import _finish

    _sample(at, "adult_gradient_boosting.csv.gz")
    at.switch_page("views/compare.py").run()
    assert not at.exception
    at.number_input(key="cmp_n_re").set_value(3000).run()
    at.selectbox(key="gap_by").set_value(by).run()
    at.selectbox(key="gap_method").set_value("platt").run()
    at.number_input(key="gap_n_folds").set_value(n_folds).run()
    at.button(key="gap_run").click().run()
    job = _finish(at, "groupgap")
    assert job.status == "done", job.error
    return job


def test_compare_says_whether_recalibration_closes_the_gaps(at):
    from pbr_core.experiments.group_gaps import recalibration_by_group

    job = _group_gap_run(at, "sex", 2)
    preds = pbr_core.load_predictions(ROOT / "sample_data" / "adult_gradient_boosting.csv.gz")
    ref = recalibration_by_group(preds, "platt", "sex", n_re=3000, n_folds=2, seed=0)
    assert job.result.table["ece"].tolist() == pytest.approx(ref["ece"].tolist(), abs=1e-12)
    frames = [d.value for d in at.dataframe]
    wide = next(f for f in frames if "Test ECE: one per group" in f.columns)
    assert set(wide["Group"]) == {"Male", "Female"}
    gaps = next(f for f in frames if "Largest gap (mean)" in f.columns)
    assert gaps["Strategy"].tolist() == ["Uncalibrated", "One for everyone", "One per group"]
    # Whether the gap changed is the paired test's to say, and 2 folds can never show it (audit 5).
    said = " ".join(m.value for m in at.markdown)
    assert "**Did the gap change?**" in said and "With 2 folds no difference between strategies can be shown" in said
    # the rank test in plain words (audit 14, item 2)
    head = said.replace("\\", "").split("**Did the gap change?**")[1].split("With 2 folds")[0]
    assert "a second test, on the ranks of the folds' differences, must agree" in head and "Wilcoxon" not in head
    from dashboard import report

    html = report.build_report([report.group_gap_section(job.result)], data_name="adult")
    assert "Does recalibration close the gaps between groups?" in html and "One per group" in html


def test_compare_names_the_groups_too_small_to_measure(at):
    """Adult's race groups: the small ones have fewer than 144 test rows per fold, so they are not
    measured; the page and the report name them, and the table says in how many folds each was."""
    from dashboard import report

    job = _group_gap_run(at, "race", 1)
    table = job.result.table
    never = sorted(set(table["group"]) - set(table.loc[table["measured"], "group"]))
    assert never and not at.exception
    captions = " ".join(c.value for c in at.caption)
    assert "Not measured in any fold (fewer than 144 test rows each time), so not in the gap" in captions
    assert all(g in captions for g in never)
    wide = next(d.value for d in at.dataframe if "Folds measured" in d.value.columns)
    assert wide.set_index("Group").loc[never, "Folds measured"].eq(0).all()
    html = report.build_report([report.group_gap_section(job.result)], data_name="adult")
    assert "Not measured in any fold" in html and "fewer than 144 test rows in a fold is not measured" in html


# --------------------------------------------------------------------------- estimators on the pages
def test_reliability_offers_equal_mass_bins_the_smooth_curve_and_other_libraries(at):
    import numpy as np

    from dashboard import figures as F
    from pbr_core import estimators as E

    at.session_state["rel_estimators_open"] = True  # the user opens "Other estimators"
    at.switch_page("views/reliability.py").run()
    preds = at.session_state["pbr_loaded"].preds
    B = pbr_core.optimal_n_bins(preds.n)
    table = next(d.value for d in at.dataframe if "What it measures" in d.value.columns)
    ref = E.library_conventions(preds.probs, preds.labels)
    assert table["ECE"].tolist() == pytest.approx(ref["ece"].tolist(), abs=1e-15)
    assert table["Estimator or library (default settings)"].iloc[0].startswith("pbr-calib: the paper's ECE")
    at.segmented_control(key="rel_binning").set_value("mass").run()
    assert not at.exception
    fig = sent_figure(at)
    counts = F.trace(fig, F.TRACE_COUNTS).y
    assert len(counts) == B and max(counts) - min(counts) <= 1     # equal mass: the same count per bin
    assert any(f"{E.ece_equal_mass(preds.probs, preds.labels):.4f}" in c.value for c in at.caption)
    at.toggle(key="rel_smooth").set_value(True).run()
    assert not at.exception
    smooth = F.trace(sent_figure(at), F.TRACE_SMOOTH)
    assert len(smooth.x) > 50 and np.all((np.asarray(smooth.y) >= 0) & (np.asarray(smooth.y) <= 1))


def test_bins_and_bias_teaches_the_estimators_on_simulated_data(at):
    from dashboard import figures as F

    at.switch_page("views/bins_bias.py").run()
    assert not at.exception
    text = "\n".join(m.value for m in at.markdown)
    assert "simulated" in text.lower() and "TCE = 0.050" in text
    at.select_slider(key="bins_sim_shift").set_value(0.0).run()
    assert not at.exception
    fig = sent_figure(at, -1)
    assert F.trace(fig, "True calibration error = 0.000") is not None


def _forecasts(n: int):
    """Issue 35's forecasts: an id, a text id of one row each, KITTI's p(y=1) and labels, a two-valued segment."""
    import pandas as pd

    preds = pbr_core.load_predictions(ROOT / "sample_data" / "kitti_random_forest.csv")
    rng = np.random.default_rng(0)
    return pd.DataFrame({"person_id": np.arange(n), "race_id": [f"race-{i}" for i in range(n)],
                         "p_dem": preds.p_positive[:n], "label": preds.labels[:n],
                         "branch": rng.choice(["house", "senate"], n)})


def test_the_page_never_opens_on_an_id_column(at):
    """Issue 35's files: an id column first (person_id, image_id, item), a column of 504 one-row values,
    then a segment. The page opens on the segment; with no segment it asks for a column and measures
    nothing (it used to open on the id: 'Cannot group by', or 504 one-row groups)."""
    df = _forecasts(504)
    at.file_uploader(key="data_upload").upload("forecasts.csv", df.to_csv(index=False).encode(), "text/csv").run()
    assert not at.exception, at.exception
    at.switch_page(GROUPS).run()
    assert not at.exception and not at.error
    assert at.selectbox(key="groups_by").value == "branch"
    assert set(at.dataframe[0].value["Group"]) == {"house", "senate"}
    at.switch_page("views/data.py").run()
    at.file_uploader(key="data_upload").upload("ids.csv", df.drop(columns="branch").to_csv(index=False).encode(),
                                               "text/csv").run()
    at.switch_page(GROUPS).run()
    assert not at.exception and not at.error
    assert at.selectbox(key="groups_by").value == "(choose a column)" and not at.dataframe
    assert any("No column of this file makes groups worth comparing" in i.value for i in at.info)


def test_compares_group_gaps_never_open_on_an_id_column(at):
    """Compare's group gaps open as the Groups page does: on the segment, not the file's first column (an id,
    which gave 504 one-row groups); with no segment, a choice to make and no Run."""
    df = _forecasts(2000)
    at.file_uploader(key="data_upload").upload("forecasts.csv", df.to_csv(index=False).encode(), "text/csv").run()
    at.switch_page("views/compare.py").run()
    assert not at.exception
    assert at.selectbox(key="gap_by").value == "branch" and not at.button(key="gap_run").disabled
    at.switch_page("views/data.py").run()
    at.file_uploader(key="data_upload").upload("ids.csv", df.drop(columns="branch").to_csv(index=False).encode(),
                                               "text/csv").run()
    at.switch_page("views/compare.py").run()
    assert not at.exception
    assert at.selectbox(key="gap_by").value == "(choose a column)" and at.button(key="gap_run").disabled
    assert any("choose the column to group by" in c.value for c in at.caption)
    at.selectbox(key="gap_by").set_value("person_id").run()  # the user's own choice stays possible
    assert not at.button(key="gap_run").disabled


def test_a_saved_row_index_is_not_offered_as_a_group_column(at):
    """Audit 8 / review: the loader keeps a pandas index as 'row index' (written back by downloads); one
    group per row is never worth offering, and a file whose only other column is that index says it has
    none."""
    import numpy as np
    import pandas as pd

    from pbr_core.loading._tables import ROW_INDEX_COLUMN

    preds = pbr_core.load_predictions(ROOT / "sample_data" / "kitti_random_forest.csv")
    n = 600
    df = pd.DataFrame({"p_car": preds.p_positive[:n], "label": preds.labels[:n],
                       "site": np.random.default_rng(0).choice(["north", "south"], n)},
                      index=np.arange(1000, 1000 + n))
    at.file_uploader(key="data_upload").upload("indexed.csv", df.to_csv().encode(), "text/csv").run()
    assert not at.exception, at.exception
    assert ROW_INDEX_COLUMN in at.session_state["pbr_loaded"].preds.metadata.columns
    at.switch_page(GROUPS).run()
    assert not at.exception and not at.error
    assert ROW_INDEX_COLUMN not in at.selectbox(key="groups_by").options and at.selectbox(key="groups_by").value == "site"
    at.switch_page("views/data.py").run()
    at.file_uploader(key="data_upload").upload("only_index.csv", df.drop(columns="site").to_csv().encode(),
                                               "text/csv").run()
    at.switch_page(GROUPS).run()
    assert not at.exception and not at.error
    from dashboard import texts

    assert any(texts.GROUPS_NONE[:40] in i.value for i in at.info)


# ------------------------------------------------------------------------ calibration over time
def _dated(n: int = 3000, seed: int = 0) -> pbr_core.Predictions:
    """The audit's dated file in small: Jan-Jun 2024, outcomes drifting up to 15 points above p by June."""
    import dataclasses

    import numpy as np
    import pandas as pd

    rng = np.random.default_rng(seed)
    t = np.sort(rng.integers(0, 182, n))
    when = pd.Timestamp("2024-01-01") + pd.to_timedelta(t, unit="D")
    p = rng.uniform(0.05, 0.8, n)
    y = (rng.random(n) < np.clip(p + 0.15 * t / 181, 0, 1)).astype(int)
    return dataclasses.replace(pbr_core.Predictions.from_arrays(np.c_[1 - p, p], y),
                               metadata=pd.DataFrame({"scored_at": when.strftime("%Y-%m-%d")}))


def _dated_page(at: AppTest, every: str) -> AppTest:
    from dashboard import state

    at.session_state["pbr_loaded"] = state.Loaded(preds=_dated(), name="dated", file_name="dated.csv",
                                                  origin="upload", key="test:dated")
    at.switch_page(GROUPS).run()
    at.selectbox(key="groups_by").set_value("scored_at").run()
    at.selectbox(key="groups_every").set_value(every).run()
    assert not at.exception, at.exception
    return at


def test_weekly_buckets_are_labelled_in_full_and_the_flagged_weeks_are_drawn(at):
    """Weekly: labels read 'week of 2024-01-01' (not a day, not cut to '2024-01'), and the overlay, which
    drew the first 12 of 26 equal-sized weeks and none of the flagged ones, draws the flagged weeks first
    and its caption names the weeks drawn."""
    _dated_page(at, "week")
    table = at.dataframe[0].value
    assert table["Group"].iloc[0] == "week of 2024-01-01" and table["Group"].is_unique and len(table) == 26
    report = calibration_by_group(_dated(), "scored_at", every="week")
    flagged = report.miscalibrated
    assert flagged and any(g > table["Group"].iloc[11] for g in flagged)   # some after the first 12 weeks
    drawn = [tr.name for tr in sent_figure(at, 0).data if tr.name in set(table["Group"])]
    assert set(flagged) <= set(drawn) and len(drawn) == 12
    caption = "\n".join(c.value for c in at.caption).replace("\\", "")
    assert f"the {len(flagged)} miscalibrated beyond chance, then the {12 - len(flagged)} largest" in caption
    assert all(g in caption for g in drawn)


def test_months_read_as_months_and_a_raw_date_suggests_week_or_month(at):
    _dated_page(at, "month")
    assert at.dataframe[0].value["Group"].tolist() == [f"2024-0{m}" for m in range(1, 7)]
    at.selectbox(key="groups_every").set_value("").run()   # the dates as they are: a group a day
    warning = next(w.value for w in at.warning if "too few rows" in w.value).replace("\\", "")
    assert "set *Dates* to by week or by month" in warning
    assert "Here 182: 2024-01-01, 2024-01-02," in warning and "and 172 more" in warning


def test_a_negative_bias_corrected_error_is_explained():
    """'bias-corrected calibration errors 0.1799 and -0.1136' called a group with -0.1136 the best: the
    sentence and the column's help now say that below 0 reads as about 0 (the values stay unclipped)."""
    import dataclasses

    from dashboard import texts
    from pbr_core.groups import gap_statement

    report = calibration_by_group(_dated(), "scored_at", every="month")
    assert report.largest_gap["corrected_best"] > 0 and "about 0" not in gap_statement(report)
    negative = dataclasses.replace(report, largest_gap={**report.largest_gap, "corrected_best": -0.1136})
    words = gap_statement(negative)
    assert ("0.1144 and about 0 (-0.1136: its measured ECE is smaller than what noise alone is expected to add, "
            "so this measure cannot tell its error from 0)") in words
    assert "Below 0" in texts.GROUPS_CORRECTED_HELP and "about 0" in texts.GROUPS_CORRECTED_HELP


def test_an_inconclusive_largest_gap_says_so_in_words_before_its_figures():
    """Audit 12a (an LLM file by subject): "... cannot tell whether it is calibrated worse than Y:
    bias-corrected calibration errors 0.1577 and -0.1062 (below 0: ...) (measured ECE 0.1602 and 0.0825),
    consistent with no difference (95% interval -0.1354 to 0.7003, ...)". The sentence now calls the
    comparison inconclusive first, reads the negative estimate as about 0, and keeps every figure."""
    import dataclasses

    from pbr_core.groups import gap_statement

    report = calibration_by_group(_dated(), "scored_at", every="month")
    g = {**report.largest_gap, "real": False, "p_holm_worst": 0.009, "corrected_worst": 0.1577,
         "corrected_best": -0.1062, "ece_worst": 0.1602, "ece_best": 0.0825, "low": -0.1354, "high": 0.7003}
    words = gap_statement(dataclasses.replace(report, largest_gap=g))
    worst, best = (f"scored_at = {g['worst']}", f"scored_at = {g['best']}")
    verdict = (f"{worst} is miscalibrated beyond chance (p = 0.0090 after correcting for the other groups), but "
               f"whether it is calibrated worse than {best} is inconclusive: these rows cannot tell. ")
    assert words.startswith(verdict), words
    k = int(round((1 + np.sqrt(1 + 8 * g["pairs"])) / 2))
    assert words[len(verdict):] == (
        "Their bias-corrected calibration errors (the part of the ECE that noise adds removed) are 0.1577 and "
        "about 0 (-0.1062: its measured ECE is smaller than what noise alone is expected to add, so this measure "
        "cannot tell its error from 0) (measured ECE 0.1602 and 0.0825); the difference lies somewhere from "
        f"-0.1354 to 0.7003 (95% interval, adjusted for comparing {k} groups), which includes no difference at all.")


def test_a_date_column_opens_on_the_period_its_rows_support(at):
    """Audit 8: grouping by a date started at the dates as they are (a group a day: 180 groups of ~44 rows on
    the fraud file, 28 s, 'Fewer than two groups have enough rows to compare'). The page now chooses the period
    from the data, says so, and keeps the user's own choice; one-day groups read 'too few rows to say'."""
    from dashboard import state, texts
    from pbr_core.groups import DATE_MAX_GROUPS, MIN_ROWS

    at.session_state["pbr_loaded"] = state.Loaded(preds=_dated(), name="dated", file_name="dated.csv",
                                                  origin="upload", key="test:dated")
    at.switch_page(GROUPS).run()
    at.selectbox(key="groups_by").set_value("scored_at").run()
    assert not at.exception, at.exception
    assert at.selectbox(key="groups_every").value == "week" and len(at.dataframe[0].value) == 26
    chosen = texts.groups_every_chosen("by week", MIN_ROWS, DATE_MAX_GROUPS)
    assert chosen in [c.value for c in at.caption]
    at.selectbox(key="groups_every").set_value("day").run()
    assert at.selectbox(key="groups_every").value == "day" and chosen not in [c.value for c in at.caption]
    cells = at.dataframe[0].value["What the test says"]
    assert cells.str.contains("too few rows to say what would show").any() and not cells.str.contains("any size").any()
    at.switch_page("views/data.py").run()
    at.switch_page(GROUPS).run()   # the user's choice stands
    assert at.selectbox(key="groups_every").value == "day"


def _dated_over(days: int, n: int = 3000, seed: int = 4) -> "pbr_core.Predictions":
    """n rows whose dates spread uniformly over ``days`` days from 1900-01-01 (audit 12c: a file of dates
    over 10,000 years was advised to group "by week or month", and month gave over 1,000 groups too)."""
    import dataclasses

    import numpy as np
    import pandas as pd

    rng = np.random.default_rng(seed)
    when = pd.Timestamp("1900-01-01") + pd.to_timedelta(rng.integers(0, days, n), unit="D")
    p = rng.uniform(0.05, 0.9, n)
    y = (rng.random(n) < p).astype(int)
    return dataclasses.replace(pbr_core.Predictions.from_arrays(np.c_[1 - p, p], y),
                               metadata=pd.DataFrame({"scored_at": when.strftime("%Y-%m-%d")}))


def _too_many(at: AppTest, preds, every: str) -> str:
    from dashboard import state

    at.session_state["pbr_loaded"] = state.Loaded(preds=preds, name="dated", file_name="dated.csv",
                                                  origin="upload", key=f"test:dated:{preds.n}:{every}")
    at.switch_page(GROUPS).run()
    at.selectbox(key="groups_by").set_value("scored_at").run()
    at.selectbox(key="groups_every").set_value(every).run()
    assert not at.exception, at.exception
    return next(e.value for e in at.error if "groups (at most 1,000 can be measured)" in e.value).replace("\\", "")


def test_too_many_groups_by_day_suggests_only_the_periods_within_the_limit(at):
    import pandas as pd

    preds = _dated_over(200 * 365)  # 200 years: weeks and months both over 1,000 among 3,000 rows
    months = pd.to_datetime(preds.metadata["scored_at"]).dt.to_period("M").nunique()
    assert months > 1000
    text = _too_many(at, preds, "day")
    assert text.endswith(f"Group by a column with fewer values (a segment, a category, a model version), or the "
                         f"rows of a shorter period: no bucket of dates gives few enough groups (by month, "
                         f"{months:,} groups).")


def test_too_many_groups_by_day_suggests_month_where_weeks_are_too_many_too(at):
    import pandas as pd

    preds = _dated_over(30 * 365, n=5000)  # 30 years: ~1,500 weeks, 360 months
    weeks = pd.to_datetime(preds.metadata["scored_at"]).dt.to_period("W-SUN").nunique()
    assert weeks > 1000
    text = _too_many(at, preds, "day")
    assert text.endswith("Group by wider periods of time (*Dates* by month).")


def test_check_group_count_with_unknown_counts_names_the_condition():
    from pbr_core.groups import check_group_count

    with pytest.raises(ValueError) as exc:
        check_group_count(5000, ["when"], "day", more=True)
    assert str(exc.value).endswith("Group by a wider bucket of dates (every='week' or 'month') if one gives at most "
                                   "1,000 groups, or a column with fewer values (a segment, a category, a model "
                                   "version), or the rows of a shorter period.")


def _elections(seed: int = 5) -> "pd.DataFrame":
    """Audit 13, item 11: an election forecasts file, 500 races: an id, three years of ~167 races each,
    20 states of ~25, a branch of one big group (House 436, Senate 34, Governor 30), p_dem and won."""
    import pandas as pd

    rng = np.random.default_rng(seed)
    year = np.repeat([2018, 2020, 2022], [169, 164, 167])
    branch = np.repeat(["House", "Senate", "Governor"], [436, 34, 30])
    rng.shuffle(branch)
    p = rng.uniform(0.02, 0.98, 500).round(3)
    return pd.DataFrame({"race_id": [f"{y}-{i:03d}" for i, y in enumerate(year)], "year": year,
                         "state": rng.choice([f"S{i}" for i in range(20)], 500), "branch": branch,
                         "p_dem": p, "won": (rng.uniform(size=500) < p).astype(int)})


def test_a_year_of_a_few_values_is_a_segment_to_open_on(at):
    """The page said 'No column of this file makes groups worth comparing' on a file with a year of three
    values of ~167 rows each (the name 'year' read as a date); it now opens on the year. The branch (one
    group of 100 rows or more, two of ~30) is still not opened on: two groups of 34 and 30 rows cannot
    be compared to anything."""
    df = _elections()
    at.file_uploader(key="data_upload").upload("elections.csv", df.to_csv(index=False).encode(), "text/csv").run()
    assert not at.exception, at.exception
    at.switch_page(GROUPS).run()
    assert not at.exception and not at.error
    assert at.selectbox(key="groups_by").value == "year"
    table = at.dataframe[0].value
    # a number alone does not read as a group: named as the sentences name it (audit 14, item 9)
    assert sorted(table["Group"].astype(str)) == ["year = 2018", "year = 2020", "year = 2022"]
    preds = at.session_state["pbr_loaded"].preds
    assert table["ECE"].tolist() == pytest.approx(calibration_by_group(preds, "year").table["ece"].tolist(), abs=1e-15)


def test_a_file_of_many_small_subjects_is_told_the_rule_in_numbers(at):
    """Audit 13, item 11: an LLM file of 16 subjects of ~31 rows: no subject has 100 rows, so the page opens
    on no column, and says how many rows a group needs rather than 'enough rows'."""
    import pandas as pd

    rng = np.random.default_rng(4)
    conf = rng.uniform(0.25, 1.0, 500).round(4)
    df = pd.DataFrame({"subject": np.repeat([f"subject_{i}" for i in range(16)], [32] * 4 + [31] * 12),
                       "question_idx": rng.integers(0, 300, 500), "confidence": conf,
                       "correct": (rng.uniform(size=500) < conf).astype(int)})
    at.file_uploader(key="data_upload").upload("mmlu.csv", df.to_csv(index=False).encode(), "text/csv").run()
    at.switch_page(GROUPS).run()
    assert not at.exception and not at.error
    assert at.selectbox(key="groups_by").value == "(choose a column)"
    assert any("at least two of them with 100 rows or more" in i.value for i in at.info)
    at.selectbox(key="groups_by").set_value("subject").run()
    assert not at.exception and len(at.dataframe[0].value) == 16
