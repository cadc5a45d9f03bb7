"""Device resolution for the GP code (GP_SPEC section 3: "CUDA when available and asked for").

``"auto"`` picks CUDA when PyTorch sees a GPU, else the CPU. An explicit CUDA request on a machine
without one is an error, never a silent fall-back: a user who asked for the GPU wants to know.
"""

from __future__ import annotations

import torch

#: Every tensor of the GP code uses this dtype (GP_SPEC section 1: float64 throughout).
DTYPE = torch.float64


def resolve_device(device: str | torch.device = "auto") -> torch.device:
    """Turn ``"auto"``, ``"cpu"``, ``"cuda"`` or ``"cuda:N"`` into a usable :class:`torch.device`.

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
            return torch.device("cuda") if torch.cuda.is_available() else torch.device("cpu")
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
