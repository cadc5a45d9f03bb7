"""Figure and table builders of the recalibration pages, against the pbr_core numbers they draw."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import pbr_core
from dashboard import figures_recal as FR
from pbr_core.experiments import best_mask, compare, summarize, summary_table


@pytest.fixture(scope="module")
def preds(cifar10) -> pbr_core.Predictions:
    logits, labels = cifar10
    return pbr_core.Predictions.from_arrays(logits[:3000], labels[:3000])


@pytest.fixture(scope="module")
def tables(preds) -> dict[str, pd.DataFrame]:
    """Reliability tables of the raw and a temperature-scaled prediction (pbr_core computes both)."""
    from pbr_core.recalibrators import TemperatureScaling

    fitted = TemperatureScaling().fit(preds.subset(np.arange(1000)))
    test = preds.subset(np.arange(1000, 3000))
    return {"uncalibrated": pbr_core.reliability_diagram(test.probs, test.labels, 12),
            "temperature": pbr_core.reliability_diagram(fitted.predict_proba(test), test.labels, 12)}


def _traces(fig, name):
    return [t for t in fig.data if t.name == name]


def test_reliability_grid_has_one_panel_per_method_with_its_numbers(tables):
    fig = FR.reliability_grid_figure(tables, labels={"temperature": "Temperature scaling"},
                                     ece={"uncalibrated": 0.031, "temperature": 0.012})
    bars = _traces(fig, "Accuracy per bin")
    assert len(bars) == 2
    for bar, table in zip(bars, tables.values()):
        np.testing.assert_array_equal(np.asarray(bar.y, dtype=float), table["accuracy"].to_numpy(float))
    assert len(_traces(fig, FR.TRACE_DIAGONAL)) == 2
    titles = [a.text for a in fig.layout.annotations]
    assert titles == ["uncalibrated · ECE 0.0310", "Temperature scaling · ECE 0.0120"]
    assert sum(bool(t.showlegend) for t in fig.data) == 4  # one legend entry per kind, not per panel
    # The gap boxes are drawn as on the Reliability page: under-confidence has no fill.
    under = _traces(fig, "Under-confidence gap")
    assert len(under) == 2 and under[0].marker.color == "rgba(0, 0, 0, 0)"
    binary = FR.reliability_grid_figure(tables, y_title="Observed frequency of y = 1", binary_positive=True)
    assert {t.name for t in binary.data if t.showlegend} == {
        "Observed frequency of y = 1 per bin", "Over-prediction gap", "Under-prediction gap", FR.TRACE_DIAGONAL}


def test_reliability_grid_wraps_rows_and_refuses_nothing(tables):
    many = {f"m{i}": tables["uncalibrated"] for i in range(5)}
    fig = FR.reliability_grid_figure(many, cols=3)
    assert fig.layout.height == 300 * 2 + 110
    with pytest.raises(ValueError, match="at least one"):
        FR.reliability_grid_figure({})


def test_reliability_overlay_draws_the_non_empty_bins_of_each_method(tables):
    t = tables["uncalibrated"].copy()
    t.loc[0, ["count", "mean_confidence", "accuracy"]] = [0, np.nan, np.nan]  # an empty bin draws nothing
    fig = FR.reliability_overlay_figure({"uncalibrated": t, "temperature": tables["temperature"]})
    assert [tr.name for tr in fig.data if tr.showlegend is not False][:3] == [FR.TRACE_DIAGONAL, "uncalibrated",
                                                                              "temperature"]
    line = fig.data[1]
    kept = t[t["count"] >= 10]  # the curve joins bins of 10 rows or more (the test below)
    np.testing.assert_array_equal(np.asarray(line.x, dtype=float), kept["mean_confidence"].to_numpy(float))
    np.testing.assert_array_equal(np.asarray(line.y, dtype=float), kept["accuracy"].to_numpy(float))
    assert line.line.color != _traces(fig, "temperature")[0].line.color


def test_overlaid_curves_join_only_bins_of_ten_rows_or_more():
    """Audit 12a (Groups page by model, an LLM file): bins of 1-2 rows at the low-confidence end were
    full points of every curve, a tangle of lines between rates of 0, 0.5 and 1. The curve now joins
    the bins of at least MIN_CURVE_BIN_ROWS rows; the others are hollow circles, not joined, with one
    legend entry, and the captions say so."""
    from dashboard import texts
    from pbr_core.plot.diagrams import MIN_CURVE_BIN_ROWS, TRACE_SPARSE_BINS

    # Bins of 1, 2, 9 (all under 10), 0 (empty: drawn nowhere), 10 and 250 rows.
    table = _bins([1, 2, 9, 0, 10, 250], [0.05, 0.15, 0.25, np.nan, 0.45, 0.9], [0.0, 0.5, 0.333, np.nan, 0.4, 0.85])
    counts = table["count"].to_numpy()
    assert MIN_CURVE_BIN_ROWS == 10
    fig = FR.reliability_overlay_figure({"gpt": table, "other": _bins([40, 60], [0.3, 0.8], [0.3, 0.7])})
    line, hollow = _traces(fig, "gpt")[0], _traces(fig, f"gpt: {TRACE_SPARSE_BINS.lower()}")[0]
    dense = counts >= 10
    np.testing.assert_array_equal(np.asarray(line.x, dtype=float), table["mean_confidence"].to_numpy()[dense])
    np.testing.assert_array_equal(np.asarray(line.y, dtype=float), table["accuracy"].to_numpy()[dense])
    sparse = (counts > 0) & ~dense
    np.testing.assert_array_equal(np.asarray(hollow.x, dtype=float), table["mean_confidence"].to_numpy()[sparse])
    np.testing.assert_array_equal(np.asarray(hollow.customdata), counts[sparse])
    assert hollow.mode == "markers" and hollow.marker.symbol == "circle-open" and hollow.showlegend is False
    assert hollow.marker.color == line.line.color and hollow.legendgroup == line.legendgroup == "gpt"
    assert not _traces(fig, f"other: {TRACE_SPARSE_BINS.lower()}")  # every bin of 'other' has 10 rows or more
    assert [t.name for t in fig.data if t.showlegend is not False][-1] == f"{TRACE_SPARSE_BINS} (fewer than 10 rows)"
    for caption in (texts.GROUPS_OVERLAY_CAPTION, texts.OVERLAY_CAPTION):
        assert "A bin of fewer than 10 rows is a hollow circle, not joined to its curve" in caption


def _bins(count, conf, acc) -> pd.DataFrame:
    """A reliability table's columns that an overlaid curve draws."""
    return pd.DataFrame({"count": count, "mean_confidence": conf, "accuracy": acc})


def test_alpha_selection_marks_the_chosen_alpha():
    scores = pd.DataFrame({"alpha": [1.0, 0.0, 0.5], "mean": [0.03, 0.05, 0.02], "std": [0.01, 0.01, 0.005]})
    fig = FR.alpha_selection_figure(scores, 0.5)
    line = fig.data[0]
    np.testing.assert_array_equal(line.x, [0.0, 0.5, 1.0])  # sorted by alpha
    chosen = next(t for t in fig.data if t.name.startswith(FR.TRACE_CHOSEN))
    assert list(chosen.x) == [0.5] and list(chosen.y) == [0.02]
    no_std = FR.alpha_selection_figure(scores.drop(columns="std"), 0.25)  # chosen not on the grid: no marker
    assert len(no_std.data) == 1


def test_n_re_sweep_figure_means_bands_and_log_axis():
    rows = []
    for fold in range(3):
        for n_re in (10, 100, 1000):
            rows += [{"method": "temperature", "fold": fold, "n_re": n_re, "ece": 0.1 / n_re ** 0.3 + 0.01 * fold},
                     {"method": "uncalibrated", "fold": fold, "n_re": n_re, "ece": 0.05}]
    summ = summarize(pd.DataFrame(rows), metrics=["ece"], by=["method", "n_re"])
    fig = FR.n_re_sweep_figure(summ, labels={"temperature": "Temperature scaling"})
    assert fig.layout.xaxis.type == "log"
    assert list(fig.layout.xaxis.tickvals) == [10, 100, 1000]
    line = next(t for t in fig.data if t.name == "Temperature scaling")
    expected = summ[(summ["method"] == "temperature")].sort_values("n_re")["mean"].to_numpy()
    np.testing.assert_allclose(np.asarray(line.y, dtype=float), expected)
    band = next(t for t in fig.data if t.name == "temperature band")
    assert band.fill == "toself" and np.all(np.asarray(band.y, dtype=float) >= 0)
    flat = next(t for t in fig.data if t.name == "uncalibrated band")  # std 0: a band of zero width
    np.testing.assert_allclose(np.asarray(flat.y, dtype=float), 0.05)


def test_kl_gap_figure_colours_by_alpha_and_sorts_the_bound():
    table = pd.DataFrame({
        "alpha": [0.0, 0.5, 1.0, 0.0], "fold": [0, 0, 0, 1], "kl": [30.0, 10.0, 2.0, np.nan],
        "ece_re": [0.01, 0.02, 0.03, np.nan], "ece_te": [0.06, 0.04, 0.035, np.nan],
        "gap": [0.05, 0.02, 0.005, np.nan], "bound": [0.9, 0.7, 0.6, np.nan],
    })
    fig = FR.kl_gap_figure(table)
    pts = next(t for t in fig.data if t.name == FR.TRACE_GAP_POINTS)
    assert len(pts.x) == 3  # the failed fit (NaN) is left out
    np.testing.assert_array_equal(np.asarray(pts.marker.color, dtype=float), [0.0, 0.5, 1.0])
    bound = next(t for t in fig.data if t.name == FR.TRACE_BOUND_POINTS)
    np.testing.assert_array_equal(np.asarray(bound.x, dtype=float), [2.0, 10.0, 30.0])
    np.testing.assert_array_equal(np.asarray(bound.y, dtype=float), [0.6, 0.7, 0.9])
    assert fig.layout.yaxis2.type == "log"


def test_summary_styler_highlights_the_best_metric_cells_only(preds):
    table = compare(preds, ["uncalibrated", "temperature"], n_re=500, n_folds=2)
    summ = summarize(table)
    styled = FR.summary_styler(summary_table(summ), best_mask(summ), labels={"temperature": "Temperature scaling"})
    frame = styled.data
    assert list(frame.index) == ["uncalibrated", "Temperature scaling"]
    assert "ECE" in frame.columns and "Fit time (s)" in frame.columns
    best = best_mask(summ)
    ece_best = best["ece"]
    assert ece_best["temperature"] and not ece_best["uncalibrated"]
    # The temperature ECE cell is highlighted; no fit-time cell is, although best_mask flags one.
    assert best["fit_seconds"].any()
    styled._compute()
    cells = {(r, c) for (r, c), props in styled.ctx.items() if ("background-color", "#d8f0dc") in props}
    cols = list(summary_table(summ).columns)
    expected = {(i, cols.index(m)) for m in cols if m in FR.HIGHLIGHTED for i, ok in enumerate(best[m]) if ok}
    assert cells == expected and (1, cols.index("ece")) in cells
