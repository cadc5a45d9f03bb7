"""Shared fixtures: paths to the bundled real sample data."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
SAMPLE_DATA = ROOT / "sample_data"


@pytest.fixture(scope="session")
def sample_dir() -> Path:
    return SAMPLE_DATA


@pytest.fixture(scope="session")
def cifar100() -> tuple[np.ndarray, np.ndarray]:
    """Real CIFAR-100 DenseNet-121 test logits (10000 x 100) and labels (over-confident model)."""
    d = np.load(SAMPLE_DATA / "cifar100_densenet121.npz", allow_pickle=False)
    return d["logits"].astype(np.float64), d["labels"]


@pytest.fixture(scope="session")
def cifar10() -> tuple[np.ndarray, np.ndarray]:
    """Real CIFAR-10 ResNet-110 test logits (10000 x 10) and labels."""
    d = np.load(SAMPLE_DATA / "cifar10_resnet110.npz", allow_pickle=False)
    return d["logits"].astype(np.float64), d["labels"]


@pytest.fixture
def unnamed_binary_targets(monkeypatch) -> list[str]:
    """The names of the metrics given a two-column (binary) array without ``binary_target`` while the test
    runs: the library's one-time warning is for a notebook user, never spent by pbr-calib's own callers
    (review 11 finding 5). Spies on ``pbr_core.metrics._binary_columns``, where every such metric resolves it."""
    from pbr_core import metrics as M

    left_to_chance: list[str] = []
    plain = M._binary_columns

    def spy(probs, binary_target, name):
        if binary_target is None and np.ndim(probs) == 2 and np.shape(probs)[1] == 2:
            left_to_chance.append(name)
        return plain(probs, binary_target, name)

    monkeypatch.setattr(M, "_binary_columns", spy)
    return left_to_chance
