"""The ECE against the number of bins B with Theorem 1's band (the Bins & bias page), and the ECE
estimators approaching a known true calibration error.

Builders: numbers computed by :mod:`pbr_core` in, ``go.Figure`` out. The only arithmetic is
presentation (the band cut to [0, 1]).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from pbr_core.plot.style import COLORS, layout_defaults, rgba

# ECE against B
TRACE_ECE = "ECE (this data)"
TRACE_ECE_REFERENCE = "ECE on all rows"
TRACE_BAND_LOW = "TCE lower limit"
TRACE_BAND_HIGH = "Where the TCE lies"
TRACE_BINNING = "Binning bias (1+L)/B"
#: The paper's name, and in words what it is (the binned estimate's sampling noise with n rows in B bins).
TRACE_ESTIMATION = "Estimation bias (sampling noise)"
TRACE_OPTIMAL_B = "B = floor(n^(1/3))"
TRACE_MINIMISING_B = "Bound-minimising B"


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
        hovertemplate="B = %{x}<br>estimation bias (sampling noise of n rows in B bins) %{y:.4f}<extra></extra>",
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
        fig.update_yaxes(title_text="Calibration error (log scale)", type="log", exponentformat="power")
    else:
        fig.update_yaxes(title_text="Calibration error", range=[0.0, y_top])
    fig.update_layout(height=height)
    layout_defaults(fig)
    if title:
        fig.update_layout(title=dict(text=title, x=0.0, xanchor="left"), margin=dict(t=110))
    return fig


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
                                 fillcolor=rgba(color, 0.12), showlegend=False, hoverinfo="skip",
                                 name=label + " high"))
        fig.add_trace(go.Scatter(name=label, x=t["n"], y=t["mean"], mode="lines+markers", line=dict(color=color, width=2),
                                 hovertemplate="n = %{x:,}<br>mean estimate %{y:.4f}<extra>" + label + "</extra>"))
    if len(table):
        fig.add_trace(go.Scatter(name=f"True calibration error = {tce:.3f}", x=[table["n"].min(), table["n"].max()],
                                 y=[tce, tce], mode="lines", line=dict(color="#333333", dash="dash", width=1.5)))
    fig.update_xaxes(type="log", exponentformat="power", title_text="Number of rows n (log scale)")
    fig.update_yaxes(title_text="Estimated calibration error", rangemode="tozero")
    fig.update_layout(height=height)
    layout_defaults(fig)
    return fig

