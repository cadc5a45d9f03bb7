"""The recalibration pages' figures and summary table (PBR, Compare, Generalization, Fit & apply).

The figures are the library's (:mod:`pbr_core.plot`, one drawing code for the app and a notebook;
the builders moved there in issue 38). What stays here is the dashboard's part: which result's
numbers go into which builder with the page's words (:mod:`dashboard.texts`: method labels, axis
titles, captions), and the summary table's highlighting. The same objects go to the page and to
the HTML report.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Mapping

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from pandas.io.formats.style import Styler

from dashboard import texts
from pbr_core import plot
from pbr_core.evaluation import EVALUATION_METRICS
from pbr_core.plot.diagrams import (  # noqa: F401  (re-exported for the pages, the report and tests)
    TRACE_DIAGONAL,
    groups_overlay_figure,
    overlay_groups,
    reliability_figure,
    reliability_grid_figure,
    reliability_overlay_figure,
)
from pbr_core.plot.studies import (  # noqa: F401  (re-exported for the pages, the report and tests)
    TRACE_BOUND_POINTS,
    TRACE_CHOSEN,
    TRACE_GAP_POINTS,
    alpha_selection_figure,
    group_gap_figure,
    n_re_sweep_figure,
)

if TYPE_CHECKING:
    from dashboard import runs


def _label(labels: Mapping[str, str] | None, key: str) -> str:
    """A method's label, or a group's name as it is (a name from the user's file), as plotly text:
    its ``<``, ``>`` and ``&`` shown as the characters, never read as markup (texts.plot_text)."""
    return texts.plot_text((labels or {}).get(key, key))


def kl_gap_figure(table: pd.DataFrame, *, eps: float = 0.05, height: int = 480,
                  n_classes: int | None = None) -> go.Figure:
    """:func:`pbr_core.plot.kl_gap_figure` with the dashboard's name for the extreme fits."""
    return plot.kl_gap_figure(table, eps=eps, height=height, n_classes=n_classes,
                              extreme_name=texts.KL_GAP_EXTREME_TRACE)


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
    """The Compare page's figures (:func:`pbr_core.plot.comparison`) with its captions, method labels and
    axis titles: fold 1's reliability tables side by side and overlaid (when kept), then every fold's
    test ECE per method (when a fit finished)."""
    methods = list(dict.fromkeys([*result.table.get("method", pd.Series(dtype=str)), *result.diagrams]))
    labels = {m: texts.method_label(m, multiclass) for m in methods}
    figs = []
    if result.diagrams:
        x_title, y_title = texts.axis_titles(binary_positive)
        common = dict(labels=labels, binary_positive=binary_positive, x_title=x_title, y_title=y_title)
        figs += [(texts.GRID_CAPTION, plot.comparison(result, kind="grid", **common)),
                 (texts.OVERLAY_CAPTION, plot.comparison(result, kind="overlay", **common))]
    if len(result.table) and result.table["ece"].notna().any():
        figs.append((texts.COMPARE_FOLDS_CAPTION, plot.comparison(result.table, kind="folds", labels=labels,
                                                                  metric_title=texts.metric_title("ece"))))
    return figs


def sweep_figure(result: runs.SweepResult) -> go.Figure:
    """The n_re sweep of a result (:func:`pbr_core.plot.n_re_sweep`), methods in the page's words."""
    multiclass = result.kind == "multiclass"
    labels = {m: texts.method_label(m, multiclass) for m in result.table["method"].unique()}
    return plot.n_re_sweep(result.table, labels=labels, metric_title=texts.metric_title("ece"))


def group_diagram_figure(table: pd.DataFrame, *, x_title: str, y_title: str, binary_positive: bool) -> go.Figure:
    """One group's reliability diagram with its consistency bands (the Reliability page's figure)."""
    return reliability_figure(table, x_title=x_title, y_title=y_title, binary_positive=binary_positive, height=520)
