"""The Compare page's n_re sweep: test ECE against the recalibration set size (the paper's Figure 3),
for the methods chosen for the comparison, with its split seed and method settings."""

from __future__ import annotations

import streamlit as st

from dashboard import figures_recal as FR
from dashboard import recal_ui, runs, state, tables, texts
from dashboard.fit_estimate import recal_heavy
from dashboard.settings_ui import CompareChoices
from pbr_core.experiments import (MIN_FIT_ROWS, MIN_TEST_ROWS, PAPER_N_RE, PAPER_N_RE_VALUES, max_n_re,
                                  small_file_problem)
from pbr_core.recalibrators import method_family

K_SWEEP_VALUES = "sweep_n_re_values"
K_SWEEP_FOLDS = "sweep_n_folds"


def sweep_values(n: int) -> list[int]:
    """The paper's n_re values that leave at least MIN_TEST_ROWS rows to test on (the sweep's fixed test set),
    on a file that can give a measured result at all (MIN_MEASURED_ROWS); none on a smaller one. The values
    below MIN_FIT_ROWS (the paper's 10, 50, 100) stay: the sweep is the experiment that shows what so few
    recalibration rows do, each measured on the same test set of at least MIN_TEST_ROWS rows."""
    if small_file_problem(n) is not None:
        return []
    return [v for v in PAPER_N_RE_VALUES if v <= max_n_re(n)]


def defaults(n: int) -> dict[str, object]:
    """The sweep's choices for new data of ``n`` rows: the paper's values up to its n_re = 1000."""
    return {K_SWEEP_VALUES: [v for v in sweep_values(n) if v <= PAPER_N_RE]}


def _below_fit_rows(values) -> None:
    """A caption when some n_re is below the rows the comparison fits on: shown to see what so few rows
    do, not advice (:func:`dashboard.texts.sweep_below_fit_rows`)."""
    words = texts.sweep_below_fit_rows(values, MIN_FIT_ROWS, MIN_TEST_ROWS)
    if words is not None:
        st.caption(words)


def render(loaded: state.Loaded, choices: CompareChoices, running: bool) -> None:
    st.divider()
    st.subheader(texts.SWEEP_TITLE)
    st.markdown(texts.SWEEP_INTRO)
    preds = loaded.preds
    methods = list(choices.methods)
    values = sweep_values(preds.n)
    if not values:  # a file too small for any measured result: one sentence, load more rows (never an n_re)
        st.info(texts.fewer_fit_rows_todo(preds.n, max_n_re(preds.n), MIN_TEST_ROWS, min_fit=MIN_FIT_ROWS),
                icon=":material/block:")
        return
    c = st.columns([3, 1, 1], gap="medium", vertical_alignment="bottom")
    chosen = c[0].multiselect("n_re values", values, key=K_SWEEP_VALUES, persist_state="session",
                              disabled=running or not values, help=texts.N_RE_VALUES_HELP)
    n_folds = c[1].number_input("Folds", min_value=1, max_value=20, value=3, key=K_SWEEP_FOLDS,
                                persist_state="session", disabled=running, help=texts.SWEEP_FOLDS_HELP)
    multiclass = preds.kind == "multiclass"
    _below_fit_rows(chosen)
    st.caption(texts.sweep_plan((texts.method_label(m, multiclass) for m in methods),
                                len(chosen) * len(methods) * int(n_folds)))
    # K x K fits: estimated, and refused beyond the server's limit, as the comparison's own run
    allowed = not chosen or recal_ui.matrix_fit_time(methods, [int(v) for v in chosen], preds.n_classes, int(n_folds),
                                                          choices.max_iter)
    go = c[2].button("Run the sweep", key="sweep_run", type="primary", icon=":material/play_arrow:",
                     disabled=running or not chosen or not methods or not allowed)
    if go and allowed:
        s = choices.sweep(chosen, int(n_folds), state.recal_binary_ece(preds))
        name, key = loaded.name, loaded.key
        recal_ui.start("sweep", texts.sweep_job_label(len(chosen), len(methods)),
                       lambda ctx: runs.run_sweep(preds, s, ctx, data_name=name, data_key=key),
                       heavy=any(method_family(m) == "gp" or recal_heavy(m, preds.n_classes) for m in methods))
    recal_ui.job_status("sweep")
    result = recal_ui.result_of("sweep")
    if result is None:
        return
    recal_ui.stale_note(result, loaded)
    total = len(result.settings.methods) * len(result.settings.n_re_values) * result.settings.n_folds
    recal_ui.partial_note(result, len(result.table), total)
    if result.table.empty:
        return
    multiclass = result.kind == "multiclass"
    st.plotly_chart(FR.sweep_figure(result), key="sweep_chart", config={"displaylogo": False})
    st.caption(texts.SWEEP_CAPTION)
    _below_fit_rows(result.settings.n_re_values)
    for note in tables.sweep_at_prior_notes(result):
        st.warning(note, icon=":material/do_not_disturb_on:")
    with st.expander("Every fit"):
        st.dataframe(tables.fold_styler(result.table, multiclass), hide_index=True, key="sweep_folds_table")
    recal_ui.csv_button("Sweep table (CSV)", tables.csv_frame(result.table), "n_re_sweep.csv", "sweep_dl_table",
                        help=texts.FOLDS_CSV_HELP)
