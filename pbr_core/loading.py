"""Reading prediction files (CSV, Parquet, NPZ, NPY) into a validated Predictions value.

TEMPORARY minimal version (NPZ only) while the full loader is being written.
"""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np

from pbr_core.predictions import Predictions, PredictionsError


def load_predictions(source, *, format=None, input_type="auto", **kwargs) -> Predictions:
    data = np.load(source if not isinstance(source, bytes) else io.BytesIO(source), allow_pickle=False)
    return Predictions.from_arrays(data["logits"], data["labels"], input_type=input_type, source=str(source))
