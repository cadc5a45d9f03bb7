"""Fixtures and settings of the GP / PBR tests.

Tests marked ``slow`` run only with ``PBR_SLOW=1`` (the default run stays within a few minutes on
a shared two-core machine). Torch uses one thread: the fits' chunked Monte Carlo loops run
several times slower with two threads on a two-core machine that others share.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
import torch
from gp_testdata import load_logits


def pytest_collection_modifyitems(config, items):
    if os.environ.get("PBR_SLOW") == "1":
        return
    skip = pytest.mark.skip(reason="slow GP test: set PBR_SLOW=1 to run it")
    for item in items:
        if "slow" in item.keywords and str(item.fspath).startswith(str(Path(__file__).parent)):
            item.add_marker(skip)


@pytest.fixture(scope="session", autouse=True)
def _one_torch_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="session")
def cifar100_logits() -> tuple[np.ndarray, np.ndarray]:
    """CIFAR-100 DenseNet-121 logits (10000 x 100): over-confident, test ECE ~.05."""
    return load_logits("cifar100_densenet121.npz")


@pytest.fixture(scope="session")
def cifar10_logits() -> tuple[np.ndarray, np.ndarray]:
    """CIFAR-10 ResNet-110 logits (10000 x 10)."""
    return load_logits("cifar10_resnet110.npz")
