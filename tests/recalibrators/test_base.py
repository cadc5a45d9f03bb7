"""The shared interface: progress reporting, registration, the JSON array encoding."""

from __future__ import annotations

import json

import numpy as np
import pytest

from pbr_core.recalibrators import HistogramBinning, Identity, REGISTRY, register, report_progress
from pbr_core.recalibrators.base import _decode, _encode, track


def test_progress_is_silent_by_default_and_reported_inside_the_block() -> None:
    assert list(track(range(3), total=3, desc="x")) == [0, 1, 2]
    seen = []

    def progress(done, total, message):
        if done == 0:  # the loop's first report: what it counts and how far
            seen.append((total, message))

    P = np.full((20, 4), 0.25)
    y = np.arange(20) % 4
    with report_progress(progress):
        HistogramBinning(n_bins=2, multiclass="one_vs_all").fit(P, y)
    assert seen == [(4, "histogram_binning (one-vs-all)")]
    HistogramBinning(n_bins=2).fit(P, y)
    assert len(seen) == 1  # the factory is gone after the block


def test_re_registering_the_same_class_is_allowed_a_different_one_is_not() -> None:
    assert register(Identity) is Identity

    class Impostor(Identity):
        method = "uncalibrated"

    with pytest.raises(RuntimeError, match="two recalibrators are registered as 'uncalibrated'"):
        register(Impostor)
    assert REGISTRY["uncalibrated"] is Identity


def test_arrays_survive_json_exactly() -> None:
    rng = np.random.default_rng(0)
    state = {"a": rng.normal(size=(3, 4)) * 1e-300, "b": [rng.uniform(size=5), np.arange(3.0)], "c": np.float64(0.1),
             "d": "text", "e": np.int64(7)}
    back = _decode(json.loads(json.dumps(_encode(state))))
    np.testing.assert_array_equal(back["a"], state["a"])
    np.testing.assert_array_equal(back["b"][0], state["b"][0])
    assert back["c"] == 0.1 and back["d"] == "text" and back["e"] == 7 and back["a"].shape == (3, 4)


def test_set_params_then_fit_uses_the_new_values() -> None:
    rec = HistogramBinning().set_params(n_bins=3, strategy="uniform")
    rec.fit(np.linspace(0.01, 0.99, 30), np.arange(30) % 2)
    assert rec.maps_[0]["values"].size == 3 and rec.get_params() == {"n_bins": 3, "strategy": "uniform", "floor": None,
                                                                      "multiclass": "top_label"}
