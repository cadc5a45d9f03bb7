"""Generalization page: KL against the ECE generalisation gap over alpha (paper Section 6.1, Figure 2)."""

from __future__ import annotations

import streamlit as st

from dashboard import figures_recal as FR
from dashboard import fit_estimate, jobs, recal_ui, runs, state, tables, texts
from pbr_core.experiments import (MIN_PAIRED_FOLDS, MIN_TEST_ROWS, PAPER_ALPHAS, folds_overlap_too_much,
                                  kl_gap_default_n_re, small_file_problem, small_test_set_problem)
from pbr_core.recalibrators import MAX_ITERATIONS, methods_taking, takes

K_OBJECTIVE = "gen_objective"
K_ALPHAS = "gen_alphas"
K_N_RE = "gen_n_re"
K_FOLDS = "gen_n_folds"
K_SEED = "gen_seed"
K_EPS = "gen_eps"
K_MAX_ITER = "gen_max_iter"
K_BATCHED = "gen_batched"
K_FOR = "gen_for"


def _reset_for_new_data(loaded: state.Loaded) -> None:
    # The paper's 1000 when 4,000 rows allow it, else a quarter of the rows, so that the folds share few
    # rows and their verdict can be read (folds_overlap_too_much); half the rows when a quarter is below
    # MIN_FIT_ROWS (the verdict is then not read, the fits are still measured).
    state.reset_for_data(K_FOR, loaded.key, {K_N_RE: max(2, kl_gap_default_n_re(loaded.preds.n))})


def _default_folds() -> int:
    """The paper's 10 folds on a GPU; on a CPU the fewest with which the folds' test can show a relation
    (:data:`pbr_core.experiments.MIN_PAIRED_FOLDS`, 6: its smallest p-value is 2 / 2^folds). The
    former 3 could only end in "With 3 folds no test can show a relation" after a minute or two
    (audit 13: 55 s on 1,500 rows, 107 s on 500)."""
    return 10 if runs.device_label() != "CPU" else MIN_PAIRED_FOLDS


def _controls(loaded: state.Loaded, running: bool) -> runs.KLGapSettings | None:
    preds = loaded.preds
    objectives = methods_taking("alpha")
    c = st.columns([1.4, 3], gap="medium")
    objective = c[0].selectbox("Objective", objectives, format_func=texts.method_label, key=K_OBJECTIVE,
                               persist_state="session", disabled=running, help=texts.OBJECTIVE_HELP)
    alphas = c[1].multiselect("α values", list(PAPER_ALPHAS), default=list(PAPER_ALPHAS), key=K_ALPHAS,
                              format_func=lambda v: f"{v:g}", persist_state="session", disabled=running,
                              help=texts.ALPHAS_HELP)
    d = st.columns(4, gap="medium")
    n_re = int(d[0].number_input("n_re (and test subset size)", min_value=2, max_value=max(2, preds.n // 2), step=100,
                                 key=K_N_RE, persist_state="session", disabled=running, help=texts.GEN_N_RE_HELP))
    n_folds = int(d[1].number_input("Folds", min_value=1, max_value=50, value=_default_folds(), key=K_FOLDS,
                                    persist_state="session", disabled=running, help=texts.N_FOLDS_HELP))
    seed = int(d[2].number_input("Split seed", min_value=0, value=0, key=K_SEED, persist_state="session",
                                 disabled=running, help=texts.SEED_HELP))
    eps = float(d[3].number_input("ε (failure probability)", min_value=0.001, max_value=0.5, value=0.05, step=0.01,
                                  format="%.3f", key=K_EPS, persist_state="session", disabled=running,
                                  help=texts.EPS_RECAL_HELP))
    max_iter, batched = None, False
    if takes(objective, "max_iter"):
        with st.expander("GP fit settings"):
            max_iter = int(st.number_input("Max optimiser iterations (0 = default)", min_value=0,
                                           max_value=MAX_ITERATIONS, value=0, step=50, key=K_MAX_ITER,
                                           persist_state="session", disabled=running, help=texts.MAX_ITER_HELP)) or None
            if runs.device_label() != "CPU":
                batched = st.checkbox("Fit all α × folds together on the GPU", key=K_BATCHED, persist_state="session",
                                      disabled=running, help=texts.GEN_BATCHED_HELP)
    if not alphas:
        st.info(texts.CHOOSE_AN_ALPHA)
        return None
    if small_file_problem(preds.n):  # no n_re can: one sentence, load more rows
        st.error(texts.gen_too_small_todo(preds.n, MIN_TEST_ROWS), icon=":material/block:")
        return None
    if 2 * n_re > preds.n:
        st.info(texts.gen_rows_too_few(n_re, preds.n))
        return None
    problem = small_test_set_problem(n_re)  # the gap's test subset has n_re rows
    if problem:
        st.error(f"{problem} {texts.gen_too_small_todo(preds.n, MIN_TEST_ROWS)}", icon=":material/block:")
        return None
    st.caption(texts.gen_plan(len(alphas), n_folds, runs.device_label()))  # no plan above a refusal
    if folds_overlap_too_much(n_re, preds.n):  # said before the fits, not only after them (audit 14, B)
        st.info(texts.fold_test_not_read_before_run(n_re, preds.n), icon=":material/info:")
    # the fits' time, in the PBR page's words: each fold fits every α on n_re rows and measures n_re others
    recal_ui.gp_fit_time(fit_estimate.folds_estimate(n_re, n_re, preds.n_classes, len(alphas), n_folds,
                                                     runs.fold_jobs(n_folds), gpu=runs.device_label() != "CPU"))
    return runs.KLGapSettings(objective=objective, alphas=tuple(sorted(alphas)), n_re=n_re, n_folds=n_folds, seed=seed,
                            eps=eps, max_iter=max_iter, binary_ece=state.recal_binary_ece(preds),
                            n_jobs=runs.fold_jobs(n_folds), batched=bool(batched))


def _start(loaded: state.Loaded, s: runs.KLGapSettings) -> None:
    preds, name, key = loaded.preds, loaded.name, loaded.key
    recal_ui.start("generalization", texts.gen_job_label(len(s.alphas), s.n_folds, s.n_re),
                   lambda ctx: runs.run_generalization(preds, s, ctx, data_name=name, data_key=key), heavy=True)


def _results(loaded: state.Loaded, result: runs.GenResult) -> None:
    res, s = result.result, result.settings
    st.subheader("Result")
    recal_ui.stale_note(result, loaded)
    recal_ui.partial_note(result, len(res.table), len(s.alphas) * s.n_folds)
    if res.table.empty:
        st.info(texts.NO_FIT_FINISHED)
        return
    failed = res.table[res.table["error"].notna()]
    if len(failed):
        st.warning(texts.gen_failed_fits(len(failed), ((r.alpha, r.fold, r.error) for r in failed.head(5).itertuples())))
    # Fold by fold, not one correlation over every fit: a fold's fits share its rows (fold_kendall).
    fk = res.across_folds
    c = st.columns(4)
    c[0].metric(texts.FOLD_METRICS[0], "–" if not fk.folds else f"{fk.mean_tau:+.3f}", help=texts.FOLD_TAU_HELP)
    c[1].metric(texts.FOLD_METRICS[1], "–" if not fk.folds else f"{fk.folds_positive} of {fk.folds}",
                help=texts.FOLDS_POSITIVE_HELP)
    if result.n_rows is not None and folds_overlap_too_much(s.n_re, result.n_rows):  # beside "Not read": no p-values
        for i in (2, 3):
            c[i].metric(texts.FOLD_METRICS[i], texts.FOLD_P_NOT_READ, help=texts.FOLD_P_NOT_READ_HELP)
    else:
        c[2].metric(texts.FOLD_METRICS[2], texts.p_value(fk.wilcoxon_p), help=texts.FOLD_WILCOXON_HELP)
        c[3].metric(texts.FOLD_METRICS[3], texts.p_value(fk.sign_p), help=texts.FOLD_SIGN_HELP)
    st.markdown(texts.correlation_reading(fk.verdict, fk.mean_tau, fk.folds_positive, fk.folds_negative, fk.folds,
                                          fk.smallest_p, n_re=s.n_re, n_rows=result.n_rows))
    extreme = tables.extreme_kl_note(res.table, result.n_classes) if result.n_classes else None
    if extreme:  # a fit that drifted from its prior (alpha = 0): said, marked on the chart, out of the means
        st.warning(extreme, icon=":material/warning:")
    st.plotly_chart(FR.kl_gap_figure(res.table, eps=s.eps, n_classes=result.n_classes), key="gen_chart",
                    config={"displaylogo": False})
    st.caption(texts.kl_gap_caption(s.n_re, s.eps) + (" " + texts.binary_ece_caption(s.binary_ece)
                                       if result.n_classes == 2 else ""))
    st.markdown(texts.PER_ALPHA_TITLE)
    st.dataframe(tables.per_alpha_styler(tables.per_alpha_frame(res.table, s.eps, result.n_classes)),
                 hide_index=True, column_config=tables.per_alpha_config(s.eps), key="gen_per_alpha")
    st.caption(texts.GEN_BOUND_CAPTION)
    with st.expander("Every fit"):
        st.dataframe(tables.fold_styler(res.table), hide_index=True)
    d = st.columns(2)
    with d[0]:
        recal_ui.csv_button("Results table (CSV, every fit)", tables.csv_frame(res.table), "kl_vs_ece_gap.csv",
                            "gen_dl_table", help=texts.GEN_CSV_HELP)
    with d[1]:
        recal_ui.report_button("gen_dl_report")


def render() -> None:
    st.title(texts.GEN_TITLE)
    st.markdown(texts.GEN_INTRO)
    loaded = state.current()
    if not recal_ui.recalibratable(loaded, needs_gp=True):
        return
    if loaded.preds.n < 4:
        st.info(texts.GEN_TOO_FEW_ROWS)
        return
    _reset_for_new_data(loaded)
    job = jobs.get("generalization")
    running = job is not None and job.active
    recal_ui.run_panel("generalization", loaded, running, button="Run", button_key="gen_run",
                       controls=_controls, start_job=_start, results=_results)


render()
