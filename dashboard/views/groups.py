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
from dashboard.fit_estimate import recal_heavy
from pbr_core import groups as G
from pbr_core.groups import MIN_ROWS
from pbr_core.loading._tables import ROW_INDEX_COLUMN
from pbr_core.loading.writing import csv_text

K_BY = state.K_GROUPS_BY
K_BY2 = state.K_GROUPS_BY2
K_EVERY = state.K_GROUPS_EVERY
K_FOR = state.K_GROUPS_FOR
NONE = state.GROUPS_NONE
#: The first option when no column of the file makes groups worth comparing: nothing is measured.
CHOOSE = texts.CHOOSE_COLUMN
K_ONE = "groups_one"
K_MEASURE = "groups_measure"
K_MEASURED = "groups_measured_for"   # the server dataset whose groups the user asked to measure
K_STOP = "groups_stop"
K_STOPPED = "groups_stopped_for"     # the server dataset whose measuring pass the user stopped
#: (data key, grouping) whose Dates the page last set from the data, and the bucket it chose then
K_EVERY_FOR = "groups_every_for"
K_EVERY_AUTO = "groups_every_auto"
logger = logging.getLogger(__name__)
EVERY = {"": "as they are", "day": "by day", "week": "by week", "month": "by month"}

def _other_columns(loaded: state.Loaded) -> list[str]:
    """The columns besides scores and labels (not the saved row index the loader kept). A dataset on the
    server: from its columns' roles (its sample in memory holds scores and labels only; the streamed pass
    reads the column chosen)."""
    p = loaded.preds
    if loaded.stream is not None:
        return [str(c) for c, role in p.column_roles if role in ("group", "metadata")]
    # The saved row index the loader kept (its name is the loader's, one group per row): not offered
    return [] if p.metadata is None else [str(c) for c in p.metadata.columns if str(c) != ROW_INDEX_COLUMN]


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
    return compute.default_group_column(loaded)


def _controls(loaded: state.Loaded) -> tuple[tuple[str, ...], str] | None:
    default = _default(loaded)
    options = ([] if default else [CHOOSE]) + _columns(loaded)

    def defaults() -> dict[str, str]:
        return {K_BY: default or CHOOSE, K_BY2: NONE, K_EVERY: ""}

    if state.reset_for_data(K_FOR, loaded.key, defaults, also=st.session_state.get(K_BY) not in options):
        st.session_state.pop(K_EVERY_FOR, None)   # Dates back to "as they are": chosen again from the data
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
                                help=texts.GROUPS_BY2_HELP)
        auto = _default_every(loaded, first, second)
        every = c[2].selectbox("Dates", list(EVERY), format_func=EVERY.get, key=K_EVERY, persist_state="session",
                               help=texts.GROUPS_EVERY_HELP)
        if loaded.stream is not None:
            st.form_submit_button("Measure the groups", key=K_MEASURE, icon=":material/groups:",
                                  on_click=_measure_requested, args=(loaded.key,),
                                  help=texts.GROUPS_STREAM_BUTTON_HELP.format(n=loaded.stream.n_total))
    if auto and every == auto:   # the choice the page made is said, with how to change it
        st.caption(texts.groups_every_chosen(EVERY[auto], G.MIN_ROWS, G.DATE_MAX_GROUPS))
    if first == CHOOSE:
        return None
    by = (first,) if second in (NONE, first, CHOOSE) or first == G.EACH_CLASS else (first, second)
    return by, every


def _default_every(loaded: state.Loaded, first: str, second: str) -> str | None:
    """Dates chosen from the data when the grouping changes (pbr_core.groups.default_every: the finest of
    day, week and month whose groups are big enough and few enough to read; the dates as they are gave
    the audit's fraud file 180 one-day groups of ~44 rows, all too small to compare). Set once per data
    and grouping, before the Dates box is drawn, so that the user's own choice afterwards stands.
    Returns the bucket chosen for this grouping (None: no date column, or a server dataset, whose values
    are not in memory)."""
    by = tuple(b for b in (first, second) if b not in (NONE, CHOOSE))
    if loaded.stream is not None or not by:
        return None
    marker = (loaded.key, by)
    if st.session_state.get(K_EVERY_FOR) != marker:
        try:
            auto = G.default_every(loaded.preds, by)
        except ValueError:   # a column it cannot read as dates: measuring says which value
            auto = None
        st.session_state[K_EVERY_FOR] = marker
        st.session_state[K_EVERY_AUTO] = auto
        st.session_state[K_EVERY] = auto or ""
    return st.session_state.get(K_EVERY_AUTO)


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
        st.error(texts.cannot_group(by, texts.groups_problem(state.within_data_root(str(exc)))),
                 icon=":material/error:")
        return
    except Exception:  # noqa: BLE001 - a file gone or unreadable on the server: never a traceback on the page
        logger.exception("calibration by group of %s failed", loaded.file_name)
        st.error(texts.cannot_group_unreadable(by), icon=":material/error:")
        return
    x_title, y_title = texts.groups_axis_titles(report.measures, *texts.axis_titles(view.binary_positive))
    st.markdown(texts.groups_measured_on(texts.groups_what(report.measures, view.what), loaded.stream.n_total if loaded.stream is not None else None, by,
                                         EVERY[every] if every else "", len(report.table)))
    for found in report.restating:  # measured since it was chosen, but its groups are off by construction
        st.warning(texts.groups_outcome_warning(found), icon=":material/warning:")
    st.markdown(texts.groups_headline(report))
    st.dataframe(tables.groups_frame(report), hide_index=True, key="groups_table", column_config={
        c: st.column_config.NumberColumn(format="%.4f") for c in
        ("ECE", "MCE", "Brier", "Mean predicted", *texts.GROUPS_RATE_COLUMN.values())}
        | {c: st.column_config.NumberColumn(format="%.4f", help=texts.GROUPS_INTERVAL_NOTE) for c in ("ECE 95 % from", "to")}
        # "week of 2024-01-01" in full; pinned, so that a row scrolled right keeps its name (audit 14 E)
        | {"Group": st.column_config.TextColumn(width="medium", pinned=True),
           "Rows": st.column_config.NumberColumn(width="small"),
           tables.GROUPS_CORRECTED_COLUMN: st.column_config.TextColumn(help=texts.GROUPS_CORRECTED_HELP),
           tables.GROUPS_P_COLUMN: st.column_config.TextColumn(help=texts.GROUPS_TEST_HELP),   # texts.p_value's format
           tables.GROUPS_VERDICT_COLUMN: st.column_config.TextColumn(width="large", help=texts.GROUPS_VERDICT_HELP)})
    below = report.table.loc[report.table["ece_corrected"] < 0, "group"].tolist()
    if below:
        st.caption(texts.groups_below_zero_note(below))
    st.caption(texts.GROUPS_TEST_CAPTION)
    st.caption(texts.GROUPS_INTERVAL_NOTE)
    if loaded.stream is not None:
        st.caption(texts.GROUPS_STREAM_NOTE)
    if report.small:
        st.warning(texts.groups_small_note(report.small, MIN_ROWS, _date_as_is(loaded, by, every)),
                   icon=":material/group_off:")
    st.markdown(texts.largest_gap(report))
    with st.expander("What each group's test says", key="groups_statements"):
        st.markdown("\n".join(f"- {texts.md(line)}" for line in G.group_statements(report)))
    order = report.table["group"].tolist()
    drawn = FR.overlay_groups(report.diagrams, report.small, order, report.miscalibrated)
    measured = len(report.table) - len(report.small)
    if measured > len(drawn):
        st.caption(texts.groups_curves_drawn(drawn, report.miscalibrated, measured))
    st.plotly_chart(FR.groups_overlay_figure(report.diagrams, report.small, order, flagged=report.miscalibrated,
                                             x_title=x_title, y_title=y_title),
                    key="groups_chart", config={"displaylogo": False})
    st.caption(texts.GROUPS_OVERLAY_CAPTION)
    _one_group(report, view, x_title, y_title)
    c = st.columns(2)
    with c[0]:
        st.download_button("Groups table (CSV)", data=csv_text(report.table).encode(),
                           file_name="calibration_by_group.csv", mime="text/csv", key="groups_dl", help=texts.groups_csv_help(),
                           icon=":material/table_view:", on_click="ignore")
    with c[1]:
        recal_ui.report_button("groups_dl_report", label="Audit report (HTML)", help=texts.AUDIT_REPORT_HELP)


def _date_as_is(loaded: state.Loaded, by: tuple[str, ...], every: str) -> bool:
    """Whether a date column is grouped by its values as they are (no *Dates* period chosen)."""
    meta = loaded.preds.metadata if loaded.preds is not None else None
    if every or meta is None:
        return False
    return any(c in meta.columns and G.is_date_column(meta[c]) for c in by)


def _one_group(report, view: state.MetricView, x_title: str, y_title: str) -> None:
    """One group's reliability diagram with its consistency bands, and whether more of its bars lie outside
    them than chance puts there (corrected for the groups)."""
    names = report.table["group"].tolist()
    if st.session_state.get(K_ONE) not in names:
        st.session_state[K_ONE] = names[0]
    name = st.selectbox("One group's reliability diagram, with its consistency bands", names, key=K_ONE,
                        help=texts.BANDS_HELP)
    table = report.diagrams[name]
    st.plotly_chart(FR.group_diagram_figure(table, x_title=x_title, y_title=y_title,
                                            binary_positive=view.binary_positive),
                    key="groups_one_chart", config={"displaylogo": False})
    # the count rule of the Reliability page, corrected for the groups one can look through
    st.caption(texts.group_bands_caption(G.bins_outside_by_group(report.diagrams), name, table=report.diagrams.get(name)))


def _measure(loaded: state.Loaded, view: state.MetricView, by: tuple[str, ...], every: str):
    """The group report; a dataset on the server is read again (every row), with a progress bar."""
    if loaded.stream is None:
        with st.spinner("Measuring each group …"):
            return compute.group_report(loaded, view, by, every)
    stop = st.empty()
    if compute.group_report(loaded, view, by, every, cached_only=True) is None:  # a pass to make: it can be stopped
        stop.button("Stop", key=K_STOP, icon=":material/stop_circle:", on_click=_stop_requested, args=(loaded.key,),
                    help=texts.GROUPS_STOP_HELP)
    bar = st.progress(0.0, text="Reading the dataset …")
    words = {"counting the groups": "Counting the groups", "measuring each group": "Measuring each group"}

    def progress(done: int, total: int | None, what: str) -> None:
        shown = f"{words.get(what, what)}: {done:,}" + (f" of {total:,} rows" if total else " rows")
        bar.progress(min(1.0, done / total) if total else 0.0, text=shown)

    try:
        return compute.group_report(loaded, view, by, every, progress=progress)
    finally:
        bar.empty()
        stop.empty()


# ------------------------------------------------------------------------------------ find the slices
K_SLICES = "slices_run"
K_SLICES_FOR = "slices_found_for"     # the data whose slices the user asked for
K_SLICES_STOP = "slices_stop"
K_SLICES_STOPPED = "slices_stopped_for"
K_SLICE_ONE = "slices_one"
K_SLICE_METHOD = "slices_recal_method"
K_SLICE_FOLDS = "slices_recal_folds"
SLICE_JOB = "slicegap"


def find_slices_section(loaded: state.Loaded) -> None:
    """Find the slices nobody named (pbr_core.slices): the button, the slices that hold up on held-out rows
    with their sentences and the guarantee, every slice tested, one slice's diagram beside the whole
    file's, and whether a recalibrator for the slice closes its gap."""
    st.divider()
    st.subheader(texts.SLICES_TITLE)
    st.markdown(texts.SLICES_INTRO)
    if not _other_columns(loaded):
        st.info(texts.SLICES_NONE, icon=":material/info:")
        return
    n = loaded.stream.n_total if loaded.stream is not None else loaded.preds.n
    st.button("Find the slices", key=K_SLICES, icon=":material/manage_search:", on_click=_slices_requested,
              args=(loaded.key,), help=(texts.SLICES_STREAM_BUTTON_HELP.format(n=n) if loaded.stream is not None
                                        else texts.SLICES_BUTTON_HELP))
    view = state.metric_view(loaded)
    if st.session_state.get(K_SLICES_FOR) != loaded.key and compute.slice_report(loaded, view, cached_only=True) is None:
        if st.session_state.get(K_SLICES_STOPPED) == loaded.key:
            st.info(texts.SLICES_STOPPED, icon=":material/stop_circle:")
        return
    try:
        report = _search(loaded, view)
    except ValueError as exc:  # no column to slice, a bad row of a server dataset
        st.error(texts.cannot_search_slices(state.within_data_root(str(exc))), icon=":material/error:")
        return
    except Exception:  # noqa: BLE001 - a file gone on the server: never a traceback on the page
        logger.exception("finding the slices of %s failed", loaded.file_name)
        st.error(texts.SLICES_UNREADABLE, icon=":material/error:")
        return
    held = report.held_up
    (st.success if held else st.info)(texts.slices_headline(report),
                                      icon=":material/target:" if held else ":material/info:")
    for line in texts.slices_lines(report):
        st.markdown(texts.bullet(line))
    for line in texts.slices_left_out(report):
        st.info(line, icon=":material/block:")
    guarantee = texts.slices_guarantee(report)
    if guarantee is not None:  # nothing searched: no search to describe (audit 3, C1)
        st.caption(guarantee)
    if len(report.table):
        st.dataframe(tables.slices_frame(report), hide_index=True, key="slices_table", column_config={
            **{c: st.column_config.NumberColumn(format="%.4f") for c in (texts.SLICES_HELD_MEAN, texts.slices_held_rate(True),
                                                                          texts.slices_held_rate(False))},
            **{c: st.column_config.NumberColumn(format="%.1f", help=texts.SLICES_GAP_HELP)
               for c in (texts.SLICES_HELD_GAP, texts.SLICES_HELD_REST)},
            texts.SLICES_HELD_SLOPE: st.column_config.NumberColumn(format="%.2f"),
            "Slice": st.column_config.TextColumn(width="large", pinned=True, help=texts.SLICES_TABLE_HELP)})
        _slice_diagram(report, view)
    with st.expander("What was searched", key="slices_searched"):
        st.markdown(texts.slices_searched(report))
    if held:
        _slice_recalibration(loaded, report, view)


def _slices_requested(key: str) -> None:
    st.session_state[K_SLICES_FOR] = key
    st.session_state.pop(K_SLICES_STOPPED, None)


def _slices_stop(key: str) -> None:
    st.session_state.pop(K_SLICES_FOR, None)
    st.session_state[K_SLICES_STOPPED] = key


def _search(loaded: state.Loaded, view: state.MetricView):
    """The slice report; a dataset on the server is read again (three passes), with a progress bar."""
    if loaded.stream is None:
        with st.spinner("Searching the slices …"):
            return compute.slice_report(loaded, view)
    stop = st.empty()
    if compute.slice_report(loaded, view, cached_only=True) is None:
        stop.button("Stop", key=K_SLICES_STOP, icon=":material/stop_circle:", on_click=_slices_stop, args=(loaded.key,),
                    help=texts.SLICES_STOP_HELP)
    bar = st.progress(0.0, text="Reading the dataset …")

    def progress(done: int, total: int | None, what: str) -> None:
        shown = f"{what.capitalize()}: {done:,}" + (f" of {total:,} rows" if total else " rows")
        bar.progress(min(1.0, done / total) if total else 0.0, text=shown)

    try:
        return compute.slice_report(loaded, view, progress=progress)
    finally:
        bar.empty()
        stop.empty()


def _slice_diagram(report, view: state.MetricView) -> None:
    """One slice's reliability diagram (its held-out rows) beside the whole file's."""
    names = report.held_up or report.table["slice"].tolist()
    if st.session_state.get(K_SLICE_ONE) not in names:
        st.session_state[K_SLICE_ONE] = names[0]
    # No slice held up: the ones offered are only the search's proposals, and the page says so.
    label = texts.SLICES_DIAGRAM_LABEL if report.held_up else texts.SLICES_DIAGRAM_LABEL_PROPOSED
    name = st.selectbox(label, names, key=K_SLICE_ONE, help=texts.SLICES_DIAGRAM_HELP)
    x_title, y_title = texts.axis_titles(view.binary_positive)
    left, right = texts.slices_diagram_captions(report, name)
    c = st.columns(2, gap="medium")
    with c[0]:
        st.markdown(texts.slice_title(name, name in report.held_up))
        st.plotly_chart(FR.group_diagram_figure(report.diagrams[name], x_title=x_title, y_title=y_title,
                                                binary_positive=view.binary_positive),
                        key="slices_one_chart", config={"displaylogo": False})
        st.caption(left)
    with c[1]:
        st.markdown(texts.SLICES_WHOLE_FILE_TITLE)
        st.plotly_chart(FR.group_diagram_figure(report.overall, x_title=x_title, y_title=y_title,
                                                binary_positive=view.binary_positive),
                        key="slices_all_chart", config={"displaylogo": False})
        st.caption(right)


def _slice_recalibration(loaded: state.Loaded, report, view: state.MetricView) -> None:
    """Does a recalibrator for the chosen slice close its gap? The Compare page's group-gap protocol
    (pbr_core.experiments.group_gaps) with the slice and the rest as the two groups."""
    import dataclasses

    import numpy as np
    import pandas as pd

    from dashboard import runs
    from dashboard.sections import group_gaps
    from pbr_core.experiments import default_n_re
    from pbr_core.recalibrators import available_methods, method_family
    from pbr_core.slices import slice_mask

    name = st.session_state.get(K_SLICE_ONE)
    if name not in report.held_up:
        name = report.held_up[0]
    st.markdown(texts.slice_recal_intro(name))
    preds = loaded.preds
    if loaded.stream is not None:  # the slice's rows are on the server; the rows in memory are a sample
        st.info(texts.SLICES_RECAL_SERVER, icon=":material/info:")
        return
    if not preds.can_recalibrate:
        st.info(texts.TOP_LABEL_NO_RECAL, icon=":material/info:")
        return
    from dashboard import jobs

    job = jobs.get(SLICE_JOB)
    running = job is not None and job.active
    methods = [m for m in available_methods() if m != "uncalibrated"]
    if st.session_state.get(K_SLICE_METHOD) not in methods:
        st.session_state[K_SLICE_METHOD] = "temperature" if "temperature" in methods else methods[0]
    c = st.columns([2, 1, 1.4], gap="medium", vertical_alignment="bottom")
    multiclass = preds.kind == "multiclass"
    method = c[0].selectbox("Recalibrator", methods, key=K_SLICE_METHOD,
                            format_func=lambda m: texts.method_label(m, multiclass))
    n_folds = int(c[1].number_input("Folds", min_value=1, max_value=20, value=group_gaps.GAP_FOLDS,
                                    key=K_SLICE_FOLDS))
    if c[2].button("Compare", key="slices_recal_run", icon=":material/play_arrow:", disabled=running):
        mask = slice_mask(preds, report, name)
        grouped = dataclasses.replace(preds, metadata=pd.DataFrame(
            {"slice": np.where(mask, texts.SLICE_IN, texts.SLICE_REST)}))
        s = runs.GroupGapSettings.of(method, ("slice",), default_n_re(preds.n), n_folds, 0, alpha=None,
                                     binary_ece=state.recal_binary_ece(preds))
        data_name, key = f"{loaded.name} · {name}", loaded.key
        recal_ui.start(SLICE_JOB, texts.slice_gap_job_label(texts.method_label(method, multiclass), name),
                       lambda ctx: runs.run_group_gaps(grouped, s, ctx, data_name=data_name, data_key=key),
                       heavy=method_family(method) == "gp" or recal_heavy(method, preds.n_classes))
    recal_ui.job_status(SLICE_JOB)
    result = recal_ui.result_of(SLICE_JOB)
    if result is None or result.table.empty:
        return
    recal_ui.stale_note(result, loaded)
    group_gaps.show(result.table, "slices_gap_chart", "slices_gap_groups", "slices_gap_gaps")


def _page() -> None:
    render()
    loaded = state.current()
    if loaded is not None:
        find_slices_section(loaded)


_page()
