"""The Compare page's group gaps: does recalibration close the calibration gaps between groups? One
recalibrator for everyone against one per group, on the comparison's splits and method settings."""

from __future__ import annotations

import streamlit as st

from dashboard import figures_recal as FR
from dashboard import compute, fit_estimate, recal_ui, runs, state, tables, texts
from dashboard.fit_estimate import recal_heavy
from dashboard.settings_ui import CompareChoices
from pbr_core.recalibrators import available_methods, method_family

CHOOSE = texts.CHOOSE_COLUMN  # the box's entry when no column makes groups worth comparing

K_GAP_BY = "gap_by"
K_GAP_METHOD = "gap_method"
K_GAP_FOLDS = "gap_n_folds"
#: Default folds of a group-gap run: enough for the paired test to name a strategy (at least
#: pbr_core.experiments.MIN_PAIRED_FOLDS = 6; it was 5, with which no difference could ever be shown).
GAP_FOLDS = 10


def _fit_rows(preds, method: str, by: str, n_re: int) -> list[int]:
    """The rows of each fit of one fold, for the time estimate of a K x K method (none for the others): every
    row of the n_re, then each group's share of them where it is enough to fit on."""
    from pbr_core.experiments.group_gaps import MIN_FIT_ROWS

    if not fit_estimate.quadratic(method):
        return []
    sizes = preds.metadata[by].value_counts(dropna=False).to_numpy() * (n_re / preds.n)
    return [int(n_re), *(int(round(v)) for v in sizes if v >= MIN_FIT_ROWS)]


def render(loaded: state.Loaded, choices: CompareChoices, running: bool) -> None:
    from pbr_core.experiments.group_gaps import MIN_FIT_ROWS, MIN_GROUP_TEST_ROWS

    from pbr_core.experiments import split_problem

    st.divider()
    st.subheader(texts.GROUP_GAP_TITLE)
    preds = loaded.preds
    # The comparison's splits: where they leave too few rows to test on (or the file is too small for any
    # measured result), the same sentence as the comparison's, and no Run (the run would be refused).
    found = split_problem(preds.n, choices.n_re)
    if found is not None and found[0] in ("file", "test"):
        st.info(texts.split_refusal(preds.n, choices.n_re), icon=":material/block:")
        return
    columns = [] if preds.metadata is None else [str(c) for c in preds.metadata.columns]
    if not columns:
        st.info(texts.GROUP_GAP_NO_COLUMN, icon=":material/info:")
        return
    st.markdown(texts.GROUP_GAP_INTRO.format(m=MIN_FIT_ROWS, t=MIN_GROUP_TEST_ROWS))
    multiclass = preds.kind == "multiclass"
    methods = [m for m in available_methods() if m != "uncalibrated"]
    if st.session_state.get(K_GAP_METHOD) not in methods:
        st.session_state[K_GAP_METHOD] = "temperature" if "temperature" in methods else methods[0]
    # Opens as the Groups page does: never on an identifier (504 one-row groups), a column whose groups are
    # worth comparing, else a choice to make (issue 35).
    default = compute.default_group_column(loaded)
    options = ([] if default else [CHOOSE]) + columns
    if st.session_state.get(K_GAP_BY) not in options:
        st.session_state[K_GAP_BY] = default or CHOOSE
    c = st.columns([2, 2, 1, 1.4], gap="medium", vertical_alignment="bottom")
    by = c[0].selectbox("Group by", options, key=K_GAP_BY, disabled=running)
    method = c[1].selectbox("Recalibrator", methods, key=K_GAP_METHOD, disabled=running,
                            format_func=lambda m: texts.method_label(m, multiclass))
    n_folds = int(c[2].number_input("Folds", min_value=1, max_value=20, value=GAP_FOLDS, key=K_GAP_FOLDS,
                                    disabled=running))
    st.caption(texts.group_gap_splits(choices.n_re, choices.seed))
    if by == CHOOSE:
        st.caption(texts.GROUP_GAP_CHOOSE)
    allowed = by != CHOOSE and recal_ui.matrix_fit_time([method], _fit_rows(preds, method, by, choices.n_re),
                                                        preds.n_classes, n_folds, choices.max_iter)
    go = c[3].button("Run", key="gap_run", type="primary", icon=":material/play_arrow:",
                     disabled=running or not allowed)
    if go and allowed:
        s = choices.group_gaps(method, by, n_folds, state.recal_binary_ece(preds))
        name, key = loaded.name, loaded.key
        recal_ui.start("groupgap", texts.group_gap_job_label(texts.method_label(method, multiclass), by),
                       lambda ctx: runs.run_group_gaps(preds, s, ctx, data_name=name, data_key=key),
                       heavy=method_family(method) == "gp" or recal_heavy(method, preds.n_classes))
    recal_ui.job_status("groupgap")
    result = recal_ui.result_of("groupgap")
    if result is None:
        return
    recal_ui.stale_note(result, loaded)
    done = result.table["fold"].nunique() if len(result.table) else 0
    recal_ui.partial_note(result, done, result.settings.n_folds)
    if result.table.empty:
        return
    show(result.table, "gap_chart", "gap_groups_table", "gap_gaps_table")
    recal_ui.csv_button("Group gaps (CSV, every fold)", tables.csv_frame(result.table), "group_gaps.csv",
                        "gap_dl_table", help=texts.GROUP_GAP_CSV_HELP)


def show(table, chart_key: str, groups_key: str, gaps_key: str) -> None:
    """A group-gap run's chart, the groups no fold measured, and its two tables (the Compare page's
    section and the Groups page's slice comparison)."""
    from pbr_core.experiments.group_gaps import MIN_GROUP_TEST_ROWS, group_gap_summary, group_gap_tests

    per_group, _ = group_gap_summary(table)
    wide, gaps = tables.group_gap_frames(table)
    st.plotly_chart(FR.group_gap_figure(per_group), key=chart_key, config={"displaylogo": False})
    st.caption(texts.GROUP_GAP_CAPTION)
    unmeasured = tables.group_gap_unmeasured(table)
    if unmeasured:
        st.caption(texts.group_gap_unmeasured(unmeasured, MIN_GROUP_TEST_ROWS))
    c = st.columns([3, 2], gap="medium")
    c[0].dataframe(wide, hide_index=True, key=groups_key,
                   column_config={col: st.column_config.NumberColumn(format="%.4f") for col in wide.columns
                                  if col.startswith("Test ECE")})
    c[1].dataframe(gaps, hide_index=True, key=gaps_key, column_config={
        "Largest gap (mean)": st.column_config.NumberColumn(format="%.4f", help=texts.GROUP_GAP_GAPS_HELP),
        "std": st.column_config.NumberColumn(format="%.4f")})
    st.markdown(texts.group_gap_verdicts(group_gap_tests(table), int(table["fold"].nunique())))
