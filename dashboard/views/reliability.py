"""Reliability page: the reliability diagram at a chosen B, with the metric cards."""

from __future__ import annotations

import streamlit as st

from dashboard import compute, figures_corp, recal_ui, state, tables, texts
from pbr_core.corp import CHANCE_OUTSIDE_SHARE

K_BINS = state.K_REL_BINS
K_BINS_FOR = state.K_REL_BINS_FOR  # which data the slider value belongs to
K_BINNING = "rel_binning"
K_SMOOTH = "rel_smooth"
#: The two expanders below the chart: drawn, and their numbers computed, once opened (:func:`_lazy_expander`).
K_ESTIMATORS_OPEN = "rel_estimators_open"
K_CLASSWISE_OPEN = "rel_classwise_open"
K_CORP_OPEN = "rel_corp_open"
BINNINGS = {"width": "Equal width (the paper)", "mass": "Equal mass"}
MAX_BINS = 200  # slider range for n up to 200^3 = 8 million rows; beyond, up to floor(n^(1/3))


def _bins_slider(view: state.MetricView) -> int:
    # The default must be the paper's B itself (the one the CLI and the Bins & bias page use), so
    # the range grows past MAX_BINS when floor(n^(1/3)) does; more bins than rows would be empty.
    default = state.AuditChoices.defaults(view.rows).n_bins
    hi = max(1, min(max(MAX_BINS, default), view.rows))
    # New data: back to the paper's B; the same data (even after visiting other pages): keep the choice.
    state.reset_for_data(K_BINS_FOR, view.key, {K_BINS: default},
                         also=not 1 <= st.session_state.get(K_BINS, 0) <= hi)
    if hi == 1:  # a slider needs min < max
        st.caption(texts.ONE_ROW_ONE_BIN)
        return 1
    return int(st.slider(
        texts.bins_slider_label(default), min_value=1, max_value=hi, key=K_BINS,
        persist_state="session", help=texts.N_BINS_HELP,
    ))


def _metric_cards(loaded: state.Loaded, view: state.MetricView, n_bins: int) -> None:
    s = compute.summary(view, n_bins)
    top_label_only = loaded.preds.kind == "top_label"
    c = st.columns(5)
    c[0].metric("ECE", f"{s['ece']:.4f}", help=texts.ECE_HELP + " " + texts.ECE_INTERVAL_HELP)
    if s["ece_ci_low"] is None:  # streamed statistics: the interval exists at one B
        c[0].caption(texts.server_interval_caption(s["interval_bins"]))
    else:
        c[0].caption(texts.ece_interval_caption(s["ece_ci_low"], s["ece_ci_high"]))
    c[1].metric("MCE", f"{s['mce']:.4f}", help=texts.MCE_HELP)
    # Brier and NLL of what the ECE measures: p(y=1), a confidence against correctness, or the vector.
    one = texts.measured_probability(view.binary_positive, top_label_only)
    c[2].metric(texts.brier_label(one), f"{s['brier']:.4f}", help=texts.brier_help(one))
    inf_rows = s.get("nll_infinite_rows", 0)  # streamed statistics do not count them
    c[3].metric(texts.nll_label(one), texts.nll_value(s["nll"], inf_rows),
                help=texts.nll_infinite_help(inf_rows, s["nll"]) if inf_rows else texts.nll_help(one))
    c[4].metric("Accuracy", f"{s['accuracy']:.2%}", help=texts.ACCURACY_HELP)
    if s["ece_ci_low"] is not None and s["ece_ci_low"] <= 0.0:  # too long for the card's column: full width
        st.caption(texts.ECE_INTERVAL_ZERO_NOTE)
    st.caption(texts.RELIABILITY_RANGE_MEANING)


def _lazy_expander(label: str, key: str):
    """An expander whose content is drawn only while it is open: the container then, else None.

    Why: a collapsed expander's content is still computed, sent and drawn by every new visitor's
    browser, and these two hold tables: st.dataframe loads ~1.3 MB of grid and Arrow code into the
    page, about 0.5 s of the browser's CPU for each new session (benchmarks/RESULTS_load.md).
    Opening one reruns the page (~0.1 s on the server) and draws its content.
    """
    box = st.expander(label, key=key, on_change="rerun")
    return box if box.open else None


def _classwise(loaded: state.Loaded, view: state.MetricView, n_bins: int) -> None:
    preds = loaded.preds
    if preds.kind != "multiclass":
        return
    box = _lazy_expander(texts.CLASSWISE_EXPANDER, K_CLASSWISE_OPEN)
    if box is None:
        return
    with box:
        st.markdown(texts.CLASSWISE_INTRO)
        mean, per_class = compute.classwise(state.metric_view(loaded, "top_label"), n_bins)
        st.metric("Classwise ECE (mean over classes)", f"{mean:.4f}")
        st.markdown(texts.WORST_CLASSES_TITLE)
        st.dataframe(tables.classwise_frame(per_class, preds.class_names, top=15), hide_index=True)
        st.caption(texts.CLASSWISE_NOT_A_TEST)


def _other_estimators(view: state.MetricView) -> None:
    box = _lazy_expander(texts.ESTIMATORS_EXPANDER, K_ESTIMATORS_OPEN)
    if box is None:
        return
    with box:
        st.markdown(texts.ESTIMATORS_INTRO)
        st.dataframe(tables.conventions_frame(compute.conventions(view)), hide_index=True,
                     key="rel_conventions_table",
                     column_config={"ECE": st.column_config.NumberColumn(format="%.4f")})
        st.caption(texts.ESTIMATORS_CAPTION)


def _corp(loaded: state.Loaded, view: state.MetricView) -> None:
    """The CORP reliability diagram (no bins), the score decomposition and the log loss's split."""
    box = _lazy_expander(texts.CORP_EXPANDER, K_CORP_OPEN)
    if box is None:
        return
    with box:
        st.markdown(texts.CORP_INTRO)
        if view.stats is not None:  # the PAV fit needs the rows: the sample's
            st.caption(texts.server_sample_note(view.rows, view.n, "the CORP part"))
        diagram, brier, log, rows_outside = compute.corp(view)
        st.plotly_chart(figures_corp.corp_figure(diagram, x_title=view.x_title, y_title=view.y_title),
                        key="rel_corp_chart", config={"displaylogo": False})
        st.caption(texts.corp_band_reading(rows_outside, CHANCE_OUTSIDE_SHARE, compute.corp_grid(view)))
        chance = compute.mcb_chance(view)
        st.markdown(texts.corp_decomposition_words(brier, log, view.what, chance["brier"]))
        st.table(tables.score_decomposition_frame(brier, log, chance))
        st.markdown(texts.log_loss_split_words(*compute.log_loss_split(loaded.preds, loaded.key)))


def render() -> None:
    st.title("Reliability")
    loaded = state.current_or_prompt()
    if loaded is None:
        return
    view = state.metric_view(loaded)
    st.markdown(texts.reliability_intro(view.what, loaded.name, view.rows))
    if view.stats is not None:
        st.caption(texts.server_sample_note(view.rows, view.n, texts.RELIABILITY_ON_SAMPLE))
    n_bins = _bins_slider(view)
    _metric_cards(loaded, view, n_bins)
    left, right = st.columns([3, 1], gap="medium")
    with left:
        c = st.columns([2, 2], gap="medium", vertical_alignment="center")
        binning = c[0].segmented_control("Bins", list(BINNINGS), format_func=BINNINGS.get, key=K_BINNING,
                                         default="width", required=True, persist_state="session",
                                         help=texts.BINNING_HELP)
        smooth = c[1].toggle("Smoothed curve with its band", key=K_SMOOTH, persist_state="session",
                             help=texts.SMOOTH_HELP)
        fig = compute.reliability_chart(view, n_bins, binning, smooth)  # shared: never changed here
        st.plotly_chart(fig, key="reliability_chart", config={"displaylogo": False})
        banded = None  # the diagram's bins with consistency bands (equal-width bins only)
        if binning == "mass":
            table = compute.reliability_equal_mass(view, n_bins)
            st.caption(texts.EQUAL_MASS_CAPTION.format(
                ece=float((table["weight"] * table["gap"].abs()).sum()), B=len(table)))
        else:
            banded = compute.reliability(view, n_bins)
            st.caption(texts.bands_caption(banded))
        test = compute.calibration_test(view)
        if test is not None:
            st.markdown(texts.overall_test_sentence(test, banded), help=texts.OVERALL_TEST_HELP)
    with right:
        st.markdown(texts.how_to_read(view.binary_positive))
    _other_estimators(view)
    _corp(loaded, view)
    _classwise(loaded, view, n_bins)
    recal_ui.report_button("rel_dl_report", label="Audit report (HTML)", n_bins=n_bins, help=texts.AUDIT_REPORT_HELP)


render()
