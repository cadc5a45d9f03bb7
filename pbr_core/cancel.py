"""Stopping a long computation part-way: :class:`Cancelled`, :func:`cancel_when` and :func:`checkpoint`.

A front end (the dashboard's Stop button, a closed browser tab, a script's time limit) asks for a
stop through a plain ``cancel() -> bool`` callable. Within ``with cancel_when(cancel):`` every slow
loop of the library calls :func:`checkpoint`, which raises :class:`Cancelled` as soon as
``cancel()`` returns True. The checkpoints sit where the time goes: each objective evaluation of
the GP optimisers (every L-BFGS closure call, line-search evaluations included, and every Adam
step), each row batch of a GP prediction and of the fixed Monte Carlo draws, each loop wrapped
with :func:`pbr_core.progress.track` (one-vs-all maps) and each objective evaluation of
the scaling methods. None of them takes more than a fraction of a second at the paper's sizes
(n = 1000, K = 100) on a CPU, so a stop acts within about a second at any point.

Why a context variable rather than a ``cancel=`` argument on every function: the long loops sit
several calls below the public API (``compare`` -> ``Recalibrator.fit`` -> ``fit_gp`` ->
``run_lbfgs`` -> the closure), and the recalibrators' constructors take only model parameters
(saved with the model). The experiment protocols' ``cancel=`` callbacks install themselves here
around each fit, so ``compare(..., cancel=cb)`` stops within a fit, not only between fits.

Without an installed callable :func:`checkpoint` does nothing (one context-variable read), and it
never touches a random generator: results are identical whether or not anyone can stop them.

Example
-------
>>> import threading
>>> from pbr_core.cancel import Cancelled, cancel_when, checkpoint
>>> stop = threading.Event()
>>> stop.set()
>>> with cancel_when(stop.is_set):
...     try:
...         checkpoint()
...     except Cancelled:
...         print("stopped")
stopped
"""

from __future__ import annotations

import contextlib
import contextvars
from typing import TYPE_CHECKING, Callable, Iterator

if TYPE_CHECKING:  # imported when an empty table is made (pandas costs ~0.4 CPU s to import)
    import pandas as pd

__all__ = ["CancelCallback", "Cancelled", "cancel_when", "checkpoint", "watching"]

#: ``cancel()``: True asks for a stop (cheap: it is called at every checkpoint).
CancelCallback = Callable[[], bool]


class Cancelled(Exception):
    """A computation was stopped by its ``cancel`` callback; what finished is kept where possible.

    Attributes
    ----------
    partial : pandas.DataFrame
        For the experiment protocols: the result table restricted to the fits that completed (same
        columns as a full run). Empty when raised from inside one fit.
    done, total : int
        Fits completed and fits planned.
    """

    def __init__(self, partial: pd.DataFrame | None = None, done: int = 0, total: int = 0) -> None:
        # Raised bare (``Cancelled()``) from inside a fit by :func:`checkpoint` or a progress callback;
        # a protocol re-raises it with its partial table.
        if partial is None:
            import pandas as pd

            partial = pd.DataFrame()
        super().__init__(f"Cancelled after {done} of {total} fits; `partial` holds the {len(partial)} rows finished.")
        self.partial = partial
        self.done = done
        self.total = total


_CANCEL: contextvars.ContextVar[tuple[Callable[[], bool], ...]] = contextvars.ContextVar("pbr_core_cancel",
                                                                                          default=())


@contextlib.contextmanager
def cancel_when(cancel: Callable[[], bool] | None) -> Iterator[None]:
    """Within the block, :func:`checkpoint` raises :class:`Cancelled` once ``cancel()`` returns True.

    Blocks nest: an inner block adds its callable to the outer ones (any of them stops the work).
    ``None`` installs nothing. The callable is called often (every objective evaluation), so it must
    be cheap, e.g. ``threading.Event.is_set``.
    """
    if cancel is None or cancel in _CANCEL.get():
        yield
        return
    token = _CANCEL.set(_CANCEL.get() + (cancel,))
    try:
        yield
    finally:
        _CANCEL.reset(token)


def watching() -> bool:
    """Whether a ``cancel`` callable is installed (so that a loop needs checks at all)."""
    return bool(_CANCEL.get())


def checkpoint() -> None:
    """Raise :class:`Cancelled` when an installed ``cancel()`` asks for a stop; else return at once."""
    cancels = _CANCEL.get()
    if cancels and any(cancel() for cancel in cancels):
        raise Cancelled()
