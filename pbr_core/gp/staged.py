"""Fits on many rows in stages: a subsample first, then every row with a fixed Monte Carlo budget (issue 40).

A full-batch fit evaluates its objective on every row with S fixed draws per entry (S = 32 at
K = 10), hundreds of times: its cost grows linearly with n (one evaluation and its gradient took
265 ms at n = 10^5, K = 10, S = 32; a fit of 189 iterations 53 CPU s). A fit in stages
(:func:`fit_staged`):

1. **Stage 1**, on ``STAGE_ROWS`` rows drawn at random (seeded): the usual fit from the prior, with
   everything it does (the Adam warm-up, L-BFGS, the restarts of a fit that ends at the prior, the
   finer class split), of the objective with alpha' = alpha m / n on its m rows, so that the KL
   keeps the weight alpha / n it has in the objective of every row (stage 1 minimises an unbiased
   estimate of it). It finds the basin; its rows are few, so each evaluation is cheap. A stage 1
   that ends at the prior is no start (its collapsed outputscale leaves no gradient to follow):
   stage 2 then fits from the prior, with everything a full-batch fit does.
2. **Then on every row**: L-BFGS continued from stage 1's parameters, on the objective of all n
   rows (the one the bounds are computed for), until the usual stopping rule fires. The training-set
   check runs on this fit. A fit on every row that fails it is redone from the prior on every row,
   exactly as :func:`pbr_core.gp.training.fit_gp` redoes a failed continuation. On 2 x 10^5 rows or
   more an intermediate stage comes first (``STAGE_GROWTH``): 5,000, 100,000, then every row, each
   stage's rows containing the previous stage's, each continued from the previous one's fit.

**A fixed Monte Carlo budget per evaluation.** Each stage draws ``S = max(2, MC_ROW_DRAWS / n)``
antithetic draws per entry (even, at most the S of a full-batch fit): the objective is a mean over
rows, so its Monte Carlo error depends on the draws in all, n x S, and from 4,096 rows on a fixed
n x S = 2^17 estimates it at least as precisely as a full-batch fit of 4,096 rows with S = 32 does
(and far more precisely than the paper's n_re = 1000 with S = 32). At n = 10^5 that is S = 2: one
evaluation 113 instead of 265 ms.

Measured (benchmarks/RESULTS_pbr_scale.md): at n = 10^5, K = 10 (CIFAR-10 logits resampled, outcomes
drawn from a fitted calibrated model) a staged fit reached an objective 1.0e-4 (relative) *lower*
than the full-batch fit, on the full-batch fit's own draws and on fresh ones, in 13 instead of 53
CPU s; the full-batch fit with another ``random_state`` differed from it by -7.6e-5 (the noise
floor).

The recalibrators switch to it from ``STAGED_MIN_ROWS`` rows (``staged="auto"``, their default);
``staged=True`` / ``False`` forces either. Fits of fewer rows are those of before, bit for bit.
"""

from __future__ import annotations

import math
import time
from dataclasses import replace

import numpy as np
import torch

from pbr_core.gp.model import GPRecalibrationModel
from pbr_core.gp.objectives import ObjectiveSpec, draw_mc_noise
from pbr_core.gp.optimizers import restore, snapshot
from pbr_core.gp.problem import FitData, FitReport, TrainCheck, TrainSettings
from pbr_core.progress import Progress
from pbr_core.gp.training import fit_gp

__all__ = ["MC_ROW_DRAWS", "STAGED_MIN_ROWS", "STAGE_GROWTH", "STAGE_ROWS", "fit_staged", "stage_draw_count",
           "stage_sizes", "uses_stages"]

#: From this many rows on, ``staged="auto"`` fits in stages. Below it a full-batch fit costs at most
#: ~12 CPU s at K = 10 and every fit is the one of before, bit for bit (the paper's protocols use
#: n_re <= 5000). Measured: at n = 10^4 a full-batch fit 6.2-7.1 CPU s, a staged one 4.0-4.8.
STAGED_MIN_ROWS = 20_000
#: Rows of stage 1 (drawn at random, seeded). 5,000 and 10,000 gave the same objective at n = 10^5
#: (within 4e-6 relative) in the same time; 20,000 was slower (stage 1 then costs more than it saves).
STAGE_ROWS = 5_000
#: Each stage before the last fits this many times the rows of the one before (while that is at most
#: half of all rows): at n = 10^6 the stages are 5,000, 100,000 and 10^6 rows, so that the costly
#: iterations on every row start from a fit on 100,000 (measured: stage 2 of 10^6 rows took 130
#: iterations of ~3 CPU s each straight from 5,000 rows). At n = 10^5 two stages (5,000, 10^5): an
#: intermediate one at 25,000 rows cost more than it saved (15.1 against 12.2 CPU s).
STAGE_GROWTH = 20
#: Draws per evaluation in all, n x S (see the module docstring): S = 32 up to 4,096 rows.
MC_ROW_DRAWS = 2**17
#: The fewest draws per entry of a staged fit (one antithetic pair).
MIN_STAGE_DRAWS = 2


def uses_stages(n_rows: int, staged: bool | str) -> bool:
    """Whether a fit of ``n_rows`` rows runs in stages: ``staged`` True / False, or "auto" (from
    ``STAGED_MIN_ROWS`` rows on)."""
    if staged == "auto":
        return int(n_rows) >= STAGED_MIN_ROWS
    return bool(staged)


def stage_draw_count(n_rows: int, n_mc: int) -> int:
    """S of a stage on ``n_rows`` rows: ``MC_ROW_DRAWS / n_rows`` rounded up to an even number, at
    least ``MIN_STAGE_DRAWS``, at most ``n_mc`` (the full-batch fit's S)."""
    s = max(MIN_STAGE_DRAWS, int(math.ceil(MC_ROW_DRAWS / max(1, int(n_rows)))))
    s += s % 2
    return int(min(s, int(n_mc)))


def _stage_seed(seed: int, stage: int) -> int:
    """The seed of stage ``stage``'s rows and draws: a stream of its own for each stage, independent of
    the fit's other draws (the prediction draws use spawn key 1, the prior split 2)."""
    return int(np.random.SeedSequence(int(seed), spawn_key=(3, int(stage))).generate_state(1)[0])


def stage_sizes(n_rows: int) -> list[int]:
    """The rows of each stage: ``STAGE_ROWS``, then ``STAGE_GROWTH`` times more while that is at most half
    of ``n_rows``, then every row (just ``[n_rows]`` for ``STAGE_ROWS`` rows or fewer)."""
    n = int(n_rows)
    if n <= STAGE_ROWS:
        return [n]
    sizes = [STAGE_ROWS]
    while sizes[-1] * STAGE_GROWTH * 2 <= n:
        sizes.append(sizes[-1] * STAGE_GROWTH)
    return [*sizes, n]


def stage_rows(n_rows: int, seed: int) -> np.ndarray:
    """A seeded permutation of the rows: stage i fits the first ``stage_sizes(n_rows)[i]`` of them
    (sorted), so each stage's rows contain the previous stage's."""
    return np.random.default_rng(_stage_seed(seed, 0)).permutation(int(n_rows))


def _problem(z: np.ndarray, y: np.ndarray, spec: ObjectiveSpec, n_mc: int, seed: int, antithetic: bool,
             mc_classes: int | None, device: torch.device, dtype: torch.dtype) -> FitData:
    n, k = z.shape
    eps = None
    if spec.needs_mc:
        eps = draw_mc_noise(n, n_mc, k, seed, device=device, dtype=dtype, antithetic=antithetic)
    data = FitData(z=torch.as_tensor(z, dtype=torch.float64, device=device), labels=torch.as_tensor(y, device=device),
                   spec=spec, eps=eps)
    return data.with_split(mc_classes) if eps is not None else data


def fit_staged(model: GPRecalibrationModel, z: np.ndarray, y: np.ndarray, spec: ObjectiveSpec, *, seed: int,
               n_mc: int, antithetic: bool, mc_classes: int | None, device: torch.device, dtype: torch.dtype,
               settings: TrainSettings, check: TrainCheck | None = None, progress: Progress | None = None,
               start: dict[str, torch.Tensor] | None = None, start_jitter: float | None = None) -> FitReport:
    """Fit ``model`` (unbatched, at its prior) to the scores ``z`` (N, K) and labels ``y`` in stages
    (module docstring); returns the report of the fit on every row, with ``stages`` saying what each
    stage did (rows, draws per entry, iterations, evaluations, objective).

    ``n_mc`` is the S of a full-batch fit (the most a stage draws); ``seed`` the fit's
    ``random_state``. With ``start`` (a fit of the same model to continue, as
    :func:`pbr_core.gp.training.fit_gp` takes it), only the stage on every row runs: the start
    already is what the stages before would find. Each stage has its own ``settings.max_iter`` budget.
    """
    t0 = time.perf_counter()
    continuing = start is not None
    n = int(z.shape[0])
    stages: list[dict] = []
    done = [0, 0, 0]  # iterations, evaluations, restarts of the stages before the last
    notes: list[str] = []

    def shifted(offset: int) -> Progress | None:
        return None if progress is None else (lambda it, mx, message: progress(offset + it, mx, message))

    prior, prior_jitter = snapshot(model), model.jitter
    sizes = stage_sizes(n) if start is None else [n]  # a continued fit starts where its start ended
    order = stage_rows(n, seed) if len(sizes) > 1 else None
    for i, m in enumerate(sizes):
        last = i == len(sizes) - 1
        rows = np.sort(order[:m]) if not last else slice(None)
        s_i = stage_draw_count(m, n_mc)
        # The KL keeps the weight it has in the objective of every row, alpha / n: on m rows that is
        # alpha' = alpha m / n, so that a stage minimises an unbiased estimate of the full objective
        # (with alpha itself the KL would weigh n / m times more, and a subsample fit collapse to the
        # prior where the fit on every row does not).
        stage_spec = spec if last else replace(spec, alpha=float(spec.alpha) * m / n)
        data = _problem(z[rows], y[rows], stage_spec, s_i, _stage_seed(seed, i + 1), antithetic, mc_classes, device,
                        dtype)
        if start is None:
            r = fit_gp(model, data, settings, progress=shifted(done[0]), check=check if last else None)[0]
        else:
            r = fit_gp(model, data, settings, progress=shifted(done[0]), check=check if last else None, start=start,
                       start_jitter=start_jitter)[0]
        stages.append({"rows": int(m), "n_mc": s_i, "alpha": float(stage_spec.alpha), "iterations": r.iterations,
                       "evaluations": r.evaluations, "objective": r.objective, "stop_reason": r.stop_reason,
                       "ended_at_prior": r.ended_at_prior})
        if last:
            break
        done = [done[0] + r.iterations, done[1] + r.evaluations, done[2] + r.restarts]
        notes.extend(r.warnings)
        # A stage that ended at the prior is no start (its collapsed outputscale leaves no gradient to
        # follow): the next stage then fits from the prior with everything a full-batch fit does.
        start, start_jitter = (None, None) if r.ended_at_prior else (snapshot(model), model.jitter)
        restore(model, prior)  # fit_gp continues from `start`; a failed continuation is redone from the prior
        model.jitter = prior_jitter
    r2 = r
    return replace(r2, iterations=done[0] + r2.iterations, evaluations=done[1] + r2.evaluations,
                   restarts=done[2] + r2.restarts, wall_time_s=time.perf_counter() - t0,
                   warnings=[*notes, *r2.warnings], continued=continuing and r2.continued, stages=stages)
