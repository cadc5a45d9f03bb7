"""How long a PBR / GP-calibration run will take, said before it starts (PBR page).

A GP fit's length cannot be known in advance (the optimiser stops on tolerance: a fit at alpha
near 0 can run hundreds of iterations more, and a fit that ends at the prior is redone from smaller
alpha), so the page gives a typical time and a range, not a promise. The model: one fit costs
about ``FIT_BASE_S + FIT_PER_ENTRY_S * n * K`` seconds on one CPU core (the Monte Carlo work is
n * K * S entries per evaluation, S = 32 below 50 classes and 16 from 50 on, and the number of
evaluations hardly depends on n or K), plus ``PREDICT_PER_ENTRY_S * n_predicted * K`` for the
J = 100 draws of the predictions. The constants are this project's measurements
(benchmarks/RESULTS_fast_pbr.md): the per-entry seconds from single fits at n_re = 1000 (round 5
with S = 32, alpha = .5: K = 100 8.9 s; round 6 with S = 16 at K = 100: 6.0 s; round 7, each row
drawing only its largest classes from 50 classes on), the fixed seconds from the median fit over
the paper's alphas (K = 10 2.8 s, round 9; K = 100 5.0 s, round 7); one thread, a 2-core machine.
On a GPU a fit is bound by kernel launches, not by n * K:
``GPU_FIT_BASE_S + GPU_FIT_PER_ENTRY_S * min(n K, GPU_FULL_ENTRIES)`` plus
``GPU_FIT_PER_ENTRY_BEYOND_S`` per entry beyond (one H200, benchmarks/RESULTS_gp.md: 1.4 s at
n K = 2000, 1.6 s at 10^4, 3.9 s at 10^5, 4.3 s at 5 x 10^5; the second run, 2026-11-28, on the
round-10 code: 1.2, 1.1, 4.4 and 3.3 s, so the constants stay). Once a fit has run in this server
process, its measured time rescales the model (``record``), so the estimate follows the machine it
runs on.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from pbr_core.gp.objectives import MANY_CLASSES, auto_mc_draws
from pbr_core.gp.staged import STAGED_MIN_ROWS, stage_draw_count, stage_sizes

#: Seconds of one fit that do not grow with n * K: ~300 iterations (the median over the paper's
#: alphas) of ~5 ms of per-operation overhead at small n * K (marginals, optimiser bookkeeping, kernel
#: algebra). Fitted to the median fits over the paper's alphas (benchmarks/RESULTS_fast_pbr.md,
#: rounds 7 and 9; one thread, n_re = 1000): K = 10, the four CIFAR-10 networks, 2.8 s (model 2.67);
#: K = 100, the four CIFAR-100 networks, 5.0 s (model 5.64); K = 2, the KITTI network, 3.1 s (model
#: 1.97). Until round 9 it was 0.2 s, fitted to the benchmark's single fit (CIFAR-10 ResNet-110 at
#: alpha .5, 140 iterations, 0.75-0.9 s): the page then said "about 1 s" for fits of 0.7-10 s.
#: Re-fitted in round 13 (the Monte Carlo kernel on (S, K, N) draws, the interpolated marginals as
#: one Function, L-BFGS's direction on the host; fits ~0.63x as long as in round 10) to the medians
#: over the paper's alphas measured then (benchmarks/RESULTS_fast_pbr.md, round 13; two jobs side by
#: side on the 2 cores): K = 10, the four CIFAR-10 networks, 2.2 s (model 2.12); K = 100, the four
#: CIFAR-100 networks, 2.95 s (model 3.40); K = 2, KITTI, 2.61 s (model 1.70).
FIT_BASE_S = 1.6
#: Seconds per score entry (row x class) of one fit with S = 32 antithetic float32 draws and
#: interpolated marginals, 150-500 evaluations (round 5: 0.9 CPU s at n * K = 10^4, 8.9 at 10^5).
#: Round 13: single fits at alpha .5, K = 100, every class drawn, 6.81 s with S = 32 (model 6.80) and
#: 4.52 s with S = 16 (model 4.88).
FIT_PER_ENTRY_S = 5.2e-5
#: Share of a CPU evaluation that does not grow with the draws S (marginals, autograd, optimiser):
#: one evaluation at n K = 10^5 took 13.3 / 20.0 / 30.1 ms with S = 8 / 16 / 32 (round 6,
#: benchmarks/RESULTS_fast_pbr.md), i.e. ~7.7 ms + 0.7 ms per draw. Fits with n_mc = "auto" use
#: S = 16 from 50 classes on (pbr_core.gp.objectives.auto_mc_draws).
FIXED_EVAL_SHARE = 0.26
#: Share of a CPU fit's per-entry seconds left when each row draws only its largest classes
#: (``mc_classes="auto"`` from 50 classes on, pbr_core.gp.objectives.ClassSplit): eight paired fits
#: of the four CIFAR-100 networks at K = 100 took 4.00 instead of 5.39 CPU s on average (round 7,
#: benchmarks/RESULTS_fast_pbr.md), some of them continuing with more classes at the end (the
#: per-entry part of the model: 3.84 s there).
#: Round 13: 0.55, fitted with the constants above to the K = 100 median over the paper's alphas
#: (the faster kernel shrank the drawn classes' part more than the rest).
SPLIT_FIT_SHARE = 0.55
#: Seconds per predicted entry (row x class) with J = 100 draws.
PREDICT_PER_ENTRY_S = 1.0e-6
#: The same on a GPU (one H200: below the entries where the GPU is saturated, each evaluation costs
#: about the same launches, ~10-15 ms, whatever n * K).
GPU_FIT_BASE_S = 1.3
GPU_FIT_PER_ENTRY_S = 2.6e-5
GPU_FULL_ENTRIES = 1e5
GPU_FIT_PER_ENTRY_BEYOND_S = 1.0e-6
#: J = 100 draws on a GPU (the H200: 8 x 10^6 predicted entries in 1.9 s).
GPU_PREDICT_PER_ENTRY_S = 2.5e-7
#: Starting the worker processes of a parallel alpha selection (spawn, import torch and pbr_core).
WORKER_START_S = 3.0
#: How much longer than the model a fit can take: the optimiser stops on tolerance, so a fit at alpha
#: near 0 (next to no KL term: long plateaus) runs hundreds of iterations more, and a fit that ends
#: at the prior is redone from smaller alpha (pbr_core.gp.training). Measured (one thread,
#: n_re = 1000, the paper's alphas; benchmarks/RESULTS_fast_pbr.md, rounds 7 and 9): K = 10,
#: 0.73-10.1 CPU s, up to 3.8x the model's 2.67 s; K = 2 (KITTI), 0.92-5.55 s, up to 2.8x its
#: 1.97 s; K = 100, 2.9-8.0 s, up to 1.4x its 5.64 s, and restarted fits of the stability runs
#: 1.3-2.5x the median fit. The page says "up to" this.
WORST_FACTOR = 4.0
#: A fit of ``STAGED_MIN_ROWS`` rows or more runs in stages (pbr_core.gp.staged): a fit from the
#: prior on 5,000 rows (the model above, with that stage's S), then each larger stage continued from
#: the one before for ``STAGE_ITERATIONS`` evaluations of ``STAGE_EVAL_PER_SCORE_S`` seconds per score
#: (row x class) at the S of the measurement (``STAGE_EVAL_DRAWS``), the draws' share scaled as above.
#: Measured on one thread (benchmarks/RESULTS_pbr_scale.md): K = 10, n = 10^5, S = 2, 95 ms per
#: evaluation on a quiet machine, 50-60 iterations on every row; K = 100, n = 50,000 (each row drawing
#: its 16 largest classes), S = 4, 221 iterations on 5,000 rows then 110 on every row, 121 CPU s on a
#: loaded machine (~0.9 s per evaluation there, taken as 0.75 s).
STAGE_ITERATIONS = {False: 60, True: 110}  # by "50 classes or more"
STAGE_EVAL_PER_SCORE_S = {False: 9.5e-8, True: 1.5e-7}
STAGE_EVAL_DRAWS = {False: 2, True: 4}
#: Alpha selection continues each fold's fits along the grid (pbr_core.alpha_selection, warm
#: starts): after the fold's first fit from the prior, each costs about this share of a fit from
#: the prior (benchmarks/RESULTS_fast_pbr.md, the cold-vs-warm sections: a fold cost
#: 1 + 7 x .65 cold fits at K = 10 and 1 + 7 x .52 at K = 100; the larger, to be safe).
WARM_FIT_SHARE = 0.65

_LOCK = threading.Lock()
_OBSERVED: list[float] = []   # measured / modelled seconds of the fits run in this process


def model_seconds(n: int, k: int, gpu: bool = False, draws: int | None = None, split: bool | None = None) -> float:
    """The model's seconds for one fit on ``n`` rows with ``k`` classes (before rescaling), on
    one CPU core or (``gpu``) on a GPU. ``draws``: the fit's S (default: what ``n_mc="auto"``
    uses for ``k`` classes); the CPU model scales the draws' share of an evaluation by S / 32.
    ``split``: whether each row draws only its largest classes (default: what ``mc_classes="auto"``
    does, from 50 classes on); the CPU model then takes ``SPLIT_FIT_SHARE`` of the per-entry seconds."""
    entries = float(n) * float(k)
    if gpu:
        return (GPU_FIT_BASE_S + GPU_FIT_PER_ENTRY_S * min(entries, GPU_FULL_ENTRIES)
                + GPU_FIT_PER_ENTRY_BEYOND_S * max(0.0, entries - GPU_FULL_ENTRIES))
    s = auto_mc_draws(k) if draws is None else int(draws)
    split = k >= MANY_CLASSES if split is None else bool(split)
    per_entry = FIT_PER_ENTRY_S * (SPLIT_FIT_SHARE if split else 1.0)
    if n >= STAGED_MIN_ROWS:  # in stages, as staged="auto" fits (the stages' own S)
        sizes = stage_sizes(int(n))
        first = model_seconds(sizes[0], k, draws=stage_draw_count(sizes[0], s), split=split)
        measured = FIXED_EVAL_SHARE + (1.0 - FIXED_EVAL_SHARE) * STAGE_EVAL_DRAWS[split] / 32.0

        def evaluation(m: int) -> float:
            draws = FIXED_EVAL_SHARE + (1.0 - FIXED_EVAL_SHARE) * stage_draw_count(m, s) / 32.0
            return STAGE_EVAL_PER_SCORE_S[split] * m * k * draws / measured

        return first + STAGE_ITERATIONS[split] * sum(evaluation(m) for m in sizes[1:])
    return FIT_BASE_S + per_entry * entries * (FIXED_EVAL_SHARE + (1.0 - FIXED_EVAL_SHARE) * s / 32.0)


def record(n: int, k: int, seconds: float, gpu: bool = False) -> None:
    """Remember a finished fit's measured seconds (rescales later estimates in this process)."""
    if seconds > 0 and n > 0 and k > 0:
        with _LOCK:
            _OBSERVED.append(seconds / model_seconds(n, k, gpu))
            del _OBSERVED[:-20]


def _scale() -> tuple[float, bool]:
    with _LOCK:
        seen = sorted(_OBSERVED)
    if not seen:
        return 1.0, False
    return seen[len(seen) // 2], True


@dataclass(frozen=True)
class Estimate:
    fits: int
    seconds: float      # the typical total
    worst: float        # when fits need many more iterations or end at the prior and are redone
    measured_here: bool  # rescaled by fits that ran in this server process
    gpu: bool = False
    folds: int | None = None    # a run of folds (Compare, Generalization): said with its workers
    workers: int = 1

    def sentence(self) -> str:
        """One line for the page."""
        what = "1 fit" if self.fits == 1 else f"{self.fits} fits"
        if self.folds:
            what += (f" in {self.folds} fold{'s' if self.folds > 1 else ''}"
                     + (f", {self.workers} folds at a time in worker processes" if self.workers > 1 else ""))
        measured_on = "one H200 GPU" if self.gpu else "a 2-core CPU"
        basis = ("from the fits already run on this server" if self.measured_here
                 else f"from measurements on {measured_on}; it adapts after the first fit here")
        return (f"Estimated time: about {_words(self.seconds)} for {what} "
                f"(up to {_words(self.worst)} where a fit needs many more iterations: alpha near 0, or a fit "
                f"that ends at the prior and is redone; {basis}).")

    @property
    def long(self) -> bool:
        return self.seconds > 60


def _words(seconds: float) -> str:
    if seconds < 90:
        return f"{max(1, round(seconds))} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def _waves(n_folds: int, n_jobs: int) -> int:
    """Rounds of folds run ``n_jobs`` at a time in worker processes (all in one process below 2)."""
    return n_folds if n_jobs <= 1 else -(-n_folds // n_jobs)


def estimate(n_re: int, n_total: int, k: int, auto_alpha: bool, n_alphas: int, n_folds: int,
             n_jobs: int = 1, gpu: bool = False) -> Estimate:
    """Seconds for the PBR page's run: (with automatic alpha) ``n_alphas * n_folds`` CV fits on
    (k-1)/k of the rows, each scored on its fold (per fold one from the prior, the others continued
    at ``WARM_FIT_SHARE`` of its cost), the folds ``n_jobs`` at a time in worker processes (each
    paying ``WORKER_START_S``), then the final fit; then predictions on every row. ``gpu``: the
    fits run on a GPU (the GPU model above)."""
    scale, measured = _scale()
    per_entry = GPU_PREDICT_PER_ENTRY_S if gpu else PREDICT_PER_ENTRY_S
    fits, seconds = 1, model_seconds(n_re, k, gpu)
    if auto_alpha:
        n_cv = n_re * (n_folds - 1) / n_folds
        fits += n_alphas * n_folds
        per_fold = model_seconds(n_cv, k, gpu) * (1 + (n_alphas - 1) * WARM_FIT_SHARE)
        rounds = _waves(n_folds, n_jobs)
        seconds += rounds * (per_fold + n_alphas * per_entry * (n_re / n_folds) * k)
        seconds += WORKER_START_S if n_jobs > 1 else 0.0
    seconds *= scale
    predict = per_entry * float(n_total) * k * scale
    return Estimate(fits=fits, seconds=seconds + predict, worst=seconds * WORST_FACTOR + predict,
                    measured_here=measured, gpu=gpu)


def folds_estimate(n_re: int, n_test: int, k: int, fits_per_fold: int, n_folds: int, n_jobs: int = 1,
                   gpu: bool = False) -> Estimate:
    """Seconds for a run of ``n_folds`` folds of ``fits_per_fold`` GP fits on ``n_re`` rows each, each
    fit then predicting ``n_test`` rows: the Compare page's GP fits (its other methods take a second
    or less; the K x K ones have :func:`recal_sentence`) and the Generalization page's α values. The
    folds run ``n_jobs`` at a time in worker processes (each paying ``WORKER_START_S``), as
    :func:`estimate` counts the PBR page's, with the same rescaling by the fits run here and the same
    sentence (audit 13: Compare's GP fits took 160 s unannounced where the PBR page estimated its own)."""
    scale, measured = _scale()
    per_entry = GPU_PREDICT_PER_ENTRY_S if gpu else PREDICT_PER_ENTRY_S
    rounds = _waves(n_folds, n_jobs)
    fitting = rounds * fits_per_fold * model_seconds(n_re, k, gpu) * scale
    predict = rounds * fits_per_fold * per_entry * float(n_test) * k * scale
    start = WORKER_START_S if n_jobs > 1 else 0.0
    return Estimate(fits=fits_per_fold * n_folds, seconds=fitting + predict + start,
                    worst=fitting * WORST_FACTOR + predict + start, measured_here=measured, gpu=gpu,
                    folds=n_folds, workers=max(1, min(n_jobs, n_folds)))


# --------------------------------------------------------------------------- classical fits of K x K matrices
#: The fits whose parameters grow like K^2 (``pbr_core.recalibrators.class_power``: matrix scaling,
#: Dirichlet calibration, SMS): one fit's seconds at ``RECAL_REF_ROWS`` rows and ``RECAL_REF_CLASSES``
#: classes, and the powers of K and n it grows with. Measured with the library's defaults (max_iter
#: 2,000), one BLAS thread, on the 2-core test machine (benchmarks/bench_recal_classes.py,
#: benchmarks/RESULTS_recal_classes.md): matrix scaling 0.85 s at K = 100, 3.7 s at 200, 17.5 s at 300
#: (n = 2,000), 2.1 s at K = 100 and n = 5,000; Dirichlet calibration 12.8 s at K = 100, 105 s at 200,
#: 207 s at 300, 14.4 s at n = 5,000; SMS 1.6 s at K = 100, 5.1 s at 200, 7.1 s at 300, 6.1 s at n =
#: 5,000. The powers are fitted from K = 100 to 300 (the times from 10 to 50 classes are a second or
#: less, where the model may be off by more without consequence). Before, they ran as "classical"
#: fits, never queued: matrix scaling at K = 2,000 ran over 275 s and took 1.9 GB, Dirichlet at
#: K = 1,000 over 230 s (audit 12c).
RECAL_FIT_MODELS: dict[str, tuple[float, float, float]] = {
    "matrix_scaling": (0.85, 2.75, 1.0),
    "dirichlet": (12.8, 2.5, 0.15),
    "sms": (1.6, 1.4, 1.5),
}
RECAL_REF_ROWS, RECAL_REF_CLASSES = 2000, 100
#: A K^2 method not measured above is estimated as the slowest one.
_RECAL_DEFAULT_MODEL = RECAL_FIT_MODELS["dirichlet"]
#: From this many classes on a K^2 fit runs as a heavy job: queued with the GP fits, one at a time.
RECAL_HEAVY_CLASSES = 50
#: Beyond this many classes a K^2 method is neither fitted nor applied on the pages, however few the rows:
#: its matrix and the optimiser's history of it grow like K^2 (matrix scaling at K = 2,000 took 1.9 GB,
#: audit 12c), and a saved one of 5,000 classes is a 48 MB file that took 1.37 GB to read.
RECAL_MAX_CLASSES = 1000
#: A run of K^2 fits estimated beyond this many seconds is refused (``PBR_CALIB_RECAL_MAX_SECONDS`` overrides).
RECAL_MAX_SECONDS = 600.0


def recal_max_seconds() -> float:
    from dashboard.load_cache import env_number

    return env_number("PBR_CALIB_RECAL_MAX_SECONDS", RECAL_MAX_SECONDS)


def quadratic(method: str) -> bool:
    """Whether ``method`` fits a K x K matrix (matrix scaling, Dirichlet calibration, SMS): the fits this
    module estimates, queues and bounds by their cost."""
    from pbr_core.recalibrators import class_power

    return class_power(method) >= 2


def recal_seconds(method: str, n: int, k: int, max_iter: int | None = None) -> float:
    """Typical seconds of one fit of a K^2 method on ``n`` rows and ``k`` classes (0 for the others:
    their fits take seconds at any K). ``max_iter`` beyond the method's default lets the optimiser run
    that many times longer on data where it does not converge sooner: counted in full."""
    if not quadratic(method):
        return 0.0
    from pbr_core.recalibrators import default_params

    base, k_power, n_power = RECAL_FIT_MODELS.get(method, _RECAL_DEFAULT_MODEL)
    seconds = base * (max(k, 2) / RECAL_REF_CLASSES) ** k_power * (max(n, 1) / RECAL_REF_ROWS) ** n_power
    default_iter = default_params(method).get("max_iter") or 0
    if max_iter and default_iter and max_iter > default_iter:
        seconds *= max_iter / default_iter
    return seconds


def recal_heavy(method: str, k: int | None) -> bool:
    """Whether a fit of ``method`` on ``k`` classes runs as a heavy job (queued, one at a time)."""
    return quadratic(method) and (k or 0) >= RECAL_HEAVY_CLASSES


def recal_run_seconds(methods, n: int, k: int, fits: int = 1, max_iter: int | None = None) -> float:
    """Typical seconds of ``fits`` fits (folds) of each of ``methods`` (the K^2 ones; 0 when none)."""
    return fits * sum(recal_seconds(m, n, k, max_iter) for m in methods)


def recal_sentence(seconds: float, fits: int) -> str:
    """The page's line before a run of K^2 fits: how long it will typically take, and how sure that is."""
    what = "1 fit" if fits == 1 else f"{fits} fits"
    return (f"Estimated time: about {_words(seconds)} for {what} of a K × K matrix (from measurements on a "
            f"2-core CPU; the optimiser stops when it converges, so a fit can take a few times as long or less).")
