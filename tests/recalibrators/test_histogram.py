"""Histogram binning against a slow, obvious loop."""

from __future__ import annotations

import numpy as np
import pytest

import pbr_core
from pbr_core.metrics import bin_index
from pbr_core.recalibrators import HistogramBinning


def slow_histogram_binning(p_fit, y_fit, p_new, n_bins, strategy):
    """Bins (lo, hi] (the first one also holds 0), frequency of y = 1 per bin, midpoint if empty."""
    n = len(p_fit)
    if strategy == "uniform":
        edges = [0.0] + [j / n_bins for j in range(1, n_bins)] + [1.0]
    else:
        s = sorted(p_fit)
        edges = [0.0]
        for j in range(1, n_bins):
            c = min(max(int(np.rint(j * n / n_bins)), 1), n - 1)
            edges.append((s[c - 1] + s[c]) / 2)
        edges.append(1.0)

    def which(x):
        for j in range(n_bins):
            if x <= edges[j + 1] or j == n_bins - 1:
                return j

    values = []
    for j in range(n_bins):
        members = [y for x, y in zip(p_fit, y_fit) if which(x) == j]
        values.append(sum(members) / len(members) if members else (edges[j] + edges[j + 1]) / 2)
    return np.array([values[which(x)] for x in p_new])


@pytest.mark.parametrize("strategy", ["uniform", "equal_mass"])
@pytest.mark.parametrize("n_bins", [1, 7, 10, 40])
def test_matches_the_slow_loop(binary_split, strategy: str, n_bins: int) -> None:
    p, y = binary_split.fit.probs[:400, 1], binary_split.fit.labels[:400]
    p_new = np.concatenate([binary_split.test.probs[:300, 1], np.linspace(0, 1, 101)])
    ours = HistogramBinning(floor=0.0, n_bins=n_bins, strategy=strategy).fit(p, y).predict_proba(p_new)[:, 1]
    ref = slow_histogram_binning(list(p), list(y), p_new, n_bins, strategy)
    np.testing.assert_array_equal(ours, ref)


def test_uniform_bins_are_the_metrics_bins() -> None:
    rng = np.random.default_rng(0)
    p = np.concatenate([rng.uniform(size=500), np.arange(11) / 10, [0.0, 1.0]])
    y = (rng.uniform(size=p.size) < p).astype(int)
    rec = HistogramBinning(floor=0.0, n_bins=10, strategy="uniform").fit(p, y)
    idx = bin_index(p, 10)
    freq = np.bincount(idx, weights=y, minlength=10) / np.bincount(idx, minlength=10)
    np.testing.assert_array_equal(rec.predict_proba(p)[:, 1], freq[idx])


def test_perfectly_calibrated_on_its_own_bins(binary_split) -> None:
    """On the recalibration set, with the same uniform bins, the binary ECE after binning is 0."""
    p, y = binary_split.fit.probs[:, 1], binary_split.fit.labels
    q = HistogramBinning(floor=0.0, n_bins=10, strategy="uniform").fit(p, y).predict_proba(p)[:, 1]
    assert pbr_core.ece(q, y, n_bins=10) < 1e-12


def test_equal_mass_bins_hold_equal_counts() -> None:
    p = np.random.default_rng(1).uniform(size=1000)
    rec = HistogramBinning(floor=0.0, n_bins=8, strategy="equal_mass").fit(p, (p > 0.5).astype(int))
    counts = np.bincount(np.searchsorted(rec.maps_[0]["edges"], p, side="left"), minlength=8)
    np.testing.assert_array_equal(counts, np.full(8, 125))


def test_empty_bins_predict_their_midpoint_and_default_bins() -> None:
    p = np.array([0.05, 0.1, 0.15, 0.9, 0.95])
    y = np.array([0, 0, 1, 1, 1])
    rec = HistogramBinning(floor=0.0, n_bins=4, strategy="uniform").fit(p, y)
    np.testing.assert_allclose(rec.maps_[0]["values"], [1 / 3, 0.375, 0.625, 1.0])
    assert HistogramBinning(floor=0.0).fit(np.linspace(0, 1, 1000), np.arange(1000) % 2).maps_[0]["values"].size == 10


def test_one_vs_all_rows_that_become_all_zero_are_uniform() -> None:
    P = np.array([[0.8, 0.1, 0.1], [0.1, 0.8, 0.1], [0.1, 0.1, 0.8], [0.7, 0.2, 0.1]])
    y = np.array([0, 1, 2, 0])
    rec = HistogramBinning(floor=0.0, n_bins=2, strategy="uniform", multiclass="one_vs_all").fit(P, y)  # every class: frequency 0 in (0, 0.5]
    out = rec.predict_proba(np.array([[0.34, 0.33, 0.33], [0.6, 0.2, 0.2]]))
    np.testing.assert_array_equal(out[0], np.full(3, 1 / 3))
    np.testing.assert_array_equal(out[1], [1.0, 0.0, 0.0])


@pytest.mark.parametrize("params,name", [({"n_bins": 0}, "n_bins"), ({"n_bins": 2.5}, "n_bins"),
                                         ({"strategy": "quantile"}, "strategy")])
def test_invalid_params(params: dict, name: str) -> None:
    with pytest.raises(ValueError, match=f"`{name}`"):
        HistogramBinning(floor=0.0, **params).fit(np.array([0.2, 0.8]), np.array([0, 1]))
