"""Prediction logs beyond memory: the calibration diagnostics in one streamed pass, on one machine
by default or on a Dask cluster, sampling for fits, and applying a recalibrator batch by batch.

Calibration by group (:func:`compute_group_statistics`) counts the groups in a pass over the group
columns, then measures them in one pass with mergeable per-group sums. :func:`compute_slices` finds
the slices whose calibration departs from the rest (a planning pass over the slice columns, one pass
for the search, one for the confirmation).

Nothing here holds all rows: a dataset (:func:`open_dataset`: a Parquet / CSV file, a folder, a
glob or an fsspec URL) is read as record batches, validated by the loader's own code, and reduced
to :class:`CalibrationStatistics`, whose partial results merge by addition. Dask is imported only
when a scheduler or a local cluster is asked for (``pip install "pbr-calib[scale]"``).

Examples
--------
>>> import pbr_core, pbr_core.stream as ps
>>> stats = ps.compute_statistics(ps.open_dataset("sample_data/kitti_mlp.parquet"), n_boot=20)
>>> preds = pbr_core.load_predictions("sample_data/kitti_mlp.parquet")
>>> abs(stats.ece() - pbr_core.ece(preds.p_positive, preds.labels, n_bins=stats.config.n_bins)) < 1e-12
True
"""

from __future__ import annotations

from pbr_core.stream._apply import RowSample, apply_to_dataset, sample_dataset
from pbr_core.stream._fit import fit_platt, fit_temperature
from pbr_core.stream._groups import GroupsConfig, GroupStatistics, compute_group_statistics
from pbr_core.stream._report import copies_notes, evaluate_dataset
from pbr_core.stream._run import compute_statistics, count_rows, scan_dataset, stats_config, unit_statistics
from pbr_core.stream._server import ServerPathError, data_root, resolve_server_path
from pbr_core.stream._slices import compute_slices
from pbr_core.stream._source import Dataset, Layout, Unit, open_dataset
from pbr_core.stream._stats import CalibrationStatistics, StatsConfig, poisson_weights

__all__ = [
    "CalibrationStatistics",
    "Dataset",
    "GroupStatistics",
    "GroupsConfig",
    "Layout",
    "RowSample",
    "ServerPathError",
    "StatsConfig",
    "Unit",
    "apply_to_dataset",
    "compute_group_statistics",
    "compute_slices",
    "compute_statistics",
    "copies_notes",
    "count_rows",
    "data_root",
    "evaluate_dataset",
    "fit_platt",
    "fit_temperature",
    "open_dataset",
    "poisson_weights",
    "resolve_server_path",
    "scan_dataset",
    "sample_dataset",
    "stats_config",
    "unit_statistics",
]
