"""Recalibrated probabilities from a fitted GP, in memory-bounded row batches (GP_SPEC section 4).

* Default (paper Algorithm 1, line 5, "V = mean of J samples"): p_n = mean_j softmax(mu_n + sqrt(var_n) * eps_nj)
  with J draws eps_nj ~ N(0, I_K) per row.
* Mean approximation (the "app." variants of the paper's tables): p_n = softmax(mu_n).

Fixed draws. On the CPU they come from NumPy's generator seeded with ``seed`` and are consumed row
by row, so the result depends only on the seed and the input (not on the batch size): a saved and
re-loaded recalibrator predicts the same numbers. On a GPU they are drawn on the device (torch's
CUDA generator, re-seeded per batch from ``seed`` and the batch's first row): host-side draws would
dominate there (the paper's protocol predicts 80 x 9000 x 100 x 100 = 7e9 draws). The same seed
gives the same result on the same GPU; CPU and GPU agree exactly with the mean approximation and
up to Monte Carlo error (J draws) otherwise.
"""

from __future__ import annotations

import numpy as np
import torch

from pbr_core.cancel import checkpoint
from pbr_core.gp.device import DTYPE
from pbr_core.gp.model import GPRecalibrationModel

#: Default memory budget for the (rows, J, K) temporaries of one prediction batch.
DEFAULT_MEMORY_BUDGET_BYTES = 512 * 2**20

#: Numbers drawn (and turned into probabilities) between two stop checks on the CPU: 4e6 (~0.2 s).
DRAW_BLOCK = 2**22

#: Live (rows, J, K) float64 arrays per batch: the draws (turned into f in place) and softmax(f),
#: plus one for the softmax's internal work space.
TEMPORARIES_PER_BATCH = 3


def prediction_batch_size(n_classes: int, n_samples: int, memory_budget_bytes: int = DEFAULT_MEMORY_BUDGET_BYTES,
                          bytes_per_element: int = 8, temporaries: int = TEMPORARIES_PER_BATCH) -> int:
    """Rows per prediction batch so that the batch's temporaries fit in ``memory_budget_bytes``.

    Examples
    --------
    >>> prediction_batch_size(100, 100)            # 512 MiB / (3 * 8 B * 100 * 100)
    2236
    """
    if n_classes < 1 or n_samples < 1:
        raise ValueError("Expected positive `n_classes` and `n_samples`.")
    per_row = temporaries * bytes_per_element * n_classes * max(n_samples, 1)
    return int(max(1, memory_budget_bytes // per_row))


def predict_proba(model: GPRecalibrationModel, z: np.ndarray, mean_approx: bool = False, n_samples: int = 100,
                  seed: int = 0, memory_budget_bytes: int = DEFAULT_MEMORY_BUDGET_BYTES,
                  device: torch.device | str | None = None) -> np.ndarray:
    """Recalibrated class probabilities for scores ``z`` of shape (N, K) (logits or log-probabilities).

    Parameters
    ----------
    model : GPRecalibrationModel
        A fitted model without batch dimensions.
    z : ndarray of shape (N, K)
    mean_approx : bool
        softmax(mu) instead of the J-sample Monte Carlo mean.
    n_samples : int
        J, the number of posterior draws per row.
    seed : int
        Seed of the draws (fixed: the same input always gives the same output).
    memory_budget_bytes : int
        Upper bound for the per-batch temporaries; see :func:`prediction_batch_size`.
    device : torch.device, optional
        Where to compute; default the model's device.

    Returns
    -------
    ndarray of shape (N, K), float64, rows summing to 1.
    """
    if len(model.batch_shape):
        raise ValueError("predict_proba expects a single GP (no batch dimensions).")
    z = np.asarray(z, dtype=np.float64)
    n, k = z.shape
    if device is None:
        device = model.variational_strategy.inducing_points.device
    rows = prediction_batch_size(k, 1 if mean_approx else n_samples, memory_budget_bytes)
    rng = np.random.default_rng(seed)
    out = np.empty((n, k), dtype=np.float64)
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            for start in range(0, n, rows):
                checkpoint()
                stop = min(start + rows, n)
                mu, var = model.marginals(torch.as_tensor(z[start:stop], dtype=DTYPE, device=device))
                if mean_approx:
                    out[start:stop] = torch.softmax(mu, dim=-1).cpu().numpy()
                elif torch.device(device).type == "cuda":
                    gen = torch.Generator(device=device).manual_seed(int(seed) * 1_000_003 + start)
                    f = torch.randn((stop - start, n_samples, k), generator=gen, dtype=DTYPE, device=device)
                    f.mul_(var.sqrt().unsqueeze(-2)).add_(mu.unsqueeze(-2))
                    out[start:stop] = torch.softmax(f, dim=-1).mean(-2).cpu().numpy()
                    del f
                else:
                    # Host draws in row blocks of about DRAW_BLOCK numbers with a stop check between
                    # them (a whole batch's draws and softmax take seconds on a loaded CPU). Each row
                    # is computed on its own and the generator fills sequentially: same numbers.
                    sd = var.sqrt()
                    step = max(1, DRAW_BLOCK // (n_samples * k))
                    for a in range(0, stop - start, step):
                        b = min(a + step, stop - start)
                        if a:
                            checkpoint()
                        f = torch.as_tensor(rng.standard_normal((b - a, n_samples, k)), dtype=DTYPE)
                        f.mul_(sd[a:b].unsqueeze(-2)).add_(mu[a:b].unsqueeze(-2))
                        out[start + a:start + b] = torch.softmax(f, dim=-1).mean(-2).numpy()
                        del f
    finally:
        model.train(was_training)
    # Each row is a mean of softmax vectors; renormalise away the last ulp so rows sum to one.
    out /= out.sum(axis=1, keepdims=True)
    return out
