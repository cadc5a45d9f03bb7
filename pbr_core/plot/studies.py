"""Figures of the recalibration studies: the alpha chosen by cross-validation, the test ECE against
the recalibration set size n_re (paper Figure 3), the ECE gap against the KL (paper Figure 2), each
group's test ECE under three strategies, and the methods' test metrics over folds (a comparison).

Builders: the tables of :mod:`pbr_core.experiments` in, ``go.Figure`` out; no formula here.
"""

from __future__ import annotations

from typing import Mapping

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from pbr_core.plot.style import (
    COLORS,
    label_of,
    layout_defaults,
    legend_above_titles,
    method_colors,
    plot_text,
    rgba,
    title_above_legend,
)

TRACE_GAP_POINTS = "ECE gap per fit"
TRACE_BOUND_POINTS = "Corollary 1 bound"
TRACE_CHOSEN = "Chosen α"
TRACE_SCORE = "Cross-validated score"


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
    layout_defaults(fig)
    return fig


# --------------------------------------------------------------------------- n_re sweep
def n_re_sweep_figure(summary: pd.DataFrame, *, labels: Mapping[str, str] | None = None, metric: str = "ece",
                      metric_title: str | None = None, title: str | None = None, height: int = 480) -> go.Figure:
    """Mean test ECE against n_re per method with a ±1 std band over folds, log x (paper Figure 3).

    Parameters
    ----------
    summary : DataFrame
        ``pbr_core.experiments.summarize(sweep_table)`` (columns method, n_re, metric, mean, std, n).
    labels : mapping of method name -> str, optional
        The methods' names in the legend (default: the names as they are).
    metric : str
        Which metric of the summary to draw.
    metric_title : str, optional
        Its name on the axis (default: the label of :data:`pbr_core.evaluation.METRICS`).
    title : str, optional
        A title above the figure.
    """
    if metric_title is None:
        from pbr_core.evaluation import METRICS

        metric_title = METRICS[metric].label if metric in METRICS else metric
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
                                 mode="lines", fill="toself", fillcolor=rgba(colors[m], 0.15), line=dict(width=0),
                                 hoverinfo="skip", showlegend=False, legendgroup=m, name=f"{m} band"))
        fig.add_trace(go.Scatter(
            name=label_of(labels, m), legendgroup=m, x=x, y=mean, mode="lines+markers",
            line=dict(color=colors[m], width=2), marker=dict(size=7), customdata=np.column_stack([std, d["n"]]),
            hovertemplate=f"{label_of(labels, m)}<br>n_re = %{{x:,}}<br>mean test {metric_title} "
                          "%{y:.4f} ± %{customdata[0]:.4f} (%{customdata[1]} folds)<extra></extra>",
        ))
    ticks = sorted(set(t["n_re"].astype(int)))
    fig.update_xaxes(type="log", title_text="Recalibration set size n_re (log scale)", tickvals=ticks,
                     ticktext=[f"{v:,}" for v in ticks], minor=dict(showgrid=False))
    fig.update_yaxes(title_text=f"Test {metric_title} (mean ± std over folds)")
    fig.update_layout(height=height)
    layout_defaults(fig)
    if title:
        title_above_legend(fig, title, legend_rows=-(-len(methods) // 4))
    return fig


# --------------------------------------------------------------------------- KL vs ECE gap
#: Legend name of the fits whose KL is extreme (a front end may pass its own words).
TRACE_EXTREME = "Extreme KL (drifted from the prior)"


def kl_gap_figure(table: pd.DataFrame, *, eps: float = 0.05, height: int = 480,
                  n_classes: int | None = None, log_kl: bool | None = None, extreme_name: str = TRACE_EXTREME,
                  title: str | None = None) -> go.Figure:
    """Left: ECE gap against KL, one point per (alpha, fold), coloured by alpha (paper Figure 2).
    Right: the same KL against Corollary 1's bound on the expected gap (log y), the gaps for scale.

    ``table`` is ``KLGapResult.table`` (columns alpha, fold, kl, gap, bound, ...); rows of failed
    fits (NaN KL or gap) are left out. With ``n_classes``, fits whose KL is extreme
    (``pbr_core.experiments.extreme_kl``: above n_re·ln K, a posterior that drifted from its prior
    at alpha = 0) are drawn as a separate ✕ trace and the KL axes are logarithmic, so that one such
    fit (KL 1.6e8) does not squash every other point against the axis. ``log_kl`` True or False
    forces the KL axes' scale (default None: logarithmic when a fit's KL is extreme); on a log axis
    a KL of 0 (a fit at its prior) is placed at 1e-12, its hover keeping the value. ``extreme_name``
    names the extreme fits' trace; ``title`` goes above the figure.
    """
    t = table.dropna(subset=["kl", "gap"])
    extreme = np.zeros(len(t), dtype=bool)
    if n_classes is not None and len(t):
        from pbr_core.experiments import extreme_kl

        extreme = extreme_kl(t["kl"], t["n_re"], n_classes)
    log_kl = bool(extreme.any()) if log_kl is None else bool(log_kl)
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
            name=extreme_name, x=drifted["kl_shown"], y=drifted["gap"], mode="markers",
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
        fig.update_xaxes(type="log", exponentformat="power", row=1, col=1)
        fig.update_xaxes(type="log", exponentformat="power", row=1, col=2)
    fig.update_yaxes(title_text="|ECE(test) − ECE(recalibration set)|", rangemode="tozero", row=1, col=1)
    fig.update_yaxes(type="log", dtick=1, exponentformat="power", title_text="log scale", row=1, col=2)
    fig.add_hline(y=1.0, line=dict(color="#999999", width=1, dash="dash"), row=1, col=2,
                  annotation_text="1 (vacuous above)", annotation_position="bottom right")
    fig.update_layout(height=height)
    layout_defaults(fig)
    legend_above_titles(fig)
    if title:
        title_above_legend(fig, title, panel_titles=True)
    return fig


GROUP_GAP_COLORS = {"uncalibrated": "#9e9e9e", "one for everyone": "#3b6fb6", "one per group": "#e08a1e"}


def group_gap_figure(per_group: pd.DataFrame, height: int = 460) -> go.Figure:
    """Each group's test ECE (mean over folds, whisker one std) for the three strategies side by side
    (``pbr_core.experiments.group_gaps.group_gap_summary``'s first table)."""
    fig = go.Figure()
    for strategy, color in GROUP_GAP_COLORS.items():
        t = per_group[per_group["strategy"] == strategy]
        fig.add_trace(go.Bar(name=strategy.capitalize(), x=[plot_text(g) for g in t["group"]], y=t["mean"],
                             error_y=dict(type="data", array=t["std"].fillna(0).to_numpy(), thickness=1.2),
                             marker=dict(color=color),
                             hovertemplate="%{x}<br>test ECE %{y:.4f} (mean over folds)<extra>" + strategy + "</extra>"))
    fig.update_layout(barmode="group", height=height)
    fig.update_yaxes(title_text="Test ECE of the group", rangemode="tozero")
    fig.update_xaxes(title_text="Group")
    layout_defaults(fig)
    return fig



# --------------------------------------------------------------------------- a comparison of methods
TRACE_FOLDS = "Each fold"
TRACE_MEAN = "Mean ± std over folds"


def _rows(*columns) -> np.ndarray:
    """Hover data of text and numbers side by side: an object array keeps each number a number (a
    column_stack would turn them all into text, which plotly's number formats do not read)."""
    out = np.empty((len(columns[0]), len(columns)), dtype=object)
    for j, col in enumerate(columns):
        out[:, j] = list(col)
    return out


def comparison_figure(table: pd.DataFrame, *, metric: str = "ece", labels: Mapping[str, str] | None = None,
                      metric_title: str | None = None, title: str | None = None, height: int = 420) -> go.Figure:
    """Each method's test metric on every fold (a point each) and its mean ± std over the folds.

    Parameters
    ----------
    table : DataFrame
        :func:`pbr_core.experiments.compare`'s per-fold table (columns method, fold, the metric);
        failed fits (NaN metric) are left out.
    metric : str
        The column drawn (``"ece"``, ``"accuracy"``, ``"nll"``, ``"brier"``).
    labels : mapping of method name -> str, optional
        The methods' names on the axis (default: the names as they are).
    metric_title : str, optional
        The metric's name on the axis (default: the label of :data:`pbr_core.evaluation.METRICS`).
    title : str, optional
        A title above the figure.

    Returns
    -------
    plotly.graph_objects.Figure
        Methods in the table's order on x (ticks 0, 1, ... named after them; the folds drawn just left
        of each, the mean just right); the means and standard deviations are those of
        :func:`pbr_core.experiments.summarize` (sample std, ddof = 1).
    """
    from pbr_core.evaluation import METRICS
    from pbr_core.experiments.summary import summarize

    if metric not in table.columns:
        raise ValueError(f"Expected a compare table with a column {metric!r}, but its columns are "
                         f"{list(table.columns)}.")
    metric_title = metric_title or (METRICS[metric].label if metric in METRICS else metric)
    ok = table.dropna(subset=[metric])
    methods = list(dict.fromkeys(ok["method"]))
    summ = summarize(ok, metrics=[metric], by=["method"]).set_index("method")
    names = [label_of(labels, m) for m in methods]
    at = {m: i for i, m in enumerate(methods)}
    # A numeric axis with the methods' names as ticks: each method's folds just left of its place, the
    # mean just right of it, so that neither hides the other.
    fold_x = np.array([at[m] for m in ok["method"]], dtype=float) - 0.12
    fig = go.Figure()
    fig.add_trace(go.Scatter(
        name=TRACE_FOLDS, x=fold_x, y=ok[metric], mode="markers",
        marker=dict(size=7, color=COLORS["counts"], line=dict(color=COLORS["accuracy"], width=1)),
        customdata=_rows([label_of(labels, m) for m in ok["method"]], ok["fold"].to_numpy() + 1),
        hovertemplate="%{customdata[0]}<br>fold %{customdata[1]}: " + metric_title + " %{y:.4f}<extra></extra>"))
    mean = summ.loc[methods, "mean"].to_numpy(float)
    std = np.nan_to_num(summ.loc[methods, "std"].to_numpy(float))
    fig.add_trace(go.Scatter(
        name=TRACE_MEAN, x=np.arange(len(methods)) + 0.12, y=mean, mode="markers",
        marker=dict(symbol="diamond", size=12, color=COLORS["ece"]),
        error_y=dict(type="data", array=std, color=COLORS["ece"], thickness=1.5, width=6),
        customdata=_rows(names, std, summ.loc[methods, "n"].to_numpy()),
        hovertemplate=("%{customdata[0]}<br>mean " + metric_title + " %{y:.4f} ± %{customdata[1]:.4f} "
                       "(%{customdata[2]} folds)<extra></extra>")))
    fig.update_xaxes(title_text="Method", tickvals=list(range(len(methods))), ticktext=names,
                     range=[-0.5, len(methods) - 0.5], showgrid=False, zeroline=False)
    fig.update_yaxes(title_text=f"Test {metric_title}", rangemode="tozero")
    fig.update_layout(height=height)
    layout_defaults(fig)
    if title:
        title_above_legend(fig, title, legend_rows=1)
    return fig
