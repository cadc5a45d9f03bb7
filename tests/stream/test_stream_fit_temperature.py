"""Temperature scaling on every row smooths probability input with exact zeros as the in-memory fit
does (issue 37, "Probability inputs with exact zeros")."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import pbr_core
from pbr_core.recalibrators import TemperatureScaling, load_recalibrator
from pbr_core.stream import fit_temperature, open_dataset
from stream_testdata import SAMPLE, write_parts


@pytest.mark.parametrize("name", ["kitti_random_forest.csv", "kitti_multiclass_random_forest.csv"])
def test_hard_zeros_are_smoothed_as_in_memory(tmp_path, name) -> None:
    df = pd.read_csv(SAMPLE / name)
    write_parts(df, tmp_path / "logs", 3, fmt="csv")
    preds = pbr_core.load_predictions(SAMPLE / name)
    assert np.any(preds.probs == 0.0)  # the case: a random forest's exact zeros
    in_memory = TemperatureScaling().fit(preds)
    streamed = fit_temperature(open_dataset(tmp_path / "logs"))
    assert in_memory.input_smoothing_ == pytest.approx(1.0 / (preds.n + 1))
    assert streamed.input_smoothing_ == in_memory.input_smoothing_
    assert streamed.temperature_ == pytest.approx(in_memory.temperature_, rel=1e-9)
    np.testing.assert_allclose(streamed.predict_proba(preds), in_memory.predict_proba(preds), rtol=0, atol=1e-10)
    # Saved and read back with its smoothing: the loaded map predicts the same.
    loaded = load_recalibrator(streamed.save(tmp_path / "t.json"))
    np.testing.assert_allclose(loaded.predict_proba(preds), in_memory.predict_proba(preds), rtol=0, atol=1e-10)


def test_without_the_smoothing_the_streamed_fit_would_differ(tmp_path) -> None:
    """The test above can fail: ln 0 read as the loader's floor gives another temperature."""
    df = pd.read_csv(SAMPLE / "kitti_random_forest.csv")
    write_parts(df, tmp_path / "logs", 2, fmt="csv")
    preds = pbr_core.load_predictions(SAMPLE / "kitti_random_forest.csv")
    smoothed = TemperatureScaling().fit(preds).temperature_
    import pbr_core.stream._fit as stream_fit

    g_smoothed = stream_fit._slope_pass(open_dataset(tmp_path / "logs"), 1.0 / smoothed, 1.0 / (preds.n + 1))[0]
    g_plain = stream_fit._slope_pass(open_dataset(tmp_path / "logs"), 1.0 / smoothed, 0.0)[0]
    assert abs(g_smoothed) < 1e-6 * preds.n < abs(g_plain)


def test_logits_take_no_counting_pass(tmp_path) -> None:
    d = np.load(SAMPLE / "cifar10_resnet110.npz")
    df = pd.DataFrame(d["logits"][:2000], columns=[f"logit_{k}" for k in range(10)]).assign(label=d["labels"][:2000])
    write_parts(df, tmp_path / "logits", 2)
    seen = []
    streamed = fit_temperature(open_dataset(tmp_path / "logits"), progress=lambda *a: seen.append(a))
    assert streamed.input_smoothing_ == 0.0 and streamed.fit_passes_ == len(seen)
