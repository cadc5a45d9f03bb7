"""Device resolution for the GP code (GP_SPEC section 3: "CUDA when available and asked for").

``"auto"`` picks CUDA when PyTorch sees a GPU and the work is large enough to gain from it
(:data:`AUTO_CUDA_MIN_SCORES`), else the CPU. An explicit CUDA request on a machine without one is
an error, never a silent fall-back: a user who asked for the GPU wants to know.

**The size rule is provisional.** It rests on one measurement, the single-fit grid of
benchmarks/RESULTS_gp.md (PBR, alpha = .5, one NVIDIA H200 against one thread of this project's
2-core CPU, the same code, 2026-11-28), wall s of a fit, CPU / GPU:

======  =============  ==============  ===============
n_re    K = 2          K = 10          K = 100
======  =============  ==============  ===============
100     3.3 / 8.7      2.6 / 6.1       3.9 / 8.6
1000    0.7 / 1.4      0.9 / 1.4       2.6 / 2.7
5000    1.3 / 1.2      7.1 / 2.1       23.8 / 3.3
======  =============  ==============  ===============

(and the first GPU run: a K = 10 fit of 1000 rows 1.4 s against 0.76 s on the CPU). The GPU lost
below n x K = 10^4 scores (its kernel launches cost more than the arithmetic), tied at 10^4-10^5,
and won 3-7x from 5 x 10^4 on; the rule puts the line at 5 x 10^4. Not measured: sizes between,
other S, the staged fits of many rows (pbr_core.gp.staged, newer than the GPU runs), other GPUs and
CPUs. ``scripts/gpu_checks.sh crossover`` measures the crossover over n x K x S on the next GPU
(benchmarks/bench_device.py); until then, pass ``device="cuda"`` or ``"cpu"`` to choose yourself.
"""

from __future__ import annotations

import torch

#: Every tensor of the GP code uses this dtype (GP_SPEC section 1: float64 throughout).
DTYPE = torch.float64

#: ``"auto"`` picks CUDA for work of at least this many scores (rows x classes, summed over the GPs
#: of a batch) when a GPU is there; below it the CPU (provisional: see the module docstring).
AUTO_CUDA_MIN_SCORES = 50_000


def auto_prefers_cuda(scores: int | None) -> bool:
    """Whether ``"auto"`` would run work of ``scores`` scores (rows x classes; None: unknown, as
    before the size rule) on a GPU, when one is there."""
    return scores is None or int(scores) >= AUTO_CUDA_MIN_SCORES


def resolve_device(device: str | torch.device = "auto", scores: int | None = None) -> torch.device:
    """Turn ``"auto"``, ``"cpu"``, ``"cuda"`` or ``"cuda:N"`` into a usable :class:`torch.device`.

    ``scores``: the size of the work, rows x classes (summed over the GPs of a batch); with
    ``"auto"``, work below :data:`AUTO_CUDA_MIN_SCORES` scores runs on the CPU even where a GPU is
    there (None: the GPU whenever there is one).

    Raises
    ------
    RuntimeError
        When a CUDA device is requested but PyTorch cannot use one (CPU-only build or no GPU), or
        the requested GPU index does not exist.
    ValueError
        For a string that is not a device name.
    """
    if isinstance(device, torch.device):
        dev = device
    else:
        name = str(device).strip().lower()
        if name == "auto":
            cuda = auto_prefers_cuda(scores) and torch.cuda.is_available()
            return torch.device("cuda") if cuda else torch.device("cpu")
        try:
            dev = torch.device(name)
        except RuntimeError as exc:
            raise ValueError(
                f"Expected argument `device` to be 'auto', 'cpu', 'cuda' or 'cuda:N', but got {device!r}."
            ) from exc
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            raise RuntimeError(
                f"device={str(device)!r} was requested, but PyTorch cannot use a CUDA GPU here "
                f"(torch.cuda.is_available() is False; torch {torch.__version__}). "
                "Use device='auto' (GPU when present, else CPU) or device='cpu'."
            )
        if dev.index is not None and dev.index >= torch.cuda.device_count():
            raise RuntimeError(
                f"device={str(device)!r} was requested, but only {torch.cuda.device_count()} CUDA device(s) exist."
            )
    elif dev.type != "cpu":
        raise ValueError(f"Expected argument `device` to be 'auto', 'cpu' or a CUDA device, but got {device!r}.")
    return dev
