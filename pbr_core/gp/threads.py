"""The torch thread count used inside a GP fit or prediction on the CPU.

Why the library sets it: the GP code works in cache-sized chunks (a few hundred kB per tensor
operation, thousands of operations per objective evaluation), where torch's intra-op threads
cost more in start-up and synchronisation than they gain, and on a machine whose cores are busy
with other work they wait for each other. Measured on this project's shared two-core machine
(benchmarks/RESULTS_fast_pbr.md): one PBR fit at n_re = 1000, K = 10 took 4.1 s wall / 4.1 CPU s
with one thread and 57.5 s wall / 28.5 CPU s with torch's default of two. Tests and benchmarks
already set one thread; the dashboard and the CLI ran with the default, several times slower.
So every fit and prediction of :mod:`pbr_core.recalibrators.gp` runs under :func:`fit_threads`.

With the OpenMP backend of the CPU builds of torch the setting belongs to the calling thread
(a dashboard job thread does not change the main thread's count), and it is restored on exit.
``PBR_CALIB_THREADS`` (an integer >= 1) overrides the default of 1, e.g. on a dedicated machine
with many idle cores where measurement shows that more threads pay.
"""

from __future__ import annotations

import os
from contextlib import contextmanager
from typing import Iterator

import torch

#: Threads per fit unless ``PBR_CALIB_THREADS`` says otherwise (see the module docstring).
DEFAULT_FIT_THREADS = 1

ENV_VAR = "PBR_CALIB_THREADS"


def fit_thread_count() -> int:
    """The thread count a fit uses: ``PBR_CALIB_THREADS`` when it holds an integer >= 1, else 1.

    Raises
    ------
    ValueError
        When ``PBR_CALIB_THREADS`` is set to something that is not an integer >= 1.
    """
    raw = os.environ.get(ENV_VAR, "").strip()
    if not raw:
        return DEFAULT_FIT_THREADS
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if value < 1:
        raise ValueError(f"The environment variable {ENV_VAR} must be a whole number of at least 1 "
                         f"(torch threads per GP fit), but it is {raw!r}.")
    return value


@contextmanager
def fit_threads(n: int | None = None) -> Iterator[int]:
    """Run the block with ``n`` torch threads (default :func:`fit_thread_count`), then restore.

    Yields the thread count in force inside the block.
    """
    n = fit_thread_count() if n is None else int(n)
    before = torch.get_num_threads()
    if n == before:
        yield n
        return
    torch.set_num_threads(n)
    try:
        yield n
    finally:
        torch.set_num_threads(before)
