"""Compare page: the paper's cross-validated comparison of recalibrators; below it the n_re sweep
(:mod:`dashboard.sections.sweep`) and the group gaps (:mod:`dashboard.sections.group_gaps`), which
reuse the comparison's choices through :class:`dashboard.settings_ui.CompareChoices`.

Every run is a background job (dashboard.jobs): the page shows its progress, can stop it (finished
folds are kept) and shows the results again after a page switch.
"""

from __future__ import annotations

import dataclasses

import streamlit as st

from dashboard import figures_recal as FR
from dashboard import fit_estimate, jobs, recal_ui, runs, state, tables, texts
from dashboard.fit_estimate import recal_heavy
from dashboard.sections import group_gaps, sweep
from dashboard.settings_ui import DEFAULT_ALPHA, K_ALPHA, K_MAX_ITER, K_METHODS, K_N_RE, K_SEED, CompareChoices
from pbr_core.evaluation import EVALUATION_METRICS
from pbr_core.experiments import default_n_re, too_few_folds
from pbr_core.recalibrators import MAX_ITERATIONS, available_methods, method_family, takes

K_FOLDS = "cmp_n_folds"
K_N_TE = "cmp_n_te"
K_DIAGRAMS = "cmp_diagrams"
K_PAIRED_METRIC = "cmp_paired_metric"
K_PAIR_A = "cmp_pair_a"
K_PAIR_B = "cmp_pair_b"
K_FOR = "cmp_for"

#: Fast and informative: the baseline, the classic, a non-parametric one and the paper's method.
DEFAULT_METHODS = ("uncalibrated", "temperature", "isotonic", "pbr")


def _defaults(n: int) -> dict[str, object]:
    # The paper's n_re = 1000 only on a file of 2,000 rows or more, else half: a test set worth measuring.
    return {K_N_RE: default_n_re(n), K_N_TE: 0, **sweep.defaults(n)}


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
    alpha, max_iter = DEFAULT_ALPHA, None
    if any(takes(m, "alpha") for m in chosen):
        alpha = c[3].slider("α of PBR", 0.0, 1.0, DEFAULT_ALPHA, 0.01, key=K_ALPHA, persist_state="session",
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
    if not chosen:
        st.info(texts.CHOOSE_A_METHOD)
        return None
    if n_te is not None and int(n_re) + n_te > preds.n:
        st.error(texts.compare_rows_too_many(int(n_re), n_te, preds.n))
        return None
    problem = texts.split_refusal(preds.n, int(n_re), n_te)
    if problem:  # folds too small to measure anything (the file, the fit part or the test part): refused,
        # with no plan of a run that will not start (audit 13: "40 fits in all … each fold fits on 22 rows")
        st.error(problem, icon=":material/block:")
        return None
    st.caption(texts.compare_plan(int(n_folds), fits, n_gp, runs.device_label() if n_gp else "", int(n_re), preds.n,
                                  n_te))
    if n_gp:  # the GP fits' time, in the PBR page's words (fit_estimate)
        recal_ui.gp_fit_time(fit_estimate.folds_estimate(int(n_re), n_te or preds.n - int(n_re), preds.n_classes,
                                                         n_gp, int(n_folds), settings.n_jobs,
                                                         gpu=runs.device_label() != "CPU"))
    if not recal_ui.matrix_fit_time(chosen, int(n_re), preds.n_classes, int(n_folds), max_iter):
        return None
    return settings


def _paired(table, multiclass: bool) -> None:
    """Paired tests over folds: the default pairs, and any pair the user picks."""
    st.markdown(texts.PAIRED_TITLE, help=texts.PAIRED_HELP)
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
        st.info(texts.PAIRED_TWO_METHODS)
        return
    for key, default in ((K_PAIR_A, methods[-1]), (K_PAIR_B, methods[0])):
        if st.session_state.get(key) not in methods:
            st.session_state[key] = default
    label = lambda m: texts.method_label(m, multiclass)  # noqa: E731
    a = c[1].selectbox("Compare A", methods, format_func=label, key=K_PAIR_A, help=texts.PAIRED_PICK_HELP)
    b = c[2].selectbox("with B", methods, format_func=label, key=K_PAIR_B, help=texts.PAIRED_PICK_HELP)
    if a == b:
        st.info(texts.PAIRED_SAME_METHOD)
    else:
        # Holm over every pair, as the table below: the pair is picked after seeing the results, and
        # tested alone it announced a winner that table rejects (p 0.021 against 0.106, a user audit).
        st.dataframe(tables.paired_frame(table, multiclass, metric, [(a, b)], holm_family="all"), hide_index=True,
                     key="cmp_pair_table", column_config=tables.paired_column_config())
        st.caption(texts.paired_pick_caption(*tables.paired_family(table, metric)))
    st.markdown(texts.PAIRED_DEFAULT_PAIRS)
    st.dataframe(tables.paired_frame(table, multiclass, metric), hide_index=True, key="cmp_paired_table",
                 column_config=tables.paired_column_config())


def _start_compare(loaded: state.Loaded, s: runs.CompareSettings) -> None:
    preds, name, key = loaded.preds, loaded.name, loaded.key
    recal_ui.start("compare", texts.compare_job_label(len(s.methods), s.n_folds, s.n_re), lambda ctx: runs.run_compare(preds, s, ctx, data_name=name, data_key=key),
                   heavy=any(method_family(m) == "gp" or recal_heavy(m, preds.n_classes) for m in s.methods))


def _results(loaded: state.Loaded, result: runs.CompareResult) -> None:
    st.subheader("Results")
    recal_ui.stale_note(result, loaded)
    recal_ui.partial_note(result, len(result.table), result.planned)
    table = result.table
    if table.empty:
        st.info(texts.NO_FIT_FINISHED)
        return
    multiclass = result.kind == "multiclass"
    failed = table[table["error"].notna()]
    if len(failed):
        st.warning(texts.failed_fits(((r.method, r.fold, r.error) for r in failed.itertuples()), multiclass),
                   icon=":material/warning:")
    summ, styled = tables.compare_tables(table, multiclass)
    st.markdown(texts.SUMMARY_TITLE, help=texts.SUMMARY_HELP)
    st.dataframe(styled, key="cmp_summary_table")
    st.caption(texts.compare_summary_caption(table["fold"].nunique(), int(table["n_te"].iloc[0]),
                                             int(table["n_bins"].iloc[0]),
                                             result.settings.binary_ece if result.kind == "binary" else None,
                                             tables.best_note(table)))
    for note in tables.compare_at_prior_notes(result):
        st.warning(note, icon=":material/do_not_disturb_on:")
    _paired(table, multiclass)
    with st.expander("Every fold"):
        st.dataframe(tables.fold_styler(table, multiclass), hide_index=True, key="cmp_folds_table")
    figs = FR.compare_figures(result, result.binary_positive,
                              result.kind == "multiclass")
    if figs:  # fold 1's diagrams side by side and overlaid when kept, then every fold's ECE
        names, keys = ["Side by side", "Overlaid", "Each fold"], ["cmp_grid_chart", "cmp_overlay_chart", "cmp_folds_chart"]
        for tab, (caption, fig), key in zip(st.tabs(names[-len(figs):]), figs, keys[-len(figs):]):
            with tab:
                st.plotly_chart(fig, key=key, config={"displaylogo": False})
                st.caption(caption)
    c = st.columns(3)
    with c[0]:
        recal_ui.csv_button("Results table (CSV, every fold)", tables.csv_frame(table), "compare_results.csv",
                            "cmp_dl_table", help=texts.FOLDS_CSV_HELP)
    with c[1]:
        recal_ui.csv_button("Summary (CSV, mean and std)", summ, "compare_summary.csv", "cmp_dl_summary",
                            help=texts.SUMMARY_CSV_HELP)
    with c[2]:
        recal_ui.report_button("cmp_dl_report")


def render() -> None:
    st.title(texts.COMPARE_TITLE)
    st.markdown(texts.COMPARE_INTRO)
    loaded = state.current()
    if not recal_ui.recalibratable(loaded):
        return
    _reset_for_new_data(loaded)
    running = any(j.active for j in (jobs.get("compare"), jobs.get("sweep"), jobs.get("groupgap")) if j is not None)
    recal_ui.run_panel("compare", loaded, running, button="Run the comparison", button_key="cmp_run",
                       controls=_controls, start_job=_start_compare, results=_results)
    choices = CompareChoices.read(st.session_state, available_methods(), loaded.preds.n)
    sweep.render(loaded, choices, running)
    group_gaps.render(loaded, choices, running)


render()
