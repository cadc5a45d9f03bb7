"""The dataset source: files, folders, globs, empty files, mixed schemas, bad rows named precisely."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pbr_core.predictions import PredictionsError
from pbr_core.stream import compute_group_statistics, compute_statistics, open_dataset

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


def test_a_column_some_files_lack_is_noted_and_refused_only_where_needed(cifar10_frame, tmp_path) -> None:
    """Audit 10a: a folder whose files differ in any column was refused, and --ignore-columns did not
    help. Every batch is read by name: a column some files lack is noted, not read, and refused only
    when the run needs it (a column to group by, the label), naming the first file that lacks it."""
    write_parts(cifar10_frame, tmp_path / "mixed", 2)
    other = cifar10_frame.drop(columns=["segment"]).rename(columns={"id": "request_id"})
    pq.write_table(pa.Table.from_pandas(other.iloc[:100], preserve_index=False), tmp_path / "mixed" / "part9.parquet")
    ds = open_dataset(tmp_path / "mixed")
    note = ds.layout().notes[-1]
    assert note.startswith("Not in every file of the dataset, so not read: 'id' (not in part9.parquet; in 2 of 3 "
                           "files); 'segment' (not in part9.parquet; in 2 of 3 files); 'request_id' (not in "
                           "part0.parquet and 1 other file; in 1 of 3 files).")
    assert compute_statistics(ds, n_boot=5).n == 10100
    with pytest.raises(PredictionsError) as err:
        compute_group_statistics(open_dataset(tmp_path / "mixed"), "segment", n_boot=5)
    assert str(err.value).startswith(f"{tmp_path / 'mixed' / 'part9.parquet'}: this file has no column 'segment' (a "
                                     "column to group or slice by), which part0.parquet has")
    # --ignore-columns leaves the columns it names out of the note
    ignored = open_dataset(tmp_path / "mixed", ignore_columns="id,request_id").layout().notes[-1]
    assert "'segment'" in ignored and "id'" not in ignored
    assert not any("Not in every file" in n
                   for n in open_dataset(tmp_path / "mixed", ignore_columns="id,request_id,segment").layout().notes)
    # a needed column missing from a later file stops the pass before it reads a row, naming the file
    pq.write_table(pa.Table.from_pandas(cifar10_frame.drop(columns=["label"]).iloc[:100], preserve_index=False),
                   tmp_path / "mixed" / "part5.parquet")
    with pytest.raises(PredictionsError, match=r"part5\.parquet: this file has no column 'label' \(the label\)"):
        compute_statistics(open_dataset(tmp_path / "mixed"), n_boot=5)
    with pytest.raises(PredictionsError, match=r"part5\.parquet: this file has no column 'label' \(the label\)"):
        open_dataset(tmp_path / "mixed", label_column="label").layout()


def test_an_extra_column_on_a_later_day_changes_nothing(cifar10_frame, tmp_path) -> None:
    """One column added on the last day (audit 10a: "it has ['model_version'] that day0.parquet has
    not", refused even with --ignore-columns model_version): the same numbers as without it."""
    plain = write_parts(cifar10_frame, tmp_path / "plain", 3)
    drift = tmp_path / "drift"
    shutil.copytree(tmp_path / "plain", drift)
    last = pd.read_parquet(plain[-1]).assign(model_version="v2")
    pq.write_table(pa.Table.from_pandas(last, preserve_index=False), drift / plain[-1].name, row_group_size=700)
    ds = open_dataset(drift, ignore_columns="model_version")
    assert not any("Not in every file" in n for n in ds.layout().notes)
    with_it, without = compute_statistics(ds, n_boot=10), compute_statistics(open_dataset(tmp_path / "plain"), n_boot=10)
    assert with_it.n == without.n == 10000 and with_it.ece() == without.ece()
    assert with_it.ece_interval() == without.ece_interval()
    assert "'model_version' (not in part0.parquet and 1 other file; in 1 of 3 files)" in open_dataset(drift).layout().notes[-1]


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_extra_columns_in_the_first_file_only_are_not_read(kitti_csv_parts, tmp_path, fmt, capsys) -> None:
    """Audit 11 finding 2: the first file holding columns the later files lack. Its first batch, which
    detects the columns, still looked at them: a numeric one ('amount', 4.50) made the scores
    "ambiguous" and the run was refused, a text one was listed as metadata in the JSON `columns` while
    the note said "not read" (the same files with the column on a later day ran). Now they are left
    out as --ignore-columns leaves a column out: the numbers of the folder without them."""
    from pbr_core.cli import EXIT_OK, main

    df = pd.concat([pd.read_csv(p) for p in sorted(kitti_csv_parts.glob("*.csv"))], ignore_index=True)
    plain = write_parts(df, tmp_path / "plain", 3, fmt=fmt)
    extra = tmp_path / "extra"
    shutil.copytree(tmp_path / "plain", extra)
    first = pd.read_csv(plain[0]) if fmt == "csv" else pd.read_parquet(plain[0])
    first = first.assign(model_version=np.where(np.arange(len(first)) % 2 == 0, "a", "b"),
                         amount=4.5 + np.arange(len(first)) % 7)
    if fmt == "csv":
        first.to_csv(extra / plain[0].name, index=False)
    else:
        pq.write_table(pa.Table.from_pandas(first, preserve_index=False), extra / plain[0].name, row_group_size=700)
    a, b = open_dataset(extra), open_dataset(tmp_path / "plain")
    lay = a.layout()
    assert lay.column_roles == b.layout().column_roles and lay.read_columns == b.layout().read_columns
    assert lay.notes[-1].startswith(f"Not in every file of the dataset, so not read: 'model_version' (not in "
                                    f"part1.{fmt} and 1 other file; in 1 of 3 files); 'amount' (not in part1.{fmt} "
                                    "and 1 other file; in 1 of 3 files).")
    sa, sb = compute_statistics(a, n_boot=10), compute_statistics(b, n_boot=10)
    assert sa.n == sb.n == len(df) and sa.ece() == sb.ece() and sa.ece_interval() == sb.ece_interval()
    # the CLI's JSON lists the columns read, as the note says: not the two left out
    assert main(["evaluate", str(extra), "--stream", "--format", "json", "--quiet"]) == EXIT_OK
    t = json.loads(capsys.readouterr().out)
    assert t["columns"] == dict(b.layout().column_roles) and t["n"] == len(df)
    assert not {"model_version", "amount"} & set(t["columns"])
    assert any(n.startswith("Not in every file of the dataset, so not read: 'model_version'") for n in t["notes"])
    # grouping or slicing by one of them names a file that lacks it, as when a later file holds it
    from pbr_core.stream import compute_slices

    lacks = rf"part1\.{fmt}: this file has no column '(model_version|amount)' \(a column to group or slice by\)"
    with pytest.raises(PredictionsError, match=lacks):
        compute_group_statistics(open_dataset(extra), "model_version", n_boot=5)
    with pytest.raises(PredictionsError, match=lacks):
        compute_slices(open_dataset(extra), ["amount"])


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_the_same_columns_in_another_order_are_read_by_name(kitti_csv_parts, tmp_path, fmt) -> None:
    """A day written with its columns in another order (audit 10a: refused, "the same columns in another
    order") is read by name: the same statistics, by group too."""
    df = pd.concat([pd.read_csv(p) for p in sorted(kitti_csv_parts.glob("*.csv"))], ignore_index=True)
    df["segment"] = np.where(np.arange(len(df)) % 3 == 0, "web", "app")
    same = write_parts(df, tmp_path / "same", 3, fmt=fmt)
    turned = tmp_path / "turned"
    shutil.copytree(tmp_path / "same", turned)
    part = pd.read_csv(same[1]) if fmt == "csv" else pd.read_parquet(same[1])
    part = part[part.columns[::-1]]
    if fmt == "csv":
        part.to_csv(turned / same[1].name, index=False)
    else:
        pq.write_table(pa.Table.from_pandas(part, preserve_index=False), turned / same[1].name, row_group_size=700)
    a, b = open_dataset(turned), open_dataset(tmp_path / "same")
    assert not any("Not in every file" in n for n in a.layout().notes)
    assert a.layout().scores == b.layout().scores and a.layout().label == b.layout().label
    sa, sb = compute_statistics(a, n_boot=10), compute_statistics(b, n_boot=10)
    assert sa.n == sb.n == len(df) and sa.ece() == sb.ece() and sa.ece_interval() == sb.ece_interval()
    ga = compute_group_statistics(a, "segment", n_boot=10)[0].report().table
    gb = compute_group_statistics(b, "segment", n_boot=10)[0].report().table
    pd.testing.assert_frame_equal(ga, gb)


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
