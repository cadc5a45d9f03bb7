"""The Dask back end: one task per unit, results merged by a tree of tasks. Imported only when asked.

It knows nothing of what a task computes: the passes (``_run``'s statistics; ``_passes`` for the groups
and the slices) hand it their unit function, so it imports none of them (they import it, inside the
functions that need Dask).
"""

from __future__ import annotations

import contextlib
from typing import Any, Callable, Iterator, Sequence

from pbr_core.stream._source import Dataset, Unit

_ADVICE = 'running on Dask needs the optional extra: pip install "pbr-calib[scale]" (dask[dataframe], distributed)'


def _distributed():
    try:
        import distributed
    except ImportError as exc:
        raise ImportError(f"{_ADVICE} ({exc})") from None
    return distributed


def _merge_pair(a, b):
    return a.merge(b)


@contextlib.contextmanager
def dask_client(scheduler: str | None, local_cluster: int | None, client=None) -> Iterator[Any]:
    """``client``, or a client of the scheduler at ``scheduler``, or of a ``distributed.LocalCluster``
    of ``local_cluster`` workers started for the block (closed after it, with the cluster)."""
    distributed = _distributed()
    own_cluster = None
    owns_client = client is None
    if client is None:
        if scheduler is not None:
            client = distributed.Client(scheduler)
        else:
            own_cluster = distributed.LocalCluster(n_workers=int(local_cluster), threads_per_worker=1,
                                                   processes=True, dashboard_address=None)
            client = distributed.Client(own_cluster)
    try:
        yield client
    finally:
        if owns_client:
            client.close()
        if own_cluster is not None:
            own_cluster.close()


def map_merge(client, dataset: Dataset, units: Sequence[Unit], task: Callable, args: tuple = (),
              progress: Callable | None = None, total: int | None = None):
    """``task(dataset, unit, *args)`` for every unit as one Dask task each, the results (objects with
    a ``merge`` method) merged on the workers by a binary tree over the units in order; the merged
    result is returned. ``units`` must not be empty."""
    distributed = _distributed()
    n = len(units)
    futures = client.map(task, [dataset] * n, list(units), *[[a] * n for a in args], pure=False)
    rows = {f.key: (u.n_rows or 0) for f, u in zip(futures, units)}
    level = list(futures)
    while len(level) > 1:
        level = [client.submit(_merge_pair, level[i], level[i + 1], pure=False) if i + 1 < len(level)
                 else level[i] for i in range(0, len(level), 2)]
    done = 0
    for future in distributed.as_completed(futures):
        if future.status == "error":
            future.result()  # re-raises the task's PredictionsError here, with its message
        done += rows[future.key]
        if progress is not None:
            progress(done, total, "rows")
    del futures
    return level[0].result()
