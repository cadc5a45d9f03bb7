"""The pure figure and table builders: the right traces, and every plotted number is pbr_core's."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import pbr_core
from dashboard import figures as F
from dashboard import tables
from dashboard.state import describe_sample, metric_view, Loaded
from dashboard.compute import subsample_sizes
from pbr_core import Predictions


@pytest.fixture(scope="module")
def preds(cifar100) -> Predictions:
    return Predictions.from_arrays(*cifar100)


@pytest.fixture(scope="module")
def top_label(preds) -> Predictions:
    return Predictions.from_top_label(preds.confidence, preds.predicted, preds.labels)


def _nan_equal(a, b) -> None:
    np.testing.assert_allclose(np.asarray(a, dtype=float), np.asarray(b, dtype=float), equal_nan=True,
                               rtol=0, atol=1e-12)


# ------------------------------------------------------------------------ reliability diagram
def test_reliability_figure_has_bars_gap_diagonal_and_histogram(preds):
    fig = F.reliability_figure(pbr_core.reliability_diagram(preds.probs, preds.labels, 15))
    # CIFAR-100 DenseNet is over-confident: some bars end outside their consistency band, marked
    assert [t.name for t in fig.data] == [F.TRACE_ACCURACY, F.TRACE_OVER, F.TRACE_UNDER, F.TRACE_DIAGONAL,
                                          F.TRACE_BANDS, F.TRACE_OUTSIDE, F.TRACE_COUNTS]
    # The histogram sits in the second row and shares the x-axis with the diagram.
    counts = F.trace(fig, F.TRACE_COUNTS)
    assert counts.yaxis == "y2" and counts.xaxis == "x2"
    assert fig.layout.xaxis.matches == "x2" or fig.layout.xaxis2.matches == "x"
    diag = F.trace(fig, F.TRACE_DIAGONAL)
    assert list(diag.x) == [0.0, 1.0] and list(diag.y) == [0.0, 1.0]


def test_consistency_bands_are_drawn_from_the_table_and_the_bars_outside_are_marked(preds):
    table = pbr_core.reliability_diagram(preds.probs, preds.labels, 15)
    fig = F.reliability_figure(table)
    band, outside = F.trace(fig, F.TRACE_BANDS), F.trace(fig, F.TRACE_OUTSIDE)
    full = table["count"].to_numpy() > 0
    _nan_equal(np.asarray(band.base, dtype=float)[full], table["band_low"][full])
    top = np.asarray(band.base, dtype=float) + np.asarray(band.y, dtype=float)
    assert np.all(top[full] >= table["band_high"].to_numpy()[full] - 1e-12)
    acc = table["accuracy"].to_numpy()
    is_out = full & ((acc < table["band_low"].to_numpy()) | (acc > table["band_high"].to_numpy()))
    _nan_equal(outside.y, acc[is_out])
    assert F.TRACE_BANDS not in [t.name for t in F.reliability_figure(table, bands=False).data]


@pytest.mark.parametrize("n_bins", [1, 7, 21, 60])
def test_reliability_figure_numbers_are_pbr_cores(preds, n_bins):
    table = pbr_core.reliability_diagram(preds.probs, preds.labels, n_bins)
    fig = F.reliability_figure(table)
    acc, over, under, counts = (F.trace(fig, n) for n in (F.TRACE_ACCURACY, F.TRACE_OVER, F.TRACE_UNDER,
                                                          F.TRACE_COUNTS))
    _nan_equal(acc.y, table["accuracy"])
    _nan_equal(acc.x, (table["lower"] + table["upper"]) / 2)
    _nan_equal(np.asarray(acc.y) + np.asarray(acc.error_y.array), table["ci_high"])
    _nan_equal(np.asarray(acc.y) - np.asarray(acc.error_y.arrayminus), table["ci_low"])
    np.testing.assert_array_equal(counts.y, table["count"])
    conf, accuracy = table["mean_confidence"].to_numpy(float), table["accuracy"].to_numpy(float)
    o, u = np.asarray(over.y, dtype=float), np.asarray(under.y, dtype=float)
    # Over-confident bins: a box from the bar's top up to the mean confidence; under-confident bins:
    # a box from the mean confidence up to the bar's top. Never both in one bin.
    is_over = conf > accuracy
    _nan_equal(np.asarray(over.base, dtype=float)[is_over], accuracy[is_over])
    _nan_equal((np.asarray(over.base, dtype=float) + o)[is_over], conf[is_over])
    _nan_equal(np.asarray(under.base, dtype=float)[~is_over & (u == u)], conf[~is_over & (u == u)])
    _nan_equal((np.asarray(under.base, dtype=float) + u)[u == u], accuracy[u == u])
    assert not np.any((o == o) & (u == u))
    # The gap boxes, weighted by the share of samples, add up to the ECE.
    share = np.asarray(counts.y) / preds.n
    assert np.nansum(share * np.fmax(np.nan_to_num(o), np.nan_to_num(u))) == pytest.approx(
        pbr_core.ece(preds.probs, preds.labels, n_bins), abs=1e-12)


def _rgba_alpha(color: str) -> float:
    return float(color.rsplit(",", 1)[1].strip(" )")) if color.startswith("rgba") else 1.0


def test_under_confidence_is_drawn_so_that_the_bar_keeps_its_colour():
    """The issue: under-confidence boxes lie inside the blue bar; a translucent red fill there made
    the bar look purple, while the guide said "red boxes below a bar". Now they have no fill (an
    orange outline and hatching) and the guide says what is drawn."""
    table = pd.DataFrame({"lower": [0.0, 0.5], "upper": [0.5, 1.0], "count": [10, 10],
                          "mean_confidence": [0.40, 0.70], "accuracy": [0.20, 0.90], "gap": [-0.2, 0.2],
                          "ci_low": [0.1, 0.8], "ci_high": [0.3, 0.95]})
    fig = F.reliability_figure(table)
    over, under = F.trace(fig, F.TRACE_OVER), F.trace(fig, F.TRACE_UNDER)
    assert list(np.asarray(over.y, dtype=float)[:1]) == pytest.approx([0.2]) and np.isnan(over.y[1])
    assert np.isnan(under.y[0]) and under.y[1] == pytest.approx(0.2) and under.base[1] == pytest.approx(0.7)
    assert _rgba_alpha(under.marker.color) == 0.0          # nothing mixes with the blue bar
    assert under.marker.line.color == F.COLORS["under"] != F.COLORS["gap"]
    assert under.marker.pattern.shape == "/"
    assert _rgba_alpha(over.marker.color) > 0.0             # the over-confidence box stands on white
    from dashboard import texts

    for guide in (texts.HOW_TO_READ_RELIABILITY, texts.HOW_TO_READ_BINARY):
        assert "Red boxes on top of a bar" in guide and "Orange hatched outlines inside the top of a bar" in guide
        assert "below a bar" not in guide


def test_the_intervals_say_what_they_cover(preds):
    """Audit 7: the smoothed curve's band is a pointwise 95% interval for the smoothed curve (it covered
    the true curve of a miscalibrated file at 0.72-0.85), and a whisker holds per bar (all 12 bars'
    whiskers held their bins' frequencies in 340 of 600 Adult files); the whisker is Clopper-Pearson's
    since audit 10b (Wilson's held a bar of rare events at 91.9 %)."""
    from dashboard import texts
    from pbr_core.estimators import smooth_reliability

    for words in ("95% interval for the smoothed curve", "not for the true calibration curve",
                  "one point at a time, not the whole curve at once"):
        assert words in " ".join(texts.SMOOTH_HELP.split())
    assert "bootstrap" not in texts.SMOOTH_HELP
    for guide in (texts.HOW_TO_READ_RELIABILITY, texts.HOW_TO_READ_BINARY):
        assert ("95% exact (Clopper-Pearson) interval for the bin's true frequency, per bar, not for all bars at once"
                in " ".join(guide.split()))
        assert "plausibly" not in guide
    fig = F.reliability_figure(pbr_core.reliability_diagram(preds.probs, preds.labels, 10),
                               smooth=smooth_reliability(preds.probs, preds.labels))
    names = [t.name for t in fig.data]
    assert F.TRACE_SMOOTH_BAND == "95% interval for the smoothed curve, point by point" and F.TRACE_SMOOTH_BAND in names


def test_binary_legend_uses_the_axis_words(preds):
    y = (preds.labels == 3).astype(int)
    x_title, y_title = "Predicted probability p(y=1)", "Observed frequency of y = 1"
    fig = F.reliability_figure(pbr_core.reliability_diagram(preds.probs[:, 3], y, 8), x_title=x_title,
                               y_title=y_title, binary_positive=True)
    names = [t.name for t in fig.data if t.showlegend is not False]
    assert names[:4] == [f"{y_title} per bin", F.TRACE_OVER_BINARY, F.TRACE_UNDER_BINARY, F.TRACE_DIAGONAL]
    assert set(names[4:]) <= {F.TRACE_BANDS, F.TRACE_OUTSIDE}
    assert not any("Accuracy" in n or "confidence" in n for n in names)
    assert fig.layout.yaxis.title.text == y_title


def test_reliability_counts_text_only_when_readable(preds):
    few = F.reliability_figure(pbr_core.reliability_diagram(preds.probs, preds.labels, 10))
    assert list(F.trace(few, F.TRACE_COUNTS).text) == [f"{c:,}" for c in
                                                       pbr_core.reliability_diagram(preds.probs, preds.labels, 10)["count"]]
    many = F.reliability_figure(pbr_core.reliability_diagram(preds.probs, preds.labels, F.MAX_BINS_WITH_TEXT + 1))
    assert F.trace(many, F.TRACE_COUNTS).text is None
    # Counts are always in the hover (customdata column 2).
    np.testing.assert_array_equal(np.asarray(F.trace(many, F.TRACE_COUNTS).customdata)[:, 2],
                                  pbr_core.reliability_diagram(preds.probs, preds.labels, F.MAX_BINS_WITH_TEXT + 1)["count"])


def test_reliability_figure_for_top_label_only_and_binary(top_label, preds):
    conf, correct = top_label.metric_inputs()
    table = pbr_core.reliability_diagram(conf, correct, 12)
    fig = F.reliability_figure(table)
    # Top-label-only (confidence, correct) gives exactly the top-label diagram of the full data.
    _nan_equal(F.trace(fig, F.TRACE_ACCURACY).y,
               pbr_core.reliability_diagram(preds.probs, preds.labels, 12)["accuracy"])
    y = (preds.labels == 3).astype(int)
    binary = F.reliability_figure(pbr_core.reliability_diagram(preds.probs[:, 3], y, 8),
                                  x_title="Predicted probability p(y=1)", y_title="Observed frequency of y = 1")
    assert binary.layout.xaxis2.title.text == "Predicted probability p(y=1)"
    assert binary.layout.yaxis.title.text == "Observed frequency of y = 1"


def test_reliability_figure_rejects_other_tables():
    with pytest.raises(ValueError, match="missing"):
        F.reliability_figure(pd.DataFrame({"accuracy": [0.5]}))


# ------------------------------------------------------------------------ ECE against B
def _curve_figure(probs, labels, n, bmax=100, lip=1.0, eps=0.05, **kw):
    Bs = np.arange(1, bmax + 1)
    return Bs, F.ece_vs_bins_figure(
        Bs, pbr_core.ece_curve(probs, labels, Bs),
        bound=pbr_core.theorem1_bound(n, Bs, lipschitz=lip, eps=eps),
        binning_bias=pbr_core.theorem1_binning_bias(Bs, lipschitz=lip),
        estimation_bias=pbr_core.theorem1_estimation_bias(n, Bs, eps=eps),
        optimal_b=pbr_core.optimal_n_bins(n),
        minimising_b=pbr_core.bound_minimizing_n_bins(n, lipschitz=lip, eps=eps), eps=eps, **kw,
    )


@pytest.mark.parametrize("lip,eps", [(1.0, 0.05), (3.0, 0.01), (0.0, 0.2)])
def test_ece_vs_bins_numbers_are_pbr_cores(preds, lip, eps):
    Bs, fig = _curve_figure(preds.probs, preds.labels, preds.n, lip=lip, eps=eps)
    ece = pbr_core.ece_curve(preds.probs, preds.labels, Bs)
    bound = pbr_core.theorem1_bound(preds.n, Bs, lipschitz=lip, eps=eps)
    _nan_equal(F.trace(fig, F.TRACE_ECE).y, ece)
    np.testing.assert_array_equal(F.trace(fig, F.TRACE_ECE).x, Bs)
    _nan_equal(F.trace(fig, F.TRACE_BINNING).y, pbr_core.theorem1_binning_bias(Bs, lipschitz=lip))
    _nan_equal(F.trace(fig, F.TRACE_ESTIMATION).y, pbr_core.theorem1_estimation_bias(preds.n, Bs, eps=eps))
    # The band is ECE +- bound, cut to [0, 1].
    _nan_equal(F.trace(fig, F.TRACE_BAND_LOW).y, np.clip(ece - bound, 0, 1))
    band = F.trace(fig, F.TRACE_BAND_HIGH)
    _nan_equal(band.y, np.clip(ece + bound, 0, 1))
    assert band.fill == "tonexty" and f"{1 - eps:.0%}" in band.name
    # One-pass curve equals the one-B ECE at a few B.
    for b in (1, 21, 100):
        assert F.trace(fig, F.TRACE_ECE).y[b - 1] == pytest.approx(pbr_core.ece(preds.probs, preds.labels, b), abs=1e-12)


@pytest.mark.parametrize("n", [150, 1000, 10000])
def test_ece_vs_bins_markers_at_the_right_b(preds, n):
    probs, labels = preds.probs[:n], preds.labels[:n]
    _, fig = _curve_figure(probs, labels, n, bmax=min(100, n))
    assert F.marker_b(fig, F.TRACE_OPTIMAL_B) == pbr_core.optimal_n_bins(n)
    assert F.marker_b(fig, F.TRACE_MINIMISING_B) == pbr_core.bound_minimizing_n_bins(n)
    opt = F.trace(fig, F.TRACE_OPTIMAL_B)
    assert list(opt.x) == [pbr_core.optimal_n_bins(n)] * 2
    assert opt.name == f"{F.TRACE_OPTIMAL_B} = {pbr_core.optimal_n_bins(n)}"


def test_ece_vs_bins_options(preds, top_label):
    conf, correct = top_label.metric_inputs()
    Bs, fig = _curve_figure(conf, correct, top_label.n, bmax=40,
                            reference_ece=pbr_core.ece_curve(preds.probs, preds.labels, range(1, 41)), log_y=True)
    _nan_equal(F.trace(fig, F.TRACE_ECE).y, pbr_core.ece_curve(preds.probs, preds.labels, Bs))
    assert F.trace(fig, F.TRACE_ECE_REFERENCE) is not None
    assert fig.layout.yaxis.type == "log"
    _, plain = _curve_figure(preds.probs, preds.labels, preds.n, bmax=40)
    assert all(t.name != F.TRACE_ECE_REFERENCE for t in plain.data)
    assert plain.layout.yaxis.range[0] == 0.0 and 0 < plain.layout.yaxis.range[1] <= 1.0
    with pytest.raises(ValueError, match="shape"):
        F.ece_vs_bins_figure([1, 2, 3], [0.1, 0.2], bound=[1, 1, 1], binning_bias=[1, 1, 1],
                             estimation_bias=[1, 1, 1], optimal_b=1, minimising_b=1, eps=0.05)


# ------------------------------------------------------------------------ tables and helpers
def test_preview_frame_for_each_kind(preds, top_label):
    df = tables.preview_frame(preds, rows=5)
    assert len(df) == 5 and {"true label", "predicted", "confidence", "correct"} <= set(df.columns)
    assert sum(c.startswith("p(") for c in df.columns) == tables.MAX_PREVIEW_CLASSES
    np.testing.assert_allclose(df["confidence"], preds.confidence[:5])
    binary = Predictions.from_arrays(preds.probs[:20, 0], (preds.labels[:20] == 0).astype(int))
    assert "p(y=1)" in tables.preview_frame(binary).columns
    assert list(tables.preview_frame(top_label, rows=3).columns) == ["true label", "predicted", "confidence", "correct"]


def test_classwise_frame_sorted_worst_first(preds):
    per_class = pbr_core.classwise_ece(preds.probs, preds.labels, 21, reduce=False)
    df = tables.classwise_frame(per_class, preds.class_names, top=5)
    assert len(df) == 5 and df["ECE of this class"].is_monotonic_decreasing
    assert df["ECE of this class"].iloc[0] == pytest.approx(per_class.max())


def test_metric_view_per_kind(preds, top_label):
    binary = Predictions.from_arrays(preds.probs[:50, 0], (preds.labels[:50] == 0).astype(int))
    pos = metric_view(Loaded(binary, "b", "b.csv", "upload", "k"), "positive")
    assert pos.probs.ndim == 1 and np.array_equal(pos.probs, binary.p_positive)
    top = metric_view(Loaded(binary, "b", "b.csv", "upload", "k"), "top_label")
    assert top.probs.shape == (50, 2) and top.key != pos.key
    tl = metric_view(Loaded(top_label, "t", "t.csv", "upload", "k"), "positive")
    assert tl.top_label_only and np.array_equal(tl.labels, top_label.correct)


def test_describe_sample_and_subsample_sizes():
    assert describe_sample("cifar100_densenet121.npz").startswith("CIFAR-100 · DenseNet-121")
    assert describe_sample("kitti_xgboost.csv") == "KITTI · XGBoost (binary p(y=1), csv)"
    assert "top-label only" in describe_sample("cifar10_resnet110_toplabel.csv")
    assert describe_sample("something_else.csv") == "something_else.csv"
    assert subsample_sizes(10_000)[-1] == 10_000 and subsample_sizes(10_000)[0] == 100
    assert subsample_sizes(50) == [50]


def test_bootstrap_resamples_shrink_only_for_large_files():
    from dashboard.compute import bootstrap_resamples

    assert bootstrap_resamples(10_000) == 1000 and bootstrap_resamples(200_000) == 1000
    assert bootstrap_resamples(1_000_000) == 200 and bootstrap_resamples(10_000_000) == 50
    assert bootstrap_resamples(10**9) == 50
