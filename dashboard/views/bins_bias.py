"""Bins & bias page: ECE against B with Theorem 1's bound, and a subsampling control for teaching."""

from __future__ import annotations

import streamlit as st

from dashboard import compute, figures, recal_ui, state, tables, texts

K_BMAX = state.K_BINS_BMAX
K_L = state.K_BINS_L
K_EPS = state.K_BINS_EPS
K_LOG = "bins_log_y"
K_SUB_N = "bins_sub_n"
K_SEED = "bins_seed"
K_FOR = state.K_BINS_FOR  # which data the B / n choices belong to

MAX_BMAX = 300


def _bmax_limit(n: int) -> int:
    """Largest B offered: up to n (more bins than rows only adds empty bins), but at least 10 so
    that even a tiny file shows the shape of the curve."""
    return min(MAX_BMAX, max(n, 10))


def _reset_for_new_data(view: state.MetricView) -> None:
    state.reset_for_data(K_FOR, view.key, {K_BMAX: state.AuditChoices.defaults(view.rows).bmax, K_SUB_N: view.rows,
                                           K_SEED: 0})


def _new_seed() -> None:
    st.session_state[K_SEED] = int(st.session_state.get(K_SEED, 0)) + 1


def _controls(view: state.MetricView) -> tuple[int, float, float, bool]:
    d = state.AuditChoices.defaults(view.rows)
    c1, c2, c3, c4 = st.columns([3, 2, 2, 1.3], gap="medium")
    with c1:
        bmax = st.slider("Largest B shown", min_value=2, max_value=_bmax_limit(view.rows), key=K_BMAX,
                         persist_state="session", help=texts.BMAX_HELP)
    with c2:
        lip = st.number_input("Lipschitz constant L", min_value=0.0, max_value=100.0, value=d.lipschitz, step=0.5,
                              key=K_L, persist_state="session", help=texts.LIPSCHITZ_HELP)
    with c3:
        eps = st.number_input("ε (failure probability)", min_value=0.001, max_value=0.5, value=d.eps,
                              step=0.01, format="%.3f", key=K_EPS, persist_state="session", help=texts.EPS_HELP)
    with c4:
        st.write("")  # aligns the toggle with the inputs' boxes
        log_y = st.toggle("Log scale", key=K_LOG, persist_state="session", help=texts.LOG_Y_HELP)
    return int(bmax), float(lip), float(eps), bool(log_y)


def _teaching(view: state.MetricView) -> state.MetricView:
    """The subsample control; returns the view the chart uses (the full data or a subset)."""
    with st.container(border=True):
        st.markdown(texts.BINS_TEACHING_TITLE)
        # A server dataset: subsets are drawn from its random sample (a random subset of that is a random
        # subset of the dataset); the last option is every row, through the streamed statistics.
        sizes = compute.subsample_sizes(view.n)
        if view.stats is not None:
            sizes = [s for s in sizes if s < view.n] + ([view.n] if view.n < view.rows else []) + [view.rows]
        if st.session_state.get(K_SUB_N) not in sizes:
            st.session_state[K_SUB_N] = view.rows
        c1, c2 = st.columns([4, 1], gap="medium", vertical_alignment="bottom")
        with c1:
            n_sub = st.select_slider("Use a random subset of n rows", options=sizes, key=K_SUB_N,
                                     persist_state="session", format_func=lambda v: f"{v:,}",
                                     help=texts.SUBSAMPLE_HELP, disabled=len(sizes) < 2)
        with c2:
            st.button("New subset", on_click=_new_seed, disabled=n_sub >= view.rows,
                      icon=":material/casino:", key="bins_resample")
        seed = int(st.session_state.get(K_SEED, 0))
        if n_sub >= view.rows:
            st.caption(texts.subset_all_rows(view.rows))
            return view
        idx = compute.subsample_index(view.n, min(int(n_sub), view.n), seed)
        st.caption(texts.subset_caption(n_sub, view.rows, seed))
        return view.subsample(idx, f"sub{n_sub}:{seed}")


def _cards(t: compute.Theorem1Reading) -> None:
    n = t.n
    helps = texts.theorem1_card_helps(t.b_opt, n, t.lipschitz, t.eps, t.bound_min)
    for column, (title, value), help_ in zip(st.columns(4), tables.theorem1_cards(t), helps):
        column.metric(title, value, help=help_)
    st.caption(texts.THEOREM1_RANGE_MEANING)
    if t.bound_min >= 1.0:
        st.info(texts.bound_says_nothing(n), icon=":material/school:")


def render() -> None:
    st.title(texts.BINS_TITLE)
    loaded = state.current_or_prompt()
    if loaded is None:
        return
    full = state.metric_view(loaded)
    st.markdown(texts.bins_intro(full.what))
    _reset_for_new_data(full)
    bmax, lip, eps, log_y = _controls(full)
    view = _teaching(full)

    curve = compute.ece_curve(view, bmax)
    reading = compute.theorem1_reading(view, curve, lip, eps)
    _cards(reading)
    fig = compute.ece_vs_bins_chart(curve, bmax, reading, log_y=log_y,
                                    reference_ece=compute.ece_curve(full, bmax) if view.rows < full.rows else None)
    left, right = st.columns([3, 1.2], gap="medium")
    with left:
        st.plotly_chart(fig, key="bins_chart", config={"displaylogo": False})
        st.caption(texts.BAND_CAPTION)
        if reading.b_min > bmax:
            st.caption(texts.b_min_beyond_chart(reading.b_min))
    with right:
        st.markdown(texts.WHY_CUBE_ROOT)
    _estimators_on_known_truth()
    recal_ui.report_button("bins_dl_report", label="Audit report (HTML)", help=texts.AUDIT_REPORT_HELP)


K_SIM_SHIFT = "bins_sim_shift"
SIM_REPEATS = 20


def _estimators_on_known_truth() -> None:
    from pbr_core.estimators import ESTIMATORS, simulated_tce

    st.divider()
    st.subheader(texts.ESTIMATORS_SIM_TITLE)
    shift = float(st.select_slider("Simulated over-confidence at confidence 1", options=[0.0, 0.05, 0.1, 0.2],
                                   value=0.1, key=K_SIM_SHIFT, format_func=lambda v: f"{v:.2f}",
                                   help=texts.SIM_SHIFT_HELP))
    st.markdown(texts.ESTIMATORS_SIM_INTRO.format(shift=shift, tce=simulated_tce(shift)))
    with st.spinner("Simulating …"):
        table = compute.estimator_convergence(shift, SIM_REPEATS)
    st.plotly_chart(figures.estimator_convergence_figure(table, ESTIMATORS, simulated_tce(shift)),
                    key="bins_estimators_chart", config={"displaylogo": False})
    st.caption(texts.ESTIMATORS_SIM_CAPTION.format(repeats=SIM_REPEATS))


render()
