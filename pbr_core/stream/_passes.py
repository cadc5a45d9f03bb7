"""One pass of a unit function over a dataset, merged: in this process or on Dask.

The group statistics (``_groups``) and the slices (``_slices``) read a dataset in several passes,
each a function of one unit (a Parquet row group or a CSV file) whose results merge; both run them
through :func:`merged_pass`, on the client :func:`with_client` opens when one is asked for.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

from pbr_core.progress import Progress
from pbr_core.stream._source import Dataset, Unit


def merged_pass(dataset: Dataset, units: Sequence[Unit], task: Callable, args: tuple, *, what: str,
                progress: Progress | None = None, total: int | None = None, client=None,
                enough: Callable[[Any], bool] | None = None):
    """``task(dataset, unit, *args)`` over every unit, the results (objects with a ``merge`` method)
    merged in unit order; ``progress(rows, total, what)`` hears the rows read.

    In this process each task also gets ``on_rows`` (called with the rows of each batch it read), and
    the pass ends early once ``enough(merged so far)`` holds (the group count's "too many groups
    already"). With a Dask ``client`` every unit is one task (:func:`pbr_core.stream._dask.map_merge`:
    merged on the workers by a tree over the units in order). ``units`` must not be empty.
    """
    report = (lambda done, tot, _rows="": progress(done, tot, what)) if progress is not None else None
    if client is not None:
        from pbr_core.stream._dask import map_merge  # Dask only when asked

        return map_merge(client, dataset, units, task, args, report, total)
    done = 0

    def on_rows(k: int) -> None:
        nonlocal done
        done += k
        if report is not None:
            report(done, total)

    result = None
    for unit in units:
        part = task(dataset, unit, *args, on_rows=on_rows)
        result = part if result is None else result.merge(part)
        if enough is not None and enough(result):
            break
    return result


def with_client(scheduler: str | None, local_cluster: int | None, client, passes: Callable[[Any], Any]) -> Any:
    """``passes(None)`` in this process, or ``passes(client)`` on the Dask client that ``scheduler``,
    ``local_cluster`` or ``client`` names (one opened here is closed after)."""
    if scheduler is None and local_cluster is None and client is None:
        return passes(None)
    from pbr_core.stream._dask import dask_client

    with dask_client(scheduler, local_cluster, client) as c:
        return passes(c)
