"""PBR page: fit PAC-Bayes recalibration (or GP calibration) once, see before/after and the bounds.

The fit is a background job (dashboard.jobs): a progress bar while it runs, controls disabled,
one GP fit at a time per server; the result stays in the session across page switches.
"""

from __future__ import annotations

import streamlit as st

from dashboard import figures_recal as FR
from dashboard import fit_estimate, jobs, recal_ui, runs, state, tables, texts
from pbr_core.experiments import PAPER_ALPHAS, default_n_re
from pbr_core.recalibrators import MAX_ITERATIONS, gp_method, method_family, takes
from pbr_core.recalibrators.gp import mc_description

K_OBJECTIVE = "pbr_objective"
K_APPROX = "pbr_mean_approx"
K_ALPHA_MODE = "pbr_alpha_mode"
K_ALPHA = "pbr_alpha"
K_GRID = "pbr_alpha_grid"
K_CV_FOLDS = "pbr_cv_folds"
K_CV_SCORE = "pbr_cv_score"
K_N_RE = "pbr_n_re"
K_SEED = "pbr_seed"
K_EPS = "pbr_eps"
K_L = "pbr_lipschitz"
K_MAX_ITER = "pbr_max_iter"
K_PRIOR_SPLIT = "pbr_prior_split_on"
K_PRIOR_SHARE = "pbr_prior_share"
K_FOR = "pbr_for"

ALPHA_MODES = {"fixed": "Set α myself", "auto": "Choose α automatically"}
CV_SCORES = texts.CV_SCORE_LABELS


def _reset_for_new_data(loaded: state.Loaded) -> None:
    # The paper's 1000 only on a file of 2,000 rows or more, else half: a test part worth measuring.
    state.reset_for_data(K_FOR, loaded.key, {K_N_RE: default_n_re(loaded.preds.n)})


def _controls(loaded: state.Loaded, running: bool) -> runs.PBRSettings | None:
    preds = loaded.preds
    c = st.columns([2, 1.5, 1], gap="medium")
    objective = c[0].radio("Objective", list(texts.OBJECTIVE_LABELS), format_func=texts.OBJECTIVE_LABELS.get,
                           key=K_OBJECTIVE, persist_state="session", disabled=running, help=texts.OBJECTIVE_HELP)
    mean_approx = c[1].toggle("Mean approximation", key=K_APPROX, persist_state="session", disabled=running,
                              help=texts.MEAN_APPROX_HELP)
    with c[2]:
        st.markdown(texts.DEVICE_TITLE, help=texts.DEVICE_HELP)
        st.markdown(texts.device_line(runs.device_label()))
    method = gp_method(objective, mean_approx)
    uses_alpha = takes(method, "alpha")
    alpha: float | None = None
    grid, cv_folds, cv_score = tuple(PAPER_ALPHAS), 5, "ece"
    if uses_alpha:
        a = st.columns([1.6, 3], gap="medium", vertical_alignment="bottom")
        if st.session_state.get(K_ALPHA_MODE) not in ALPHA_MODES:
            st.session_state[K_ALPHA_MODE] = "fixed"
        mode = a[0].segmented_control("α", list(ALPHA_MODES), format_func=ALPHA_MODES.get, key=K_ALPHA_MODE,
                                      required=True, persist_state="session", disabled=running,
                                      help=texts.ALPHA_AUTO_HELP)
        if mode == "auto":
            b = a[1].columns([3, 1, 1.3], vertical_alignment="bottom")
            grid = tuple(sorted(b[0].multiselect("α grid", list(PAPER_ALPHAS), default=list(PAPER_ALPHAS), key=K_GRID,
                                                 format_func=lambda v: f"{v:g}", persist_state="session",
                                                 disabled=running, help=texts.ALPHA_AUTO_HELP))) or tuple(PAPER_ALPHAS)
            cv_folds = int(b[1].number_input("k folds", min_value=2, max_value=10, value=5, key=K_CV_FOLDS,
                                             persist_state="session", disabled=running,
                                             help=texts.CV_FOLDS_HELP))
            cv_score = b[2].selectbox("Score", list(CV_SCORES), format_func=CV_SCORES.get, key=K_CV_SCORE,
                                      persist_state="session", disabled=running,
                                      help=texts.CV_SCORE_HELP)
        else:
            alpha = float(a[1].slider("α (weight of the KL term)", 0.0, 1.0, 0.5, 0.01, key=K_ALPHA,
                                      persist_state="session", disabled=running, help=texts.ALPHA_HELP))
    else:
        st.caption(texts.GP_NO_ALPHA)
    d = st.columns(3, gap="medium")
    n_re = int(d[0].number_input("Recalibration rows n_re", min_value=2, max_value=preds.n - 1, step=100, key=K_N_RE,
                                 persist_state="session", disabled=running, help=texts.N_RE_HELP))
    seed = int(d[1].number_input("Split seed", min_value=0, value=0, key=K_SEED, persist_state="session",
                                 disabled=running, help=texts.SEED_HELP))
    problem = texts.split_refusal(preds.n, n_re)
    if problem:  # a file, fit part or test part too small to measure anything: refused, with what to do
        # and no split or time of a run that will not start (audit 4: "Fit on 75 rows, test on 75 rows.")
        st.error(problem, icon=":material/block:")
    else:
        d[2].markdown(texts.pbr_split(n_re, preds.n))
    if method_family(method) == "gp" and not problem:  # a GP fit: its time is worth saying before it starts
        est = fit_estimate.estimate(n_re, preds.n, preds.n_classes, uses_alpha and alpha is None, len(grid), cv_folds,
                                    n_jobs=runs.fold_jobs(cv_folds), gpu=runs.device_label() != "CPU")
        if est.long:
            st.info(est.sentence(), icon=":material/hourglass_top:")
        else:
            st.caption(texts.estimate_caption(est.sentence()))
    with st.expander("Bound and fit settings"):
        e = st.columns(3, gap="medium")
        eps = float(e[0].number_input("ε (failure probability)", min_value=0.001, max_value=0.5, value=0.05, step=0.01,
                                      format="%.3f", key=K_EPS, persist_state="session", disabled=running,
                                      help=texts.EPS_RECAL_HELP))
        lip = float(e[1].number_input("Lipschitz constant L", min_value=0.0, max_value=100.0, value=1.0, step=0.5,
                                      key=K_L, persist_state="session", disabled=running, help=texts.L_RECAL_HELP))
        max_iter = None
        if takes(method, "max_iter"):
            max_iter = int(e[2].number_input("Max optimiser iterations (0 = default)", min_value=0,
                                             max_value=MAX_ITERATIONS, value=0, step=50, key=K_MAX_ITER,
                                             persist_state="session", disabled=running, help=texts.MAX_ITER_HELP)) or None
        p = st.columns([2, 1], gap="medium", vertical_alignment="bottom")
        split_on = p[0].toggle("Bounds valid as stated: choose the prior on separate rows", key=K_PRIOR_SPLIT,
                               persist_state="session", disabled=running, help=texts.PRIOR_SPLIT_HELP)
        prior_split = 0.0
        if split_on:
            prior_split = float(p[1].number_input("Share of rows for the prior", min_value=0.05, max_value=0.9,
                                                  value=0.3, step=0.05, format="%.2f", key=K_PRIOR_SHARE,
                                                  persist_state="session", disabled=running,
                                                  help=texts.PRIOR_SPLIT_HELP))
            n_prior = int(round(prior_split * n_re))
            st.caption(texts.prior_split_caption(n_prior, n_re))
    if problem:
        return None
    return runs.PBRSettings(objective=objective, mean_approx=bool(mean_approx), alpha=alpha, alpha_grid=grid,
                            cv_folds=cv_folds, cv_score=cv_score, n_re=n_re, seed=seed, eps=eps, lipschitz=lip,
                            max_iter=max_iter, binary_ece=state.recal_binary_ece(preds), prior_split=prior_split,
                            n_jobs=runs.fold_jobs(cv_folds) if uses_alpha and alpha is None else 1)


def _start(loaded: state.Loaded, s: runs.PBRSettings) -> None:
    preds, name, key = loaded.preds, loaded.name, loaded.key
    recal_ui.start("pbr", texts.pbr_job_label(texts.method_label(s.method), s.uses_alpha, s.alpha, s.n_re),
                   lambda ctx: runs.run_pbr(preds, s, ctx, data_name=name, data_key=key), heavy=True)


def _cards(r: runs.PBRResult) -> None:
    c = st.columns(6)
    c[0].metric("Test ECE after", f"{r.after['ece']:.4f}",
                **recal_ui.ece_change(r.before["ece"], r.after["ece"], r.worse_shown, r.better_shown),
                help=texts.ece_after_help(r.before["ece"], r.after["n_bins"], r.n_te))
    c[1].metric("Test ECE before", f"{r.before['ece']:.4f}", help=texts.ECE_BEFORE_HELP)
    c[2].metric("Accuracy after", f"{r.after['accuracy']:.2%}",
                **recal_ui.change(r.before["accuracy"], r.after["accuracy"], points=True),
                help=texts.ACCURACY_HELP)
    c[3].metric("KL(ρ‖π)", texts.kl_card(r.kl), help=texts.KL_HELP)
    fr = r.fit_report
    iters = fr.get("iterations")
    c[4].metric("Iterations", "–" if iters is None else f"{iters:,}", help=texts.FIT_INFO_HELP)
    c[5].metric("Fit time", f"{fr.get('wall_time_s', r.seconds):.1f} s", help=texts.FIT_INFO_HELP)
    st.caption(texts.fit_details(fr.get("device", runs.device_label()), r.alpha, r.settings.alpha is None,
                                 mc_description(fr), fr.get("stop_reason"), fr.get("converged", True)))
    for w in fr.get("warnings", []) or []:
        st.caption(texts.fit_warning(w))
    note = texts.at_prior_note(r.at_prior, r.alpha, r.settings.n_re,
                               cv_grid=tables.cv_scored_alphas(r.settings.alpha, r.alpha_scores))
    if note:
        st.info(note, icon=":material/info:")
    extreme = tables.pbr_extreme_kl_note(r)
    if extreme:  # a posterior that drifted from its prior (alpha = 0): its KL and bounds say nothing
        st.warning(extreme, icon=":material/warning:")
    worse = tables.pbr_worse_on_test_note(r)
    if worse:
        st.warning(worse, icon=":material/warning:")
    fall = tables.pbr_ece_fall_note(r)  # a fall is read against the same noise as a rise
    if fall:
        st.info(fall, icon=":material/info:")


def _bounds(r: runs.PBRResult) -> None:
    st.subheader(texts.BOUNDS_TITLE, help=texts.BOUNDS_INTRO)
    if not r.bounds:
        st.info(texts.NO_KL_NO_BOUNDS)
        return
    s = r.settings
    n = r.n_bound or s.n_re
    if r.bound_prior == "split":
        st.success(texts.bound_validity("split", n, s.n_re), icon=":material/verified:")
    else:
        st.warning(texts.bound_validity("same_rows", n, s.n_re), icon=":material/info:")
    st.caption(texts.bounds_caption(n, r.n_bins_re, r.kl, s.eps, s.lipschitz, r.ece_re))
    c = st.columns(2, gap="large")
    with c[0], st.container(border=True):
        b = r.bounds["corollary1"]
        st.metric("Corollary 1: E_ρ ECE generalisation gap ≤", f"{b:.4f}",
                  help=texts.COROLLARY1_CARD_HELP)
        st.markdown(texts.corollary1_reading(b, n, s.eps, r.ece_re))
    with c[1], st.container(border=True):
        b = r.bounds["corollary2"]
        st.metric("Corollary 2: E_ρ |TCE − recalibration ECE| ≤", f"{b:.4f}",
                  help=texts.COROLLARY2_CARD_HELP)
        st.markdown(texts.corollary2_reading(b, s.eps, r.ece_re))
        st.caption(texts.COROLLARY2_RANGE_MEANING)
    if s.objective == "pbr_total":
        st.caption(texts.PBR_TOTAL_BOUND_NOTE)


def _results(loaded: state.Loaded, r: runs.PBRResult) -> None:
    st.subheader(texts.result_title(texts.method_label(r.settings.method)))
    recal_ui.stale_note(r, loaded)
    _cards(r)
    binary_positive = r.binary_positive
    before, after = FR.pbr_reliability_figures(r, binary_positive)
    c = st.columns(2, gap="medium")
    c[0].plotly_chart(before, key="pbr_before_chart", config={"displaylogo": False})
    c[1].plotly_chart(after, key="pbr_after_chart", config={"displaylogo": False})
    st.caption(texts.RELIABILITY_PAIR_CAPTION + (" " + texts.binary_ece_caption(r.settings.binary_ece)
                                                 if r.preds.kind == "binary" else ""))
    if r.alpha_scores is not None and len(r.alpha_scores):
        with st.expander(texts.alpha_choice_title(r.alpha), expanded=True):
            a = st.columns([1.6, 1.4], gap="medium")
            a[0].plotly_chart(FR.alpha_selection_figure(r.alpha_scores, r.alpha,
                                                        score_name=CV_SCORES.get(r.settings.cv_score, "score")),
                              key="pbr_alpha_chart", config={"displaylogo": False})
            frame = tables.alpha_scores_frame(r.alpha_scores, CV_SCORES.get(r.settings.cv_score, "score"))
            if tables.ALPHA_FAILED in frame:  # "–" where a failed fit left no mean (not "None")
                formats = {c: "{:.4g}" if c == "KL (mean)" else "{:.4f}" for c in frame.columns
                           if c not in ("α", tables.ALPHA_FAILED)}
                shown = frame.style.format({"α": "{:g}", **formats}, na_rep="–")
                a[1].dataframe(shown, hide_index=True)
            else:
                a[1].dataframe(frame, hide_index=True, column_config={
                    c: st.column_config.NumberColumn(format="%.4g" if c == "KL (mean)" else "%.4f")
                    for c in frame.columns if c != "α"})
            st.caption(texts.alpha_scores_help(r.settings.cv_score, r.settings.n_re, r.settings.cv_folds, r.n_te))
    _bounds(r)
    st.subheader("Downloads")
    c = st.columns(3)
    with c[0]:
        # The file's other columns as written (a CSV's ZIP code 01234, not 1234), or said to be as read.
        text, exact = state.as_written_for(r.data_key)
        recal_ui.lazy_button("Calibrated predictions (CSV)", lambda: r.calibrated_csv(as_written=text()),
                             f"{r.settings.method}_calibrated.csv", "text/csv", "pbr_dl_predictions",
                             help=texts.pbr_predictions_help(r.data_name, texts.method_label(r.settings.method),
                                                             runs.FIT_ROWS_COLUMN, r.settings.n_re, r.n_te,
                                                             as_written=exact,
                                                             written_as=state.download_format(r.data_key)))
    with c[1]:
        recal_ui.recalibrator_download(r, f"{r.settings.method}_recalibrator.json", "pbr_dl_recalibrator",
                                       help=texts.RECALIBRATOR_JSON_HELP)
        score_map = recal_ui.score_map_download(r, "pbr_dl_score_map")
    with c[2]:
        recal_ui.report_button("pbr_dl_report")
    if score_map:  # the recalibrator takes probabilities; the model's new scores go through the map first
        st.warning(texts.ship_mapped_scores_warning(score_map["score_column"], code_below=False),
                   icon=":material/warning:")


def render() -> None:
    st.title(texts.PBR_TITLE)
    st.markdown(texts.PBR_INTRO)
    loaded = state.current()
    if not recal_ui.recalibratable(loaded, needs_gp=True):
        return
    _reset_for_new_data(loaded)
    job = jobs.get("pbr")
    running = job is not None and job.active
    recal_ui.run_panel("pbr", loaded, running, button="Run", button_key="pbr_run",
                       controls=_controls, start_job=_start, results=_results)


render()
