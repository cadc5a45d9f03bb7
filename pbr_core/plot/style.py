"""What every figure of :mod:`pbr_core.plot` shares: colours, the layout, user text made safe for
plotly, and looking traces up by name (tests and front ends find traces by their legend names)."""

from __future__ import annotations

import re
from typing import Mapping

import plotly.graph_objects as go

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

#: One colour per method, stable across figures (tab10 without the grey).
PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#bcbd22",
           "#17becf", "#393b79", "#637939", "#8c6d31", "#843c39", "#7b4173", "#3182bd")

_LINE_BREAKS = re.compile(r"[\r\n\t\v\f\x85\u2028\u2029]+")


def plot_text(value: object) -> str:
    """A user-provided string (a file, column, class, group or method name) as literal text in a
    plotly title, axis title, legend or hover label.

    Plotly reads a subset of HTML in those (``<b>``, ``<a href>``, ``<br>``, entities); ``&``, ``<``
    and ``>`` are written as entities, which it shows as the characters themselves, and line breaks
    become spaces.
    """
    text = _LINE_BREAKS.sub(" ", str(value))
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def label_of(labels: Mapping[str, str] | None, key: str) -> str:
    """A method's label from ``labels`` or the key as it is, as plotly text (:func:`plot_text`)."""
    return plot_text((labels or {}).get(key, key))


def method_colors(methods: list[str]) -> dict[str, str]:
    """One :data:`PALETTE` colour per method, in the order given."""
    return {m: PALETTE[i % len(PALETTE)] for i, m in enumerate(methods)}


def rgba(hex_color: str, alpha: float) -> str:
    """``"#rrggbb"`` as a CSS ``rgba(...)`` with opacity ``alpha``."""
    h = hex_color.lstrip("#")
    r, g, b = (int(h[i:i + 2], 16) for i in (0, 2, 4))
    return f"rgba({r}, {g}, {b}, {alpha})"


def layout_defaults(fig: go.Figure) -> None:
    """The white template, margins, and the legend in one row above the plot."""
    fig.update_layout(
        template="plotly_white",
        margin=dict(l=60, r=20, t=50, b=50),
        legend=dict(orientation="h", yanchor="bottom", y=1.02, xanchor="left", x=0.0, traceorder="normal"),
        hoverlabel=dict(align="left"),
    )


def legend_above_titles(fig: go.Figure) -> None:
    """Subplot figures: the legend at the top of the figure, above the panel titles, not on them."""
    fig.update_layout(margin=dict(t=110), legend=dict(y=0.985, yref="container", yanchor="top"))


def trace(fig: go.Figure, name: str) -> go.BaseTraceType:
    """The first trace whose name is ``name`` or starts with it (names may carry a value suffix).

    Raises
    ------
    KeyError
        No such trace; the message lists the figure's trace names.
    """
    for tr in fig.data:
        if tr.name == name or (tr.name or "").startswith(name):
            return tr
    raise KeyError(f"No trace {name!r} in the figure; traces: {[t.name for t in fig.data]}.")


def marker_b(fig: go.Figure, name: str) -> int:
    """The B at which the vertical marker trace ``name`` (a ``TRACE_*_B`` constant) is drawn."""
    for tr in fig.data:
        if tr.name and tr.name.startswith(name + " = "):
            return int(tr.meta["marker_b"])
    raise KeyError(f"No marker {name!r} in the figure.")


def title_above_legend(fig: go.Figure, title: str, *, legend_rows: int = 1, panel_titles: bool = False) -> None:
    """A title of one or more lines (``<br>``) at the top of the figure, the legend's rows below it,
    then (``panel_titles``) the subplots' titles: the top margin grows with each, so none overlaps."""
    height = float(fig.layout.height or 450)
    lines = title.count("<br>") + 1
    title_px = 14 + 22 * lines
    top = title_px + 24 * max(1, legend_rows) + (36 if panel_titles else 16)
    fig.update_layout(
        # plotly places a title of several lines as if it had one (its first lines go up, out of the
        # figure): moved down by the lines beyond the first.
        title=dict(text=title, x=0.01, xref="container", xanchor="left", y=1.0 - (8.0 + 22.0 * (lines - 1)) / height,
                   yref="container", yanchor="top"),
        margin=dict(t=top),
        legend=dict(y=1.0 - title_px / height, yref="container", yanchor="top"))
