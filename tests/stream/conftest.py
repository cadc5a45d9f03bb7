"""Real sample data split into several files (with extra columns), for the streamed path."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import pbr_core
from stream_testdata import write_parts

SAMPLE = Path(__file__).resolve().parents[2] / "sample_data"


@pytest.fixture(scope="session")
def cifar10_frame() -> pd.DataFrame:
    """CIFAR-10 ResNet-110 (real, 10000 x 10) as probabilities, label, an id and a text segment column."""
    preds = pbr_core.load_predictions(SAMPLE / "cifar10_resnet110.npz")
    df = pd.DataFrame(preds.probs, columns=[f"c{k}" for k in range(10)])
    df["label"] = preds.labels
    df["id"] = np.arange(preds.n)
    df["segment"] = np.where(np.arange(preds.n) % 3 == 0, "web", "app")
    return df


@pytest.fixture(scope="session")
def cifar10_parts(tmp_path_factory, cifar10_frame) -> Path:
    """The CIFAR-10 frame in 4 Parquet files of row groups of 700 rows."""
    folder = tmp_path_factory.mktemp("c10") / "logs"
    write_parts(cifar10_frame, folder, 4)
    return folder


@pytest.fixture(scope="session")
def kitti_csv_parts(tmp_path_factory) -> Path:
    """KITTI gradient-boosting p(y=1) (real, binary) in 3 CSV files."""
    df = pd.read_csv(SAMPLE / "kitti_xgboost.csv")
    folder = tmp_path_factory.mktemp("kitti") / "logs"
    write_parts(df, folder, 3, fmt="csv")
    return folder


@pytest.fixture(scope="session")
def toplabel_parts(tmp_path_factory) -> Path:
    """CIFAR-10 top-label export (confidence, predicted, label; real) in 3 Parquet files."""
    df = pd.read_csv(SAMPLE / "cifar10_resnet110_toplabel.csv")
    folder = tmp_path_factory.mktemp("top") / "logs"
    write_parts(df, folder, 3, row_group_size=1000)
    return folder
