"""Pure plotly figure builders: numbers computed by `pbr_core` in, ``go.Figure`` out.

No Streamlit import and no calibration formula here (scikit-learn's split of ``calibration_curve``
and ``CalibrationDisplay``): every plotted number comes from the caller, which takes it from
`pbr_core`. That keeps the figures testable without a browser and reusable by later pages
(recalibration, comparison) and by the command line tool.

Trace names are module constants so that tests (and later pages) can find traces by name.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

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
# ECE against B
TRACE_ECE = "ECE (this data)"
TRACE_ECE_REFERENCE = "ECE on all rows"
TRACE_BAND_LOW = "TCE lower limit"
TRACE_BAND_HIGH = "Where the TCE lies"
TRACE_BINNING = "Binning bias (1+L)/B"
TRACE_ESTIMATION = "Estimation bias"
TRACE_OPTIMAL_B = "B = floor(n^(1/3))"
TRACE_MINIMISING_B = "Bound-minimising B"

COLORS = {
    "accuracy": "#3b6fb6",
    "gap": "#d62728",
    "under": "#e8710a",
    "diagonal": "#7f7f7f",
    "counts": "#9bb3d6",
    "ece": "#1f3d7a",
    "band": "rgba(59, 111, 182, 0.18)",
    "binning": "#e08a1e",
    "estimation": "#2a9d8f",
    "optimal": "#6a3d9a",
    "minimising": "#c2185b",
    "reference": "#b0b0b0",
}

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


def _layout_defaults(fig: go.Figure) -> None:
    fig.update_layout(
        template="plotly_white",
        margin=dict(l=60, r=20, t=50, b=50),
        legend=dict(orientation="h", yanchor="bottom", y=1.02, xanchor="left", x=0.0, traceorder="normal"),
        hoverlabel=dict(align="left"),
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
        ``observed``, ``band_low``, ``band_high``, ``sigma``), drawn over the bars with its band,
        where the confidences have some density.
    bands : bool
        Draw each bin's consistency band (columns ``band_low``, ``band_high`` of the table, when it
        has them): where its bar would end at least 90 % of the time if the model were calibrated,
        with the bars that end outside it marked (:func:`band_traces`).

    Returns
    -------
    plotly.graph_objects.Figure
        Row 1: accuracy bars with Wilson interval error bars, the gap from the accuracy to the bin's
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
                       "(95% Wilson interval %{customdata[5]:.3f} to %{customdata[6]:.3f})"
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
    _layout_defaults(fig)
    if title:
        fig.update_layout(title=dict(text=title, x=0.0, xanchor="left", y=0.995, yanchor="top"),
                          margin=dict(t=80))
    return fig


TRACE_BANDS = "Where a calibrated bin would fall (90 %)"
TRACE_OUTSIDE = "Outside its band: larger than chance"


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
            hovertemplate=y_title + " %{y:.3f}: outside its band, a gap larger than chance<extra></extra>"))
    return traces


TRACE_SMOOTH = "Smoothed curve"
TRACE_SMOOTH_BAND = "Smoothed curve, 95% band"


def smooth_traces(smooth: pd.DataFrame, y_title: str) -> list[go.Scatter]:
    """The smoothed reliability curve and its bootstrap band, drawn only where the confidences have
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


def _vertical_marker(fig: go.Figure, name: str, b: int, y_top: float, color: str, dash: str) -> None:
    fig.add_trace(go.Scatter(
        name=f"{name} = {b}", x=[b, b], y=[0.0, y_top], mode="lines",
        line=dict(color=color, dash=dash, width=2), hovertemplate=f"{name} = {b}<extra></extra>",
        meta={"marker_b": int(b)},
    ))


def ece_vs_bins_figure(
    n_bins: Sequence[int] | np.ndarray,
    ece: Sequence[float] | np.ndarray,
    *,
    bound: Sequence[float] | np.ndarray,
    binning_bias: Sequence[float] | np.ndarray,
    estimation_bias: Sequence[float] | np.ndarray,
    optimal_b: int,
    minimising_b: int,
    eps: float,
    reference_ece: Sequence[float] | np.ndarray | None = None,
    log_y: bool = False,
    title: str | None = None,
    height: int = 520,
) -> go.Figure:
    """ECE against the number of bins B with Theorem 1's band and its two terms.

    Parameters
    ----------
    n_bins, ece : arrays of the same length
        B values and the ECE at each (``pbr_core.ece_curve``).
    bound, binning_bias, estimation_bias : arrays like ``n_bins``
        Theorem 1's bound on |TCE - ECE| and its two terms (``pbr_core.theorem1_bound``,
        ``theorem1_binning_bias``, ``theorem1_estimation_bias``).
    optimal_b, minimising_b : int
        floor(n^(1/3)) and the B that minimises the bound; drawn as vertical lines.
    eps : float
        The bound holds with probability 1 - eps (used only in the legend).
    reference_ece : array, optional
        ECE of the full data, drawn faintly when the main curve is a subsample.

    Notes
    -----
    The band is [ECE - bound, ECE + bound] clipped to [0, 1]: the TCE is an expected absolute
    difference of probabilities, so it can be neither negative nor above 1. Clipping is the only
    arithmetic done here and it is presentation, not a formula of the paper.
    """
    B = np.asarray(n_bins, dtype=np.int64)
    e = np.asarray(ece, dtype=float)
    bd = np.asarray(bound, dtype=float)
    arrays = {"ece": e, "bound": bd, "binning_bias": np.asarray(binning_bias, dtype=float),
              "estimation_bias": np.asarray(estimation_bias, dtype=float)}
    for name, arr in arrays.items():
        if arr.shape != B.shape:
            raise ValueError(f"Expected `{name}` of shape {B.shape} like `n_bins`, but got {arr.shape}.")
    lo = np.clip(e - bd, 0.0, 1.0)
    hi = np.clip(e + bd, 0.0, 1.0)
    custom = np.column_stack([bd, arrays["binning_bias"], arrays["estimation_bias"], lo, hi])

    fig = go.Figure()
    fig.add_trace(go.Scatter(
        name=TRACE_BAND_LOW, x=B, y=lo, mode="lines", line=dict(width=0), showlegend=False,
        hoverinfo="skip",
    ))
    fig.add_trace(go.Scatter(
        name=f"{TRACE_BAND_HIGH} ({1 - eps:.0%}): ECE ± bound", x=B, y=hi, mode="lines",
        line=dict(width=0), fill="tonexty", fillcolor=COLORS["band"], hoverinfo="skip",
    ))
    if reference_ece is not None:
        ref = np.asarray(reference_ece, dtype=float)
        fig.add_trace(go.Scatter(
            name=TRACE_ECE_REFERENCE, x=B[: ref.size], y=ref[: B.size], mode="lines",
            line=dict(color=COLORS["reference"], width=1.5),
            hovertemplate="B = %{x}<br>ECE on all rows %{y:.4f}<extra></extra>",
        ))
    fig.add_trace(go.Scatter(
        name=TRACE_ECE, x=B, y=e, mode="lines+markers" if B.size <= 60 else "lines",
        line=dict(color=COLORS["ece"], width=2.2), marker=dict(size=4), customdata=custom,
        hovertemplate=("B = %{x}<br>ECE %{y:.4f}<br>bound ± %{customdata[0]:.4f} "
                       "(binning %{customdata[1]:.4f} + estimation %{customdata[2]:.4f})"
                       "<br>TCE in [%{customdata[3]:.4f}, %{customdata[4]:.4f}]<extra></extra>"),
    ))
    fig.add_trace(go.Scatter(
        name=TRACE_BINNING, x=B, y=arrays["binning_bias"], mode="lines",
        line=dict(color=COLORS["binning"], dash="dash", width=1.8),
        hovertemplate="B = %{x}<br>binning bias %{y:.4f}<extra></extra>",
    ))
    fig.add_trace(go.Scatter(
        name=TRACE_ESTIMATION, x=B, y=arrays["estimation_bias"], mode="lines",
        line=dict(color=COLORS["estimation"], dash="dot", width=1.8),
        hovertemplate="B = %{x}<br>estimation bias %{y:.4f}<extra></extra>",
    ))
    # The y-axis shows the band from B = floor(n^(1/3)) on with room to spare, not the whole band:
    # the bias terms reach (1+L) at B = 1 and would squash the curves of interest. What is cut off
    # at small B is the binning bias shooting up, which the eye completes.
    tail = hi[B >= optimal_b] if np.any(B >= optimal_b) else hi
    y_top = min(1.0, max(1.5 * float(np.nanmax(tail)), 1.2 * float(np.nanmax(e)), 0.05)) if B.size else 1.0
    _vertical_marker(fig, TRACE_OPTIMAL_B, int(optimal_b), y_top, COLORS["optimal"], "dash")
    _vertical_marker(fig, TRACE_MINIMISING_B, int(minimising_b), y_top, COLORS["minimising"], "dot")
    fig.update_xaxes(title_text="Number of bins B", range=[0.5, float(B.max()) + 0.5] if B.size else None)
    if log_y:
        fig.update_yaxes(title_text="Calibration error (log scale)", type="log")
    else:
        fig.update_yaxes(title_text="Calibration error", range=[0.0, y_top])
    fig.update_layout(height=height)
    _layout_defaults(fig)
    if title:
        fig.update_layout(title=dict(text=title, x=0.0, xanchor="left"), margin=dict(t=110))
    return fig


def marker_b(fig: go.Figure, name: str) -> int:
    """The B at which the vertical marker trace ``name`` (a TRACE_*_B constant) is drawn."""
    for tr in fig.data:
        if tr.name and tr.name.startswith(name + " = "):
            return int(tr.meta["marker_b"])
    raise KeyError(f"No marker {name!r} in the figure.")


def trace(fig: go.Figure, name: str) -> go.BaseTraceType:
    """The first trace whose name is ``name`` or starts with it (names may carry a value suffix)."""
    for tr in fig.data:
        if tr.name == name or (tr.name or "").startswith(name):
            return tr
    raise KeyError(f"No trace {name!r} in the figure; traces: {[t.name for t in fig.data]}.")


ESTIMATOR_COLORS = {"paper": "#1f3d7a", "equal_mass": "#2a9d8f", "debiased": "#e08a1e", "smooth": "#6a3d9a"}


def estimator_convergence_figure(table: pd.DataFrame, labels: dict[str, str], tce: float,
                                 height: int = 460) -> go.Figure:
    """Each estimator's mean over simulated data sets against n (log axis), with ± one std bands, and
    the true calibration error (``pbr_core.estimators.estimator_convergence``)."""
    fig = go.Figure()
    for key, label in labels.items():
        t = table[table["estimator"] == key].sort_values("n")
        color = ESTIMATOR_COLORS.get(key, "#555555")
        fig.add_trace(go.Scatter(x=t["n"], y=t["mean"] - t["std"], mode="lines", line=dict(width=0),
                                 showlegend=False, hoverinfo="skip", name=label + " low"))
        fig.add_trace(go.Scatter(x=t["n"], y=t["mean"] + t["std"], mode="lines", line=dict(width=0), fill="tonexty",
                                 fillcolor=_rgba(color, 0.12), showlegend=False, hoverinfo="skip",
                                 name=label + " high"))
        fig.add_trace(go.Scatter(name=label, x=t["n"], y=t["mean"], mode="lines+markers", line=dict(color=color, width=2),
                                 hovertemplate="n = %{x:,}<br>mean estimate %{y:.4f}<extra>" + label + "</extra>"))
    if len(table):
        fig.add_trace(go.Scatter(name=f"True calibration error = {tce:.3f}", x=[table["n"].min(), table["n"].max()],
                                 y=[tce, tce], mode="lines", line=dict(color="#333333", dash="dash", width=1.5)))
    fig.update_xaxes(type="log", title_text="Number of rows n (log scale)")
    fig.update_yaxes(title_text="Estimated calibration error", rangemode="tozero")
    fig.update_layout(height=height)
    _layout_defaults(fig)
    return fig


def _rgba(hex_color: str, alpha: float) -> str:
    h = hex_color.lstrip("#")
    return f"rgba({int(h[0:2], 16)}, {int(h[2:4], 16)}, {int(h[4:6], 16)}, {alpha})"
