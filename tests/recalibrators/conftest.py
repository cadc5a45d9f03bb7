"""Fixtures of the recalibrator tests: real prediction sets with a fixed recalibration/test split."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from pbr_core import Predictions

SAMPLE_DATA = Path(__file__).resolve().parents[2] / "sample_data"
N_RE = 1000


@pytest.fixture(scope="session", autouse=True)
def _one_blas_thread():
    """One BLAS thread: the (K x K) matrix products of matrix scaling run several times slower with
    two threads on a shared two-core machine than with one."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # pragma: no cover - threadpoolctl comes with scikit-learn
        yield
        return
    with threadpool_limits(limits=1, user_api="blas"):
        yield


@dataclass(frozen=True)
class Split:
    """A named real prediction set split into a recalibration part and a test part."""

    name: str
    fit: Predictions
    test: Predictions


def _split(name: str, preds: Predictions, n_re: int = N_RE, seed: int = 0) -> Split:
    idx = np.random.default_rng(seed).permutation(preds.n)
    return Split(name, preds.subset(idx[:n_re]), preds.subset(idx[n_re:]))


def _npz(name: str) -> Predictions:
    d = np.load(SAMPLE_DATA / name, allow_pickle=False)
    return Predictions.from_arrays(d["logits"].astype(np.float64), d["labels"], input_type="logits", source=name)


@pytest.fixture(scope="session")
def cifar100_split() -> Split:
    """CIFAR-100 DenseNet-121 logits (K = 100, over-confident: test ECE ~.05); 1000 rows to fit."""
    return _split("cifar100", _npz("cifar100_densenet121.npz"))


@pytest.fixture(scope="session")
def cifar10_split() -> Split:
    """CIFAR-10 ResNet-110 logits (K = 10, test ECE ~.027); 1000 rows to fit."""
    return _split("cifar10", _npz("cifar10_resnet110.npz"))


@pytest.fixture(scope="session")
def binary_split() -> Split:
    """A real binary problem: the KITTI random forest's p(y=1) (binary ECE ~.07) when the file is
    there, else CIFAR-10 ResNet-110 as "is the top label right?" (p = confidence, y = correct)."""
    path = SAMPLE_DATA / "kitti_random_forest.csv"
    if path.exists():
        df = pd.read_csv(path)
        preds = Predictions.from_arrays(df["p_positive"].to_numpy(), df["label"].to_numpy(), source=path.name)
        return _split("kitti_rf", preds)
    c10 = _npz("cifar10_resnet110.npz")
    return _split("cifar10_correct", Predictions.from_arrays(c10.confidence, c10.correct.astype(np.int64)))


@pytest.fixture(scope="session")
def small_multiclass() -> tuple[np.ndarray, np.ndarray]:
    """300 rows of CIFAR-10 logits and labels: quick fits for the contract tests."""
    d = np.load(SAMPLE_DATA / "cifar10_resnet110.npz", allow_pickle=False)
    return d["logits"][:300].astype(np.float64), d["labels"][:300]


@pytest.fixture(scope="session")
def small_binary(binary_split: Split) -> tuple[np.ndarray, np.ndarray]:
    """300 rows of the binary problem as p(y=1) and 0/1 labels."""
    return binary_split.fit.probs[:300, 1].copy(), binary_split.fit.labels[:300].copy()
