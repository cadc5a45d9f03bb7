"""Subnormal probabilities (1e-320, as GaussianNB's predict_proba gives) raise no NumPy
RuntimeWarning in the resolution evidence (audit 10a, finding 11: "divide by zero encountered in
divide" and "invalid value encountered in subtract" from pbr_core/resolution.py), and are no evidence
of how many significant digits were written."""

from __future__ import annotations

import warnings

import numpy as np

import pbr_core
from pbr_core.recalibrators import TemperatureScaling
from pbr_core.resolution import DECIMALS, EVIDENCE_NAMES, evidence_terms


def _terms(p) -> dict[str, np.ndarray]:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        return dict(zip(EVIDENCE_NAMES, evidence_terms(np.asarray(p, dtype=np.float64))))


def test_subnormal_values_raise_no_warning_and_say_nothing_of_digits() -> None:
    t = _terms([1e-320, 5e-324, np.nextafter(np.finfo(np.float64).tiny, 0)])
    np.testing.assert_array_equal(t["interior"], 1.0)
    for d in DECIMALS:
        np.testing.assert_array_equal(t[f"off_digits_{d}"], 0.0)


def test_the_smallest_normal_values_keep_their_significant_digits() -> None:
    """2.34e-308 is on the grid of 3 significant digits and above (the former step 10^-316 was itself
    subnormal, and put it off the grid of 6 digits and more), off that of 1 and 2."""
    for v in (2.34e-308, 1.23e-300, 0.123, 4.56e-12):
        t = _terms([v])
        assert [int(t[f"off_digits_{d}"][0]) for d in DECIMALS] == [1, 1] + [0] * 7, v


def test_fitting_on_subnormal_probabilities_is_silent() -> None:
    rng = np.random.default_rng(0)
    p = rng.uniform(0.05, 0.95, 200)
    p[0], p[1] = 1e-320, 1 - 1e-16
    y = (rng.uniform(size=200) < p).astype(int)
    preds = pbr_core.Predictions.from_predictions(y, p)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        TemperatureScaling().fit(preds)
