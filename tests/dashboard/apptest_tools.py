"""Helpers the AppTest files share."""

from __future__ import annotations

import base64

import numpy as np
import plotly.io as pio


def sent_figure(at, index: int = 0):
    """The plotly figure the page sent to the browser (chart ``index``), with plotly's base64 typed
    arrays decoded into numpy arrays."""
    charts = at.get("plotly_chart")
    assert charts, "no plotly chart on the page"
    fig = pio.from_json(charts[index].proto.spec)
    for tr in fig.data:
        for attr in ("x", "y", "base"):
            v = getattr(tr, attr, None)
            if isinstance(v, dict) and "bdata" in v:
                setattr(tr, attr, np.frombuffer(base64.b64decode(v["bdata"]), dtype=v["dtype"]))
    return fig
