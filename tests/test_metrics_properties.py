"""Property tests (hypothesis) for pbr_core.metrics: invariants that hold for every input."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

import pbr_core
from pbr_core import metrics as M
from pbr_core.predictions import softmax

SETTINGS = settings(max_examples=40, deadline=None)
SKLEARN_SETTINGS = settings(max_examples=20, deadline=None)  # sklearn validation dominates the cost


@st.composite
def multiclass(draw, max_n=120, max_k=6):
    """Softmax probabilities of bounded logits (no probability below ~1e-10) and labels."""
    n = draw(st.integers(1, max_n))
    K = draw(st.integers(2, max_k))
    logits = draw(arrays(np.float64, (n, K), elements=st.floats(-10, 10, allow_nan=False)))
    y = draw(arrays(np.int64, n, elements=st.integers(0, K - 1)))
    return softmax(logits), y


@st.composite
def binary(draw, max_n=120):
    n = draw(st.integers(1, max_n))
    # Mix arbitrary values with exact bin edges, 0 and 1.
    special = st.sampled_from([0.0, 1.0, 0.5, 0.25, 1 / 3, 2 / 3, 0.1, 0.7, 0.9])
    p = draw(arrays(np.float64, n, elements=st.one_of(st.floats(0, 1), special)))
    y = draw(arrays(np.int64, n, elements=st.integers(0, 1)))
    return p, y


any_data = st.one_of(multiclass(), binary())
n_bins = st.integers(1, 60)


@SETTINGS
@given(any_data, n_bins)
def test_ece_and_mce_lie_in_unit_interval_and_mce_bounds_ece(data, B):
    p, y = data
    e, m = pbr_core.ece(p, y, B), pbr_core.mce(p, y, B)
    assert 0.0 <= e <= 1.0 + 1e-12
    assert 0.0 <= m <= 1.0 + 1e-12
    assert m >= e - 1e-12


@SETTINGS
@given(
    st.lists(st.tuples(st.integers(1, 12), st.integers(0, 12)), min_size=1, max_size=15),
    n_bins,
    st.randoms(use_true_random=False),
)
def test_ece_of_a_perfectly_calibrated_construction_is_zero(groups, B, rnd):
    # Each group: m rows with p(y=1) = k/m, exactly k of them positive. Every bin is a union of
    # whole groups, so accuracy equals mean confidence in every bin, for every B.
    p, y = [], []
    for m, k in groups:
        k = min(k, m)
        p += [k / m] * m
        y += [1] * k + [0] * (m - k)
    order = list(range(len(p)))
    rnd.shuffle(order)
    p, y = np.array(p)[order], np.array(y)[order]
    assert pbr_core.ece(p, y, B) == pytest.approx(0.0, abs=1e-12)
    assert pbr_core.ece_curve(p, y, [B])[0] == pytest.approx(0.0, abs=1e-12)


@SETTINGS
@given(any_data, n_bins, st.randoms(use_true_random=False))
def test_ece_is_invariant_to_permuting_samples(data, B, rnd):
    p, y = data
    perm = np.arange(len(y))
    rnd.shuffle(perm)
    assert pbr_core.ece(p[perm], y[perm], B) == pytest.approx(pbr_core.ece(p, y, B), abs=1e-12)
    assert pbr_core.ece_curve(p[perm], y[perm], [B]) == pytest.approx(pbr_core.ece_curve(p, y, [B]), abs=1e-12)


@SETTINGS
@given(any_data, st.lists(st.integers(1, 80), min_size=1, max_size=12))
def test_ece_curve_equals_ece_at_every_B(data, Bs):
    p, y = data
    curve = pbr_core.ece_curve(p, y, Bs)
    np.testing.assert_allclose(curve, [pbr_core.ece(p, y, B) for B in Bs], atol=1e-12)


@SETTINGS
@given(
    arrays(np.float64, st.integers(1, 200), elements=st.one_of(
        st.floats(0, 1), st.sampled_from([0.0, 1.0, 0.5, 1 / 3, 2 / 3, 0.1, 0.3, 0.7, 1 / 7, 6 / 7]))),
    st.integers(1, 1000),
)
def test_fast_bin_index_equals_searchsorted_on_the_edges(c, B):
    # (a, b] bins, edges k/B in float64: exactly what searchsorted(..., side="left") gives.
    edges = np.arange(1, B + 1, dtype=np.float64) / B
    c = np.concatenate([c, edges, np.nextafter(edges, 0), np.nextafter(edges, 2).clip(0, 1)])
    assert np.array_equal(M.bin_index(c, B), np.searchsorted(edges, c, side="left"))


@SKLEARN_SETTINGS
@given(multiclass())
def test_proper_scores_match_sklearn(data):
    from sklearn.metrics import accuracy_score, brier_score_loss, log_loss

    p, y = data
    K = p.shape[1]
    assert pbr_core.accuracy(p, y) == pytest.approx(accuracy_score(y, p.argmax(axis=1)))
    # sklearn halves the Brier score for two columns by default; ours is always the sum over classes.
    ref_brier = brier_score_loss(y, p, labels=list(range(K)), scale_by_half=False)
    assert pbr_core.brier_score(p, y) == pytest.approx(ref_brier, rel=1e-10, abs=1e-12)
    assert pbr_core.nll(p, y) == pytest.approx(log_loss(y, p, labels=list(range(K))), rel=1e-9)


@SKLEARN_SETTINGS
@given(binary())
def test_binary_proper_scores_match_sklearn(data):
    from sklearn.metrics import accuracy_score, brier_score_loss, log_loss

    p, y = data
    p = np.clip(p, 1e-6, 1 - 1e-6)  # sklearn clips at machine eps, we at the smallest float
    assert pbr_core.accuracy(p, y) == pytest.approx(accuracy_score(y, (p > 0.5).astype(int)))
    assert pbr_core.brier_score(p, y) == pytest.approx(2 * brier_score_loss(y, p, pos_label=1), rel=1e-10, abs=1e-12)
    assert pbr_core.nll(p, y) == pytest.approx(log_loss(y, p, labels=[0, 1]), rel=1e-9)


@SETTINGS
@given(multiclass(), n_bins)
def test_classwise_ece_is_the_binary_ece_of_each_class(data, B):
    p, y = data
    per_class = pbr_core.classwise_ece(p, y, B, reduce=False)
    assert per_class.shape == (p.shape[1],)
    for k in range(p.shape[1]):
        assert per_class[k] == pytest.approx(pbr_core.ece(p[:, k], (y == k).astype(int), B), abs=1e-12)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # B' > n is expected here
            assert pbr_core.ece_k(p, y, B, classes=[k]) == pytest.approx(per_class[k], abs=1e-12)


@SETTINGS
@given(multiclass(), st.integers(1, 5), st.randoms(use_true_random=False))
def test_ece_k_is_bounded_permutation_invariant_and_one_region_is_the_mean_gap(data, Bp, rnd):
    p, y = data
    K = p.shape[1]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        e = pbr_core.ece_k(p, y, Bp)
        perm = np.arange(len(y))
        rnd.shuffle(perm)
        assert pbr_core.ece_k(p[perm], y[perm], Bp) == pytest.approx(e, abs=1e-12)
    assert 0.0 <= e <= 2.0 + 1e-12  # an L1 distance between two points of the simplex
    freq = np.bincount(y, minlength=K) / len(y)
    assert pbr_core.ece_k(p, y, 1) == pytest.approx(np.abs(p.mean(axis=0) - freq).sum(), abs=1e-12)


@SETTINGS
@given(any_data, n_bins)
def test_reliability_diagram_is_consistent_with_ece(data, B):
    p, y = data
    rd = pbr_core.reliability_diagram(p, y, B)
    assert len(rd) == B and rd["count"].sum() == len(y)
    occ = rd[rd["count"] > 0]
    assert (occ["weight"] * occ["gap"].abs()).sum() == pytest.approx(pbr_core.ece(p, y, B), abs=1e-12)
    assert ((occ["mean_confidence"] > occ["lower"] - 1e-12) & (occ["mean_confidence"] <= occ["upper"] + 1e-12)).all()


@settings(max_examples=25, deadline=None)
@given(any_data, st.integers(1, 20), st.integers(0, 2**32 - 1))
def test_bootstrap_interval_is_ordered_and_inside_unit_interval(data, B, seed):
    p, y = data
    # The interval always contains the ECE itself: its ends never contradict it.
    lo, hi = pbr_core.ece_bootstrap_ci(p, y, B, n_boot=50, seed=seed)
    assert 0.0 <= lo <= pbr_core.ece(p, y, B) + 1e-12 and pbr_core.ece(p, y, B) <= hi + 1e-12 and hi <= 1.0
