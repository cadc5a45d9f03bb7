"""pbr_core.plot (issue 38): one drawing code, clear messages for bad input, user names as text.

What each figure draws is pinned against the library's numbers on the bundled data in
tests/test_notebook.py; the builders' details in tests/dashboard/test_figures*.py."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import pbr_core
import pbr_core.plot as plot

ROOT = Path(__file__).resolve().parents[1]


def test_figures_are_drawn_in_pbr_core_plot_only():
    """The dashboard and the scripts make no trace, no figure and no subplot grid of their own, and
    no matplotlib: they call pbr_core.plot (the review found the KL-gap and n_re charts drawn twice)."""
    drawing = re.compile(r"\bgo\.[A-Z][A-Za-z]*\(|make_subplots|\bmatplotlib\b")
    files = [*ROOT.glob("dashboard/**/*.py"), *ROOT.glob("scripts/*.py")]
    assert len(files) > 20
    found = [f"{p.relative_to(ROOT)}:{i}" for p in files
             for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
             if drawing.search(line.split("#", 1)[0])]
    assert found == []
    assert drawing.search("fig = go.Scatter(x=x)") and drawing.search("import matplotlib.pyplot as plt")


def test_bad_input_is_named():
    preds = pbr_core.Predictions.from_predictions([0, 1, 1, 0], [0.2, 0.7, 0.9, 0.4])
    with pytest.raises(ValueError, match="Expected `labels` to be None with Predictions"):
        plot.reliability(preds, [0, 1, 1, 0])
    with pytest.raises(ValueError, match="outside \\[0, 1\\]"):
        plot.reliability(np.array([0.2, 1.5]), np.array([0, 1]))
    with pytest.raises(ValueError, match="Expected argument `binning` to be 'width' or 'mass', but got 'quantile'"):
        plot.reliability(preds, binning="quantile")
    with pytest.raises(ValueError, match="Expected argument `target` to be 'positive' or 'top_label'"):
        plot.ece_vs_bins(preds, target="p1")
    with pytest.raises(ValueError, match="`max_bins` to be an integer larger than 0, but got 0"):
        plot.ece_vs_bins(preds, max_bins=0)
    with pytest.raises(TypeError, match="Expected a compare table .* but got Predictions"):
        plot.comparison(preds)
    table = pd.DataFrame({"method": ["a", "a"], "fold": [0, 1], "ece": [0.1, 0.2]})
    with pytest.raises(ValueError, match="kind='folds' draws the table alone"):
        plot.comparison(table, kind="grid")
    with pytest.raises(ValueError, match="`kind` to be 'grid', 'overlay' or 'folds'"):
        plot.comparison(table, kind="bars")
    with pytest.raises(ValueError, match="a column 'nll'"):
        plot.comparison(table, metric="nll")


def test_user_names_are_text_not_markup():
    """A group or method named like markup shows as typed: plotly reads <b>, <a href> in labels."""
    table = pd.DataFrame({"method": ["<b>x</b>", "<b>x</b>", "y&z", "y&z"], "fold": [0, 1, 0, 1],
                          "ece": [0.1, 0.2, 0.05, 0.06]})
    fig = plot.comparison(table)
    assert list(fig.layout.xaxis.ticktext) == ["&lt;b&gt;x&lt;/b&gt;", "y&amp;z"]
    assert plot.plot_text("a\nb<br>") == "a b&lt;br&gt;"
