"""Groups page: is the model calibrated for everyone? Calibration per group of a column (a segment, a
demographic attribute, the true class, or a date by day, week or month), with a test per group, the
small groups flagged, the largest gap between groups, and the groups' reliability curves overlaid.
"""

from __future__ import annotations

import pandas as pd
import streamlit as st

from dashboard import figures_recal as FR
from dashboard import state
from pbr_core.groups import MIN_ROWS, GroupReport, calibration_by_group

K_BY = "groups_by"
K_BY2 = "groups_by2"
K_EVERY = "groups_every"
K_FOR = "groups_for"
TRUE_CLASS = "true class"
NONE = "(none)"
EVERY = {"": "as they are", "day": "by day", "week": "by week", "month": "by month"}

INTRO = (
    "Is the model calibrated **for everyone**, or only on average? Each group of rows gets its own ECE "
    "(with B = floor(n^(1/3)) of the group's rows), its 95 % bootstrap interval, a test, and its own "
    "reliability curve."
)
TEST_HELP = (
    "Spiegelhalter's z-test: does the group's confidence match its outcomes? It needs no bins (unlike the "
    "Hosmer-Lemeshow test, whose answer changes with the binning). The p-values are corrected for testing "
    "several groups at once (Holm's method): below 0.05, the group is miscalibrated beyond chance. A test "
    "can miss errors that cancel across confidence levels: read it with the ECE and the curve."
)
SMALL_NOTE = (
    "Groups with fewer than {m} rows are marked *too few rows*: their reliability curve has only a few bins "
    "of a few rows, and their ECE is mostly noise. They stay in the table, and out of the largest gap."
)
NO_GROUPS = (
    "This file has no other columns to group by. Columns such as a segment, a region, a model version or "
    "a date may stay in the file: they are kept next to the predictions (see the Data page). You can "
    "still group by the true class."
)


@st.cache_data(show_spinner=False, max_entries=32)
def _report(key: str, by: tuple[str, ...], every: str, target: str, _preds) -> GroupReport:
    return calibration_by_group(_preds, list(by), target=target, every=every or None)


def _columns(loaded: state.Loaded) -> list[str]:
    p = loaded.preds
    cols = [] if p.metadata is None else [str(c) for c in p.metadata.columns]
    return cols + ([TRUE_CLASS] if p.has_class_ids and p.has_labels else [])


def _controls(loaded: state.Loaded) -> tuple[tuple[str, ...], str] | None:
    options = _columns(loaded)
    if st.session_state.get(K_FOR) != loaded.key:
        st.session_state[K_FOR] = loaded.key
        groups = loaded.preds.columns_with_role("group")
        st.session_state[K_BY] = groups[0] if groups else options[0]
        st.session_state[K_BY2] = NONE
        st.session_state[K_EVERY] = ""
    if loaded.preds.metadata is None:
        st.info(NO_GROUPS, icon=":material/info:")
    c = st.columns([2, 2, 1.4], gap="medium")
    first = c[0].selectbox("Group by", options, key=K_BY,
                           help="A column of the file, or the true class of each row.")
    second = c[1].selectbox("…and by (optional)", [NONE, *[o for o in options if o != first]], key=K_BY2,
                            help="Two columns give every combination of their values.")
    every = c[2].selectbox("Dates", list(EVERY), format_func=EVERY.get, key=K_EVERY,
                           help="For a date or time column: calibration over time, so that a drift after a "
                                "deployment shows.")
    by = (first,) if second == NONE else (first, second)
    return by, every


def _table(report: GroupReport) -> pd.DataFrame:
    t = report.table
    rate = "Frequency of y = 1" if report.target == "positive" else "Accuracy"
    return pd.DataFrame({
        "Group": t["group"], "Rows": t["n"], rate: t["rate"], "Mean predicted": t["mean_predicted"],
        "ECE": t["ece"], "ECE 95 % from": t["ece_low"], "to": t["ece_high"], "MCE": t["mce"], "Brier": t["brier"],
        "p (Holm)": t["p_holm"], "Too few rows": t["too_small"],
    })


def _gap_sentence(report: GroupReport) -> str:
    g = report.largest_gap
    if not g:
        return "Fewer than two groups have enough rows to compare."
    return (f"**Largest gap:** {g['worst']} has an ECE {g['gap']:.4f} higher than {g['best']} "
            f"(95 % bootstrap interval {g['low']:.4f} to {g['high']:.4f}"
            + ("; it includes 0, so the difference may be chance)." if g["low"] <= 0 <= g["high"] else ")."))


def render() -> None:
    st.title("Groups")
    loaded = state.current_or_prompt()
    if loaded is None:
        return
    st.markdown(INTRO)
    chosen = _controls(loaded)
    if chosen is None:
        return
    by, every = chosen
    view = state.metric_view(loaded)
    target = "positive" if view.binary_positive else "top_label"
    try:
        with st.spinner("Measuring each group …"):
            report = _report(loaded.key, by, every, target, loaded.preds)
    except ValueError as exc:
        st.error(f"Cannot group by {' and '.join(by)}: {exc}", icon=":material/error:")
        return
    st.markdown(f"Measured on **{view.what}**, grouped by **{' × '.join(by)}**"
                + (f" ({EVERY[every]})" if every else "") + f": {len(report.table)} groups.")
    st.dataframe(_table(report), hide_index=True, key="groups_table", column_config={
        c: st.column_config.NumberColumn(format="%.4f") for c in
        ("ECE", "ECE 95 % from", "to", "MCE", "Brier", "Mean predicted", "Frequency of y = 1", "Accuracy")}
        | {"p (Holm)": st.column_config.NumberColumn(format="%.3g", help=TEST_HELP)})
    st.caption("Test: " + report.test + ". " + TEST_HELP)
    if report.small:
        st.warning(SMALL_NOTE.format(m=MIN_ROWS) + " Here: " + ", ".join(report.small) + ".",
                   icon=":material/group_off:")
    st.markdown(_gap_sentence(report))
    x_title, y_title = (("Predicted probability p(y=1)", "Observed frequency of y = 1") if target == "positive"
                        else ("Confidence (probability of the predicted class)", "Accuracy"))
    shown = {g: d for g, d in report.diagrams.items() if g not in report.small} or report.diagrams
    if len(shown) > 12:
        largest = report.table["group"].tolist()[:12]
        shown = {g: shown[g] for g in largest if g in shown}
        st.caption("The curves of the 12 largest groups (the table lists every group).")
    st.plotly_chart(FR.reliability_overlay_figure(shown, x_title=x_title, y_title=y_title), key="groups_chart",
                    config={"displaylogo": False})
    st.caption("One curve per group: each point is a bin of that group (its mean confidence and its observed "
               "rate). The closer to the dashed diagonal, the better calibrated the group.")
    st.download_button("Groups table (CSV)", data=report.table.to_csv(index=False).encode(),
                       file_name="calibration_by_group.csv", mime="text/csv", key="groups_dl",
                       icon=":material/table_view:", on_click="ignore")


render()
