"""The dataset source: files, folders, globs, empty files, mixed schemas, bad rows named precisely."""

from __future__ import annotations

import shutil

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pbr_core.predictions import PredictionsError
from pbr_core.stream import compute_statistics, open_dataset

from stream_testdata import write_parts


def _copy(src, dst):
    shutil.copytree(src, dst)
    return dst


def test_an_empty_file_among_many_changes_nothing(cifar10_parts, cifar10_frame, tmp_path) -> None:
    folder = _copy(cifar10_parts, tmp_path / "logs")
    empty = pa.Table.from_pandas(cifar10_frame.iloc[:0], preserve_index=False)
    pq.write_table(empty, folder / "part1b.parquet")  # sorts between part1 and part2
    ds = open_dataset(folder)
    assert len(ds.files) == 5
    with_empty = compute_statistics(ds, n_boot=10)
    without = compute_statistics(open_dataset(cifar10_parts), n_boot=10)
    assert with_empty.n == without.n == 10000
    assert with_empty.ece() == without.ece()
    np.testing.assert_array_equal(with_empty.cells, without.cells)
    # The interval's draws are seeded by file number and row; the empty file shifts the numbers of the
    # later files, so the interval is another draw of the same distribution, not the same numbers.
    lo, hi = with_empty.ece_interval()
    assert lo <= with_empty.ece() <= hi


def test_bad_rows_in_a_later_file_are_named(cifar10_frame, tmp_path) -> None:
    df = cifar10_frame.copy()
    files = write_parts(df, tmp_path / "nan", 4)
    part = pd.read_parquet(files[2])
    part.loc[part.index[1234], "c3"] = np.nan  # row 1235 of part2, in its second row group (700 rows each)
    pq.write_table(pa.Table.from_pandas(part, preserve_index=False), files[2], row_group_size=700)
    with pytest.raises(PredictionsError) as err:
        compute_statistics(open_dataset(tmp_path / "nan"), n_boot=5)
    msg = str(err.value)
    assert "part2.parquet" in msg and "row group 2" in msg and "row 1235 of the file" in msg and "c3" in msg

    files = write_parts(df, tmp_path / "label", 3, fmt="csv")
    part = pd.read_csv(files[1])
    part.loc[part.index[2000], "label"] = 12  # only 10 classes
    part.to_csv(files[1], index=False)
    with pytest.raises(PredictionsError, match=r"part1\.csv.*row 2001 of the file") as err:
        compute_statistics(open_dataset(tmp_path / "label"), n_boot=5)
    assert "12" in str(err.value)

    files = write_parts(df, tmp_path / "sum", 3)
    part = pd.read_parquet(files[2])
    part.loc[part.index[10], "c0"] += 0.2  # the row no longer sums to one
    pq.write_table(pa.Table.from_pandas(part, preserve_index=False), files[2], row_group_size=700)
    with pytest.raises(PredictionsError, match=r"part2\.parquet.*row group 1, row 11 of the file.*sum"):
        compute_statistics(open_dataset(tmp_path / "sum"), n_boot=5)


def test_mixed_schemas_are_a_clear_error(cifar10_frame, tmp_path) -> None:
    write_parts(cifar10_frame, tmp_path / "mixed", 2)
    other = cifar10_frame.drop(columns=["segment"]).rename(columns={"id": "request_id"})
    pq.write_table(pa.Table.from_pandas(other.iloc[:100], preserve_index=False), tmp_path / "mixed" / "part9.parquet")
    with pytest.raises(PredictionsError) as err:
        open_dataset(tmp_path / "mixed")
    msg = str(err.value)
    assert "part9.parquet" in msg and "columns differ" in msg and "'segment'" in msg and "request_id" in msg


def test_what_is_not_a_dataset(tmp_path, cifar10_parts) -> None:
    with pytest.raises(PredictionsError, match="no file found"):
        open_dataset(tmp_path / "nothing-*.parquet")
    (tmp_path / "a.parquet").write_bytes(b"")
    with pytest.raises(PredictionsError, match="a.parquet.*Parquet"):
        compute_statistics(open_dataset(tmp_path / "a.parquet"), n_boot=5)
    shutil.copy(cifar10_parts / "part0.parquet", tmp_path / "b.parquet")
    pd.DataFrame({"x": [1]}).to_csv(tmp_path / "c.csv", index=False)
    with pytest.raises(PredictionsError, match="mixes Parquet and CSV"):
        open_dataset([tmp_path / "b.parquet", tmp_path / "c.csv"])


def test_roles_come_from_the_loader(cifar10_parts) -> None:
    ds = open_dataset(cifar10_parts, ignore_columns="segment", label_column="label")
    lay = ds.layout()
    assert lay.scores == tuple(f"c{k}" for k in range(10))
    assert dict(lay.column_roles) == {**{f"c{k}": "score" for k in range(10)}, "label": "label",
                                      "id": "metadata", "segment": "ignored"}
    assert set(lay.read_columns) == {*lay.scores, "label"}  # later batches read only these


def test_an_fsspec_url_is_a_dataset(cifar10_frame) -> None:
    fsspec = pytest.importorskip("fsspec")
    fs = fsspec.filesystem("memory")
    for i, rows in enumerate(np.array_split(np.arange(3000), 2)):
        with fs.open(f"/pbr-stream-test/logs/p{i}.parquet", "wb") as f:
            pq.write_table(pa.Table.from_pandas(cifar10_frame.iloc[rows], preserve_index=False), f)
    try:
        ds = open_dataset("memory://pbr-stream-test/logs/*.parquet")
        assert len(ds.files) == 2 and ds.files[0].startswith("memory://")
        stats = compute_statistics(ds, n_boot=5)
        import pbr_core

        part = cifar10_frame.iloc[:3000]
        probs = part[[f"c{k}" for k in range(10)]].to_numpy()
        assert stats.n == 3000
        assert stats.ece() == pytest.approx(pbr_core.ece(probs, part["label"].to_numpy(), stats.config.n_bins), abs=1e-12)
    finally:
        fs.rm("/pbr-stream-test", recursive=True)
