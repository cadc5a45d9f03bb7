"""Temperature scaling against a 1-D grid search on the NLL, against netcal, and its edge cases."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.special import softmax

from pbr_core.recalibrators import TemperatureScaling
from pbr_core.recalibrators.temperature import temperature_nll


def test_matches_a_fine_grid_search_on_the_nll(cifar100_split) -> None:
    z, y = cifar100_split.fit.logits, cifar100_split.fit.labels
    T = TemperatureScaling().fit(z, y).temperature_
    grid = np.linspace(0.5, 3.0, 26)  # step 0.1, then zoom in twice around the best point: 1e-3, 1e-5
    for step in (1e-3, 1e-5):
        best = grid[np.argmin([temperature_nll(t, z, y) for t in grid])]
        grid = best + step * np.arange(-100, 101)
    nll = np.array([temperature_nll(t, z, y) for t in grid])
    T_grid = grid[np.argmin(nll)]
    assert abs(T - T_grid) <= 1e-5
    assert temperature_nll(T, z, y) <= nll.min() + 1e-15
    # Stationary point: the central difference of the NLL vanishes at T.
    h = 1e-6
    assert abs(temperature_nll(T + h, z, y) - temperature_nll(T - h, z, y)) / (2 * h) < 1e-8


def test_matches_netcal(cifar100_split) -> None:
    netcal_scaling = pytest.importorskip("netcal.scaling")
    fit, test = cifar100_split.fit, cifar100_split.test
    ours = TemperatureScaling().fit(fit).predict_proba(test)
    ref = netcal_scaling.TemperatureScaling()
    ref.fit(softmax(fit.logits, axis=1), fit.labels)
    theirs = ref.transform(softmax(test.logits, axis=1))
    # netcal's scipy optimiser stops at its default tolerance; measured 1.4e-6.
    assert np.max(np.abs(ours - theirs)) < 1e-5


def test_logits_and_log_probabilities_give_the_same_map(cifar10_split) -> None:
    fit = cifar10_split.fit
    a = TemperatureScaling().fit(fit.logits, fit.labels)
    b = TemperatureScaling().fit(fit.probs, fit.labels)  # scores = log p, shifted per row
    assert a.input_type_ == "logits" and b.input_type_ == "probabilities"
    assert a.temperature_ == pytest.approx(b.temperature_, rel=1e-9)
    np.testing.assert_allclose(a.predict_proba(fit.logits), b.predict_proba(fit.probs), atol=1e-10)


def test_accuracy_is_unchanged_and_over_confidence_is_softened(cifar100_split) -> None:
    ts = TemperatureScaling().fit(cifar100_split.fit)
    P = ts.predict_proba(cifar100_split.test)
    np.testing.assert_array_equal(P.argmax(axis=1), cifar100_split.test.probs.argmax(axis=1))
    assert ts.temperature_ > 1.0


def test_optimum_beyond_the_bounds_warns_and_uses_the_bound() -> None:
    rng = np.random.default_rng(0)
    z = rng.normal(0, 3, (200, 4))
    with pytest.warns(RuntimeWarning, match="T shrinks"):  # every label is the argmax: NLL -> 0 as T -> 0
        assert TemperatureScaling().fit(z, z.argmax(axis=1)).temperature_ == 1e-3
    with pytest.warns(RuntimeWarning, match="no information"):  # labels are the argmin: anti-informative
        assert TemperatureScaling(max_temperature=50.0).fit(z, z.argmin(axis=1)).temperature_ == 50.0


@pytest.mark.parametrize("lo,hi", [(0.0, 10.0), (2.0, 1.0), (1.0, np.inf), (-1.0, 1.0)])
def test_invalid_bounds(lo: float, hi: float) -> None:
    with pytest.raises(ValueError, match="min_temperature"):
        TemperatureScaling(min_temperature=lo, max_temperature=hi).fit(np.eye(3), np.arange(3))


@pytest.mark.filterwarnings("ignore:The NLL keeps falling")
def test_hard_zero_probabilities_are_smoothed() -> None:
    """Exact zeros are mixed with the uniform distribution (weight 1 / (n + 1)) before the log
    (tests/recalibrators/test_hard_zeros.py has the real case)."""
    p = np.array([[1.0, 0.0], [0.2, 0.8], [0.6, 0.4], [0.0, 1.0]])
    ts = TemperatureScaling().fit(p, np.array([0, 1, 1, 0]))
    assert ts.input_smoothing_ == 0.2
    assert np.all(ts.predict_proba(p) > 0)
