"""The GP recalibration model eta_V and the PBR objectives (GP_SPEC.md; paper Section 5.2, Appendix F).

Small modules, one concern each (GPyTorch style: model, objective and optimiser are separate):

* :mod:`pbr_core.gp.model`: the latent GP shared by all classes (GP_SPEC section 1).
* :mod:`pbr_core.gp.objectives`: GP calibration ELBO, PBR (Eq. vi_obj2), PBR total (Eq. vi_obj3).
* :mod:`pbr_core.gp.problem`: the types of one fit: data, settings, training-set check, report.
* :mod:`pbr_core.gp.training`: the fit: retries, jitter, training-set check, reports (section 3).
* :mod:`pbr_core.gp.optimizers`: chunked L-BFGS and a vectorised per-GP Adam, on an objective closure.
* :mod:`pbr_core.gp.batch`: many (alpha, split) fits as one batched GP (section 5).
* :mod:`pbr_core.gp.grid`: the alpha x fold grid of PBR fits (one after another, continued along the
  grid, in worker processes, or batched) behind the alpha selection and the KL-gap study.
* :mod:`pbr_core.gp.predict`: memory-bounded Monte Carlo prediction (section 4).
* :mod:`pbr_core.gp.device`: "auto" / "cpu" / "cuda" resolution.
"""

from __future__ import annotations

from pbr_core.gp.device import resolve_device
from pbr_core.gp.model import GPRecalibrationModel, WhiteNoiseKernel, kmeans_1d
from pbr_core.gp.objectives import ObjectiveSpec, ObjectiveTerms, evaluate_objective
from pbr_core.gp.predict import predict_proba, prediction_batch_size
from pbr_core.gp.problem import FitReport
from pbr_core.gp.training import fit_gp

__all__ = [
    "FitReport",
    "GPRecalibrationModel",
    "ObjectiveSpec",
    "ObjectiveTerms",
    "WhiteNoiseKernel",
    "evaluate_objective",
    "fit_gp",
    "kmeans_1d",
    "predict_proba",
    "prediction_batch_size",
    "resolve_device",
]
