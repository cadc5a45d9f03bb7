"""Progress of long computations: one signature, ``progress(done, total, message)``.

Every progress report of the package is a call ``progress(done, total, message)``: ``done`` of
``total`` steps finished, ``message`` naming them. Stopping is the other half of the protocol and
lives in :mod:`pbr_core.cancel` (a ``cancel() -> bool`` callable; :class:`~pbr_core.cancel.Cancelled`).

Every place that reports progress takes such a callable:

* The experiment protocols and alpha selection take ``progress=`` and call it after each fit
  (the outer steps a front end counts).
* Slow loops below ``Recalibrator.fit`` report to the callable installed with
  :func:`report_progress` (inner progress, a context variable for the same reason as
  :func:`pbr_core.cancel.cancel_when`: the loops sit several calls below the public API). A GP fit
  reports its optimiser iterations against ``max_iter`` as ``"<method> fit"``; a loop wrapped with
  :func:`track` (one-vs-all maps) reports the items finished before each new one.

The CLI turns a tqdm bar into such a callable with :func:`tqdm_progress`; the dashboard's
``JobContext.progress`` and ``JobContext.fit_progress`` are two of them. The library never prints.

Example
-------
>>> from pbr_core.progress import report_progress, track
>>> seen = []
>>> with report_progress(lambda done, total, message: seen.append((done, total, message))):
...     for k in track(range(2), total=2, desc="maps"):
...         pass
>>> seen
[(0, 2, 'maps'), (1, 2, 'maps')]
"""

from __future__ import annotations

import contextlib
import contextvars
from typing import Any, Callable, Iterable, Iterator, Protocol, TypeVar

from pbr_core import cancel as _cancel

__all__ = ["Progress", "installed", "report_progress", "tqdm_progress", "track"]

#: ``progress(done, total, message)``: ``done`` of ``total`` steps finished, ``message`` names them;
#: ``total`` is None where it is not known ahead (the rows of a CSV read in a stream, the passes of a
#: fit on every row). Every progress report of the package has this shape: the protocols' fits, the
#: optimisers' iterations ("objective 0.0123"), the streamed passes' rows ("rows", or the pass:
#: "counting the groups"), the streamed fits' passes.
Progress = Callable[[int, "int | None", str], None]

_T = TypeVar("_T")
_PROGRESS: contextvars.ContextVar[Progress | None] = contextvars.ContextVar("pbr_core_progress", default=None)


@contextlib.contextmanager
def report_progress(progress: Progress | None) -> Iterator[None]:
    """Within the block, slow loops inside ``fit`` report to ``progress(done, total, message)``.

    ``None`` installs nothing (and hides an outer callable). Example:
    ``with report_progress(tqdm_progress(bar)): rec.fit(X, y)``.
    """
    token = _PROGRESS.set(progress)
    try:
        yield
    finally:
        _PROGRESS.reset(token)


def installed() -> Progress | None:
    """The callable installed with :func:`report_progress`, or None."""
    return _PROGRESS.get()


def track(iterable: Iterable[_T], total: int | None = None, desc: str = "") -> Iterable[_T]:
    """Wrap a slow loop: before each item the installed progress hears ``(items done, total, desc)``
    and a stop asked for with :func:`pbr_core.cancel.cancel_when` ends the loop. With neither
    installed the iterable is returned untouched."""
    progress = _PROGRESS.get()
    if progress is None and not _cancel.watching():
        return iterable
    return _tracked(iterable, progress, 0 if total is None else int(total), desc)


def _tracked(iterable: Iterable[_T], progress: Progress | None, total: int, desc: str) -> Iterator[_T]:
    for i, item in enumerate(iterable):
        if progress is not None:
            progress(i, total, desc)
        _cancel.checkpoint()
        yield item


class _TqdmLike(Protocol):
    total: Any
    n: Any

    def refresh(self) -> Any: ...

    def set_description_str(self, desc: str | None = ..., refresh: bool = ...) -> Any: ...


def tqdm_progress(bar: _TqdmLike) -> Progress:
    """Turn a tqdm bar into a ``progress(done, total, message)`` callback (for the CLI).

    Examples
    --------
    >>> from tqdm import tqdm
    >>> with tqdm(disable=True) as bar:
    ...     report = tqdm_progress(bar)
    ...     report(1, 4, "temperature, fold 1/2")
    ...     (bar.n, bar.total)
    (1, 4)
    """

    def report(done: int, total: int, message: str) -> None:
        bar.total = total
        bar.n = done
        bar.set_description_str(message, refresh=False)
        bar.refresh()

    return report
