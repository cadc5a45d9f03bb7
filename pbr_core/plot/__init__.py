"""The dashboard's own plotly figures, for a notebook: ``pbr_core.plot.reliability(preds)``.

One drawing code for the library and the dashboard (the dashboard's pages and HTML report call the
builders here): what a notebook shows is what the app shows.

Two levels, like scikit-learn's ``CalibrationDisplay.from_predictions`` and its constructor:

* calls that take a library value and compute what they draw with :mod:`pbr_core`:
  :func:`reliability` (a :class:`~pbr_core.Predictions` or probabilities and labels), :func:`corp`
  (the reliability diagram without bins),
  :func:`ece_vs_bins` (Theorem 1's bound against B), :func:`groups` (a
  :class:`~pbr_core.groups.GroupReport`), :func:`comparison` (a compare table or run),
  :func:`kl_gap` (paper Figure 2) and :func:`n_re_sweep` (paper Figure 3);
* builders that take the numbers already computed: :func:`reliability_figure`, :func:`corp_figure`,
  :func:`ece_vs_bins_figure`, :func:`theorem1_figure`, :func:`reliability_grid_figure`,
  :func:`reliability_overlay_figure`, :func:`groups_overlay_figure`, :func:`comparison_figure`,
  :func:`kl_gap_figure`, :func:`n_re_sweep_figure`, :func:`alpha_selection_figure`,
  :func:`group_gap_figure`, :func:`estimator_convergence_figure`.

Every function returns a ``plotly.graph_objects.Figure`` (``fig.show()``, ``fig.write_html(path)``);
no formula is computed here. Words on the figures are neutral defaults (axis titles, legend names
as the ``TRACE_*`` constants); a front end with its own words passes them as arguments (the
dashboard passes those of ``dashboard/texts.py``). User text (group, class and method names) is
shown as literal text (:func:`plot_text`).

The builders live in :mod:`~pbr_core.plot.diagrams` (reliability diagrams; without bins:
:mod:`~pbr_core.plot.corp_diagram`), :mod:`~pbr_core.plot.bins` (ECE against B) and
:mod:`~pbr_core.plot.studies` (the recalibration studies), with their trace names as constants;
:mod:`~pbr_core.plot.style` holds the colours and :func:`trace` (a trace by its name).

Importing :mod:`pbr_core` does not import plotly; ``import pbr_core.plot`` (or the first use of
``pbr_core.plot``) does.
"""

from __future__ import annotations

from pbr_core.plot._api import (
    axis_titles,
    comparison,
    corp,
    ece_vs_bins,
    groups,
    kl_gap,
    measured_inputs,
    n_re_sweep,
    reliability,
    theorem1_figure,
)
from pbr_core.plot.style import COLORS, PALETTE, marker_b, method_colors, plot_text, trace
from pbr_core.plot.bins import ece_vs_bins_figure, estimator_convergence_figure
from pbr_core.plot.corp_diagram import corp_figure
from pbr_core.plot.studies import (
    alpha_selection_figure,
    comparison_figure,
    group_gap_figure,
    kl_gap_figure,
    n_re_sweep_figure,
)
from pbr_core.plot.diagrams import (
    groups_overlay_figure,
    reliability_figure,
    reliability_grid_figure,
    reliability_overlay_figure,
)

__all__ = [
    "COLORS",
    "PALETTE",
    "alpha_selection_figure",
    "axis_titles",
    "comparison",
    "comparison_figure",
    "corp",
    "corp_figure",
    "ece_vs_bins",
    "ece_vs_bins_figure",
    "estimator_convergence_figure",
    "group_gap_figure",
    "groups",
    "groups_overlay_figure",
    "kl_gap",
    "kl_gap_figure",
    "marker_b",
    "measured_inputs",
    "method_colors",
    "n_re_sweep",
    "n_re_sweep_figure",
    "plot_text",
    "reliability",
    "reliability_figure",
    "reliability_grid_figure",
    "reliability_overlay_figure",
    "theorem1_figure",
    "trace",
]
