"""Running the one pass: in this process (default) or on a Dask cluster (optional extra ``scale``)."""

from __future__ import annotations

from typing import Callable, Iterable, Sequence

from pbr_core.bounds import optimal_n_bins
from pbr_core.metrics import _check_bin_list, _check_n_bins, default_n_boot
from pbr_core.predictions import PredictionsError
from pbr_core.progress import Progress
from pbr_core.stream._source import Dataset, Unit
from pbr_core.stream._stats import CalibrationStatistics, StatsConfig

__all__ = ["compute_statistics", "count_rows", "scan_dataset", "stats_config", "unit_statistics"]



def count_rows(dataset: Dataset) -> int:
    """Rows of the dataset: from the Parquet footers, or by reading the CSV files' label column once."""
    n = dataset.num_rows()
    if n is not None:
        return n
    lay = dataset.layout()
    col = lay.read_columns[:1]
    return int(sum(rb.num_rows for u in dataset.units() for _, rb in dataset.raw_batches(u, col)))


def stats_config(dataset: Dataset, n_bins: int | None = None, curve_bins: Iterable[int] = range(1, 201),
                 n_boot: int | None = None, seed: int = 0, n_rows: int | None = None) -> StatsConfig:
    """The :class:`StatsConfig` for a dataset: B = floor(n^(1/3)) unless given, the bootstrap size
    of :func:`pbr_core.metrics.default_n_boot` unless given, the curve's B values."""
    lay = dataset.layout()
    n = count_rows(dataset) if n_rows is None and (n_bins is None or n_boot is None) else n_rows
    B = optimal_n_bins(n) if n_bins is None else _check_n_bins(n_bins)
    nb = default_n_boot(n) if n_boot is None else _check_n_bins(n_boot, "n_boot")
    curve = tuple(int(b) for b in _check_bin_list(curve_bins))
    return StatsConfig(kind=lay.kind, n_classes=max(lay.n_classes, 1), n_bins=B, curve_bins=curve,
                       n_boot=nb, seed=int(seed))


def unit_statistics(dataset: Dataset, unit: Unit, config: StatsConfig) -> CalibrationStatistics:
    """The statistics of one unit (a Parquet row group or a CSV file): the function each Dask task runs."""
    stats = CalibrationStatistics.empty(config)
    for start, preds in dataset.predictions(unit):
        stats.update(preds, key=(unit.file_index, start))
    return stats


def compute_statistics(
    dataset: Dataset,
    *,
    n_bins: int | None = None,
    curve_bins: Iterable[int] = range(1, 201),
    n_boot: int | None = None,
    seed: int = 0,
    progress: Progress | None = None,
    scheduler: str | None = None,
    local_cluster: int | None = None,
    client=None,
) -> CalibrationStatistics:
    """All diagnostics' statistics of ``dataset`` in one pass.

    By default one process reads the record batches in order (memory: one batch plus the
    statistics). With ``scheduler`` (a Dask scheduler address such as ``tcp://host:8786``),
    ``local_cluster`` (start a ``distributed.LocalCluster`` with that many workers for this call) or
    an existing ``client``, every unit becomes one Dask task computing the same statistics, and the
    results are merged here as they arrive: the numbers are those of the single-process pass (the
    same per-batch random draws; sums added in another order, so equal to ~1e-15).

    Raises
    ------
    PredictionsError
        A bad file or row, named with the file, row group and row.
    ImportError
        Dask was asked for but is not installed (``pip install "pbr-calib[scale]"``).
    """
    config = stats_config(dataset, n_bins, curve_bins, n_boot, seed)
    units = dataset.units()
    total = dataset.num_rows()
    if scheduler is None and local_cluster is None and client is None:
        stats = CalibrationStatistics.empty(config)
        done = 0
        for unit in units:
            for start, preds in dataset.predictions(unit):
                stats.update(preds, key=(unit.file_index, start))
                done += preds.n
                if progress is not None:
                    progress(done, total, "rows")
        return _non_empty(stats, dataset)
    return _non_empty(_on_dask(dataset, units, config, scheduler=scheduler, local_cluster=local_cluster,
                               client=client, progress=progress, total=total), dataset)


def _on_dask(dataset: Dataset, units: Sequence[Unit], config: StatsConfig, *, scheduler: str | None,
             local_cluster: int | None, client=None, progress: Progress | None = None,
             total: int | None = None) -> CalibrationStatistics:
    """:func:`unit_statistics` mapped over the units on a Dask cluster and merged.

    One task per unit (a Parquet row group or a CSV file); the partial statistics (at most about 5 MB
    whatever the unit's rows: per-cell sums, n_boot x 2B bootstrap sums, K x B classwise sums, the rows'
    hashes for the copies note (4 MB), the rows themselves while there are at most 50,000) are
    merged on the workers by a binary tree of merge tasks over the units in order, so only the final
    statistics travel to the client, and the floating-point additions happen in the same order
    however the tasks were scheduled (the result does not depend on which task finished first).
    """
    from pbr_core.stream._dask import dask_client, map_merge  # Dask only when asked

    dataset.layout()  # detect once here: every task then reads only the columns it needs
    with dask_client(scheduler, local_cluster, client) as c:
        if not units:
            return CalibrationStatistics.empty(config)
        return map_merge(c, dataset, units, unit_statistics, (config,), progress, total)


def _non_empty(stats: CalibrationStatistics, dataset: Dataset) -> CalibrationStatistics:
    if stats.n == 0:
        raise PredictionsError(f"{dataset.spec}: the dataset has no data rows.")
    return stats


def scan_dataset(
    dataset: Dataset,
    configs: dict[str, StatsConfig],
    *,
    sample_size: int | None = None,
    seed: int = 0,
    progress: Progress | None = None,
):
    """One pass in this process feeding several statistics (e.g. p(y=1) and top-label of a binary
    dataset) and, with ``sample_size``, a uniform sample of the rows for what needs rows in memory.

    Returns
    -------
    (dict of name -> CalibrationStatistics, Predictions of the sample or None)
    """
    from pbr_core.stream._apply import RowSample

    stats = {name: CalibrationStatistics.empty(c) for name, c in configs.items()}
    sample = RowSample(sample_size, seed) if sample_size else None
    total = dataset.num_rows()
    done = 0
    for unit in dataset.units():
        for start, preds in dataset.predictions(unit):
            for s in stats.values():
                s.update(preds, key=(unit.file_index, start))
            if sample is not None:
                sample.update(preds, (unit.file_index, start))
            done += preds.n
            if progress is not None:
                progress(done, total, "rows")
    if done == 0:
        raise PredictionsError(f"{dataset.spec}: the dataset has no data rows.")
    return stats, (sample.predictions(dataset.layout(), dataset.spec) if sample is not None else None)
