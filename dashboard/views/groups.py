"""Groups page: is the model calibrated for everyone? Calibration per group of a column (a segment, a
demographic attribute, the true class, or a date by day, week or month), with a test per group, the
small groups flagged, the largest gap between groups, and the groups' reliability curves overlaid.
"""

from __future__ import annotations

import streamlit as st

from dashboard import compute, recal_ui, state, tables, texts
from dashboard import figures_recal as FR
from pbr_core.groups import MIN_ROWS

K_BY = state.K_GROUPS_BY
K_BY2 = state.K_GROUPS_BY2
K_EVERY = state.K_GROUPS_EVERY
K_FOR = state.K_GROUPS_FOR
TRUE_CLASS = "true class"
NONE = state.GROUPS_NONE
EVERY = {"": "as they are", "day": "by day", "week": "by week", "month": "by month"}

def _columns(loaded: state.Loaded) -> list[str]:
    p = loaded.preds
    cols = [] if p.metadata is None else [str(c) for c in p.metadata.columns]
    return cols + ([TRUE_CLASS] if p.has_class_ids and p.has_labels else [])


def _controls(loaded: state.Loaded) -> tuple[tuple[str, ...], str] | None:
    options = _columns(loaded)
    def defaults() -> dict[str, str]:
        groups = loaded.preds.columns_with_role("group")
        return {K_BY: groups[0] if groups else options[0], K_BY2: NONE, K_EVERY: ""}

    state.reset_for_data(K_FOR, loaded.key, defaults)
    if loaded.preds.metadata is None:
        st.info(texts.GROUPS_NONE, icon=":material/info:")
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


def render() -> None:
    st.title("Groups")
    loaded = state.current_or_prompt()
    if loaded is None:
        return
    st.markdown(texts.GROUPS_INTRO)
    if loaded.stream is not None:  # the sample keeps scores and labels only, not the other columns
        st.info("Calibration by group is not available yet for a dataset on the server: it needs every row's "
                "group column, which the streamed pass does not keep. Run `pbr-calib evaluate` with `--by` on a "
                "file (or a sample of the rows) instead.", icon=":material/info:")
        return
    chosen = _controls(loaded)
    if chosen is None:
        return
    by, every = chosen
    view = state.metric_view(loaded)
    target = "positive" if view.binary_positive else "top_label"
    try:
        with st.spinner("Measuring each group …"):
            report = compute.group_report(loaded, view, by, every)
    except ValueError as exc:
        st.error(f"Cannot group by {' and '.join(by)}: {exc}", icon=":material/error:")
        return
    st.markdown(f"Measured on **{view.what}**, grouped by **{' × '.join(by)}**"
                + (f" ({EVERY[every]})" if every else "") + f": {len(report.table)} groups.")
    st.dataframe(tables.groups_frame(report), hide_index=True, key="groups_table", column_config={
        c: st.column_config.NumberColumn(format="%.4f") for c in
        ("ECE", "ECE 95 % from", "to", "MCE", "Brier", "Mean predicted", "Frequency of y = 1", "Accuracy")}
        | {"p (Holm)": st.column_config.NumberColumn(format="%.3g", help=texts.GROUPS_TEST_HELP)})
    st.caption("Test: " + report.test + ". " + texts.GROUPS_TEST_HELP)
    if report.small:
        st.warning(texts.GROUPS_SMALL_NOTE.format(m=MIN_ROWS) + " Here: " + ", ".join(report.small) + ".",
                   icon=":material/group_off:")
    st.markdown(texts.gap_sentence(report.largest_gap))
    x_title, y_title = texts.axis_titles(target == "positive")
    if len(report.table) - len(report.small) > 12:
        st.caption("The curves of the 12 largest groups (the table lists every group).")
    st.plotly_chart(FR.groups_overlay_figure(report.diagrams, report.small, report.table["group"].tolist(),
                                             x_title=x_title, y_title=y_title),
                    key="groups_chart", config={"displaylogo": False})
    st.caption(texts.GROUPS_OVERLAY_CAPTION)
    c = st.columns(2)
    with c[0]:
        st.download_button("Groups table (CSV)", data=report.table.to_csv(index=False).encode(),
                           file_name="calibration_by_group.csv", mime="text/csv", key="groups_dl",
                           icon=":material/table_view:", on_click="ignore")
    with c[1]:
        recal_ui.report_button("groups_dl_report", label="Audit report (HTML)", help=texts.AUDIT_REPORT_HELP)


render()
