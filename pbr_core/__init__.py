"""pbr_core: calibration diagnostics and PAC-Bayes recalibration (Fujisawa & Futami, ICML 2025).

Two calls do the common thing::

    import pbr_core
    preds = pbr_core.load_predictions("predictions.csv")
    pbr_core.ece(preds.probs, preds.labels)          # B = floor(n^(1/3)) bins by default
"""

from __future__ import annotations

from pbr_core.bounds import (
    bound_minimizing_n_bins,
    corollary1_bound,
    corollary2_bound,
    optimal_n_bins,
    optimal_n_bins_per_axis,
    theorem1_binning_bias,
    theorem1_bound,
    theorem1_estimation_bias,
    theorem2_bound,
    theorem3_bound,
)
from pbr_core.metrics import (
    accuracy,
    brier_score,
    calibration_summary,
    classwise_ece,
    default_n_boot,
    ece,
    ece_bootstrap_ci,
    ece_curve,
    ece_k,
    mce,
    nll,
    reliability_diagram,
)
from pbr_core.predictions import Predictions, PredictionsError

__version__ = "0.1.0"

__all__ = [
    "CalibratedModel",
    "Predictions",
    "PredictionsError",
    "accuracy",
    "bound_minimizing_n_bins",
    "brier_score",
    "calibration_summary",
    "classwise_ece",
    "corollary1_bound",
    "corollary2_bound",
    "default_n_boot",
    "ece",
    "ece_bootstrap_ci",
    "ece_curve",
    "ece_k",
    "load_predictions",
    "mce",
    "nll",
    "optimal_n_bins",
    "optimal_n_bins_per_axis",
    "reliability_diagram",
    "theorem1_binning_bias",
    "theorem1_bound",
    "theorem1_estimation_bias",
    "theorem2_bound",
    "theorem3_bound",
]


def __getattr__(name: str):
    # CalibratedModel subclasses scikit-learn's estimator classes, whose import costs ~2 s: imported
    # when first used, so that `import pbr_core` (the dashboard, the CLI) does not pay for it.
    if name == "CalibratedModel":
        from pbr_core.calibrated_model import CalibratedModel

        return CalibratedModel
    # The readers import pandas (~0.4 CPU s): loaded on first use, so that a fit from arrays (the first
    # fit of a process, issue 40) does not pay for them.
    if name == "load_predictions":
        from pbr_core.loading import load_predictions

        return load_predictions
    # The figures import plotly (~0.3 s): loaded on first use, so that `import pbr_core` does not pay.
    if name == "plot":
        import importlib

        return importlib.import_module("pbr_core.plot")
    raise AttributeError(f"module 'pbr_core' has no attribute {name!r}")
