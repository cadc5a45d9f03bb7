"""The notebook's calls: a library value in, the dashboard's own figure out.

Each function reads the numbers from :mod:`pbr_core` (the same calls the dashboard's pages make)
and hands them to the builders of :mod:`pbr_core.plot.diagrams`, :mod:`~pbr_core.plot.bins` and
:mod:`~pbr_core.plot.studies`, which the dashboard draws with too: one drawing code for both.
"""

from __future__ import annotations

from typing import Any, Literal, Mapping

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from pbr_core.plot.bins import ece_vs_bins_figure
from pbr_core.plot.studies import comparison_figure, kl_gap_figure, n_re_sweep_figure
from pbr_core.plot.diagrams import (
    AXIS_TITLES_POSITIVE,
    AXIS_TITLES_TOP_LABEL,
    groups_overlay_figure,
    reliability_figure,
    reliability_grid_figure,
    reliability_overlay_figure,
)

#: Largest B of :func:`ece_vs_bins` by default (the Bins & bias page's default too).
DEFAULT_MAX_BINS = 100


def measured_inputs(data: Any, labels: Any = None, target: str | None = None) -> tuple[np.ndarray, np.ndarray, bool]:
    """``(probs, labels, binary_positive)`` that the binned metrics see for ``data``.

    ``data`` is a :class:`~pbr_core.Predictions` (``labels`` must then be None), or probabilities:
    an (n, K) array of probability vectors, or a 1-D array of p(y=1) with ``labels`` in {0, 1}.
    Binary data is measured on p(y=1) or on the top label as ``target`` says (default
    :data:`pbr_core.metrics.DEFAULT_BINARY_TARGET`, the app's choice); ``binary_positive`` says
    which, for the axis words. Validation is the metrics' own (a ``ValueError`` naming the problem).
    """
    from pbr_core import metrics as M
    from pbr_core.predictions import Predictions

    target = M.DEFAULT_BINARY_TARGET if target is None else M.check_binary_target(target, "target")
    if isinstance(data, Predictions):
        if labels is not None:
            raise ValueError("Expected `labels` to be None with Predictions (they carry their labels), "
                             "but got labels too.")
        if not data.has_labels:
            raise ValueError("Expected Predictions with labels, but these have none: a reliability diagram "
                             "compares the predictions with the outcomes.")
        measured = M.BINARY_TARGET.measured(data.kind, target)
        probs, y = M.ece_inputs(*data.metric_inputs(), measured)
        return np.asarray(probs), np.asarray(y), measured == "positive"
    if labels is None:
        raise ValueError("Expected `labels` with an array of probabilities (or pass a Predictions), but got none.")
    probs = np.asarray(data)
    if probs.ndim == 1:
        return probs, np.asarray(labels), True
    probs, y = M.ece_inputs(probs, np.asarray(labels), target)
    return np.asarray(probs), np.asarray(y), probs.ndim == 1


def axis_titles(binary_positive: bool) -> tuple[str, str]:
    """The library's (x, y) axis titles: p(y=1) words for binary data measured on p(y=1), else
    confidence and accuracy."""
    return AXIS_TITLES_POSITIVE if binary_positive else AXIS_TITLES_TOP_LABEL


def reliability(data: Any, labels: Any = None, n_bins: int | None = None, *, target: str | None = None,
                binning: Literal["width", "mass"] = "width", bands: bool = True, smooth: bool = False,
                title: str | None = None,
                x_title: str | None = None, y_title: str | None = None, height: int = 620) -> go.Figure:
    """Reliability diagram with each bin's consistency band and the samples per bin (the Reliability page's).

    Parameters
    ----------
    data : Predictions or array
        A :class:`~pbr_core.Predictions`, or probabilities ((n, K), or 1-D p(y=1)) with ``labels``.
    labels : array, optional
        Class indices (with an array ``data`` only).
    n_bins : int, optional
        Number of equal-width bins B (default floor(n^(1/3)), :func:`pbr_core.optimal_n_bins`).
    target : {"positive", "top_label"}, optional
        What binary data is measured on (default :data:`pbr_core.metrics.DEFAULT_BINARY_TARGET`).
    binning : {"width", "mass"}
        Equal-width bins (the paper's, Eq. 2) or equal-mass bins
        (:func:`pbr_core.estimators.reliability_equal_mass`), as the Reliability page offers.
    bands : bool
        Draw each bin's 90 % consistency band (``band_low`` / ``band_high`` of the table) and mark
        the bars outside it.
    smooth : bool
        Draw the smoothed reliability curve (:func:`pbr_core.estimators.smooth_reliability`) too, with
        its pointwise 95 % interval for the smoothed curve (not for the true calibration curve).
    title, x_title, y_title : str, optional
        Words on the figure (defaults: the library's neutral axis titles, :func:`axis_titles`).

    Returns
    -------
    plotly.graph_objects.Figure
        The bars are :func:`pbr_core.reliability_diagram`'s ``accuracy`` column (with its
        Clopper-Pearson interval), the gap boxes its ``mean_confidence``, the histogram its ``count``
        (:func:`pbr_core.plot.reliability_figure`).

    Examples
    --------
    >>> import pbr_core, pbr_core.plot
    >>> preds = pbr_core.load_predictions("sample_data/kitti_random_forest.csv")  # doctest: +SKIP
    >>> pbr_core.plot.reliability(preds).show()  # doctest: +SKIP
    """
    from pbr_core.bounds import optimal_n_bins
    from pbr_core.metrics import reliability_diagram

    if binning not in ("width", "mass"):
        raise ValueError(f"Expected argument `binning` to be 'width' or 'mass', but got {binning!r}.")
    probs, y, positive = measured_inputs(data, labels, target)
    B = optimal_n_bins(len(y)) if n_bins is None else n_bins
    if binning == "mass":
        from pbr_core.estimators import reliability_equal_mass

        table = reliability_equal_mass(probs, y, n_bins=B, binary_target="top_label")
    else:
        # measured_inputs made them what `target` measures: two columns left are the top label
        table = reliability_diagram(probs, y, B, binary_target="top_label")
    smoothed = None
    if smooth:
        from pbr_core.estimators import smooth_reliability

        smoothed = smooth_reliability(probs, y, binary_target="top_label")
    xt, yt = axis_titles(positive)
    return reliability_figure(table, x_title=x_title or xt, y_title=y_title or yt, title=title, height=height,
                              binary_positive=positive, smooth=smoothed, bands=bands)


def corp(data: Any, labels: Any = None, *, target: str | None = None, level: float = 0.9, n_resamples: int = 100,
         seed: int = 0, title: str | None = None, x_title: str | None = None, y_title: str | None = None) -> go.Figure:
    """The CORP reliability diagram, without bins (the Reliability page's, Dimitriadis, Gneiting & Jordan 2021).

    Parameters
    ----------
    data, labels, target
        As in :func:`reliability`: what is measured is p(y=1) against y, or the confidence of the
        top label against whether it was right.
    level, n_resamples, seed
        The consistency band's coverage, resamples and seed (:func:`pbr_core.corp.corp_reliability`).
    title, x_title, y_title : str, optional
        Words on the figure (defaults: the library's, :func:`axis_titles`).

    Returns
    -------
    plotly.graph_objects.Figure
        The PAV fit of :func:`pbr_core.corp.corp_reliability` at each distinct forecast (steps) over
        its consistency band, red markers where it leaves the band (:func:`~pbr_core.plot.corp_figure`).
    """
    from pbr_core.corp import corp_reliability
    from pbr_core.metrics import confidence_and_outcome
    from pbr_core.plot.corp_diagram import corp_figure

    probs, y, positive = measured_inputs(data, labels, target)
    conf, out = confidence_and_outcome(probs, y)
    diagram = corp_reliability(conf, out, level=level, n_resamples=n_resamples, seed=seed)
    xt, yt = axis_titles(positive)
    return corp_figure(diagram, x_title=x_title or xt, y_title=y_title or yt, title=title)


def theorem1_figure(n: int, curve: Any, *, lipschitz: float = 1.0, eps: float = 0.05,
                    **figure_kwargs: Any) -> go.Figure:
    """:func:`~pbr_core.plot.ece_vs_bins_figure` of an ECE curve over B = 1..len(curve) with
    Theorem 1's bound and its two terms at ``n`` rows, L = ``lipschitz`` and 1 - ``eps``
    (:func:`pbr_core.theorem1_bound`, ``theorem1_binning_bias``, ``theorem1_estimation_bias``), and
    the markers at floor(n^(1/3)) and at the bound-minimising B. The Bins & bias page draws its
    cached curve with this; ``figure_kwargs`` go to the builder (title, log_y, reference_ece)."""
    from pbr_core import bounds

    curve = np.asarray(curve, dtype=float)
    Bs = np.arange(1, curve.size + 1)
    return ece_vs_bins_figure(
        Bs, curve, bound=bounds.theorem1_bound(n, Bs, lipschitz=lipschitz, eps=eps),
        binning_bias=bounds.theorem1_binning_bias(Bs, lipschitz=lipschitz),
        estimation_bias=bounds.theorem1_estimation_bias(n, Bs, eps=eps),
        optimal_b=bounds.optimal_n_bins(n), minimising_b=bounds.bound_minimizing_n_bins(n, lipschitz=lipschitz, eps=eps),
        eps=eps, **figure_kwargs)


def ece_vs_bins(data: Any, labels: Any = None, *, max_bins: int | None = None, lipschitz: float = 1.0,
                eps: float = 0.05, target: str | None = None, log_y: bool = False,
                title: str | None = None) -> go.Figure:
    """The ECE against the number of bins B with the paper's bias bound (the Bins & bias page's figure).

    Parameters
    ----------
    data, labels, target
        As in :func:`reliability`.
    max_bins : int, optional
        Largest B drawn (default ``min(100, max(n, 10))``, the page's default).
    lipschitz, eps : float
        Theorem 1's Lipschitz constant L of the calibration function and its 1 - eps level.
    log_y : bool
        A logarithmic y axis.
    title : str, optional
        A title above the figure.

    Returns
    -------
    plotly.graph_objects.Figure
        The ECE of :func:`pbr_core.ece_curve` at B = 1..max_bins, the band ECE ± Theorem 1's bound
        (cut to [0, 1]), the binning and estimation terms, and vertical lines at floor(n^(1/3))
        and at :func:`pbr_core.bound_minimizing_n_bins` (:func:`theorem1_figure`).

    References
    ----------
    Fujisawa & Futami, "PAC-Bayes Analysis for Recalibration in Classification", ICML 2025, Theorem 1.
    """
    from pbr_core.metrics import ece_curve

    probs, y, _ = measured_inputs(data, labels, target)
    n = len(y)
    bmax = min(DEFAULT_MAX_BINS, max(n, 10)) if max_bins is None else int(max_bins)
    if bmax < 1:
        raise ValueError(f"Expected argument `max_bins` to be an integer larger than 0, but got {max_bins}.")
    curve = ece_curve(probs, y, n_bins=range(1, bmax + 1), binary_target="top_label")  # as in reliability()
    return theorem1_figure(n, curve, lipschitz=lipschitz, eps=eps, log_y=log_y, title=title)


def groups(report: Any, *, most: int = 12, x_title: str | None = None, y_title: str | None = None) -> go.Figure:
    """Every group's reliability curve on one chart (the Groups page's figure).

    Parameters
    ----------
    report : GroupReport
        :func:`pbr_core.groups.calibration_by_group`'s result (or the streamed one's).
    most : int
        At most this many groups, the largest first; groups too small to read
        (``report.small``) are left out unless every group is.
    x_title, y_title : str, optional
        Axis titles (default: the library's words for what the report measured).

    Returns
    -------
    plotly.graph_objects.Figure
        One trace per group, named after it: the (mean_confidence, accuracy) of the non-empty
        bins of ``report.diagrams[group]``.
    """
    # The report's target is what its diagrams measured: "positive" only for binary data on p(y=1).
    xt, yt = axis_titles(getattr(report, "target", None) == "positive")
    return groups_overlay_figure(report.diagrams, report.small, report.table["group"].tolist(),
                                 x_title=x_title or xt, y_title=y_title or yt, most=most)


def comparison(result: Any, diagrams: Mapping[str, pd.DataFrame] | None = None, *,
               kind: Literal["grid", "overlay", "folds"] | None = None, metric: str = "ece",
               labels: Mapping[str, str] | None = None, binary_positive: bool | None = None,
               x_title: str | None = None, y_title: str | None = None, metric_title: str | None = None) -> go.Figure:
    """A recalibration comparison: the methods' reliability diagrams (the Compare page's figures) or
    their test metric over folds.

    Parameters
    ----------
    result : CompareRun or DataFrame
        :func:`pbr_core.experiments.runs.run_compare`'s result (its ``table`` and, with
        ``CompareSettings(diagrams=True)``, fold 1's reliability tables), or
        :func:`pbr_core.experiments.compare`'s per-fold table.
    diagrams : mapping of method -> reliability table, optional
        Fold 1's reliability tables when ``result`` is a table (e.g. kept with ``compare``'s
        ``on_predictions``).
    kind : {"grid", "overlay", "folds"}, optional
        One diagram per method, every method's curve on one chart, or the test ``metric`` of
        every fold with its mean ± std per method (:func:`~pbr_core.plot.comparison_figure`).
        Default: "grid" when there are diagrams, else "folds".
    metric : str
        The metric of "folds".
    labels : mapping of method -> str, optional
        The methods' names on the figure (default: the registry's labels,
        :func:`pbr_core.recalibrators.method_label`).
    binary_positive : bool, optional
        Whether the diagrams are of p(y=1) (default: the result's own ``binary_positive``, else False).
    x_title, y_title : str, optional
        Axis titles of the diagrams (default: the library's words).
    metric_title : str, optional
        The metric's name on "folds"' axis (default: :data:`pbr_core.evaluation.METRICS`' label).

    Returns
    -------
    plotly.graph_objects.Figure
        "grid": each panel's title carries fold 1's test ECE from the table.
    """
    table = result.table if hasattr(result, "table") else result
    if not isinstance(table, pd.DataFrame):
        raise TypeError(f"Expected a compare table (DataFrame) or run_compare's result, but got {type(result).__name__}.")
    if diagrams is None:
        diagrams = getattr(result, "diagrams", None) or None
    kind = kind or ("grid" if diagrams else "folds")
    if kind not in ("grid", "overlay", "folds"):
        raise ValueError(f"Expected argument `kind` to be 'grid', 'overlay' or 'folds', but got {kind!r}.")
    methods = list(dict.fromkeys(table["method"])) if "method" in table.columns else list(diagrams or {})
    if labels is None:
        labels = _method_labels(methods + list(diagrams or {}), getattr(result, "kind", None) == "multiclass")
    if kind == "folds":
        return comparison_figure(table, metric=metric, labels=labels, metric_title=metric_title)
    if not diagrams:
        raise ValueError("Expected fold 1's reliability tables for a grid or overlay of diagrams "
                         "(run_compare with CompareSettings(diagrams=True), or `diagrams=`), but got none; "
                         "kind='folds' draws the table alone.")
    if binary_positive is None:
        binary_positive = bool(getattr(result, "binary_positive", False))
    xt, yt = axis_titles(binary_positive)
    xt, yt = x_title or xt, y_title or yt
    if kind == "overlay":
        return reliability_overlay_figure(diagrams, labels=labels, x_title=xt, y_title=yt)
    ece = table[table["fold"] == 0].set_index("method")["ece"].to_dict() if len(table) else {}
    return reliability_grid_figure(diagrams, labels=labels, ece=ece, x_title=xt, y_title=yt,
                                   binary_positive=binary_positive)


def _method_labels(methods: list[str], multiclass: bool) -> dict[str, str]:
    from pbr_core.recalibrators import method_label

    out = {}
    for m in dict.fromkeys(methods):
        try:
            out[m] = method_label(m, multiclass)
        except (KeyError, ValueError):  # a name outside the registry (a test double): shown as it is
            out[m] = m
    return out


def kl_gap(result: Any, *, n_classes: int | None = None, eps: float | None = None, log_kl: bool | None = None,
           title: str | None = None) -> go.Figure:
    """The ECE gap against the KL of each fit and Corollary 1's bound (paper Figure 2; the
    Generalization page's figure).

    Parameters
    ----------
    result : KLGapRun, KLGapResult or DataFrame
        :func:`pbr_core.experiments.runs.run_kl_gap`'s result, :func:`pbr_core.experiments.kl_vs_ece_gap`'s,
        or its ``table`` (columns alpha, fold, n_re, kl, ece_re, ece_te, gap, bound).
    n_classes : int, optional
        K: fits whose KL is above n_re ln K (:func:`pbr_core.experiments.extreme_kl`) are drawn apart
        (default: the run's ``n_classes``).
    eps : float, optional
        The bound's 1 - eps level, for the panel title (default: the run's settings, else 0.05).
    log_kl : bool, optional
        Force the KL axes' scale (default: logarithmic when a KL is extreme).
    title : str, optional
        A title above the figure.
    """
    if n_classes is None:
        n_classes = getattr(result, "n_classes", None)
    if eps is None:
        eps = float(getattr(getattr(result, "settings", None), "eps", 0.05))
    inner = getattr(result, "result", result)
    table = getattr(inner, "table", inner)
    if not isinstance(table, pd.DataFrame):
        raise TypeError(f"Expected a KL-gap table (DataFrame) or kl_vs_ece_gap's result, but got {type(result).__name__}.")
    return kl_gap_figure(table, eps=eps, n_classes=n_classes, log_kl=log_kl, title=title)


def n_re_sweep(result: Any, *, metric: str = "ece", labels: Mapping[str, str] | None = None,
               metric_title: str | None = None, title: str | None = None) -> go.Figure:
    """Mean test metric against the recalibration set size n_re per method (paper Figure 3; the
    Compare page's sweep figure).

    Parameters
    ----------
    result : SweepRun or DataFrame
        :func:`pbr_core.experiments.runs.run_sweep`'s result or :func:`pbr_core.experiments.n_re_sweep`'s
        per-fold table; failed fits (NaN metric) count in no mean.
    metric : str
        The metric drawn.
    labels : mapping of method -> str, optional
        The methods' names in the legend (default: the registry's labels).
    metric_title : str, optional
        The metric's name on the axis (default: the label of :data:`pbr_core.evaluation.METRICS`).
    title : str, optional
        A title above the figure.

    Returns
    -------
    plotly.graph_objects.Figure
        The means and standard deviations over folds of :func:`pbr_core.experiments.summarize`.
    """
    from pbr_core.experiments.summary import summarize

    table = getattr(result, "table", result)
    if not isinstance(table, pd.DataFrame):
        raise TypeError(f"Expected an n_re sweep table (DataFrame) or run_sweep's result, but got {type(result).__name__}.")
    if labels is None:
        labels = _method_labels(list(table["method"]), getattr(result, "kind", None) == "multiclass")
    summ = summarize(table, metrics=[metric], by=["method", "n_re"])
    return n_re_sweep_figure(summ, labels=labels, metric=metric, metric_title=metric_title, title=title)
