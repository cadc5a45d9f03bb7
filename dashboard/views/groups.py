"""Groups page: is the model calibrated for everyone? Calibration per group of a column (a segment, a
demographic attribute, the predicted class, each class against the rest, or a date by day, week or
month), with a test per group and what it supports, the small groups flagged, the largest gap between
groups and whether it is real, the groups' reliability curves overlaid, and one group's diagram with
its consistency bands.
"""

from __future__ import annotations

import logging

import streamlit as st

from dashboard import compute, recal_ui, state, tables, texts
from dashboard import figures_recal as FR
from pbr_core import groups as G
from pbr_core.groups import MIN_ROWS
from pbr_core.loading.writing import csv_text

K_BY = state.K_GROUPS_BY
K_BY2 = state.K_GROUPS_BY2
K_EVERY = state.K_GROUPS_EVERY
K_FOR = state.K_GROUPS_FOR
NONE = state.GROUPS_NONE
#: The first option when no column of the file makes groups worth comparing: nothing is measured.
CHOOSE = "(choose a column)"
K_ONE = "groups_one"
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
    """The file's other columns, then the predicted class and (three classes or more) each class against
    the rest. Grouping by the true class is not offered (pbr_core.groups.TRUE_CLASS_REFUSED)."""
    p = loaded.preds
    classes = p.has_class_ids and p.has_labels
    multiclass = classes and p.kind == "multiclass" and p.n_classes >= 3
    return (_other_columns(loaded) + ([G.PREDICTED_CLASS] if classes else [])
            + ([G.EACH_CLASS] if multiclass else []))


def _default(loaded: state.Loaded) -> str | None:
    """The column the page opens on: never one the loader called an identifier, one whose groups are
    worth comparing (pbr_core.groups.default_group_column); None when no column qualifies."""
    p = loaded.preds
    if loaded.stream is not None:  # the values are not in memory: by the columns' names and roles
        return G.default_group_column_by_name(_other_columns(loaded), p.columns_with_role("group"))
    return G.default_group_column(p)


def _controls(loaded: state.Loaded) -> tuple[tuple[str, ...], str] | None:
    default = _default(loaded)
    options = ([] if default else [CHOOSE]) + _columns(loaded)

    def defaults() -> dict[str, str]:
        return {K_BY: default or CHOOSE, K_BY2: NONE, K_EVERY: ""}

    state.reset_for_data(K_FOR, loaded.key, defaults, also=st.session_state.get(K_BY) not in options)
    if not _other_columns(loaded):
        st.info(texts.GROUPS_NONE, icon=":material/info:")
    elif default is None:
        st.info(texts.GROUPS_NO_DEFAULT, icon=":material/info:")
    # A dataset on the server is read again for every grouping: the choices are sent together with a
    # button, so that picking two columns and a period costs one pass, not three.
    box = st.form("groups_form", border=False) if loaded.stream is not None else st.container()
    with box:
        c = st.columns([2, 2, 1.4], gap="medium")
        # (kept while other pages show: the report, downloadable from every page, groups by them)
        first = c[0].selectbox("Group by", options, key=K_BY, persist_state="session",
                               help=texts.GROUPS_BY_HELP)
        second = c[1].selectbox("…and by (optional)", [NONE, *[o for o in options if o not in (first, CHOOSE, G.EACH_CLASS)]], key=K_BY2,
                                persist_state="session",
                                help="Two columns give every combination of their values.")
        every = c[2].selectbox("Dates", list(EVERY), format_func=EVERY.get, key=K_EVERY, persist_state="session",
                               help="For a date or time column: calibration over time, so that a drift after a "
                                    "deployment shows.")
        if loaded.stream is not None:
            st.form_submit_button("Measure the groups", key=K_MEASURE, icon=":material/groups:",
                                  on_click=_measure_requested, args=(loaded.key,),
                                  help=texts.GROUPS_STREAM_BUTTON_HELP.format(n=loaded.stream.n_total))
    if first == CHOOSE:
        return None
    by = (first,) if second in (NONE, first, CHOOSE) or first == G.EACH_CLASS else (first, second)
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
    st.markdown(texts.groups_headline(report))
    st.dataframe(tables.groups_frame(report), hide_index=True, key="groups_table", column_config={
        c: st.column_config.NumberColumn(format="%.4f") for c in
        ("ECE", "ECE 95 % from", "to", "MCE", "Brier", "Mean predicted", "Frequency of y = 1", "Accuracy")}
        | {"ECE without noise": st.column_config.NumberColumn(format="%.4f", help=texts.GROUPS_CORRECTED_HELP),
           "p (corrected)": st.column_config.TextColumn(help=texts.GROUPS_TEST_HELP),   # texts.p_value's format
           "What the test says": st.column_config.TextColumn(width="large", help=texts.GROUPS_VERDICT_HELP)})
    st.caption(texts.GROUPS_TEST_HELP)
    if loaded.stream is not None:
        st.caption(texts.GROUPS_STREAM_NOTE)
    if report.small:
        st.warning(texts.GROUPS_SMALL_NOTE.format(m=MIN_ROWS) + " Here: " + texts.md_list(report.small) + ".",
                   icon=":material/group_off:")
    st.markdown("**Largest gap.** " + texts.gap_sentence(report))
    with st.expander("What each group's test says", key="groups_statements"):
        st.markdown("\n".join(f"- {texts.md(line)}" for line in G.group_statements(report)))
    if len(report.table) - len(report.small) > 12:
        st.caption("The curves of the 12 largest groups (the table lists every group).")
    st.plotly_chart(FR.groups_overlay_figure(report.diagrams, report.small, report.table["group"].tolist(),
                                             x_title=x_title, y_title=y_title),
                    key="groups_chart", config={"displaylogo": False})
    st.caption(texts.GROUPS_OVERLAY_CAPTION)
    _one_group(report, view, x_title, y_title)
    c = st.columns(2)
    with c[0]:
        st.download_button("Groups table (CSV)", data=csv_text(report.table).encode(),
                           file_name="calibration_by_group.csv", mime="text/csv", key="groups_dl",
                           icon=":material/table_view:", on_click="ignore")
    with c[1]:
        recal_ui.report_button("groups_dl_report", label="Audit report (HTML)", help=texts.AUDIT_REPORT_HELP)


def _one_group(report, view: state.MetricView, x_title: str, y_title: str) -> None:
    """One group's reliability diagram with its consistency bands: which of its gaps are larger than
    chance at its size."""
    names = report.table["group"].tolist()
    if st.session_state.get(K_ONE) not in names:
        st.session_state[K_ONE] = names[0]
    name = st.selectbox("One group's reliability diagram, with its consistency bands", names, key=K_ONE,
                        help=texts.BANDS_HELP)
    table = report.diagrams[name]
    st.plotly_chart(FR.group_diagram_figure(table, x_title=x_title, y_title=y_title,
                                            binary_positive=view.binary_positive),
                    key="groups_one_chart", config={"displaylogo": False})
    st.caption(texts.bands_caption(table))


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
