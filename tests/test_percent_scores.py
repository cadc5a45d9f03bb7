"""Scores written as percentages ("31.1" for 0.311), read when asked (load_predictions(percent=True),
pbr-calib --percent, the stream's open_dataset(percent=True)); never by the loader's own guess.
Real KITTI and CIFAR-10 predictions; the numbers equal those of the file written as fractions."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import pbr_core
from pbr_core import PredictionsError, load_predictions
from pbr_core.cli import main as cli_main

ROOT = Path(__file__).resolve().parents[1]


def _csv(df: pd.DataFrame) -> bytes:
    return df.to_csv(index=False).encode()


@pytest.fixture(scope="module")
def kitti() -> pd.DataFrame:
    return pd.read_csv(ROOT / "sample_data" / "kitti_random_forest.csv")


@pytest.fixture(scope="module")
def kitti_percent(kitti) -> pd.DataFrame:
    return kitti.assign(p_positive=kitti["p_positive"] * 100)   # 0.13 -> 13


def test_binary_percentages_read_as_asked_give_the_fractions_numbers(kitti, kitti_percent):
    with pytest.raises(PredictionsError, match=r"holds 13 \(percentages\? divide them by 100, or load the file "
                                               r"with percent=True\)"):
        load_predictions(_csv(kitti_percent), format="csv")
    preds = load_predictions(_csv(kitti_percent), format="csv", percent=True)
    np.testing.assert_allclose(preds.p_positive, kitti["p_positive"].to_numpy(), rtol=0, atol=1e-12)
    assert pbr_core.ece(preds.p_positive, preds.labels) == pytest.approx(
        pbr_core.ece(kitti["p_positive"].to_numpy(), kitti["label"].to_numpy()), abs=1e-12)
    assert ("Read the score column 'p_positive' as percentages, as asked: divided by 100 (13 -> 0.13 in the "
            "first row).") in preds.notes


def test_multiclass_percentages_that_sum_to_100(cifar10):
    logits, labels = cifar10
    probs = pbr_core.predictions.softmax(logits[:2000])
    df = pd.DataFrame(probs * 100, columns=[f"p_{k}" for k in range(10)]).assign(label=labels[:2000])
    with pytest.raises(PredictionsError, match="look like percentages"):
        load_predictions(_csv(df), format="csv")
    preds = load_predictions(_csv(df), format="csv", percent=True)
    np.testing.assert_allclose(preds.probs, probs, rtol=0, atol=1e-12)
    # whole-number percentages (kept as counts by the detection), rounded: renormalising removes the rounding
    whole = df.assign(**{f"p_{k}": np.round(probs[:, k] * 100).astype(int) for k in range(10)}).assign(
        region=np.arange(2000) % 7 + 1)
    preds = load_predictions(_csv(whole), format="csv", percent=True, renormalize=True)
    assert preds.n_classes == 10 and dict(preds.column_roles)["region"] == "metadata"
    np.testing.assert_allclose(preds.probs, probs, rtol=0, atol=0.06)


def test_a_confidence_in_percent(cifar10):
    df = pd.read_csv(ROOT / "sample_data" / "cifar10_resnet110_toplabel.csv")
    preds = load_predictions(_csv(df.assign(confidence=df["confidence"] * 100)), format="csv", percent=True)
    np.testing.assert_allclose(preds.confidence, df["confidence"].to_numpy(), rtol=0, atol=1e-12)
    assert any(n.startswith("Read the confidence column 'confidence' as percentages") for n in preds.notes)


def test_what_cannot_be_percentages_is_refused_with_a_reason(kitti, kitti_percent):
    with pytest.raises(PredictionsError, match="every value of the score column 'p_positive' lies between 0 and 1: "
                                               "these are fractions already"):
        load_predictions(_csv(kitti), format="csv", percent=True)
    over = kitti_percent.copy()
    over.loc[4, "p_positive"] = 130.0
    with pytest.raises(PredictionsError, match=r"hold 130 at row 5 \(data row, header excluded\): percentages lie "
                                               "between 0 and 100"):
        load_predictions(_csv(over), format="csv", percent=True)
    with pytest.raises(PredictionsError, match="cannot be read as logits"):
        load_predictions(_csv(kitti_percent), format="csv", percent=True, input_type="logits")
    with pytest.raises(PredictionsError, match="NPZ / NPY file holds arrays: save them divided by 100"):
        load_predictions(ROOT / "sample_data" / "cifar10_resnet110.npz", percent=True)


def test_the_command_line_and_the_stream_read_percentages_too(kitti, kitti_percent, tmp_path, capsys):
    path = tmp_path / "forecasts.csv"
    kitti_percent.to_csv(path, index=False)
    assert cli_main(["evaluate", str(path), "--format", "json"]) != 0
    assert "load the file with --percent" in capsys.readouterr().err
    assert cli_main(["evaluate", str(path), "--percent", "--format", "json"]) == 0
    expected = pbr_core.ece(kitti["p_positive"].to_numpy(), kitti["label"].to_numpy())
    assert json.loads(capsys.readouterr().out)["ece"] == pytest.approx(expected, abs=1e-12)
    from pbr_core.stream import compute_statistics, open_dataset

    ds = open_dataset(str(path), percent=True)
    stats = compute_statistics(ds, curve_bins=range(1, 3))
    assert stats.n == len(kitti) and stats.ece() == pytest.approx(expected, abs=1e-12)
