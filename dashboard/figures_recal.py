"""Pure figure and table builders of the recalibration pages (PBR, Compare, Generalization).

Like :mod:`dashboard.figures`: numbers computed by ``pbr_core`` in, ``go.Figure`` (or a pandas
Styler) out, no Streamlit and no formula. The same objects go to the page and to the HTML report.
A separate module because figures.py holds the calibration pages' two large builders already.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Mapping, Sequence

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots
from pandas.io.formats.style import Styler

from dashboard import texts
from pbr_core.evaluation import EVALUATION_METRICS
from dashboard.figures import COLORS, _layout_defaults, bars_name, gap_traces, reliability_figure

if TYPE_CHECKING:
    from dashboard import runs

TRACE_DIAGONAL = "Perfect calibration"
TRACE_GAP_POINTS = "ECE gap per fit"
TRACE_BOUND_POINTS = "Corollary 1 bound"
TRACE_CHOSEN = "Chosen α"
TRACE_SCORE = "Cross-validated score"

#: One colour per method, stable across figures (tab10 without the grey).
PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#bcbd22",
           "#17becf", "#393b79", "#637939", "#8c6d31", "#843c39", "#7b4173", "#3182bd")

def method_colors(methods: list[str]) -> dict[str, str]:
    return {m: PALETTE[i % len(PALETTE)] for i, m in enumerate(methods)}


def _label(labels: Mapping[str, str] | None, key: str) -> str:
    """A method's label, or a group's name as it is (a name from the user's file), as plotly text:
    its ``<``, ``>`` and ``&`` shown as the characters, never read as markup (texts.plot_text)."""
    return texts.plot_text((labels or {}).get(key, key))


def _rgba(hex_color: str, alpha: float) -> str:
    h = hex_color.lstrip("#")
    r, g, b = (int(h[i:i + 2], 16) for i in (0, 2, 4))
    return f"rgba({r}, {g}, {b}, {alpha})"


def _legend_above_titles(fig: go.Figure) -> None:
    """Subplot figures: the legend at the top of the figure, above the panel titles, not on them."""
    fig.update_layout(margin=dict(t=110), legend=dict(y=0.985, yref="container", yanchor="top"))


# --------------------------------------------------------------------------- reliability, many methods
def reliability_grid_figure(
    tables: Mapping[str, pd.DataFrame],
    *,
    labels: Mapping[str, str] | None = None,
    ece: Mapping[str, float] | None = None,
    x_title: str = "Confidence",
    y_title: str = "Accuracy",
    cols: int = 3,
    height_per_row: int = 300,
    binary_positive: bool = False,
) -> go.Figure:
    """Small multiples: one reliability diagram per method (accuracy bars, gap boxes, diagonal).

    ``tables`` maps a method name to its ``pbr_core.reliability_diagram`` table; ``ece`` (optional)
    puts each method's ECE in its panel title. Bars and gap boxes are drawn and named as in
    :func:`dashboard.figures.reliability_figure` (``binary_positive``: p(y=1) wording).
    """
    names = list(tables)
    if not names:
        raise ValueError("Expected at least one reliability table, but got none.")
    cols = max(1, min(cols, len(names)))
    rows = math.ceil(len(names) / cols)
    titles = [_label(labels, m) + (f" · ECE {ece[m]:.4f}" if ece and m in ece else "") for m in names]
    fig = make_subplots(rows=rows, cols=cols, subplot_titles=titles, shared_yaxes=True,
                        horizontal_spacing=0.04, vertical_spacing=0.16 if rows > 1 else 0.1)
    for i, m in enumerate(names):
        t = tables[m]
        r, c = i // cols + 1, i % cols + 1
        centre = ((t["lower"] + t["upper"]) / 2).to_numpy(float)
        width = (t["upper"] - t["lower"]).to_numpy(float) * 0.92
        acc = t["accuracy"].to_numpy(float)
        conf = t["mean_confidence"].to_numpy(float)
        first = i == 0
        fig.add_trace(go.Bar(
            name=bars_name(y_title), legendgroup="acc", showlegend=first, x=centre, y=acc, width=width,
            marker=dict(color=COLORS["accuracy"], line=dict(width=0)),
            customdata=np.column_stack([t["count"].to_numpy(), conf]),
            hovertemplate=f"{_label(labels, m)}<br>{y_title} %{{y:.3f}}<br>mean confidence "
                          "%{customdata[1]:.3f}<br>%{customdata[0]:,} samples<extra></extra>",
        ), row=r, col=c)
        for tr in gap_traces(centre, width, acc, conf, binary_positive=binary_positive, showlegend=first):
            fig.add_trace(tr, row=r, col=c)
        fig.add_trace(go.Scatter(
            name=TRACE_DIAGONAL, legendgroup="diag", showlegend=first, x=[0, 1], y=[0, 1], mode="lines",
            line=dict(color=COLORS["diagonal"], dash="dash", width=1.2), hoverinfo="skip",
        ), row=r, col=c)
        fig.update_xaxes(range=[0, 1], row=r, col=c, title_text=x_title if r == rows else None)
        fig.update_yaxes(range=[0, 1.05], row=r, col=c, title_text=y_title if c == 1 else None)
    fig.update_layout(barmode="overlay", bargap=0, height=height_per_row * rows + 110)
    _layout_defaults(fig)
    _legend_above_titles(fig)
    fig.update_annotations(font_size=13)
    return fig


def reliability_overlay_figure(
    tables: Mapping[str, pd.DataFrame],
    *,
    labels: Mapping[str, str] | None = None,
    x_title: str = "Confidence",
    y_title: str = "Accuracy",
    height: int = 520,
) -> go.Figure:
    """Every method's reliability curve in one figure: (mean confidence, accuracy) of its non-empty bins."""
    names = list(tables)
    colors = method_colors(names)
    fig = go.Figure()
    fig.add_trace(go.Scatter(name=TRACE_DIAGONAL, x=[0, 1], y=[0, 1], mode="lines",
                             line=dict(color=COLORS["diagonal"], dash="dash", width=1.5), hoverinfo="skip"))
    for m in names:
        t = tables[m]
        t = t[t["count"] > 0]
        fig.add_trace(go.Scatter(
            name=_label(labels, m), x=t["mean_confidence"], y=t["accuracy"], mode="lines+markers",
            line=dict(color=colors[m], width=2), marker=dict(size=7),
            customdata=t["count"].to_numpy(),
            hovertemplate=f"{_label(labels, m)}<br>mean confidence %{{x:.3f}}<br>{y_title} %{{y:.3f}}"
                          "<br>%{customdata:,} samples<extra></extra>",
        ))
    fig.update_xaxes(range=[0, 1], title_text=x_title)
    fig.update_yaxes(range=[0, 1.02], title_text=y_title)
    fig.update_layout(height=height)
    _layout_defaults(fig)
    return fig


# --------------------------------------------------------------------------- alpha selection
def alpha_selection_figure(scores: pd.DataFrame, chosen: float, *, score_name: str = "held-out ECE",
                           height: int = 360) -> go.Figure:
    """Cross-validated score against alpha (mean ± std over the CV folds), the chosen alpha marked.

    ``scores`` has columns ``alpha``, ``mean`` and optionally ``std``.
    """
    t = scores.sort_values("alpha")
    err = t["std"].to_numpy(float) if "std" in t else None
    fig = go.Figure()
    fig.add_trace(go.Scatter(
        name=TRACE_SCORE, x=t["alpha"], y=t["mean"], mode="lines+markers",
        line=dict(color=COLORS["ece"], width=2), marker=dict(size=8),
        error_y=dict(type="data", array=err, color="#555555", thickness=1.2, width=3) if err is not None else None,
        hovertemplate="α = %{x:g}<br>" + score_name + " %{y:.4f}<extra></extra>",
    ))
    row = t[np.isclose(t["alpha"].to_numpy(float), chosen)]
    if len(row):
        fig.add_trace(go.Scatter(
            name=f"{TRACE_CHOSEN} = {chosen:g}", x=row["alpha"], y=row["mean"], mode="markers",
            marker=dict(size=16, color="rgba(0,0,0,0)", line=dict(color=COLORS["minimising"], width=3)),
            hovertemplate=f"chosen α = {chosen:g}<extra></extra>",
        ))
    fig.update_xaxes(title_text="α (weight of the KL term)")
    fig.update_yaxes(title_text=f"Cross-validated {score_name}")
    fig.update_layout(height=height)
    _layout_defaults(fig)
    return fig


# --------------------------------------------------------------------------- n_re sweep
def n_re_sweep_figure(summary: pd.DataFrame, *, labels: Mapping[str, str] | None = None, metric: str = "ece",
                      height: int = 480) -> go.Figure:
    """Mean test ECE against n_re per method with a ±1 std band over folds, log x (paper Figure 3).

    ``summary`` is ``pbr_core.experiments.summarize(sweep_table)`` (columns method, n_re, metric,
    mean, std, n).
    """
    t = summary[summary["metric"] == metric]
    methods = list(dict.fromkeys(t["method"]))
    colors = method_colors(methods)
    fig = go.Figure()
    for m in methods:
        d = t[t["method"] == m].sort_values("n_re")
        x = d["n_re"].to_numpy(float)
        mean = d["mean"].to_numpy(float)
        std = np.nan_to_num(d["std"].to_numpy(float))
        # The band is cut at 0: an ECE is never negative (presentation only).
        fig.add_trace(go.Scatter(x=np.concatenate([x, x[::-1]]),
                                 y=np.concatenate([mean + std, np.clip(mean - std, 0.0, None)[::-1]]),
                                 mode="lines", fill="toself", fillcolor=_rgba(colors[m], 0.15), line=dict(width=0),
                                 hoverinfo="skip", showlegend=False, legendgroup=m, name=f"{m} band"))
        fig.add_trace(go.Scatter(
            name=_label(labels, m), legendgroup=m, x=x, y=mean, mode="lines+markers",
            line=dict(color=colors[m], width=2), marker=dict(size=7), customdata=np.column_stack([std, d["n"]]),
            hovertemplate=f"{_label(labels, m)}<br>n_re = %{{x:,}}<br>mean test {texts.metric_title(metric)} "
                          "%{y:.4f} ± %{customdata[0]:.4f} (%{customdata[1]} folds)<extra></extra>",
        ))
    ticks = sorted(set(t["n_re"].astype(int)))
    fig.update_xaxes(type="log", title_text="Recalibration set size n_re (log scale)", tickvals=ticks,
                     ticktext=[f"{v:,}" for v in ticks], minor=dict(showgrid=False))
    fig.update_yaxes(title_text=f"Test {texts.metric_title(metric)} (mean ± std over folds)")
    fig.update_layout(height=height)
    _layout_defaults(fig)
    return fig


# --------------------------------------------------------------------------- KL vs ECE gap
def kl_gap_figure(table: pd.DataFrame, *, eps: float = 0.05, height: int = 480,
                  n_classes: int | None = None) -> go.Figure:
    """Left: ECE gap against KL, one point per (alpha, fold), coloured by alpha (paper Figure 2).
    Right: the same KL against Corollary 1's bound on the expected gap (log y), the gaps for scale.

    ``table`` is ``KLGapResult.table`` (columns alpha, fold, kl, gap, bound, ...); rows of failed
    fits (NaN KL or gap) are left out. With ``n_classes``, fits whose KL is extreme
    (``pbr_core.experiments.extreme_kl``: above n_re·ln K, a posterior that drifted from its prior
    at alpha = 0) are drawn as a separate ✕ trace and the KL axes are logarithmic, so that one such
    fit (KL 1.6e8) does not squash every other point against the axis.
    """
    t = table.dropna(subset=["kl", "gap"])
    extreme = np.zeros(len(t), dtype=bool)
    if n_classes is not None and len(t):
        from pbr_core.experiments import extreme_kl

        extreme = extreme_kl(t["kl"], t["n_re"], n_classes)
    log_kl = bool(extreme.any())
    if log_kl:  # a log axis cannot place a KL of 0 (a fit at the prior): at 1e-12, the hover keeps the value
        t = t.assign(kl_shown=t["kl"].clip(lower=1e-12))
    else:
        t = t.assign(kl_shown=t["kl"])
    drifted, t = t[extreme], t[~extreme]
    # Wide spacing: the alpha colour bar sits between the panels, left of the right panel's axis.
    fig = make_subplots(rows=1, cols=2, column_widths=[0.58, 0.42], horizontal_spacing=0.18,
                        subplot_titles=("ECE gap against KL", f"Corollary 1 bound ({1 - eps:.0%}) against KL"))
    alphas = t["alpha"].to_numpy(float)
    custom = np.column_stack([alphas, t["fold"].to_numpy() + 1, t["ece_re"], t["ece_te"], t["bound"], t["kl"]])
    cmin, cmax = (float(alphas.min()), float(alphas.max())) if alphas.size else (0.0, 1.0)
    fig.add_trace(go.Scatter(
        name=TRACE_GAP_POINTS, x=t["kl_shown"], y=t["gap"], mode="markers",
        marker=dict(size=10, color=alphas, colorscale="Viridis", cmin=cmin, cmax=cmax if cmax > cmin else cmin + 1,
                    line=dict(color="#333333", width=0.6),
                    colorbar=dict(title=dict(text="α"), x=0.49, xanchor="left", len=0.8, thickness=14)),
        customdata=custom,
        hovertemplate=("α = %{customdata[0]:g}, fold %{customdata[1]}<br>KL %{customdata[5]:.3g}<br>gap %{y:.4f} "
                       "(recal. ECE %{customdata[2]:.4f}, test ECE %{customdata[3]:.4f})"
                       "<br>Corollary 1 bound %{customdata[4]:.3f}<extra></extra>"),
    ), row=1, col=1)
    if len(drifted):
        fig.add_trace(go.Scatter(
            name=texts.KL_GAP_EXTREME_TRACE, x=drifted["kl_shown"], y=drifted["gap"], mode="markers",
            marker=dict(symbol="x", size=12, color="#c62828", line=dict(color="#7f0000", width=1)),
            customdata=np.column_stack([drifted["alpha"], drifted["fold"].to_numpy() + 1, drifted["kl"]]),
            hovertemplate=("α = %{customdata[0]:g}, fold %{customdata[1]}<br>KL %{customdata[2]:.3g} (extreme)"
                           "<br>gap %{y:.4f}<extra></extra>"),
        ), row=1, col=1)
    order = np.argsort(t["kl"].to_numpy(float))
    fig.add_trace(go.Scatter(
        name=TRACE_BOUND_POINTS, x=t["kl_shown"].to_numpy(float)[order], y=t["bound"].to_numpy(float)[order],
        mode="lines+markers", line=dict(color=COLORS["minimising"], dash="dot", width=1.5),
        marker=dict(symbol="diamond-open", size=8), hovertemplate="KL %{x:.3g}<br>bound %{y:.3f}<extra></extra>",
    ), row=1, col=2)
    fig.add_trace(go.Scatter(
        name="ECE gap (same fits)", x=t["kl_shown"], y=t["gap"].clip(lower=1e-4), mode="markers",
        marker=dict(size=6, color=COLORS["accuracy"], opacity=0.7), hovertemplate="KL %{x:.3g}<br>gap %{y:.4f}<extra></extra>",
    ), row=1, col=2)
    fig.update_xaxes(title_text="KL(ρ‖π) of the fitted posterior" + (" (log scale)" if log_kl else ""), row=1, col=1)
    fig.update_xaxes(title_text="KL(ρ‖π)" + (" (log scale)" if log_kl else ""), row=1, col=2)
    if log_kl:
        fig.update_xaxes(type="log", row=1, col=1)
        fig.update_xaxes(type="log", row=1, col=2)
    fig.update_yaxes(title_text="|ECE(test) − ECE(recalibration set)|", rangemode="tozero", row=1, col=1)
    fig.update_yaxes(type="log", dtick=1, title_text="log scale", row=1, col=2)
    fig.add_hline(y=1.0, line=dict(color="#999999", width=1, dash="dash"), row=1, col=2,
                  annotation_text="1 (vacuous above)", annotation_position="bottom right")
    fig.update_layout(height=height)
    _layout_defaults(fig)
    _legend_above_titles(fig)
    return fig


# --------------------------------------------------------------------------- tables
#: Columns whose best value is highlighted (a fastest fit or smallest KL is not "best" for the user).
HIGHLIGHTED = EVALUATION_METRICS


def summary_styler(summary_text: pd.DataFrame, best: pd.DataFrame, *, labels: Mapping[str, str] | None = None,
                   highlighted: tuple[str, ...] = HIGHLIGHTED) -> Styler:
    """The "mean ± std" table (``pbr_core.experiments.summary_table``) with the best cell per column
    highlighted (``best_mask``): bold on a green background, in the ``highlighted`` metric columns."""
    shown = summary_text.copy()
    mask = best.reindex(index=shown.index, columns=shown.columns, fill_value=False).fillna(False).astype(bool)
    mask.loc[:, [c for c in mask.columns if c not in highlighted]] = False
    shown.index = [_label(labels, m) for m in shown.index]
    mask.index = shown.index
    shown.columns = [texts.metric_title(c) for c in shown.columns]
    mask.columns = shown.columns
    shown.index.name = "method"
    style = np.where(mask.to_numpy(), "font-weight: 700; background-color: #d8f0dc; color: #14532d", "")
    return shown.style.apply(lambda _: pd.DataFrame(style, index=shown.index, columns=shown.columns), axis=None)


def groups_overlay_figure(diagrams: Mapping[str, pd.DataFrame], small: Sequence[str], order: Sequence[str], *,
                          x_title: str, y_title: str, most: int = 12) -> go.Figure:
    """The groups' reliability curves overlaid: the groups with enough rows (all if none has), at most
    ``most`` of them in ``order`` (largest first)."""
    keep = [g for g in order if g in diagrams and g not in set(small)] or [g for g in order if g in diagrams]
    return reliability_overlay_figure({g: diagrams[g] for g in keep[:most]}, x_title=x_title, y_title=y_title)


GROUP_GAP_COLORS = {"uncalibrated": "#9e9e9e", "one for everyone": "#3b6fb6", "one per group": "#e08a1e"}


def group_gap_figure(per_group: pd.DataFrame, height: int = 460) -> go.Figure:
    """Each group's test ECE (mean over folds, whisker one std) for the three strategies side by side
    (``pbr_core.experiments.group_gaps.group_gap_summary``'s first table)."""
    fig = go.Figure()
    for strategy, color in GROUP_GAP_COLORS.items():
        t = per_group[per_group["strategy"] == strategy]
        fig.add_trace(go.Bar(name=strategy.capitalize(), x=[texts.plot_text(g) for g in t["group"]], y=t["mean"],
                             error_y=dict(type="data", array=t["std"].fillna(0).to_numpy(), thickness=1.2),
                             marker=dict(color=color),
                             hovertemplate="%{x}<br>test ECE %{y:.4f} (mean over folds)<extra>" + strategy + "</extra>"))
    fig.update_layout(barmode="group", height=height)
    fig.update_yaxes(title_text="Test ECE of the group", rangemode="tozero")
    fig.update_xaxes(title_text="Group")
    _layout_defaults(fig)
    return fig


# --------------------------------------------------------------------------- a job's result, on its page and in the report
def pbr_reliability_figures(result: runs.PBRResult | runs.ApplyResult, binary_positive: bool, ece_name: str = "test ECE",
                            method: str | None = None) -> tuple[go.Figure, go.Figure]:
    """Reliability diagrams before and after of a result with ``before`` / ``after`` metrics and
    ``reliability_before`` / ``reliability_after`` tables (PBR page, Fit & apply page)."""
    b, a = result.before["ece"], result.after["ece"]
    method = method or texts.method_label(result.settings.method)
    x_title, y_title = texts.axis_titles(binary_positive)
    common = dict(x_title=x_title, y_title=y_title, binary_positive=binary_positive, height=520)
    return (reliability_figure(result.reliability_before,
                               title=f"Before: uncalibrated · {ece_name} {b:.4f}", **common),
            reliability_figure(result.reliability_after,
                               title=f"After: {method} · {ece_name} {a:.4f}", **common))


def compare_figures(result: runs.CompareResult, binary_positive: bool, multiclass: bool) -> list[tuple[str, go.Figure]]:
    if not result.diagrams:
        return []
    x_title, y_title = texts.axis_titles(binary_positive)
    labels = {m: texts.method_label(m, multiclass) for m in result.diagrams}
    t0 = result.table[result.table["fold"] == 0].set_index("method")["ece"]
    return [
        (texts.GRID_CAPTION, reliability_grid_figure(result.diagrams, labels=labels, ece=t0.to_dict(),
                                                     x_title=x_title, y_title=y_title,
                                                     binary_positive=binary_positive)),
        (texts.OVERLAY_CAPTION, reliability_overlay_figure(result.diagrams, labels=labels,
                                                           x_title=x_title, y_title=y_title)),
    ]


def sweep_figure(result: runs.SweepResult) -> go.Figure:
    """The n_re sweep of a result: :func:`n_re_sweep_figure` of its summary, methods in the page's words."""
    from pbr_core.experiments import summarize

    multiclass = result.kind == "multiclass"
    summ = summarize(result.table, metrics=["ece"], by=["method", "n_re"])
    labels = {m: texts.method_label(m, multiclass) for m in result.table["method"].unique()}
    return n_re_sweep_figure(summ, labels=labels)


def group_diagram_figure(table: pd.DataFrame, *, x_title: str, y_title: str, binary_positive: bool) -> go.Figure:
    """One group's reliability diagram with its consistency bands (the Reliability page's figure)."""
    from dashboard.figures import reliability_figure

    return reliability_figure(table, x_title=x_title, y_title=y_title, binary_positive=binary_positive, height=520)
