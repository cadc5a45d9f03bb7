"""The CORP reliability diagram (Dimitriadis, Gneiting & Jordan 2021) as a plotly figure: numbers in
(:class:`pbr_core.corp.CorpReliability`), ``go.Figure`` out; no formula.

The Reliability page, the audit report and a notebook (:func:`pbr_core.plot.corp`) draw the same
figure from the same numbers (moved here from ``dashboard/figures_corp.py``, issue 38). Trace names
are module constants, for tests.
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from pbr_core.plot.diagrams import AXIS_TITLES_TOP_LABEL

TRACE_CORP = "CORP: PAV-recalibrated probability"
TRACE_CORP_BAND = "Consistency band (if calibrated)"
TRACE_CORP_DIAGONAL = "Perfect calibration"
TRACE_CORP_OUTSIDE = "Outside the band"

_CURVE = "#1f4e9c"
_BAND = "rgba(120, 120, 120, 0.25)"
_OUTSIDE = "#c0392b"


def corp_figure(corp, *, x_title: str = AXIS_TITLES_TOP_LABEL[0], y_title: str = AXIS_TITLES_TOP_LABEL[1],
                title: str | None = None, height: int = 520) -> go.Figure:
    """The CORP reliability diagram: the PAV fit of the outcome on the forecast (a step function, no
    bins to choose) over its consistency band around the diagonal.

    Parameters
    ----------
    corp : pbr_core.corp.CorpReliability
        ``x`` (the distinct forecasts), ``recalibrated`` (the PAV fit at each), ``band_low`` /
        ``band_high`` (where the fit would lie at each x with probability ``level`` if the forecasts
        were calibrated).
    x_title, y_title : str
        Axis titles, the binned diagram's (what is measured; default the top label's words).
    title : str, optional
        The figure's title (the report's); the page leaves it to the section heading.

    Returns
    -------
    plotly.graph_objects.Figure
        The band (grey), the diagonal, the CORP curve (steps, ``line_shape="hv"``), and red markers
        where the curve leaves the band.
    """
    x = np.asarray(corp.x, dtype=float)
    fit = np.asarray(corp.recalibrated, dtype=float)
    low, high = np.asarray(corp.band_low, dtype=float), np.asarray(corp.band_high, dtype=float)
    fig = go.Figure()
    fig.add_trace(go.Scatter(x=x, y=high, mode="lines", line=dict(width=0, shape="hv"), hoverinfo="skip",
                             showlegend=False, name=TRACE_CORP_BAND + " (upper)"))
    fig.add_trace(go.Scatter(x=x, y=low, mode="lines", line=dict(width=0, shape="hv"), fill="tonexty",
                             fillcolor=_BAND, name=f"{TRACE_CORP_BAND}, {corp.level:.0%}", hoverinfo="skip"))
    fig.add_trace(go.Scatter(x=[0, 1], y=[0, 1], mode="lines", line=dict(color="#555", dash="dash", width=1),
                             name=TRACE_CORP_DIAGONAL, hoverinfo="skip"))
    fig.add_trace(go.Scatter(x=x, y=fit, mode="lines", line=dict(color=_CURVE, width=2.5, shape="hv"),
                             name=TRACE_CORP, customdata=np.column_stack([low, high]),
                             hovertemplate="forecast %{x:.3f}<br>PAV-recalibrated %{y:.3f}<br>"
                                           "band %{customdata[0]:.3f} to %{customdata[1]:.3f}<extra></extra>"))
    outside = (fit < low) | (fit > high)
    if outside.any():
        fig.add_trace(go.Scatter(x=x[outside], y=fit[outside], mode="markers",
                                 marker=dict(color=_OUTSIDE, size=5), name=TRACE_CORP_OUTSIDE,
                                 hovertemplate="forecast %{x:.3f}<br>PAV-recalibrated %{y:.3f}<extra></extra>"))
    fig.update_layout(height=height, title=title, margin=dict(l=60, r=20, t=50 if title else 20, b=50),
                      legend=dict(orientation="h", yanchor="bottom", y=1.01, x=0), hovermode="closest")
    fig.update_xaxes(title=x_title, range=[0, 1])
    fig.update_yaxes(title=y_title, range=[0, 1], scaleanchor="x", scaleratio=1)
    return fig
