"""Reliability diagrams: one set of bins (with its consistency bands and a smoothed curve), many
methods side by side or overlaid, the groups of a :class:`~pbr_core.groups.GroupReport` overlaid.

Builders: a :func:`pbr_core.reliability_diagram` table in, ``go.Figure`` out; no formula here
(scikit-learn's split of ``calibration_curve`` and ``CalibrationDisplay``). Trace names are module
constants so that tests and front ends find traces by name.
"""

from __future__ import annotations

import math
from typing import Mapping, Sequence

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from pbr_core.plot.style import COLORS, label_of, layout_defaults, legend_above_titles, method_colors

#: Axis titles of a top-label diagram and of a binary diagram measured on p(y=1) (the library's
#: neutral defaults; a front end passes its own words).
AXIS_TITLES_TOP_LABEL = ("Confidence (probability of the predicted class)", "Accuracy")
AXIS_TITLES_POSITIVE = ("Predicted probability p(y=1)", "Observed frequency of y = 1")

# Reliability diagram. The bars are named after the y-axis ("Accuracy per bin", or "Observed
# frequency of y = 1 per bin" for binary data measured on p(y=1)); the two gap traces after what
# they show (:func:`gap_names`).
TRACE_ACCURACY = "Accuracy per bin"
TRACE_OVER = "Over-confidence gap"
TRACE_UNDER = "Under-confidence gap"
TRACE_OVER_BINARY = "Over-prediction gap"
TRACE_UNDER_BINARY = "Under-prediction gap"
TRACE_DIAGONAL = "Perfect calibration"
TRACE_COUNTS = "Samples per bin"

#: Show the count as text on every histogram bar only up to this many bins (beyond it the numbers
#: overlap and become noise; the hover still shows them).
MAX_BINS_WITH_TEXT = 30

_RELIABILITY_COLUMNS = ("lower", "upper", "count", "mean_confidence", "accuracy", "gap", "ci_low", "ci_high")


def bars_name(y_title: str) -> str:
    """Legend name of the reliability bars: the y-axis wording, so legend and axis say the same."""
    return f"{y_title} per bin"


def gap_names(binary_positive: bool = False) -> tuple[str, str]:
    """(over, under) legend names of the gap boxes: confidence words, or p(y=1) words for binary data."""
    return (TRACE_OVER_BINARY, TRACE_UNDER_BINARY) if binary_positive else (TRACE_OVER, TRACE_UNDER)


def gap_traces(centre: np.ndarray, width: np.ndarray, acc: np.ndarray, conf: np.ndarray, *,
               binary_positive: bool = False, customdata: np.ndarray | None = None,
               hover: tuple[str, str] | None = None, showlegend: bool = True) -> tuple[go.Bar, go.Bar]:
    """The gap between each bin's bar and its mean confidence, as two traces that never mix colours.

    Over-confidence (mean confidence above the bar) is a red box standing ON the bar, from its top up
    to the mean confidence. Under-confidence (mean confidence below the bar top) lies INSIDE the bar,
    from the mean confidence up to its top: a translucent red box there turned the blue purple, so
    it is drawn as an orange outline with orange hatching and no fill, and the blue stays blue.
    A bin has at most one of the two (NaN draws nothing). The boxes' heights weighted by the
    bins' shares of the rows add up to the ECE.
    """
    over, under = gap_names(binary_positive)
    gap_over = np.where(conf > acc, conf - acc, np.nan)
    gap_under = np.where(conf < acc, acc - conf, np.nan)
    hover = hover or (None, None)
    common = dict(x=centre, width=width, customdata=customdata, showlegend=showlegend)
    return (
        go.Bar(name=over, y=gap_over, base=acc, legendgroup="over",
               marker=dict(color="rgba(214, 39, 40, 0.30)", line=dict(color=COLORS["gap"], width=1.2)),
               hovertemplate=hover[0], hoverinfo=None if hover[0] else "skip", **common),
        go.Bar(name=under, y=gap_under, base=conf, legendgroup="under",
               marker=dict(color="rgba(0, 0, 0, 0)", line=dict(color=COLORS["under"], width=2),
                           pattern=dict(shape="/", fgcolor=COLORS["under"], bgcolor="rgba(0, 0, 0, 0)",
                                        fillmode="overlay", size=7, solidity=0.25)),
               hovertemplate=hover[1], hoverinfo=None if hover[1] else "skip", **common),
    )


def reliability_figure(
    table: pd.DataFrame,
    *,
    x_title: str = "Confidence (probability of the predicted class)",
    y_title: str = "Accuracy",
    title: str | None = None,
    height: int = 620,
    binary_positive: bool = False,
    smooth: pd.DataFrame | None = None,
    bands: bool = True,
) -> go.Figure:
    """Reliability diagram with a confidence histogram below it on a shared x-axis.

    Parameters
    ----------
    table : DataFrame
        The per-bin statistics of :func:`pbr_core.reliability_diagram` (columns ``lower``,
        ``upper``, ``count``, ``mean_confidence``, ``accuracy``, ``gap``, ``ci_low``, ``ci_high``).
        Empty bins (count 0, NaN statistics) draw nothing.
    x_title, y_title : str
        Axis titles; binary data measured on p(y=1) says "Predicted p(y=1)" / "Observed frequency of y=1".
        The bars' legend name is ``bars_name(y_title)``, so the legend uses the axis's words.
    binary_positive : bool
        Binary data measured on p(y=1): the gap boxes are called over- / under-prediction.
    smooth : DataFrame, optional
        A smoothed reliability curve (:func:`pbr_core.estimators.smooth_reliability`: ``t``,
        ``observed``, ``band_low``, ``band_high``, ``sigma``), drawn over the bars with its pointwise
        95 % interval (for the smoothed curve, not the true one), where the confidences have some density.
    bands : bool
        Draw each bin's consistency band (columns ``band_low``, ``band_high`` of the table, when it
        has them): where its bar would end at least 90 % of the time if the model were calibrated,
        with the bars that end outside it marked (:func:`band_traces`).

    Returns
    -------
    plotly.graph_objects.Figure
        Row 1: accuracy bars with Clopper-Pearson interval error bars, the gap from the accuracy to the bin's
        mean confidence (the bar's share of the ECE; :func:`gap_traces`: red boxes on the bar where
        over-confident, orange hatched outlines inside it where under-confident), and the diagonal.
        Row 2: the number of samples per bin (text on the bars when B <= ``MAX_BINS_WITH_TEXT``,
        always in the hover).
    """
    missing = [c for c in _RELIABILITY_COLUMNS if c not in table.columns]
    if missing:
        raise ValueError(f"Expected the columns of pbr_core.reliability_diagram, but {missing} are missing.")
    lower = table["lower"].to_numpy(dtype=float)
    upper = table["upper"].to_numpy(dtype=float)
    centre = (lower + upper) / 2.0
    width = upper - lower
    count = table["count"].to_numpy(dtype=np.int64)
    acc = table["accuracy"].to_numpy(dtype=float)
    conf = table["mean_confidence"].to_numpy(dtype=float)
    gap = table["gap"].to_numpy(dtype=float)
    ci_lo = table["ci_low"].to_numpy(dtype=float)
    ci_hi = table["ci_high"].to_numpy(dtype=float)
    n = int(count.sum())
    share = count / n if n else np.zeros_like(count, dtype=float)
    # One row of hover data per bin, shared by the bars of both rows.
    custom = np.column_stack([lower, upper, count, conf, acc, ci_lo, ci_hi, gap, share])

    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, row_heights=[0.72, 0.28], vertical_spacing=0.04)
    hover_bin = "Bin (%{customdata[0]:.3f}, %{customdata[1]:.3f}]<br>%{customdata[2]:,} samples"
    fig.add_trace(go.Bar(
        name=bars_name(y_title), x=centre, y=acc, width=width * 0.92,
        marker=dict(color=COLORS["accuracy"], line=dict(width=0)),
        error_y=dict(type="data", symmetric=False, array=ci_hi - acc, arrayminus=acc - ci_lo,
                     color="#333333", thickness=1.2, width=2),
        customdata=custom,
        hovertemplate=(hover_bin + "<br>" + y_title + " %{customdata[4]:.3f} "
                       "(95% Clopper-Pearson interval %{customdata[5]:.3f} to %{customdata[6]:.3f})"
                       "<br>mean confidence %{customdata[3]:.3f}<extra></extra>"),
    ), row=1, col=1)
    gap_hover = (hover_bin + "<br>mean confidence %{customdata[3]:.3f}<br>" + y_title +
                 " %{customdata[4]:.3f}<br>gap (" + y_title.lower() + " - confidence) "
                 "%{customdata[7]:+.3f}<extra>%{fullData.name}</extra>")
    for tr in gap_traces(centre, width * 0.92, acc, conf, binary_positive=binary_positive, customdata=custom,
                         hover=(gap_hover, gap_hover)):
        fig.add_trace(tr, row=1, col=1)
    fig.add_trace(go.Scatter(
        name=TRACE_DIAGONAL, x=[0.0, 1.0], y=[0.0, 1.0], mode="lines",
        line=dict(color=COLORS["diagonal"], dash="dash", width=1.5), hoverinfo="skip",
    ), row=1, col=1)
    if bands and "band_low" in table.columns:
        for tr in band_traces(table, centre, width, y_title):
            fig.add_trace(tr, row=1, col=1)
    if smooth is not None:
        for tr in smooth_traces(smooth, y_title):
            fig.add_trace(tr, row=1, col=1)
    show_text = len(count) <= MAX_BINS_WITH_TEXT
    fig.add_trace(go.Bar(
        name=TRACE_COUNTS, x=centre, y=count, width=width * 0.92,
        marker=dict(color=COLORS["counts"], line=dict(width=0)),
        text=[f"{c:,}" for c in count] if show_text else None,
        textposition="outside", cliponaxis=False, textfont=dict(size=10),
        customdata=custom, showlegend=False,
        hovertemplate=hover_bin + " (%{customdata[8]:.1%} of all)<extra></extra>",
    ), row=2, col=1)
    fig.update_layout(barmode="overlay", height=height, bargap=0)
    fig.update_xaxes(range=[0.0, 1.0], row=1, col=1)
    fig.update_xaxes(range=[0.0, 1.0], title_text=x_title, row=2, col=1)
    fig.update_yaxes(range=[0.0, 1.05], title_text=y_title, row=1, col=1)
    top = max(int(count.max()) if count.size else 1, 1)
    fig.update_yaxes(title_text="Samples", range=[0, top * 1.25], row=2, col=1)
    layout_defaults(fig)
    if title:
        fig.update_layout(title=dict(text=title, x=0.0, xanchor="left", y=0.995, yanchor="top"),
                          margin=dict(t=80))
    return fig


TRACE_BANDS = "Where a calibrated bin would fall (90 %)"
#: Not "larger than chance": about 1 bar in 10 lies outside its band by chance (audit 5); the captions count them.
TRACE_OUTSIDE = "Outside its 90 % band"


def band_traces(table: pd.DataFrame, centre: np.ndarray, width: np.ndarray, y_title: str) -> list[go.BaseTraceType]:
    """The consistency band of every bin as a grey box around the height a calibrated bin's bar would
    reach, and a mark on the bars that end outside their band (Broecker & Smith 2007)."""
    lo = table["band_low"].to_numpy(dtype=float)
    hi = table["band_high"].to_numpy(dtype=float)
    acc = table["accuracy"].to_numpy(dtype=float)
    full = table["count"].to_numpy() > 0
    custom = np.column_stack([lo, hi])
    # A band of zero height (every row certain) still shows as a line.
    height = np.where(full, np.maximum(hi - lo, 0.004), np.nan)
    traces: list[go.BaseTraceType] = [go.Bar(
        name=TRACE_BANDS, x=centre, y=height, base=np.where(full, lo, np.nan), width=width * 0.4,
        marker=dict(color="rgba(90, 90, 90, 0.28)", line=dict(color="rgba(60, 60, 60, 0.8)", width=1)),
        customdata=custom,
        hovertemplate=("if calibrated, " + y_title.lower() + " between %{customdata[0]:.3f} and "
                       "%{customdata[1]:.3f} at least 90% of the time<extra></extra>"))]
    out = full & ((acc < lo - 1e-12) | (acc > hi + 1e-12))
    if out.any():
        traces.append(go.Scatter(
            name=TRACE_OUTSIDE, x=centre[out], y=acc[out], mode="markers",
            marker=dict(symbol="x-thin", size=11, line=dict(width=2.5, color=COLORS["gap"])),
            hovertemplate=y_title + " %{y:.3f}: outside its 90% band (about 1 bar in 10 is, by chance)<extra></extra>"))
    return traces


TRACE_SMOOTH = "Smoothed curve"
TRACE_SMOOTH_BAND = "95% interval for the smoothed curve, point by point"


def smooth_traces(smooth: pd.DataFrame, y_title: str) -> list[go.Scatter]:
    """The smoothed reliability curve and its pointwise 95 % interval (for the smoothed curve, not the
    true one: :func:`pbr_core.estimators.smooth_reliability`), drawn only where the confidences have
    some density (a kernel average far from any row is an extrapolation)."""
    s = smooth[smooth["density"] >= 0.02 * smooth["density"].max()]
    sigma = float(s["sigma"].iloc[0]) if len(s) else float("nan")
    return [
        go.Scatter(name=TRACE_SMOOTH_BAND + "_low", x=s["t"], y=s["band_low"], mode="lines", line=dict(width=0),
                   showlegend=False, hoverinfo="skip"),
        go.Scatter(name=TRACE_SMOOTH_BAND, x=s["t"], y=s["band_high"], mode="lines", line=dict(width=0),
                   fill="tonexty", fillcolor="rgba(106, 61, 154, 0.18)", hoverinfo="skip"),
        go.Scatter(name=f"{TRACE_SMOOTH} (kernel width {sigma:.3f})", x=s["t"], y=s["observed"], mode="lines",
                   line=dict(color=COLORS["optimal"], width=2.4),
                   hovertemplate="confidence %{x:.3f}<br>" + y_title + " (smoothed) %{y:.3f}<extra></extra>"),
    ]



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
    :func:`reliability_figure` (``binary_positive``: p(y=1) wording).
    """
    names = list(tables)
    if not names:
        raise ValueError("Expected at least one reliability table, but got none.")
    cols = max(1, min(cols, len(names)))
    rows = math.ceil(len(names) / cols)
    titles = [label_of(labels, m) + (f" · ECE {ece[m]:.4f}" if ece and m in ece else "") for m in names]
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
            hovertemplate=f"{label_of(labels, m)}<br>{y_title} %{{y:.3f}}<br>mean confidence "
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
    layout_defaults(fig)
    legend_above_titles(fig)
    fig.update_annotations(font_size=13)
    return fig


#: The fewest rows of a bin that an overlaid reliability curve passes through (a bin of fewer is
#: drawn as a hollow circle, not joined): below 10 rows a bin's 95 % interval (its Clopper-Pearson
#: whisker on the Reliability page) spans more than 0.33 of the axis at every rate, 0.65 near one half.
MIN_CURVE_BIN_ROWS = 10
#: The hollow circles' legend entry.
TRACE_SPARSE_BINS = "Bin of few rows, not joined"


def reliability_overlay_figure(
    tables: Mapping[str, pd.DataFrame],
    *,
    labels: Mapping[str, str] | None = None,
    x_title: str = "Confidence",
    y_title: str = "Accuracy",
    height: int = 520,
    min_rows: int = MIN_CURVE_BIN_ROWS,
) -> go.Figure:
    """Every method's (or group's) reliability curve in one figure: (mean confidence, accuracy) of its
    non-empty bins. The curve joins the bins of at least ``min_rows`` (:data:`MIN_CURVE_BIN_ROWS`)
    rows; a bin of fewer is a hollow circle of the same colour, not joined: with 1 or 2 rows its
    rate is 0, 0.5 or 1, and curves through such bins tangled at the sparse end (audit 12a). The
    Reliability page's bars show the same bins with their whiskers."""
    names = list(tables)
    colors = method_colors(names)
    fig = go.Figure()
    fig.add_trace(go.Scatter(name=TRACE_DIAGONAL, x=[0, 1], y=[0, 1], mode="lines",
                             line=dict(color=COLORS["diagonal"], dash="dash", width=1.5), hoverinfo="skip"))
    any_sparse = False
    for m in names:
        t = tables[m]
        t = t[t["count"] > 0]
        dense = t["count"].to_numpy() >= min_rows
        name = label_of(labels, m)
        hover = (f"{name}<br>mean confidence %{{x:.3f}}<br>{y_title} %{{y:.3f}}<br>%{{customdata:,}} samples")
        fig.add_trace(go.Scatter(
            name=name, legendgroup=m, x=t["mean_confidence"][dense], y=t["accuracy"][dense], mode="lines+markers",
            line=dict(color=colors[m], width=2), marker=dict(size=7),
            customdata=t["count"].to_numpy()[dense], hovertemplate=hover + "<extra></extra>",
        ))
        if not dense.all():
            any_sparse = True
            fig.add_trace(go.Scatter(
                name=f"{name}: {TRACE_SPARSE_BINS.lower()}", legendgroup=m, showlegend=False,
                x=t["mean_confidence"][~dense], y=t["accuracy"][~dense], mode="markers",
                marker=dict(size=6, color=colors[m], symbol="circle-open", line=dict(width=1.5)),
                customdata=t["count"].to_numpy()[~dense],
                hovertemplate=hover + f" (fewer than {min_rows}: not on the curve)<extra></extra>",
            ))
    if any_sparse:  # one legend entry for the hollow circles of every curve
        fig.add_trace(go.Scatter(name=f"{TRACE_SPARSE_BINS} (fewer than {min_rows} rows)", x=[None], y=[None],
                                 mode="markers", hoverinfo="skip",
                                 marker=dict(size=7, color=COLORS["diagonal"], symbol="circle-open")))
    fig.update_xaxes(range=[0, 1], title_text=x_title)
    fig.update_yaxes(range=[0, 1.02], title_text=y_title)
    fig.update_layout(height=height)
    layout_defaults(fig)
    return fig



def overlay_groups(diagrams: Mapping[str, pd.DataFrame], small: Sequence[str], order: Sequence[str],
                   flagged: Sequence[str] = (), most: int = 12) -> list[str]:
    """The groups whose curves :func:`groups_overlay_figure` draws, in ``order``: the groups with enough
    rows (all if none has), at most ``most``, the ``flagged`` ones (miscalibrated beyond chance) first,
    then the first in ``order`` (largest first). Without the flagged ones first, weekly buckets of about
    equal size drew the first 12 weeks and none of the 7 flagged ones, all later."""
    keep = [g for g in order if g in diagrams and g not in set(small)] or [g for g in order if g in diagrams]
    first = set(flagged)
    chosen = set(([g for g in keep if g in first] + [g for g in keep if g not in first])[:most])
    return [g for g in keep if g in chosen]


def groups_overlay_figure(diagrams: Mapping[str, pd.DataFrame], small: Sequence[str], order: Sequence[str], *,
                          x_title: str, y_title: str, most: int = 12, flagged: Sequence[str] = ()) -> go.Figure:
    """The groups' reliability curves overlaid: those :func:`overlay_groups` picks."""
    keep = overlay_groups(diagrams, small, order, flagged, most)
    return reliability_overlay_figure({g: diagrams[g] for g in keep}, x_title=x_title, y_title=y_title)

