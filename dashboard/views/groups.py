"""Groups page: is the model calibrated for everyone? Calibration per group of a column (a segment, a
demographic attribute, the true class, or a date by day, week or month), with a test per group, the
small groups flagged, the largest gap between groups, and the groups' reliability curves overlaid.
"""

from __future__ import annotations

import logging

import streamlit as st

from dashboard import compute, recal_ui, state, tables, texts
from dashboard import figures_recal as FR
from pbr_core.groups import MIN_ROWS
from pbr_core.loading.writing import csv_text

K_BY = state.K_GROUPS_BY
K_BY2 = state.K_GROUPS_BY2
K_EVERY = state.K_GROUPS_EVERY
K_FOR = state.K_GROUPS_FOR
TRUE_CLASS = "true class"
NONE = state.GROUPS_NONE
K_MEASURE = "groups_measure"
K_MEASURED = "groups_measured_for"   # the server dataset whose groups the user asked to measure
K_STOP = "groups_stop"
K_STOPPED = "groups_stopped_for"     # the server dataset whose measuring pass the user stopped
logger = logging.getLogger(__name__)
EVERY = {"": "as they are", "day": "by day", "week": "by week", "month": "by month"}

def _other_columns(loaded: state.Loaded) -> list[str]:
    """The columns besides scores and labels. A dataset on the server: from its columns' roles (its
    sample in memory holds scores and labels only; the streamed pass reads the column chosen)."""
    p = loaded.preds
    if loaded.stream is not None:
        return [str(c) for c, role in p.column_roles if role in ("group", "metadata")]
    return [] if p.metadata is None else [str(c) for c in p.metadata.columns]


def _columns(loaded: state.Loaded) -> list[str]:
    p = loaded.preds
    return _other_columns(loaded) + ([TRUE_CLASS] if p.has_class_ids and p.has_labels else [])


def _controls(loaded: state.Loaded) -> tuple[tuple[str, ...], str] | None:
    options = _columns(loaded)
    def defaults() -> dict[str, str]:
        groups = loaded.preds.columns_with_role("group")
        return {K_BY: groups[0] if groups else options[0], K_BY2: NONE, K_EVERY: ""}

    state.reset_for_data(K_FOR, loaded.key, defaults)
    if not _other_columns(loaded):
        st.info(texts.GROUPS_NONE, icon=":material/info:")
    # A dataset on the server is read again for every grouping: the choices are sent together with a
    # button, so that picking two columns and a period costs one pass, not three.
    box = st.form("groups_form", border=False) if loaded.stream is not None else st.container()
    with box:
        c = st.columns([2, 2, 1.4], gap="medium")
        # (kept while other pages show: the report, downloadable from every page, groups by them)
        first = c[0].selectbox("Group by", options, key=K_BY, persist_state="session",
                               help="A column of the file, or the true class of each row.")
        second = c[1].selectbox("…and by (optional)", [NONE, *[o for o in options if o != first]], key=K_BY2,
                                persist_state="session",
                                help="Two columns give every combination of their values.")
        every = c[2].selectbox("Dates", list(EVERY), format_func=EVERY.get, key=K_EVERY, persist_state="session",
                               help="For a date or time column: calibration over time, so that a drift after a "
                                    "deployment shows.")
        if loaded.stream is not None:
            st.form_submit_button("Measure the groups", key=K_MEASURE, icon=":material/groups:",
                                  on_click=_measure_requested, args=(loaded.key,),
                                  help=texts.GROUPS_STREAM_BUTTON_HELP.format(n=loaded.stream.n_total))
    by = (first,) if second in (NONE, first) else (first, second)
    return by, every


def _measure_requested(key: str) -> None:
    st.session_state[K_MEASURED] = key
    st.session_state.pop(K_STOPPED, None)


def _stop_requested(key: str) -> None:
    """Stop's callback. Its click made Streamlit interrupt the run that was reading the dataset (at the
    next progress update, i.e. the next record batch); this run then shows the prompt, not the pass."""
    st.session_state.pop(K_MEASURED, None)
    st.session_state[K_STOPPED] = key


def render() -> None:
    st.title("Groups")
    loaded = state.current_or_prompt()
    if loaded is None:
        return
    st.markdown(texts.GROUPS_INTRO)
    chosen = _controls(loaded)
    if chosen is None:
        return
    by, every = chosen
    if loaded.stream is not None and st.session_state.get(K_MEASURED) != loaded.key:
        if st.session_state.get(K_STOPPED) == loaded.key:
            st.info(texts.GROUPS_STREAM_STOPPED, icon=":material/stop_circle:")
        st.caption(texts.GROUPS_STREAM_PROMPT.format(n=loaded.stream.n_total))
        return
    view = state.metric_view(loaded)
    try:
        report = _measure(loaded, view, by, every)
    except ValueError as exc:  # the grouping (too many groups, not a date) or a bad row of a server dataset
        st.error(f"Cannot group by {texts.md_list(by, ' and ')}: "
                 f"{texts.groups_problem(state.within_data_root(str(exc)))}",
                 icon=":material/error:")
        return
    except Exception:  # noqa: BLE001 - a file gone or unreadable on the server: never a traceback on the page
        logger.exception("calibration by group of %s failed", loaded.file_name)
        st.error(f"Cannot group by {texts.md_list(by, ' and ')}: the data could not be read again. Read it again on the "
                 "Data page; if this persists, the server's log has the details.", icon=":material/error:")
        return
    x_title, y_title = texts.axis_titles(view.binary_positive)
    rows = f" of all {loaded.stream.n_total:,} rows of the dataset" if loaded.stream is not None else ""
    st.markdown(f"Measured on **{view.what}**{rows}, grouped by **{texts.md_list(by, ' × ')}**"
                + (f" ({EVERY[every]})" if every else "") + f": {len(report.table)} groups.")
    st.dataframe(tables.groups_frame(report), hide_index=True, key="groups_table", column_config={
        c: st.column_config.NumberColumn(format="%.4f") for c in
        ("ECE", "ECE 95 % from", "to", "MCE", "Brier", "Mean predicted", "Frequency of y = 1", "Accuracy")}
        | {"p (Holm)": st.column_config.TextColumn(help=texts.GROUPS_TEST_HELP)})   # texts.p_value's format
    st.caption("Test: " + report.test + ". " + texts.GROUPS_TEST_HELP)
    if loaded.stream is not None:
        st.caption(texts.GROUPS_STREAM_NOTE)
    if report.small:
        st.warning(texts.GROUPS_SMALL_NOTE.format(m=MIN_ROWS) + " Here: " + texts.md_list(report.small) + ".",
                   icon=":material/group_off:")
    st.markdown(texts.gap_sentence(report.largest_gap))
    if len(report.table) - len(report.small) > 12:
        st.caption("The curves of the 12 largest groups (the table lists every group).")
    st.plotly_chart(FR.groups_overlay_figure(report.diagrams, report.small, report.table["group"].tolist(),
                                             x_title=x_title, y_title=y_title),
                    key="groups_chart", config={"displaylogo": False})
    st.caption(texts.GROUPS_OVERLAY_CAPTION)
    c = st.columns(2)
    with c[0]:
        st.download_button("Groups table (CSV)", data=csv_text(report.table).encode(),
                           file_name="calibration_by_group.csv", mime="text/csv", key="groups_dl",
                           icon=":material/table_view:", on_click="ignore")
    with c[1]:
        recal_ui.report_button("groups_dl_report", label="Audit report (HTML)", help=texts.AUDIT_REPORT_HELP)


def _measure(loaded: state.Loaded, view: state.MetricView, by: tuple[str, ...], every: str):
    """The group report; a dataset on the server is read again (every row), with a progress bar."""
    if loaded.stream is None:
        with st.spinner("Measuring each group …"):
            return compute.group_report(loaded, view, by, every)
    stop = st.empty()
    if compute.group_report(loaded, view, by, every, cached_only=True) is None:  # a pass to make: it can be stopped
        stop.button("Stop", key=K_STOP, icon=":material/stop_circle:", on_click=_stop_requested, args=(loaded.key,),
                    help="Stops reading the dataset; nothing measured so far is kept.")
    bar = st.progress(0.0, text="Reading the dataset …")
    words = {"counting the groups": "Counting the groups", "measuring each group": "Measuring each group"}

    def progress(what: str, done: int, total: int | None) -> None:
        shown = f"{words.get(what, what)}: {done:,}" + (f" of {total:,} rows" if total else " rows")
        bar.progress(min(1.0, done / total) if total else 0.0, text=shown)

    try:
        return compute.group_report(loaded, view, by, every, progress=progress)
    finally:
        bar.empty()
        stop.empty()


render()
