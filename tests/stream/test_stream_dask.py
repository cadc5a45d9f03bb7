"""Streamed == in-memory == Dask: the same statistics through a Dask LocalCluster started here."""

from __future__ import annotations

import sys

import numpy as np
import pytest

import pbr_core
from pbr_core.stream import compute_statistics, open_dataset

distributed = pytest.importorskip("distributed", reason="the optional extra pbr-calib[scale] is not installed")

pytestmark = pytest.mark.dask


@pytest.fixture(scope="module")
def client():
    # In-process workers (threads): starts in a fraction of a second; the tasks still run through
    # the scheduler, pickling-free but with the same per-unit function and merge.
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                                  dashboard_address=None) as cluster, distributed.Client(cluster) as c:
        yield c


def test_core_does_not_import_dask(cifar10_parts) -> None:
    import subprocess

    code = ("import sys, pbr_core, pbr_core.stream as ps, pbr_core.cli; "
            f"ps.compute_statistics(ps.open_dataset({str(cifar10_parts)!r}), n_boot=5); "
            "print(any(m == 'dask' or m.startswith(('dask.', 'distributed')) for m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_dask_equals_stream_equals_in_memory(cifar10_parts, cifar10_frame, client) -> None:
    ds = open_dataset(cifar10_parts, batch_rows=500)
    local = compute_statistics(ds, n_boot=50, seed=4)
    on_dask = compute_statistics(ds, n_boot=50, seed=4, client=client)
    assert on_dask.n == local.n == 10000
    np.testing.assert_allclose(on_dask.cells, local.cells, rtol=0, atol=1e-9)
    np.testing.assert_allclose(on_dask.boot, local.boot, rtol=0, atol=1e-9)
    assert on_dask.ece_interval() == pytest.approx(local.ece_interval(), abs=1e-12)  # same draws per batch
    probs = cifar10_frame[[f"c{k}" for k in range(10)]].to_numpy()
    labels = cifar10_frame["label"].to_numpy()
    B = on_dask.config.n_bins
    assert on_dask.ece() == pytest.approx(pbr_core.ece(probs, labels, n_bins=B), abs=1e-12)
    np.testing.assert_allclose(on_dask.ece_curve(), pbr_core.ece_curve(probs, labels), rtol=0, atol=1e-12)
    assert on_dask.brier == pytest.approx(pbr_core.brier_score(probs, labels), abs=1e-12)


def test_a_bad_row_on_a_worker_is_named(cifar10_frame, tmp_path, client) -> None:
    import pandas as pd
    import pyarrow as pa
    import pyarrow.parquet as pq
    from stream_testdata import write_parts

    files = write_parts(cifar10_frame, tmp_path / "bad", 3)
    part = pd.read_parquet(files[1])
    part.loc[part.index[900], "label"] = -1
    pq.write_table(pa.Table.from_pandas(part, preserve_index=False), files[1], row_group_size=700)
    with pytest.raises(pbr_core.PredictionsError, match=r"part1\.parquet.*row group 2, row 901 of the file"):
        compute_statistics(open_dataset(tmp_path / "bad"), n_boot=5, client=client)
