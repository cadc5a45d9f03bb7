"""The Dask back end: one task per unit, statistics merged on the client. Imported only when asked."""

from __future__ import annotations

from typing import Callable, Sequence

from pbr_core.stream._source import Dataset, Unit
from pbr_core.stream._stats import CalibrationStatistics, StatsConfig

_ADVICE = 'running on Dask needs the optional extra: pip install "pbr-calib[scale]" (dask[dataframe], distributed)'


def _distributed():
    try:
        import distributed
    except ImportError as exc:
        raise ImportError(f"{_ADVICE} ({exc})") from None
    return distributed


def _unit_task(dataset: Dataset, unit: Unit, config: StatsConfig) -> CalibrationStatistics:
    from pbr_core.stream._run import unit_statistics

    return unit_statistics(dataset, unit, config)


def run_on_dask(dataset: Dataset, units: Sequence[Unit], config: StatsConfig, *, scheduler: str | None,
                local_cluster: int | None, client=None, progress: Callable | None = None,
                total: int | None = None) -> CalibrationStatistics:
    """Map :func:`pbr_core.stream._run.unit_statistics` over the units on a Dask cluster and merge.

    The statistics of a unit are a few MB at most (cells, n_boot x 2B bootstrap sums), whatever its
    rows, so gathering them on the client costs little; they are merged in unit order so that the
    result does not depend on which task finished first.
    """
    distributed = _distributed()
    dataset.layout()  # detect once here: every task then reads only the columns it needs
    own_cluster = None
    if client is None:
        if scheduler is not None:
            client = distributed.Client(scheduler)
        else:
            own_cluster = distributed.LocalCluster(n_workers=int(local_cluster), threads_per_worker=1,
                                                   processes=True, dashboard_address=None)
            client = distributed.Client(own_cluster)
        owns_client = True
    else:
        owns_client = False
    try:
        futures = client.map(_unit_task, [dataset] * len(units), list(units), [config] * len(units), pure=False)
        results: list[CalibrationStatistics | None] = [None] * len(units)
        position = {f.key: i for i, f in enumerate(futures)}
        done = 0
        for future in distributed.as_completed(futures):
            part = future.result()  # re-raises a task's PredictionsError here, with its message
            results[position[future.key]] = part
            done += part.n
            if progress is not None:
                progress(done, total)
        merged = CalibrationStatistics.empty(config)
        for part in results:
            merged.merge(part)
        return merged
    finally:
        if owns_client:
            client.close()
        if own_cluster is not None:
            own_cluster.close()
