"""Many GP fits at once: one batched GPyTorch model over (alpha, data split) pairs (GP_SPEC section 5).

Used by alpha selection and by the paper's protocol benchmark. Each batch entry is an independent
GP with its own recalibration rows, alpha, inducing points and parameters; rows are padded to the
largest split with weight 0. The fixed Monte Carlo draws are drawn for the longest split with the
common seed; because the draws are row-major (:func:`pbr_core.gp.objectives.draw_mc_noise`), every
entry sees exactly the draws its fit alone would see. Batches are fitted with the vectorised Adam of
:mod:`pbr_core.gp.optimizers` (element-wise, so each entry follows the path of its fit alone).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Sequence

import numpy as np
import torch

from pbr_core.gp.device import DTYPE
from pbr_core.gp import objectives as _objectives
from pbr_core.gp.model import GPRecalibrationModel, InputKind, initial_inducing_points, kernel_inputs
from pbr_core.gp.objectives import ObjectiveSpec, draw_mc_noise
from pbr_core.gp.problem import FitData, FitReport, TrainCheck, TrainSettings
from pbr_core.progress import Progress
from pbr_core.gp.training import fit_gp


def fit_batch(zs: Sequence[np.ndarray], ys: Sequence[np.ndarray], alphas: Sequence[float], spec: ObjectiveSpec,
              input_kind: InputKind, device: torch.device, n_mc: int = 32, seed: int = 0, n_inducing: int = 10,
              antithetic: bool = True, mc_classes: int | None = None,
              variational: str = "mean_field", settings: TrainSettings | None = None,
              check: TrainCheck | None = None,
              progress: Progress | None = None) -> tuple[GPRecalibrationModel, list[FitReport]]:
    """Fit one GP per (z, y, alpha) triple, all in one batched model.

    Parameters
    ----------
    zs, ys : sequences of arrays (n_i, K) and (n_i,)
        The recalibration rows of each fit (n_i may differ).
    alphas : sequence of float
        KL weight of each fit (they replace ``spec.alpha``).
    spec : ObjectiveSpec
        The objective family (PBR or PBR total).
    mc_classes : int, optional
        T: each row draws only its T largest scores and its label, the tail enters through its
        moments (:class:`~pbr_core.gp.objectives.ClassSplit`); None draws every class.

    Returns
    -------
    (model, reports)
        The batched model (``model.member(i)`` is fit i) and one FitReport per fit.
    """
    b = len(zs)
    if not (b == len(ys) == len(alphas)) or b == 0:
        raise ValueError("Expected as many score arrays, label arrays and alpha values, and at least one.")
    k = zs[0].shape[1]
    n_max = max(z.shape[0] for z in zs)
    z_pad = np.zeros((b, n_max, k))
    y_pad = np.zeros((b, n_max), dtype=np.int64)
    w = np.zeros((b, n_max))
    for i, (z, y) in enumerate(zip(zs, ys)):
        z_pad[i, : z.shape[0]] = z
        z_pad[i, z.shape[0]:] = z[0]  # finite filler rows with weight 0
        y_pad[i, : y.shape[0]] = y
        w[i, : z.shape[0]] = 1.0
    zu = np.stack([initial_inducing_points(kernel_inputs(z, input_kind), n_inducing, seed=seed) for z in zs])
    model = GPRecalibrationModel(torch.as_tensor(zu, dtype=DTYPE), input_kind, variational,
                                 batch_shape=torch.Size([b])).to(device)
    eps = (draw_mc_noise(n_max, n_mc, k, seed, device=device, dtype=_objectives.MC_DTYPE, antithetic=antithetic)
           if spec.needs_mc else None)
    data = FitData(z=torch.as_tensor(z_pad, dtype=DTYPE, device=device),
                   labels=torch.as_tensor(y_pad, device=device),
                   spec=replace(spec, alpha=tuple(float(a) for a in alphas)), eps=eps,
                   weights=torch.as_tensor(w, dtype=DTYPE, device=device))
    data = data.with_split(mc_classes)
    settings = settings or TrainSettings(optimizer="adam")
    reports = fit_gp(model, data, settings, progress=progress, check=check)
    return model, reports
