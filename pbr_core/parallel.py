"""Independent chains of fits on several CPU cores: :func:`run_chains`.

A GP fit runs on one torch thread (:mod:`pbr_core.gp.threads`: measured faster than torch's
default), so a protocol that fits folds one after the other uses one core of a laptop's 4-16.
The folds of an alpha selection or of the KL-gap protocol are independent chains (within a fold
the fits may continue from each other, across folds they share nothing), so they can run in
worker processes, one chain per task, ``n_jobs`` at a time. Each fit is seeded by its own
parameters, so the rows are the same numbers whatever ``n_jobs`` is (``tests/test_parallel.py``).

Workers are started with the ``spawn`` method (safe from threads, e.g. a dashboard job, and on
every OS); each imports ``pbr_core`` and torch once (1-2 CPU s), so parallel runs pay off for
protocols of more than a few fits. As with any ``spawn`` multiprocessing, each worker imports the
script that started it: in a script, call with ``n_jobs > 1`` under ``if __name__ == "__main__":``
(otherwise the workers stop with a message saying so). The items a chain emits (its finished rows) reach the caller
as they finish, so progress is reported per fit and a stop (``cancel``) keeps every finished row:
the workers are terminated at once, mid-fit. Warnings raised in a worker (a fit that ended at the
prior, a failed fit kept as a NaN row) are re-issued in the caller as they arrive, so the caller's
warning filters, ``pytest.warns`` and the dashboard see them as with ``n_jobs=1``.
"""

from __future__ import annotations

import importlib
import multiprocessing as mp
import numbers
import os
import queue as _queue
import traceback
import warnings
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any, Callable, Sequence

from pbr_core.cancel import checkpoint

__all__ = ["N_JOBS_WORDS", "available_cores", "check_n_jobs", "is_n_jobs", "run_chains"]

#: Seconds between two looks at the cancel callable while waiting for workers.
POLL_S = 0.2

_WORKER_QUEUE: Any = None

SCRIPT_GUARD_SHORT = "each worker imports the script that started it"
SCRIPT_GUARD = ("pbr_core n_jobs > 1 was called again inside one of its own worker processes: "
                + SCRIPT_GUARD_SHORT + " (Python's 'spawn' start method), so a call at the top level of a script "
                "runs again in every worker. Put the call under `if __name__ == '__main__':`, or use n_jobs=1.")


def available_cores() -> int:
    """CPU cores this process may use (the affinity mask where the OS has one)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # macOS, Windows
        return max(1, os.cpu_count() or 1)


#: What ``n_jobs`` may be, in words (the library's, the CLI's and the estimators' messages).
N_JOBS_WORDS = "a whole number >= 1, or -1 (every core)"


def is_n_jobs(value: Any) -> bool:
    """Whether ``value`` is a valid ``n_jobs``: an int >= 1, or -1."""
    return (not isinstance(value, bool) and isinstance(value, numbers.Integral)
            and (int(value) >= 1 or int(value) == -1))


def check_n_jobs(n_jobs: Any) -> int:
    """``n_jobs`` as a number of worker processes: an int >= 1, or -1 for every available core."""
    if not is_n_jobs(n_jobs):
        raise ValueError(f"Expected argument `n_jobs` to be {N_JOBS_WORDS}, but got {n_jobs!r}.")
    return available_cores() if int(n_jobs) == -1 else int(n_jobs)


def _init_worker(q: Any) -> None:
    global _WORKER_QUEUE
    _WORKER_QUEUE = q


def _warning_category(module: str, name: str) -> type[Warning]:
    """The warning class a worker named (by module and qualified name), or UserWarning."""
    try:
        obj: Any = importlib.import_module(module)
        for part in name.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError):
        return UserWarning
    return obj if isinstance(obj, type) and issubclass(obj, Warning) else UserWarning


def _run_in_worker(chain_fn: Callable[..., None], index: int, args: tuple) -> None:
    q = _WORKER_QUEUE

    def forward(message, category, filename, lineno, file=None, line=None):
        # Plain strings and ints only: the queue pickles in a feeder thread, where a warning
        # object that does not pickle would be lost without a word.
        q.put((index, "warning", (str(message), category.__module__, category.__qualname__, str(filename),
                                  int(lineno))))

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("always")  # every warning goes to the caller, whose filters decide
            warnings.showwarning = forward
            chain_fn(*args, emit=lambda item: q.put((index, "item", item)))
    except BaseException as exc:  # noqa: BLE001 - handed to the parent, which raises it
        try:
            q.put((index, "error", exc))
        except Exception:  # an exception that does not pickle: its text instead
            q.put((index, "error", RuntimeError(f"{type(exc).__name__}: {exc}\n{traceback.format_exc()}")))
        return
    q.put((index, "done", None))


def run_chains(chain_fn: Callable[..., None], chains: Sequence[tuple], n_jobs: int,
               on_item: Callable[[int, Any], None]) -> None:
    """Call ``chain_fn(*chains[i], emit=...)`` for every i, ``n_jobs`` chains at a time.

    ``chain_fn`` (a module-level function: it is pickled to the workers) calls ``emit(item)`` for
    each finished item (e.g. a row); ``on_item(i, item)`` is then called in this process, in the
    order the items arrive. With ``n_jobs == 1`` (or one chain) everything runs here, in order.

    Raises :class:`~pbr_core.cancel.Cancelled` (bare; the caller adds its partial table) when a stop
    installed with :func:`~pbr_core.cancel.cancel_when` is asked for (checked between fits here, or
    every 0.2 s while workers run, which are then terminated); the first exception of a chain, as
    raised there; RuntimeError when a worker process died (e.g. killed for memory).
    """
    n_jobs = min(int(n_jobs), len(chains))
    if n_jobs > 1 and getattr(mp.current_process(), "_inheriting", False):  # multiprocessing's own test
        # A worker re-running the caller's script: the spawn start method imports the main module in
        # every worker, and a call that is not under `if __name__ == "__main__":` runs again there.
        raise RuntimeError(SCRIPT_GUARD)
    if n_jobs <= 1:
        for i, args in enumerate(chains):
            chain_fn(*args, emit=lambda item, i=i: on_item(i, item))
        return
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    registry: dict = {}  # "default"/"once" filters show a repeated worker warning once, as in one process
    pool = ProcessPoolExecutor(max_workers=n_jobs, mp_context=ctx, initializer=_init_worker, initargs=(q,))
    finished = False
    try:
        futures = [pool.submit(_run_in_worker, chain_fn, i, tuple(args)) for i, args in enumerate(chains)]
        remaining = set(range(len(chains)))
        while remaining:
            checkpoint()  # a stop installed around the caller (pbr_core.cancel.cancel_when)
            try:
                index, kind, payload = q.get(timeout=POLL_S)
            except _queue.Empty:
                for f in futures:
                    exc = f.exception() if f.done() else None
                    if isinstance(exc, BrokenProcessPool):
                        raise RuntimeError("A worker process stopped unexpectedly: out of memory, or a script "
                                           "whose call with n_jobs > 1 is not under `if __name__ == "
                                           "'__main__':` (" + SCRIPT_GUARD_SHORT + "); run with n_jobs=1 to fit "
                                           "in this process.") from exc
                    if exc is not None:  # e.g. a chain's arguments that cannot be sent to a worker
                        raise exc
                continue
            if kind == "item":
                on_item(index, payload)
            elif kind == "warning":
                text, module, name, filename, lineno = payload
                warnings.warn_explicit(text, _warning_category(module, name), filename, lineno,
                                       registry=registry)
            elif kind == "done":
                remaining.discard(index)
            else:
                raise payload
        finished = True
    finally:
        if not finished:
            # Stop now: running fits are killed, queued chains never start.
            for p in list(getattr(pool, "_processes", {}).values()):
                p.terminate()
        pool.shutdown(wait=finished, cancel_futures=True)
        q.close()
