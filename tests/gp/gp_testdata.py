"""Helpers of the GP tests: real logits from sample_data/ and fixed recalibration/test splits."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

SAMPLE_DATA = Path(__file__).resolve().parents[2] / "sample_data"


@dataclass(frozen=True)
class Split:
    """Recalibration rows (z, y) and test rows (z_te, y_te) of a real prediction set."""

    z: np.ndarray
    y: np.ndarray
    z_te: np.ndarray
    y_te: np.ndarray


def load_logits(name: str) -> tuple[np.ndarray, np.ndarray]:
    d = np.load(SAMPLE_DATA / name, allow_pickle=False)
    return d["logits"].astype(np.float64), d["labels"].astype(np.int64)


def split(z: np.ndarray, y: np.ndarray, n_re: int, seed: int = 0, n_te: int | None = None) -> Split:
    idx = np.random.default_rng(seed).permutation(z.shape[0])
    te = idx[n_re:] if n_te is None else idx[n_re:n_re + n_te]
    return Split(z[idx[:n_re]], y[idx[:n_re]], z[te], y[te])


def class_subset(z: np.ndarray, y: np.ndarray, classes: int) -> tuple[np.ndarray, np.ndarray]:
    """Rows whose label is among the first ``classes`` classes, restricted to those logit columns."""
    keep = y < classes
    return z[keep][:, :classes], y[keep]
