"""Compare page: the paper's cross-validated comparison of recalibrators, and the n_re sweep.

Both runs are background jobs (dashboard.jobs): the page shows their progress, can stop them
(finished folds are kept) and shows the results again after a page switch.
"""

from __future__ import annotations

import dataclasses

import streamlit as st

from dashboard import figures_recal as FR
from dashboard import jobs, recal_ui, runs, state, tables, texts
from pbr_core.experiments import (MIN_TEST_ROWS, PAPER_N_RE, PAPER_N_RE_VALUES, default_n_re, max_n_re,
                                  small_test_set_problem, too_few_folds)
from pbr_core.evaluation import EVALUATION_METRICS
from pbr_core.experiments.settings import method_settings, params_of
from pbr_core.recalibrators import MAX_ITERATIONS, available_methods, method_family, takes

K_METHODS = "cmp_methods"
K_N_RE = "cmp_n_re"
K_FOLDS = "cmp_n_folds"
K_SEED = "cmp_seed"
K_N_TE = "cmp_n_te"
K_ALPHA = "cmp_alpha"
K_DIAGRAMS = "cmp_diagrams"
K_MAX_ITER = "cmp_max_iter"
K_PAIRED_METRIC = "cmp_paired_metric"
K_PAIR_A = "cmp_pair_a"
K_PAIR_B = "cmp_pair_b"
K_SWEEP_VALUES = "sweep_n_re_values"
K_SWEEP_FOLDS = "sweep_n_folds"
K_FOR = "cmp_for"

#: Fast and informative: the baseline, the classic, a non-parametric one and the paper's method.
DEFAULT_METHODS = ("uncalibrated", "temperature", "isotonic", "pbr")


def _sweep_values(n: int) -> list[int]:
    """The paper's n_re values that leave at least MIN_TEST_ROWS rows to test on (the sweep's fixed test set)."""
    return [v for v in PAPER_N_RE_VALUES if v <= max_n_re(n)]


def _defaults(n: int) -> dict[str, object]:
    # The paper's n_re = 1000 only on a file of 2,000 rows or more, else half: a test set worth measuring.
    return {K_N_RE: default_n_re(n), K_N_TE: 0,
            K_SWEEP_VALUES: [v for v in _sweep_values(n) if v <= PAPER_N_RE]}


def _reset_for_new_data(loaded: state.Loaded) -> None:
    state.reset_for_data(K_FOR, loaded.key, lambda: _defaults(loaded.preds.n))


def _controls(loaded: state.Loaded, running: bool) -> runs.CompareSettings | None:
    preds = loaded.preds
    multiclass = preds.kind == "multiclass"
    methods = available_methods()
    if K_METHODS not in st.session_state:
        st.session_state[K_METHODS] = [m for m in DEFAULT_METHODS if m in methods]
    st.multiselect("Methods", methods, key=K_METHODS, persist_state="session", disabled=running,
                   format_func=lambda m: texts.method_label(m, multiclass), help=texts.COMPARE_METHODS_HELP)
    runs.preload_gp()
    chosen = [m for m in st.session_state[K_METHODS] if m in methods]
    c = st.columns(4, gap="medium")
    n_re = c[0].number_input("Recalibration rows n_re", min_value=2, max_value=preds.n - 1, step=100, key=K_N_RE,
                             persist_state="session", disabled=running, help=texts.N_RE_HELP)
    n_folds = c[1].number_input("Folds", min_value=1, max_value=50, value=10, key=K_FOLDS, persist_state="session",
                                disabled=running, help=texts.N_FOLDS_HELP)
    seed = c[2].number_input("Split seed", min_value=0, value=0, key=K_SEED, persist_state="session",
                             disabled=running, help=texts.SEED_HELP)
    alpha, max_iter = 0.5, None
    if any(takes(m, "alpha") for m in chosen):
        alpha = c[3].slider("α of PBR", 0.0, 1.0, 0.5, 0.01, key=K_ALPHA, persist_state="session",
                            disabled=running, help=texts.COMPARE_ALPHA_HELP)
    if any(takes(m, "max_iter") for m in chosen):
        with st.expander("GP fit settings"):
            max_iter = int(st.number_input("Max optimiser iterations (0 = the library's default)", min_value=0,
                                           max_value=MAX_ITERATIONS, value=0, step=50, key=K_MAX_ITER,
                                           persist_state="session", disabled=running, help=texts.MAX_ITER_HELP)) or None
    # Binary data: the app's one ECE (the sidebar's choice), as on every other page; the page says which.
    binary_ece = state.recal_binary_ece(preds)
    if preds.kind == "binary":
        st.caption(texts.binary_ece_caption(binary_ece))
    n_te = int(st.number_input("Test rows per fold (0 = every row not used to fit)", min_value=0,
                               max_value=max(1, preds.n - 2), step=500, key=K_N_TE, persist_state="session",
                               disabled=running, help=texts.N_TE_HELP)) or None
    diagrams = st.checkbox("Draw reliability diagrams (fold 1's test set)", value=True, key=K_DIAGRAMS,
                           persist_state="session", disabled=running, help=texts.DIAGRAMS_HELP)
    settings = runs.CompareSettings.of(chosen, int(n_re), int(n_folds), int(seed), n_te=n_te, diagrams=diagrams,
                                     binary_ece=binary_ece, alpha=float(alpha), max_iter=max_iter)
    fits, n_gp = settings.fits_per_fold()  # a method and its "app." variant share one fit
    if n_gp:  # GP fits take seconds each: their folds go to worker processes (which take seconds to start)
        settings = dataclasses.replace(settings, n_jobs=runs.fold_jobs(int(n_folds)))
    st.caption(f"{int(n_folds) * fits} fits in all" + (f", of which {int(n_folds) * n_gp} GP fits "
                                                      f"(on {runs.device_label()})" if n_gp else "") +
               f"; each fold fits on {int(n_re):,} rows and tests on " +
               (f"the other {preds.n - int(n_re):,}." if n_te is None else f"{n_te:,} of the other {preds.n - int(n_re):,}."))
    if not chosen:
        st.info("Choose at least one method.")
        return None
    if n_te is not None and int(n_re) + n_te > preds.n:
        st.error(f"{int(n_re):,} recalibration rows and {n_te:,} test rows need {int(n_re) + n_te:,} rows, "
                 f"but the file has {preds.n:,}. Lower one of them (0 test rows = all the others).")
        return None
    problem = small_test_set_problem(preds.n - int(n_re) if n_te is None else n_te)
    if problem:  # folds of a test set too small to say anything: refused, with what to do
        todo = (texts.more_test_rows_todo(MIN_TEST_ROWS) if n_te is not None and int(n_re) <= max_n_re(preds.n)
                else texts.fewer_fit_rows_todo(preds.n, max_n_re(preds.n), MIN_TEST_ROWS))
        st.error(f"{problem} {todo}", icon=":material/block:")
        return None
    return settings


def _paired(table, multiclass: bool) -> None:
    """Paired tests over folds: the default pairs, and any pair the user picks."""
    st.markdown("**Is the difference real? Paired tests over folds**", help=texts.PAIRED_HELP)
    few = too_few_folds(int(table[table["error"].isna()]["fold"].nunique()))
    if few:  # the tests could only say "no difference shown": not run, and why
        st.info(few, icon=":material/info:")
        return
    st.caption(texts.PAIRED_INTRO)
    c = st.columns([1.2, 2, 2], gap="medium", vertical_alignment="bottom")
    metric = c[0].selectbox("Metric", EVALUATION_METRICS, format_func=texts.COLUMN_TITLES.get, key=K_PAIRED_METRIC)
    # Only methods with results: a method whose every fit failed has nothing to pair.
    methods = list(dict.fromkeys(table[table["error"].isna()]["method"]))
    if len(methods) < 2:
        st.info("Paired tests need at least two methods.")
        return
    for key, default in ((K_PAIR_A, methods[-1]), (K_PAIR_B, methods[0])):
        if st.session_state.get(key) not in methods:
            st.session_state[key] = default
    label = lambda m: texts.method_label(m, multiclass)  # noqa: E731
    a = c[1].selectbox("Compare A", methods, format_func=label, key=K_PAIR_A, help=texts.PAIRED_PICK_HELP)
    b = c[2].selectbox("with B", methods, format_func=label, key=K_PAIR_B, help=texts.PAIRED_PICK_HELP)
    if a == b:
        st.info("Choose two different methods to compare them.")
    else:
        st.dataframe(tables.paired_frame(table, multiclass, metric, [(a, b)]), hide_index=True, key="cmp_pair_table",
                     column_config=tables.paired_column_config())
    st.markdown("Each method against the uncalibrated model and against the best mean:")
    st.dataframe(tables.paired_frame(table, multiclass, metric), hide_index=True, key="cmp_paired_table",
                 column_config=tables.paired_column_config())


def _start_compare(loaded: state.Loaded, s: runs.CompareSettings) -> None:
    preds, name, key = loaded.preds, loaded.name, loaded.key
    label = f"comparison of {len(s.methods)} methods × {s.n_folds} folds (n_re = {s.n_re:,})"
    recal_ui.start("compare", label, lambda ctx: runs.run_compare(preds, s, ctx, data_name=name, data_key=key),
                   heavy=any(method_family(m) == "gp" for m in s.methods))


def _results(loaded: state.Loaded, result: runs.CompareResult) -> None:
    st.subheader("Results")
    recal_ui.stale_note(result, loaded)
    recal_ui.partial_note(result, len(result.table), result.planned)
    table = result.table
    if table.empty:
        st.info("No fit finished.")
        return
    multiclass = result.kind == "multiclass"
    failed = table[table["error"].notna()]
    if len(failed):
        st.warning("Some fits failed and are left out of the means: " + "; ".join(
            f"{texts.method_label(r.method, multiclass)} fold {r.fold + 1}: {texts.md(r.error)}"
            for r in failed.itertuples()),
            icon=":material/warning:")
    summ, styled = tables.compare_tables(table, multiclass)
    st.markdown("**Test metrics, mean ± std over folds**", help=texts.SUMMARY_HELP)
    st.dataframe(styled, key="cmp_summary_table")
    st.caption(f"{table['fold'].nunique()} folds · {int(table['n_te'].iloc[0]):,} test rows per fold · ECE with "
               f"B = {int(table['n_bins'].iloc[0])} bins" +
               (f" · {texts.binary_ece_caption(result.settings.binary_ece)}" if result.kind == "binary" else ".") +
               " " + tables.best_note(table))
    for note in tables.compare_at_prior_notes(result):
        st.warning(note, icon=":material/do_not_disturb_on:")
    _paired(table, multiclass)
    with st.expander("Every fold"):
        st.dataframe(tables.fold_styler(table, multiclass), hide_index=True, key="cmp_folds_table")
    figs = FR.compare_figures(result, result.binary_positive,
                              result.kind == "multiclass")
    if figs:
        tab_grid, tab_overlay = st.tabs(["Side by side", "Overlaid"])
        with tab_grid:
            st.plotly_chart(figs[0][1], key="cmp_grid_chart", config={"displaylogo": False})
            st.caption(figs[0][0])
        with tab_overlay:
            st.plotly_chart(figs[1][1], key="cmp_overlay_chart", config={"displaylogo": False})
            st.caption(figs[1][0])
    c = st.columns(3)
    with c[0]:
        recal_ui.csv_button("Results table (CSV, every fold)", tables.csv_frame(table), "compare_results.csv",
                            "cmp_dl_table", help=texts.FOLDS_CSV_HELP)
    with c[1]:
        recal_ui.csv_button("Summary (CSV, mean and std)", summ, "compare_summary.csv", "cmp_dl_summary",
                            help=texts.SUMMARY_CSV_HELP)
    with c[2]:
        recal_ui.report_button("cmp_dl_report")


def _sweep(loaded: state.Loaded, methods: list[str], running: bool) -> None:
    st.divider()
    st.subheader("How much recalibration data is needed? (n_re sweep)")
    st.markdown(texts.SWEEP_INTRO)
    preds = loaded.preds
    values = _sweep_values(preds.n)
    if not values:  # even the smallest n_re leaves fewer than MIN_TEST_ROWS rows to test on
        st.info(f"{small_test_set_problem(preds.n - PAPER_N_RE_VALUES[0])} "
                f"{texts.fewer_fit_rows_todo(preds.n, max_n_re(preds.n), MIN_TEST_ROWS)}", icon=":material/block:")
        return
    c = st.columns([3, 1, 1], gap="medium", vertical_alignment="bottom")
    chosen = c[0].multiselect("n_re values", values, key=K_SWEEP_VALUES, persist_state="session",
                              disabled=running or not values, help=texts.N_RE_VALUES_HELP)
    n_folds = c[1].number_input("Folds", min_value=1, max_value=20, value=3, key=K_SWEEP_FOLDS,
                                persist_state="session", disabled=running,
                                help="Random splits per n_re (fewer than the comparison: the sweep fits "
                                     "every method for every n_re).")
    go = c[2].button("Run the sweep", key="sweep_run", type="primary", icon=":material/play_arrow:",
                     disabled=running or not chosen or not methods)
    multiclass = preds.kind == "multiclass"
    st.caption(f"Methods: those chosen above ({', '.join(texts.method_label(m, multiclass) for m in methods) or 'none'}); "
               f"{len(chosen) * len(methods) * int(n_folds)} fits.")
    if go:
        s = runs.SweepSettings(methods=tuple(methods), n_re_values=tuple(sorted(chosen)), n_folds=int(n_folds),
                               seed=int(st.session_state.get(K_SEED, 0)), binary_ece=state.recal_binary_ece(preds),
                               params=params_of({m: method_settings(m, float(st.session_state.get(K_ALPHA, 0.5)),
                                                                    int(st.session_state.get(K_MAX_ITER) or 0) or None)
                                                 for m in methods}))
        name, key = loaded.name, loaded.key
        recal_ui.start("sweep", f"n_re sweep ({len(chosen)} sizes × {len(methods)} methods)",
                       lambda ctx: runs.run_sweep(preds, s, ctx, data_name=name, data_key=key),
                       heavy=any(method_family(m) == "gp" for m in methods))
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
    for note in tables.sweep_at_prior_notes(result):
        st.warning(note, icon=":material/do_not_disturb_on:")
    with st.expander("Every fit"):
        st.dataframe(tables.fold_styler(result.table, multiclass), hide_index=True, key="sweep_folds_table")
    recal_ui.csv_button("Sweep table (CSV)", tables.csv_frame(result.table), "n_re_sweep.csv", "sweep_dl_table",
                        help=texts.FOLDS_CSV_HELP)


K_GAP_BY = "gap_by"
K_GAP_METHOD = "gap_method"
K_GAP_FOLDS = "gap_n_folds"


def _group_gaps(loaded: state.Loaded, running: bool) -> None:
    """Does recalibration close the gaps between groups? One recalibrator for everyone vs one per group."""
    from pbr_core.experiments.group_gaps import MIN_FIT_ROWS, group_gap_summary

    st.divider()
    st.subheader("Does recalibration close the gaps between groups?")
    preds = loaded.preds
    columns = [] if preds.metadata is None else [str(c) for c in preds.metadata.columns]
    if not columns:
        st.info("This needs a column that groups the rows (a segment, a region, a model version...). The file "
                "has none besides the predictions; see the Groups page for what such a file looks like.",
                icon=":material/info:")
        return
    st.markdown(texts.GROUP_GAP_INTRO.format(m=MIN_FIT_ROWS))
    multiclass = preds.kind == "multiclass"
    methods = [m for m in available_methods() if m != "uncalibrated"]
    if st.session_state.get(K_GAP_METHOD) not in methods:
        st.session_state[K_GAP_METHOD] = "temperature" if "temperature" in methods else methods[0]
    groups = preds.columns_with_role("group")
    if st.session_state.get(K_GAP_BY) not in columns:
        st.session_state[K_GAP_BY] = groups[0] if groups else columns[0]
    c = st.columns([2, 2, 1, 1.4], gap="medium", vertical_alignment="bottom")
    by = c[0].selectbox("Group by", columns, key=K_GAP_BY, disabled=running)
    method = c[1].selectbox("Recalibrator", methods, key=K_GAP_METHOD, disabled=running,
                            format_func=lambda m: texts.method_label(m, multiclass))
    n_folds = int(c[2].number_input("Folds", min_value=1, max_value=20, value=5, key=K_GAP_FOLDS, disabled=running))
    go = c[3].button("Run", key="gap_run", type="primary", icon=":material/play_arrow:", disabled=running)
    n_re = int(st.session_state.get(K_N_RE, min(1000, preds.n - 1)))
    st.caption(f"The splits of the comparison above: n_re = {n_re:,}, split seed "
               f"{int(st.session_state.get(K_SEED, 0))}. Each fold fits one recalibrator for everyone and one per group.")
    if go:
        s = runs.GroupGapSettings(method=method, by=(by,), n_re=n_re, n_folds=n_folds,
                                  seed=int(st.session_state.get(K_SEED, 0)), binary_ece=state.recal_binary_ece(preds),
                                  params=tuple(sorted(method_settings(
                                      method, float(st.session_state.get(K_ALPHA, 0.5)),
                                      int(st.session_state.get(K_MAX_ITER) or 0) or None).items())))
        name, key = loaded.name, loaded.key
        recal_ui.start("groupgap", f"{texts.method_label(method, multiclass)} for everyone vs per {by}",
                       lambda ctx: runs.run_group_gaps(preds, s, ctx, data_name=name, data_key=key),
                       heavy=method_family(method) == "gp")
    recal_ui.job_status("groupgap")
    result = recal_ui.result_of("groupgap")
    if result is None:
        return
    recal_ui.stale_note(result, loaded)
    done = result.table["fold"].nunique() if len(result.table) else 0
    recal_ui.partial_note(result, done, result.settings.n_folds)
    if result.table.empty:
        return
    per_group, _ = group_gap_summary(result.table)
    wide, gaps = tables.group_gap_frames(result.table)
    st.plotly_chart(FR.group_gap_figure(per_group), key="gap_chart", config={"displaylogo": False})
    st.caption(texts.GROUP_GAP_CAPTION)
    c = st.columns([3, 2], gap="medium")
    c[0].dataframe(wide, hide_index=True, key="gap_groups_table",
                   column_config={col: st.column_config.NumberColumn(format="%.4f") for col in wide.columns
                                  if col.startswith("Test ECE")})
    c[1].dataframe(gaps, hide_index=True, key="gap_gaps_table", column_config={
        "Largest gap (mean)": st.column_config.NumberColumn(format="%.4f", help=texts.GROUP_GAP_GAPS_HELP),
        "std": st.column_config.NumberColumn(format="%.4f")})
    recal_ui.csv_button("Group gaps (CSV, every fold)", tables.csv_frame(result.table), "group_gaps.csv",
                        "gap_dl_table", help="One row per (fold, group, strategy): rows, test ECE, whether the "
                        "group had too few rows for a recalibrator of its own.")


def render() -> None:
    st.title("Compare recalibrators")
    st.markdown(
        "Which recalibrator suits this model? The paper's protocol (Section 6.2): split the rows at random "
        "into a **recalibration set** (to fit on) and a **test set** (to score on), fit every method on the "
        "same split, repeat over several folds and report the mean ± std of the test metrics."
    )
    loaded = state.current()
    if not recal_ui.recalibratable(loaded):
        return
    _reset_for_new_data(loaded)
    running = any(j.active for j in (jobs.get("compare"), jobs.get("sweep"), jobs.get("groupgap")) if j is not None)
    recal_ui.run_panel("compare", loaded, running, button="Run the comparison", button_key="cmp_run",
                       controls=_controls, start_job=_start_compare, results=_results)
    _sweep(loaded, [m for m in st.session_state.get(K_METHODS, []) if m in available_methods()], running)
    _group_gaps(loaded, running)


render()
